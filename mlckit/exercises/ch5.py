"""Chapter 5 (integration with machine learning frameworks): import the course's CNN from
PyTorch with the chapter's hand-written ``from_fx`` and converters of one's own.

The answer is a function ``import_cnn(fx_module) -> IRModule``. The checker makes the CNN in
PyTorch with the course's trained weights (:func:`cnn_model`), traces it with
``torch.fx.symbolic_trace``, imports it with the answer, checks that ``main`` computes with
``call_tir`` kernels only (the converters emit topi with ``bb.emit_te``), builds it for
``"llvm"`` and compares it with PyTorch on real FashionMNIST images. When the numbers differ,
it runs the module once more recording every kernel's output and names the first layer of the
model that no kernel reproduces. torch is an optional dependency, imported when checking.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any

import numpy as np

from mlckit.datasets import cnn_params, fashion_mnist
from mlckit.errors import MLCError
from mlckit.ir import IRModule, Op
from mlckit.relax import BlockBuilder, Call, Function
from mlckit.relax.utils import format_struct_info

from . import checks
from .ch3 import bindings, build_and_load, describe, relax_main, shape_of, shape_text
from .core import Mismatch, exercise
from .solutions import ch5 as solutions

# The model's layers, in order: (name in cnn_model(), what it is, shape after it without
# the batch dimension).
LAYERS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("conv", "nn.Conv2d(1, 32, 3)", (32, 26, 26)),
    ("relu0", "the nn.ReLU after the convolution", (32, 26, 26)),
    ("pool", "nn.MaxPool2d(2)", (32, 13, 13)),
    ("flatten", "nn.Flatten()", (5408,)),
    ("linear0", "nn.Linear(5408, 100)", (100,)),
    ("relu1", "the nn.ReLU after linear0", (100,)),
    ("linear1", "nn.Linear(100, 10)", (10,)),
)

_LAYER_HINTS = {
    "conv": "map_nn_conv2d: bb.emit_te(topi.nn.conv2d_nchw, x, map_param(nn_mod.weight), "
    "nn_mod.stride, nn_mod.padding, nn_mod.dilation), then add nn_mod.bias reshaped to "
    "(1, C, 1, 1) with topi.add, so that it broadcasts over (n, C, H, W)",
    "relu0": "the nn.ReLU converter is the chapter's (topi.nn.relu of its one argument); check "
    "that your conv converter returns the value after the bias",
    "pool": "map_nn_max_pool2d: bb.emit_te(topi.nn.max_pool2d, x, kernel=nn_mod.kernel_size, "
    "stride=nn_mod.stride, padding=nn_mod.padding): max over 2x2 windows, stride 2 (torch's "
    "stride defaults to the kernel size)",
    "flatten": "map_nn_flatten: nn.Flatten keeps the batch dimension and merges (C, H, W) in "
    "row-major (NCHW) order: bb.emit_te(topi.nn.flatten, x) gives (n, 5408)",
    "linear0": "the nn.Linear converter is the chapter's: bb.emit_te(topi.nn.dense, x, "
    "map_param(nn_mod.weight), map_param(nn_mod.bias)); keep it as it is",
    "relu1": "the nn.ReLU converter is the chapter's: bb.emit_te(topi.nn.relu, x)",
    "linear1": "the nn.Linear converter is the chapter's: bb.emit_te(topi.nn.dense, x, "
    "map_param(nn_mod.weight), map_param(nn_mod.bias)); main returns its output (no softmax)",
}

_SHAPES = " -> ".join(
    ["x (n, 1, 28, 28)"] + [f"{what} {shape_text(('n', *shape))}" for _, what, shape in LAYERS]
)

_HOW = (
    "import_cnn(fx_module) returns the IRModule that the chapter's from_fx builds: "
    "return from_fx(fx_module, [(1, 1, 28, 28)], call_function_map, call_module_map)"
)

# Nine images of six classes of the sprite set (90 per class, in label order).
IMAGES = (3, 50, 95, 300, 330, 480, 500, 800, 899)

ATOL = RTOL = 1e-4


# ------------------------------------------------------------------ the model, in PyTorch


def _torch() -> Any:
    try:
        import torch
        import torch.fx
    except ImportError:
        raise Mismatch(
            "this exercise imports a PyTorch model, and PyTorch is not installed",
            "pip install mlckit[torch] (or pip install torch), then restart the kernel",
        ) from None
    return torch


def cnn_model() -> Any:
    """The course's assignment CNN as a ``torch.nn.Sequential`` (layers named ``conv``,
    ``relu0``, ``pool``, ``flatten``, ``linear0``, ``relu1``, ``linear1``) holding the trained
    weights of ``mlckit.datasets.cnn_params()``, in eval mode. Needs PyTorch."""
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(
        OrderedDict(
            conv=nn.Conv2d(1, 32, 3),
            relu0=nn.ReLU(),
            pool=nn.MaxPool2d(2),
            flatten=nn.Flatten(),
            linear0=nn.Linear(5408, 100),
            relu1=nn.ReLU(),
            linear1=nn.Linear(100, 10),
        )
    )
    params = cnn_params()
    names = {"conv": "conv2d", "linear0": "linear0", "linear1": "linear1"}
    model.load_state_dict(
        {
            f"{layer}.{kind}": torch.from_numpy(params[f"{key}_{kind}"])
            for layer, key in names.items()
            for kind in ("weight", "bias")
        }
    )
    return model.eval()


def torch_stages(model: Any, x: np.ndarray) -> dict[str, np.ndarray]:
    """The value after each layer of :func:`cnn_model` on images ``x`` (n, 1, 28, 28), and
    ``"conv without bias"``, the convolution that forgot its bias."""
    torch = _torch()
    stages: dict[str, np.ndarray] = {}
    with torch.no_grad():
        h = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        conv = model.conv
        stages["conv without bias"] = torch.nn.functional.conv2d(
            h, conv.weight, None, conv.stride, conv.padding, conv.dilation
        ).numpy()
        for name, layer in model.named_children():
            h = layer(h)
            stages[name] = h.numpy()
    return stages


# ------------------------------------------------------------------ calling the answer


def _check_signature(answer: Any) -> None:
    """A function that cannot take the traced model alone (say, ``from_fx`` itself)."""
    try:
        signature = inspect.signature(answer)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(object())
    except TypeError:
        raise Mismatch(
            f"your function takes {signature}; the answer is import_cnn(fx_module), a function "
            "of the traced model alone",
            "wrap the chapter's from_fx: def import_cnn(fx_module): return "
            "from_fx(fx_module, [(1, 1, 28, 28)], call_function_map, call_module_map)",
        ) from None


def _import(answer: Any, traced: Any) -> Any:
    """``answer(traced)``; a missing converter or a topi call that fails is a Mismatch."""
    torch = _torch()
    try:
        return answer(traced)
    except KeyError as err:
        key = err.args[0] if err.args else None
        if isinstance(key, type) and issubclass(key, torch.nn.Module):
            name = key.__name__
            raise Mismatch(
                f"your importer has no converter for nn.{name}: call_module_map[type(module)] "
                f"raised KeyError for {name}",
                f"write a converter (bb, node_map, node, nn_mod) -> relax value for nn.{name} "
                f"and add it to call_module_map: {{..., nn.{name}: map_nn_{name.lower()}}}",
            ) from None
        if callable(key):
            name = getattr(key, "__qualname__", getattr(key, "__name__", repr(key)))
            raise Mismatch(
                f"your importer has no converter for the function {name}: "
                "call_function_map[node.target] raised KeyError",
                f"add a converter (bb, node_map, node) -> relax value for {name} to "
                "call_function_map",
            ) from None
        raise
    except MLCError as err:
        text = str(err)
        if "topi.nn.dense" in text and "5408" in text:
            hint = (
                "the tensor reaching nn.Linear(5408, 100) does not have 5408 = 32 * 13 * 13 "
                "features, so a converter before it gives the wrong shape. The shapes along "
                f"the model: {_SHAPES}"
            )
        elif "conv2d_nchw" in text and "4-d NCHW input" in text:
            hint = (
                "the image reaching nn.Conv2d is not 4-d: from_fx's input_shapes gives its "
                "shape, [(1, 1, 28, 28)] (batch, channel, height, width)"
            )
        else:
            hint = (
                "the message names the function that refused its arguments: check the "
                "converter that calls it (the topi signatures are in mlckit.topi). The shapes "
                f"along the model: {_SHAPES}"
            )
        raise Mismatch(
            f"importing the model failed with {type(err).__name__}: {text}", hint
        ) from None


def _image_batch(main: Function) -> str:
    """The batch dimension of main's one parameter, the image."""
    params = [p.name_hint for p in main.params]
    if len(params) != 1:
        raise Mismatch(
            f"main takes {len(params)} parameters ({', '.join(params) or 'none'}); the model "
            "has one input, the image",
            "from_fx makes one relax.Var per placeholder node; the weights are constants "
            "(map_param(nn_mod.weight)), not parameters",
        )
    (x,) = main.params
    dims = shape_of(x.struct_info_)
    if dims is None or dims[1:] != ("1", "28", "28") or x.struct_info_.dtype != "float32":
        raise Mismatch(
            f"main's parameter {x.name_hint} is {format_struct_info(x.struct_info_)}; the "
            'image is R.Tensor((1, 1, 28, 28), "float32")',
            "pass input_shapes=[(1, 1, 28, 28)] to from_fx",
        )
    return dims[0]


def _check_kernels_only(main: Function) -> None:
    """Every call in main is a call_tir of a kernel that a converter emitted."""
    calls = [
        describe(b.value)
        for b in bindings(main)
        if isinstance(b.value, Call)
        and not (isinstance(b.value.op, Op) and b.value.op.name == "relax.call_tir")
    ]
    if not calls:
        if not any(isinstance(b.value, Call) for b in bindings(main)):
            raise Mismatch(
                "main calls no kernel at all",
                "each converter emits the layer's computation: bb.emit_te(topi..., ...)",
            )
        return
    ops = ", ".join(dict.fromkeys(calls))
    hint = (
        "in each converter, emit a topi kernel with bb.emit_te (bb.emit_te(topi.nn.relu, x)), "
        "not a relax operator with bb.emit"
    )
    if len(calls) == sum(isinstance(b.value, Call) for b in bindings(main)):
        raise Mismatch(
            f"main computes with high-level relax operators ({ops}), not with call_tir "
            "kernels. That is what the library's importer, mlckit.relax.frontend.torch.from_fx, "
            "gives; this exercise asks for the chapter's from_fx with converters of your own",
            hint,
        )
    raise Mismatch(
        f"besides call_tir kernels, main calls high-level relax operators ({ops}): a converter "
        "emits a relax operator where the exercise asks for a topi kernel",
        hint,
    )


def _check_output_shape(main: Function, batch: str) -> None:
    """Point at the first layer whose shape no binding has, when main's output is wrong."""
    out = shape_of(main.body.body.struct_info_)
    if out == (batch, "10"):
        return
    got = "unknown" if out is None else shape_text(out)
    steps = [
        (b.var.name_hint, describe(b.value), shape_of(b.var.struct_info_)) for b in bindings(main)
    ]
    position = 0
    for name, what, dims in LAYERS:
        want = (batch, *map(str, dims))
        found = next((i for i in range(position, len(steps)) if steps[i][2] == want), None)
        if found is None:
            after = ""
            if position < len(steps):
                var, value, shape = steps[position]
                shape_said = "an unknown shape" if shape is None else f"shape {shape_text(shape)}"
                after = f"; the binding where it should be, `{var} = {value}`, has {shape_said}"
            raise Mismatch(
                f"main returns shape {got}, not ({batch}, 10): no value of your module has the "
                f"shape of {what}'s output, {shape_text(want)}{after}",
                _LAYER_HINTS[name],
            )
        position = found + 1
    raise Mismatch(
        f"main returns shape {got}; the model returns the ({batch}, 10) output of "
        "nn.Linear(100, 10)",
        "from_fx's output node returns the value of the last layer: bb.emit_output of it",
    )


# ------------------------------------------------------------------ running and comparing


def _kernel_outputs(ex: Any, main: Function, x: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Run main once on ``x``, recording each kernel's output: (binding, kernel, value)."""
    outputs: list[tuple[str, np.ndarray]] = []

    def record(name: str, kernel: Any) -> Any:
        def run(*args: Any) -> None:
            kernel(*args)
            out = [a for a in args if isinstance(a, np.ndarray)][-1]
            outputs.append((name, np.array(out)))

        return run

    namespace = ex.make_namespace(record)
    namespace[ex.python_names["main"]](x)
    names = [b.var.name_hint for b in bindings(main) if describe(b.value).startswith("call_tir(")]
    return [(name, kernel, value) for (kernel, value), name in zip(outputs, names)]


def _matches(value: np.ndarray, expected: np.ndarray) -> bool:
    return value.shape == expected.shape and bool(
        np.allclose(value, expected, rtol=1e-3, atol=ATOL)
    )


def _first_wrong_layer(ex: Any, main: Function, x: np.ndarray, model: Any) -> None:
    """Name the first layer of the model whose output no kernel reproduces."""
    stages = torch_stages(model, x)
    outputs = _kernel_outputs(ex, main, x)
    for name, what, _ in LAYERS:
        if any(_matches(value, stages[name]) for _, _, value in outputs):
            continue
        if name == "conv" and any(
            _matches(value, stages["conv without bias"]) for _, _, value in outputs
        ):
            raise Mismatch(
                "your nn.Conv2d converter leaves out the bias: its values agree with torch's "
                "convolution without the bias, and nothing after it agrees with the model",
                "add nn_mod.bias after topi.nn.conv2d_nchw: one value per output channel, "
                "relax.const(nn_mod.bias.data.cpu().numpy().reshape(1, -1, 1, 1)) with "
                "topi.add, so that it broadcasts over (n, C, H, W)",
            )
        same_shape = [
            f"`{var} = call_tir({kernel})`"
            for var, kernel, value in outputs
            if value.shape == stages[name].shape
        ]
        where = (
            f"; your kernels of that shape ({', '.join(same_shape)}) compute other values"
            if same_shape
            else ""
        )
        earlier = "" if name == "conv" else ". The layers before it agree"
        raise Mismatch(
            f"your module's values first differ from PyTorch's at {what}: no kernel of your "
            f"module computes its output {shape_text(stages[name].shape)}{where}{earlier}",
            _LAYER_HINTS[name],
        )


@exercise(
    "ch5.fx_cnn",
    title="Import the course CNN from PyTorch with your own converters",
    task="""
    The chapter's `from_fx(fx_mod, input_shapes, call_function_map, call_module_map)` walks
    the nodes of a `torch.fx` graph and builds the relax function `main` with a
    `BlockBuilder`; it comes with converters for `nn.Linear` and `nn.ReLU` that each emit a
    topi kernel with `bb.emit_te`. Import the course's CNN with it:

    ```python
    nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                  nn.Linear(5408, 100), nn.ReLU(), nn.Linear(100, 10))
    ```

    Write the converters `map_nn_conv2d`, `map_nn_max_pool2d` and `map_nn_flatten`, each
    `(bb, node_map, node, nn_mod) -> relax value`, with `bb.emit_te` and functions of
    `mlckit.topi` (read the layer's settings off `nn_mod`: `nn_mod.weight`, `nn_mod.stride`,
    ...), and hand in `import_cnn(fx_module)`, which returns
    `from_fx(fx_module, [(1, 1, 28, 28)], ...)` with your converters added to
    `call_module_map`. The answer is the function itself: `check("ch5.fx_cnn", import_cnn)`.
    The checker traces the model with the trained weights of `cnn_params()`
    (`mlckit.exercises.ch5.cnn_model()` makes it), imports it with your function, builds
    it for "llvm" and compares it with PyTorch on FashionMNIST images.
    """,
    hints=(
        "Three topi functions do the work: topi.nn.conv2d_nchw (and topi.add for the bias), "
        "topi.nn.max_pool2d and topi.nn.flatten. Each converter gets its input from "
        "node_map[node.args[0]] and returns what bb.emit_te gives; register it under the "
        "layer's class: call_module_map[nn.Conv2d] = map_nn_conv2d.",
        "topi.nn.conv2d_nchw(x, weight, stride, padding, dilation) has no bias: add "
        "nn_mod.bias reshaped to (1, 32, 1, 1), so that it broadcasts over the channels of "
        "(1, 32, 26, 26). nn.MaxPool2d(2) takes 2x2 windows with stride 2: torch's stride "
        "defaults to the kernel size (nn_mod.stride is already 2). nn.Flatten keeps the batch: "
        "(1, 32, 13, 13) -> (1, 5408).",
        "conv = bb.emit_te(topi.nn.conv2d_nchw, x, map_param(nn_mod.weight), nn_mod.stride, "
        "nn_mod.padding, nn_mod.dilation); bias = relax.const(nn_mod.bias.data.cpu().numpy()"
        ".reshape(1, -1, 1, 1), 'float32'); return bb.emit_te(topi.add, conv, bias). "
        "Pooling: bb.emit_te(topi.nn.max_pool2d, x, kernel=nn_mod.kernel_size, "
        "stride=nn_mod.stride, padding=nn_mod.padding). Flatten: bb.emit_te(topi.nn.flatten, "
        "x). Then import_cnn passes call_module_map={nn.Linear: map_nn_linear, nn.ReLU: "
        "map_nn_relu, nn.Conv2d: map_nn_conv2d, nn.MaxPool2d: map_nn_max_pool2d, nn.Flatten: "
        "map_nn_flatten}.",
    ),
    solution=solutions.fx_cnn,
)
def check_fx_cnn(answer: Any) -> None:
    torch = _torch()
    if isinstance(answer, (IRModule, Function, BlockBuilder)):
        raise Mismatch(
            f"you passed {type(answer).__name__}; the answer is the function import_cnn that "
            "imports a traced model",
            "pass the function itself, without calling it: check('ch5.fx_cnn', import_cnn)",
        )
    if not callable(answer):
        raise Mismatch(
            f"expected a function import_cnn(fx_module), got {type(answer).__name__}",
            "pass the function itself, without calling it: check('ch5.fx_cnn', import_cnn)",
        )
    _check_signature(answer)
    model = cnn_model()
    mod = _import(answer, torch.fx.symbolic_trace(model))
    if mod is None:
        raise Mismatch("your import_cnn returns None; it returns the IRModule from_fx built", _HOW)
    main = relax_main(mod, _HOW)
    batch = _image_batch(main)
    _check_kernels_only(main)
    _check_output_shape(main, batch)
    ex, vm = build_and_load(mod)
    images = fashion_mnist("sprite900", dtype="float32").images[list(IMAGES)][:, None]
    if batch.isdigit() and batch != "1":
        images = images[np.arange(int(batch)) % len(images)]
    batches = [images[i : i + 1] for i in range(len(images))] if batch == "1" else [images]
    try:
        got = np.concatenate([vm["main"](x).numpy() for x in batches])
    except MLCError as err:
        raise Mismatch(
            f"running main failed: {type(err).__name__}: {err}", "the message says what to change"
        ) from None
    expected = torch_stages(model, images)["linear1"]
    if got.shape == expected.shape and np.allclose(got, expected, rtol=RTOL, atol=ATOL):
        return
    _first_wrong_layer(ex, main, batches[0], model)
    checks.assert_close(got, expected, "main's output (the logits)", rtol=RTOL, atol=ATOL)
