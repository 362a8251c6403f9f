"""Chapter 3 (end-to-end model execution): ``call_tir`` in numpy, one build for any batch
size, and the course's CNN built with ``relax.BlockBuilder`` and ``bb.emit_te``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit import relax
from mlckit.datasets import cnn_params, fashion_mnist, mlp_params, mlp_reference
from mlckit.errors import MLCError
from mlckit.ir import IRModule, Op
from mlckit.ir.structural import structural_equal
from mlckit.relax import BlockBuilder, Call, ExternFunc, Function, GlobalVar, TensorStructInfo
from mlckit.relax.utils import format_dim, format_struct_info
from mlckit.runtime import cpu
from mlckit.tir import IntImm, PrimFunc

from . import checks
from .core import Mismatch, exercise
from .solutions import ch3 as solutions

# ------------------------------------------------------------------ shared: reading a main


def relax_main(answer: Any, how: str) -> Function:
    """The relax function ``main`` of an IRModule answer; ``how`` says how to make one."""
    if isinstance(answer, BlockBuilder):
        raise Mismatch(
            "you passed the BlockBuilder itself; the answer is the module it built",
            "pass bb.get() (after bb.emit_func_output(...))",
        )
    if isinstance(answer, Function):
        raise Mismatch(
            "you passed a relax function; the answer is the IRModule that holds it together "
            "with the PrimFuncs it calls",
            how,
        )
    if not isinstance(answer, IRModule):
        raise Mismatch(f"expected an IRModule, got {type(answer).__name__}", how)
    if "main" not in answer or not isinstance(answer["main"], Function):
        names = ", ".join(gv.name_hint for gv in answer.functions) or "none"
        raise Mismatch(
            f"your module has no relax function named main (its functions: {names})", how
        )
    return answer["main"]


def bindings(main: Function) -> list[Any]:
    """The bindings of ``main``, in order, over all its blocks."""
    return [b for block in main.body.blocks for b in block.bindings]


def describe(value: Any) -> str:
    """A binding's value in a few words: ``call_tir(max_pool2d)``, ``R.nn.relu``."""
    if not isinstance(value, Call):
        return type(value).__name__
    op = value.op
    if isinstance(op, Op):
        kind = op.name.removeprefix("relax.")
        callee = value.args[0] if value.args else None
        if isinstance(callee, GlobalVar):
            return f"{kind}({callee.name_hint})"
        if isinstance(callee, ExternFunc):
            return f'{kind}("{callee.global_symbol}")'
        return "R." + kind
    return getattr(op, "name_hint", type(op).__name__)


def shape_of(sinfo: Any) -> tuple[str, ...] | None:
    """A tensor's dims as text (``("n", "784")``), or None when it is not a known-shape tensor."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape_values is not None:
        return tuple(format_dim(d) for d in sinfo.shape_values)
    return None


def shape_text(dims: Sequence[Any]) -> str:
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def build_and_load(mod: IRModule) -> Any:
    """``relax.build(mod, "llvm")`` and a VirtualMachine on the CPU; a failure is a Mismatch."""
    try:
        ex = relax.build(mod, target="llvm")
    except MLCError as err:
        raise checks.build_mismatch(
            err, "relax.build failed on your module", "the message says what to change"
        ) from None
    return ex, relax.VirtualMachine(ex, cpu())


# ------------------------------------------------------------------ ch3.call_tir_numpy


def _relu_dps(x: np.ndarray, y: np.ndarray) -> None:
    np.maximum(x, 0, out=y)


def _add_dps(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.add(a, b, out=c)


def _recording(func: Callable[..., None], n_inputs: int, calls: list) -> Callable[..., None]:
    """``func``, remembering every call's arguments; it computes only on a well-formed call."""

    def prim_func(*args: Any) -> None:
        calls.append(args)
        if len(args) == n_inputs + 1 and all(isinstance(a, np.ndarray) for a in args):
            # A mis-shaped output fails here; the recorded arguments say what was wrong.
            with contextlib.suppress(ValueError, TypeError):
                func(*args)

    return prim_func


def _check_dps_call(
    calls: list, inputs: Sequence[np.ndarray], shape: tuple[int, ...], dtype: str
) -> np.ndarray:
    """The output array ``lnumpy_call_tir`` passed, after checking how it called prim_func."""
    if not calls:
        raise Mismatch(
            "your function never called prim_func",
            "call_tir runs the PrimFunc: call prim_func(*inputs, out) once",
        )
    if len(calls) > 1:
        raise Mismatch(
            f"your function called prim_func {len(calls)} times; call_tir calls it once",
            "allocate one output, then call prim_func(*inputs, out) once",
        )
    args = calls[0]
    n = len(inputs)
    if len(args) == n and all(a is b for a, b in zip(args, inputs)):
        raise Mismatch(
            "you called prim_func with the inputs only, so it has nowhere to write its result",
            "destination-passing style: allocate the output yourself and pass it after the "
            "inputs, prim_func(*inputs, out)",
        )
    if args and args[0] is inputs:
        raise Mismatch(
            "you passed the tuple of inputs to prim_func as one argument",
            "unpack it: prim_func(*inputs, out)",
        )
    if len(args) != n + 1:
        raise Mismatch(
            f"you called prim_func with {len(args)} arguments; with {n} inputs it takes "
            f"{n + 1} ({n} inputs, then the output)",
            "pass the inputs unpacked (prim_func(*inputs, out)), not the tuple itself",
        )
    if any(a is not b for a, b in zip(args[:n], inputs)):
        if all(a is b for a, b in zip(args[1:], inputs)):
            raise Mismatch(
                "you passed the output first; in destination-passing style it comes after the "
                "inputs",
                "prim_func(*inputs, out)",
            )
        raise Mismatch(
            "the first arguments you passed to prim_func are not the inputs, in order",
            "pass the inputs unchanged: prim_func(*inputs, out)",
        )
    out = args[-1]
    if not isinstance(out, np.ndarray):
        raise Mismatch(
            f"the output you passed to prim_func is a {type(out).__name__}, not a numpy array",
            "allocate it with np.empty(shape, dtype=dtype)",
        )
    if out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
        raise Mismatch(
            f"you allocated the output with shape {out.shape} and dtype {out.dtype}; this call "
            f"asks for shape {tuple(shape)} and dtype {dtype}",
            "use the shape and dtype arguments: np.empty(shape, dtype=dtype) (np.empty's "
            "default dtype is float64)",
        )
    return out


@exercise(
    "ch3.call_tir_numpy",
    title="call_tir in low-level numpy",
    task="""
    Write `lnumpy_call_tir(prim_func, inputs, shape, dtype)`, the numpy meaning of
    `R.call_tir(prim_func, inputs, out_sinfo=R.Tensor(shape, dtype))`: allocate the output
    tensor, call `prim_func` in destination-passing style (the inputs, then the output it
    fills in place), and return the output. `prim_func` is a low-level numpy function such
    as `lnumpy_relu0(X, Y)`; `inputs` is a tuple of arrays. The answer is the function.
    """,
    hints=(
        "The function itself computes nothing: all the work happens inside prim_func. What "
        "does prim_func need that the caller has to provide?",
        "Three lines: np.empty(shape, dtype=dtype), then prim_func(...), then return.",
        "res = np.empty(shape, dtype=dtype); prim_func(*inputs, res); return res",
    ),
    solution=solutions.call_tir_numpy,
)
def check_call_tir_numpy(answer: Any) -> None:
    if not callable(answer):
        raise Mismatch(
            f"expected a function lnumpy_call_tir(prim_func, inputs, shape, dtype), "
            f"got {type(answer).__name__}",
            "pass the function itself, without calling it",
        )
    x, a, b = checks.random_inputs([(3, 4), (2, 5), (2, 5)])
    a, b = (np.rint(v * 100).astype("int32") for v in (a, b))
    cases = [(_relu_dps, (x,), (3, 4), "float32"), (_add_dps, (a, b), (2, 5), "int32")]
    for func, inputs, shape, dtype in cases:
        calls: list = []
        result = answer(_recording(func, len(inputs), calls), inputs, shape, dtype)
        out = _check_dps_call(calls, inputs, shape, dtype)
        if result is None:
            raise Mismatch(
                "your function returns None; call_tir's value is the output tensor",
                "return the array you allocated and passed to prim_func",
            )
        if result is not out and not (
            isinstance(result, np.ndarray) and np.array_equal(result, out)
        ):
            raise Mismatch(
                "your function returns something other than the output prim_func filled",
                "return the array you allocated and passed to prim_func",
            )
        expected = np.empty(shape, dtype)
        func(*inputs, expected)
        checks.assert_close(result, expected, f"the output of {func.__name__.strip('_')}")


# ------------------------------------------------------------------ ch3.any_batch

_ANY_BATCH_HOW = (
    "write the module with @I.ir_module (start from MyModuleMixture) and pass the class "
    "itself, e.g. check('ch3.any_batch', MyModuleAnyBatch)"
)


def _check_symbolic_batch(mod: IRModule, main: Function) -> None:
    """Every tensor in ``main`` carries x's batch dimension, and every PrimFunc accepts it."""
    x = main.params[0]
    batch = x.struct_info_.shape_values[0]
    for binding in bindings(main):
        dims = shape_of(binding.var.struct_info_)
        if not dims:
            continue
        first = binding.var.struct_info_.shape_values[0]
        if not structural_equal(first, batch):
            right = shape_text((format_dim(batch), *dims[1:]))
            raise Mismatch(
                f"`{binding.var.name_hint} = {describe(binding.value)}` has shape "
                f"{shape_text(dims)}; with x of shape {shape_text(shape_of(x.struct_info_))} "
                f"it is {right}",
                f'write out_sinfo=R.Tensor({right}, "float32"), with '
                f"{format_dim(batch)} = T.int64() at the top of main",
            )
        value = binding.value
        if not (isinstance(value, Call) and describe(value).startswith("call_tir(")):
            continue
        name = value.args[0].name_hint
        if isinstance(mod[name], PrimFunc):
            _check_prim_func_accepts(name, mod[name], value, binding.var)


def _check_prim_func_accepts(name: str, func: PrimFunc, call: Call, out: Any) -> None:
    """A buffer with a fixed dimension where main passes a symbolic one is the usual mistake."""
    tensors = [*call.args[1].fields, out]
    for param, arg in zip(func.params, tensors):
        buffer = func.buffer_map.get(param)
        sinfo = arg.struct_info_
        if buffer is None or not isinstance(sinfo, TensorStructInfo) or not sinfo.shape_values:
            continue
        for want, have in zip(sinfo.shape_values, buffer.shape):
            if isinstance(have, IntImm) and not isinstance(want, IntImm):
                raise Mismatch(
                    f"the PrimFunc {name}'s buffer {buffer.name} has the fixed shape "
                    f"{shape_text([format_dim(d) for d in buffer.shape])}, but main passes a "
                    f"tensor of shape {shape_text(shape_of(sinfo))}: the kernel would refuse "
                    "every batch but its own with a VMError",
                    "declare the parameter as a T.handle and its buffer with "
                    'T.match_buffer(x, (n, 784), "float32"), after n = T.int64()',
                )


@exercise(
    "ch3.any_batch",
    title="One build for every batch size",
    task="""
    `MyModuleMixture` (TensorIR `linear0`, extern `env.relu` and `env.linear`) works for a
    batch of exactly one image. Write `MyModuleAnyBatch`, the same model for any batch size:
    its `main(x, w0, b0, w1, b1)` takes `x` of shape `(n, 784)` with a symbolic `n`, and
    the weights in the (out, in) layout of `mlp_params()`. One `relax.build` must then run
    batches of 1, 3 and 8 images. `env.linear` and `env.relu` are the extern functions
    registered in this chapter (run that cell first). The answer is the IRModule.
    """,
    hints=(
        "Three places fix the batch at 1: main's parameter x, the out_sinfo of each call, and "
        "the buffers of the PrimFunc linear0.",
        'In main: x: R.Tensor(("n", 784), "float32"), then n = T.int64() so that out_sinfo '
        "can say R.Tensor((n, 128), ...). In linear0: a symbolic n for its buffers.",
        "linear0 takes x: T.handle, ... and declares n = T.int64(); "
        'X = T.match_buffer(x, (n, 784), "float32"); Z = T.match_buffer(z, (n, 128), '
        '"float32"); its loops run over T.grid(n, 128, 784).',
    ),
    solution=solutions.any_batch,
)
def check_any_batch(answer: Any) -> None:
    main = relax_main(answer, _ANY_BATCH_HOW)
    names = [p.name_hint for p in main.params]
    if len(names) != 5:
        raise Mismatch(
            f"main takes {len(names)} parameters ({', '.join(names)}); the exercise passes 5: "
            "x, w0, b0, w1, b1",
            "keep MyModuleMixture's signature; only the shapes change",
        )
    x_dims = shape_of(main.params[0].struct_info_)
    if x_dims is None or len(x_dims) != 2:
        raise Mismatch(
            f"main's x is {format_struct_info(main.params[0].struct_info_)}; expected a 2-d "
            "tensor (n, 784)",
            'x: R.Tensor(("n", 784), "float32")',
        )
    if x_dims[0].isdigit():
        raise Mismatch(
            f"main's x has the fixed shape {shape_text(x_dims)}, so a batch of 8 images is "
            "rejected when main is called",
            'give x a symbolic batch dimension: x: R.Tensor(("n", 784), "float32")',
        )
    _check_symbolic_batch(answer, main)
    _, vm = build_and_load(answer)
    params = mlp_params()
    weights = [params[k] for k in ("w0", "b0", "w1", "b1")]
    images = fashion_mnist("sprite900").images[::113]  # 8 images, one of each of 8 classes
    for batch in (1, 3, 8):
        x = images[:batch].reshape(batch, 784).astype(np.float32) / np.float32(255)
        try:
            out = vm["main"](x, *weights)
        except MLCError as err:
            raise Mismatch(
                f"main failed on a batch of {batch}: {err}",
                "a missing env.linear / env.relu: run the chapter's cell that registers them",
            ) from None
        checks.assert_close(
            out, mlp_reference(images[:batch], params), f"the output for a batch of {batch}"
        )


# ------------------------------------------------------------------ ch3.cnn

# The CNN's steps and the shape after each (batch dimension left out), as the shapes of
# main's bindings pass through them.
_CNN_STEPS: tuple[tuple[tuple[int, ...], str], ...] = (
    ((32, 26, 26), "conv2d 3x3 (stride 1, no padding) with its bias, and relu"),
    ((32, 13, 13), "max-pool 2x2 with stride 2"),
    ((5408,), "flatten (NCHW: channel, then row, then column)"),
    ((100,), "linear0 and relu"),
    ((10,), "linear1 and softmax"),
)

_CNN_STEP_HINTS = {
    (32, 26, 26): "check the convolution: kernel OIHW (32, 1, 3, 3), stride 1, padding 0, "
    "dilation 1; the bias has one value per channel, so reshape it to (1, 32, 1, 1) to "
    "broadcast over (1, 32, 26, 26); relu comes after the bias",
    (32, 13, 13): "check the pooling: max over 2x2 windows with stride 2, after relu",
    (5408,): "flatten the pooled (1, 32, 13, 13) tensor in NCHW order (topi.nn.flatten)",
    (100,): "topi.nn.dense(x, W, b) computes x @ W.T + b for a weight in (out, in) layout; "
    "relu follows linear0",
    (10,): "linear1 is topi.nn.dense with linear1_weight and linear1_bias; softmax follows",
}

# Nine images of six classes of the sprite set (90 per class, in label order).
_CNN_IMAGES = (3, 50, 95, 300, 330, 480, 500, 800, 899)


def cnn_reference_stages(x: np.ndarray, p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The CNN in numpy on images ``x`` (N, 1, 28, 28): every intermediate value, in order
    (``datasets.cnn_reference`` gives only the logits; a checker needs each layer's value)."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    stages = {"conv2d": np.einsum("nchwij,ocij->nohw", windows, p["conv2d_weight"])}
    stages["conv2d + bias"] = stages["conv2d"] + p["conv2d_bias"][None, :, None, None]
    stages["relu"] = np.maximum(stages["conv2d + bias"], np.float32(0))
    n, c, h, w = stages["relu"].shape
    stages["max-pool"] = stages["relu"].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    stages["flatten"] = stages["max-pool"].reshape(n, -1)
    stages["linear0 without bias"] = stages["flatten"] @ p["linear0_weight"].T
    stages["linear0"] = stages["linear0 without bias"] + p["linear0_bias"]
    stages["relu after linear0"] = np.maximum(stages["linear0"], np.float32(0))
    stages["linear1 without bias"] = stages["relu after linear0"] @ p["linear1_weight"].T
    stages["linear1"] = stages["linear1 without bias"] + p["linear1_bias"]
    e = np.exp(stages["linear1"] - stages["linear1"].max(axis=1, keepdims=True))
    stages["softmax"] = e / e.sum(axis=1, keepdims=True)
    return stages


_IMAGE_PARAM_HINT = (
    'x = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32")), then '
    'bb.function("main", [x])'
)


def _cnn_input(main: Function, params: dict[str, np.ndarray]) -> tuple[str, dict[str, Any]]:
    """main's batch dimension (``"1"`` or a symbol) and the weights it takes as parameters."""
    if not main.params:
        raise Mismatch(
            "main takes no parameters; it takes the image x",
            _IMAGE_PARAM_HINT,
        )
    x, *rest = main.params
    dims = shape_of(x.struct_info_)
    dtype = getattr(x.struct_info_, "dtype", None)
    if dims is None or dims[1:] != ("1", "28", "28") or dtype != "float32":
        raise Mismatch(
            f"main's first parameter {x.name_hint} is {format_struct_info(x.struct_info_)}; "
            'the image is R.Tensor((1, 1, 28, 28), "float32")',
            _IMAGE_PARAM_HINT,
        )
    unknown = [p.name_hint for p in rest if p.name_hint not in params]
    if unknown:
        raise Mismatch(
            f"main takes parameters {', '.join(unknown)} besides the image; weights passed "
            f"as parameters must be named like the keys of cnn_params(): {', '.join(params)}",
            "or bind the weights as constants, relax.const(params[...])",
        )
    return dims[0], {p.name_hint: params[p.name_hint] for p in rest}


def _check_cnn_shapes(main: Function, batch: str) -> None:
    """Point at the first step whose shape is not the CNN's, when the output's is wrong."""
    out = shape_of(main.body.body.struct_info_)
    if out == (batch, "10"):
        return
    # Consecutive bindings of one shape are one step of the CNN (conv2d, bias and relu ...).
    steps: list[tuple[str, str, tuple[str, ...]]] = []
    for binding in bindings(main):
        dims = shape_of(binding.var.struct_info_)
        if dims is not None and (not steps or steps[-1][2] != dims):
            steps.append((binding.var.name_hint, describe(binding.value), dims))
    expected = [((batch, *map(str, dims)), text) for dims, text in _CNN_STEPS]
    got = "unknown" if out is None else shape_text(out)
    for (name, what, dims), (want, text) in zip(steps, expected):
        if dims != want:
            raise Mismatch(
                f"`{name} = {what}` has shape {shape_text(dims)}, where the CNN's {text} gives "
                f"{shape_text(want)}: the first step that differs, so main returns shape {got}, "
                f"not ({batch}, 10)",
                _CNN_STEP_HINTS[tuple(int(d) for d in want[1:])],
            )
    if len(steps) < len(expected):
        done = f"the shape after the CNN's {expected[len(steps) - 1][1]}" if steps else "no tensor"
        rest = "; ".join(text for _, text in expected[len(steps) :])
        raise Mismatch(
            f"main returns shape {got}, {done}. The CNN goes on with: {rest}; it returns "
            f"({batch}, 10)",
            "emit the remaining steps with bb.emit_te(topi...), and pass the last one to "
            "bb.emit_output",
        )
    raise Mismatch(
        f"main returns shape {got}; the CNN returns the ({batch}, 10) probabilities of linear1 "
        "and softmax",
        "return the softmax of linear1's output, without reshaping it",
    )


def _first_wrong_kernel(
    ex: Any, main: Function, x: np.ndarray, stages: dict[str, np.ndarray]
) -> tuple[str, str, tuple[int, ...]] | None:
    """Run main once, recording each kernel's output; the first that matches no value of the
    reference CNN: (binding name, kernel, shape)."""
    outputs: list[tuple[str, np.ndarray]] = []

    def record(name: str, kernel: Any) -> Any:
        def run(*args: Any) -> None:
            kernel(*args)
            out = [a for a in args if isinstance(a, np.ndarray)][-1]
            outputs.append((name, out.copy()))

        return run

    namespace = ex.make_namespace(record)
    namespace[ex.python_names["main"]](x)
    names = [b.var.name_hint for b in bindings(main) if describe(b.value).startswith("call_tir(")]
    for (kernel, value), name in zip(outputs, names):
        matches = [
            s
            for s in stages.values()
            if s.shape == value.shape and np.allclose(value, s, 1e-3, 1e-4)
        ]
        if not matches:
            return name, kernel, value.shape
    return None


@exercise(
    "ch3.cnn",
    title="The CNN with BlockBuilder and emit_te",
    task="""
    Build the course's FashionMNIST CNN as an IRModule with `relax.BlockBuilder` and
    `bb.emit_te`, one topi operator at a time: conv2d 3x3 (stride 1, no padding) + bias ->
    relu -> max-pool 2x2 (stride 2) -> flatten (NCHW) -> linear0 -> relu -> linear1 ->
    softmax. The weights come from `cnn_params()`: conv2d_weight (32, 1, 3, 3), conv2d_bias
    (32,), linear0_weight (100, 5408), linear0_bias (100,), linear1_weight (10, 100),
    linear1_bias (10,) (linear weights in (out, in) layout).

    `main` takes the image `x: R.Tensor((1, 1, 28, 28), "float32")` (pixels in [0, 1]) and
    returns the class probabilities `(1, 10)`. Put the weights in as constants
    (`relax.const(params["conv2d_weight"])`), or give `main` parameters after `x` named like
    the keys of `cnn_params()` (the checker binds them with `BindParams`). The answer is the
    module, `bb.get()`; the checker builds it for "llvm" and runs it on real images.
    """,
    hints=(
        "Each step is one bb.emit_te(topi-function, relax values..., other arguments): "
        "topi.nn.conv2d_nchw, topi.add, topi.nn.relu, topi.nn.max_pool2d, topi.nn.flatten, "
        "topi.nn.dense, topi.nn.softmax. Print bb.get() now and then: each binding shows its "
        "shape.",
        "conv2d_nchw(data, kernel, stride, padding, dilation) takes 1, 0, 1 here. The conv "
        "bias (32,) must broadcast over channels: relax.const(bias.reshape(1, 32, 1, 1)). "
        "topi.nn.dense(x, weight, bias) already computes x @ weight.T + bias.",
        "conv = bb.emit_te(topi.nn.conv2d_nchw, x, relax.const(p['conv2d_weight']), 1, 0, 1); "
        "then topi.add with the reshaped bias, topi.nn.relu, "
        "bb.emit_te(topi.nn.max_pool2d, h, kernel=2, stride=2), topi.nn.flatten, "
        "topi.nn.dense(h, W0, b0), relu, dense(h, W1, b1), and "
        "bb.emit_output(bb.call_te(topi.nn.softmax, h)).",
    ),
    solution=solutions.cnn,
)
def check_cnn(answer: Any) -> None:
    how = "build main with bb.function('main', [x]) and pass the module: bb.get()"
    main = relax_main(answer, how)
    params = cnn_params()
    batch, bound = _cnn_input(main, params)
    _check_cnn_shapes(main, batch)
    mod = relax.transform.BindParams("main", bound)(answer) if bound else answer
    ex, vm = build_and_load(mod)
    images = fashion_mnist("sprite900", dtype="float32").images[list(_CNN_IMAGES)][:, None]
    stages = cnn_reference_stages(images, params)
    if batch == "1":
        got = np.concatenate([vm["main"](image[None]).numpy() for image in images])
    else:
        got = vm["main"](images).numpy()
    if np.allclose(got, stages["softmax"], rtol=1e-3, atol=1e-5):
        return
    if np.allclose(got, stages["linear1"], rtol=1e-3, atol=1e-4):
        raise Mismatch(
            "main returns linear1's output (the logits), not class probabilities",
            "the CNN ends with a softmax: bb.emit_te(topi.nn.softmax, logits)",
        )
    first = {name: value[:1] for name, value in stages.items()}
    wrong = _first_wrong_kernel(ex, relax_main(mod, how), images[:1], first)
    if wrong is not None:
        name, kernel, shape = wrong
        step = tuple(int(d) for d in shape[1:])
        hint = _CNN_STEP_HINTS.get(step, "compare the order of your steps with the task's")
        raise Mismatch(
            f"the first value that differs from the reference CNN is `{name}` (kernel "
            f"{kernel}, shape {shape_text(shape)}); the values before it agree. Look at this "
            "step and at what feeds it",
            hint,
        )
    checks.assert_close(got, stages["softmax"], "the probabilities", rtol=1e-3, atol=1e-5)
