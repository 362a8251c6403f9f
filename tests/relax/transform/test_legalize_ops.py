"""LegalizeOps: every high-level op becomes a call_tir of a generated PrimFunc, with the same
struct info, and the built program matches numpy (static and symbolic shapes)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import relax, tir, topi
from mlckit.errors import MLCError
from mlckit.ir import Op
from mlckit.relax.transform.legalize_ops import LEGALIZATIONS, LegalizeOps
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

op = relax.op
n_var = tir.Var("n", "int64")
dims = st.integers(1, 4)


# ------------------------------------------------------------------------------ harness
@dataclass
class Case:
    """One op applied to ``inputs``; ``batch`` lists the inputs whose axis 0 becomes the
    symbolic ``n`` in the symbolic run."""

    inputs: list[np.ndarray]
    build: Callable[..., relax.Expr]
    expected: np.ndarray | list[np.ndarray]
    batch: Sequence[int] = (0,)
    rtol: float = 1e-5
    atol: float = 1e-5


def _sinfo(array: np.ndarray, symbolic: bool) -> relax.TensorStructInfo:
    shape: list[Any] = list(array.shape)
    if symbolic:
        shape[0] = n_var
    return relax.TensorStructInfo(shape, array.dtype.name)


def build_module(case: Case, symbolic: bool) -> mlckit.IRModule:
    params = [
        relax.Var(f"x{i}", _sinfo(a, symbolic and i in case.batch))
        for i, a in enumerate(case.inputs)
    ]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(case.build(*params))
        bb.emit_func_output(gv)
    return bb.get()


def high_level_calls(mod: mlckit.IRModule) -> list[str]:
    """The names of the ops other than call_tir that the relax functions still call."""
    names: list[str] = []

    def visit(expr: Any) -> None:
        if (
            isinstance(expr, relax.Call)
            and isinstance(expr.op, Op)
            and expr.op.name != "relax.call_tir"
        ):
            names.append(expr.op.name)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            for block in func.body.blocks:
                for binding in block.bindings:
                    visit(binding.value)
    return names


def run_case(case: Case, symbolic: bool) -> None:
    mod = build_module(case, symbolic)
    after = LegalizeOps()(mod)
    assert high_level_calls(after) == []
    mlckit.ir.assert_structural_equal(after["main"].ret_struct_info, mod["main"].ret_struct_info)
    vm = relax.VirtualMachine(relax.build(after, "python"))
    result = vm["main"](*case.inputs)
    # A list of expected arrays: the op returns a tuple (split).
    pairs = (
        zip(result, case.expected) if isinstance(case.expected, list) else [(result, case.expected)]
    )
    for got, expected in pairs:
        got = got.numpy()
        assert got.shape == expected.shape
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol)


def rand(rng: np.random.Generator, shape: Sequence[int], dtype: str = "float32") -> np.ndarray:
    return rng.uniform(-2, 2, size=shape).astype(dtype)


# ------------------------------------------------------------------------------ cases
Draw = Callable[[Any], Any]
CASES: dict[str, Callable[[Draw, np.random.Generator], Case]] = {}


def case(*names: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for name in names:
            CASES[name] = lambda draw, rng, fn=fn, name=name: fn(name, draw, rng)
        return fn

    return register


_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "floor_divide": np.floor_divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


@case(*_BINARY)
def _binary(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    rows, cols = draw(dims), draw(dims)
    # Small positive integers: exact for division and powers, and comparisons hit ties.
    a = rng.integers(1, 4, size=(rows, cols)).astype("float32")
    b = rng.integers(1, 4, size=(1, cols) if draw(st.booleans()) else (cols,)).astype("float32")
    return Case([a, b], getattr(op, name), _BINARY[name](a, b))


@case("add_scalar")
def _add_scalar(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    a = rand(rng, (draw(dims), draw(dims)))
    scalar = relax.const(1.5, "float32")
    return Case([a], lambda x: op.multiply(op.add(x, scalar), scalar), (a + 1.5) * 1.5)


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_UNARY: dict[str, tuple[Callable, Callable, bool]] = {
    # name: (constructor, numpy reference, needs a positive input)
    "exp": (op.exp, np.exp, False),
    "log": (op.log, np.log, True),
    "sqrt": (op.sqrt, np.sqrt, True),
    "tanh": (op.tanh, np.tanh, False),
    "sigmoid": (op.sigmoid, _sigmoid, False),
    "negative": (op.negative, np.negative, False),
    "abs": (op.abs, np.abs, False),
    "nn.relu": (op.nn.relu, lambda x: np.maximum(x, 0), False),
    "nn.gelu": (op.nn.gelu, _gelu, False),
    "nn.silu": (op.nn.silu, lambda x: x * _sigmoid(x), False),
    "erf": (op.erf, np.vectorize(math.erf, otypes=["float32"]), False),
}


@case(*_UNARY)
def _unary(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    ctor, ref, positive = _UNARY[name]
    x = rand(rng, (draw(dims), draw(dims)))
    if positive:
        x = np.abs(x) + np.float32(0.1)
    return Case([x], ctor, ref(x).astype("float32"))


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@case("nn.softmax", "nn.log_softmax")
def _softmax_case(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), draw(dims)))
    axis = draw(st.integers(-3, 2))
    if name == "nn.softmax":
        return Case([x], lambda v: op.nn.softmax(v, axis), _softmax(x, axis))
    return Case([x], lambda v: op.nn.log_softmax(v, axis), np.log(_softmax(x, axis)))


@case("nn.layer_norm")
def _layer_norm(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), draw(st.integers(2, 4))))
    # The kernel takes the variance as E[x^2] - E[x]^2 in float32 (one pass, as TVM): keep
    # the rows far from constant, where that loses digits.
    x += np.arange(x.shape[-1], dtype="float32") * 5
    axes = draw(st.sampled_from([[-1], [1, 2]]))
    center, scale = draw(st.booleans()), draw(st.booleans())
    shape = [x.shape[a] for a in axes]
    gamma, beta = rand(rng, shape), rand(rng, shape)
    mean = x.mean(axis=tuple(axes), keepdims=True)
    var = x.var(axis=tuple(axes), keepdims=True)
    out = (x - mean) / np.sqrt(var + 1e-5)
    out = out * (gamma if scale else 1) + (beta if center else 0)
    return Case(
        [x, gamma, beta],
        lambda v, g, b: op.nn.layer_norm(v, g, b, axes, center=center, scale=scale),
        out.astype("float32"),
        rtol=1e-4,
        atol=1e-4,
    )


@case("matmul")
def _matmul(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    k = draw(dims)
    a_shape = draw(st.sampled_from([(k,), (draw(dims), k), (draw(dims), 1, draw(dims), k)]))
    b_shape = draw(st.sampled_from([(k,), (k, draw(dims)), (draw(dims), k, draw(dims))]))
    a, b = rand(rng, a_shape), rand(rng, b_shape)
    return Case([a, b], op.matmul, np.matmul(a, b), batch=(0,) if len(a_shape) > 1 else ())


@case("matmul_out_dtype")
def _matmul_out_dtype(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    a = rand(rng, (draw(dims), 3), "float16")
    b = rand(rng, (3, draw(dims)), "float16")
    expected = a.astype("float32") @ b.astype("float32")
    return Case([a, b], lambda x, y: op.matmul(x, y, out_dtype="float32"), expected, rtol=1e-3)


@case("nn.dense", "nn.linear")
def _dense(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), 3))
    w, b = rand(rng, (draw(dims), 3)), None
    expected = x @ w.T
    if name == "nn.dense":
        return Case([x, w], op.nn.dense, expected)
    b = rand(rng, (w.shape[0],))
    return Case([x, w, b], op.nn.linear, expected + b)


def _conv2d_ref(x, w, stride, pad, dilation, groups):
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow), "float32")
    per_group = o // groups
    for g in range(o):
        group = g // per_group
        xs = x[:, group * cg : (group + 1) * cg]
        for i in range(oh):
            for j in range(ow):
                patch = xs[
                    :,
                    :,
                    i * stride[0] : i * stride[0] + dilation[0] * (kh - 1) + 1 : dilation[0],
                    j * stride[1] : j * stride[1] + dilation[1] * (kw - 1) + 1 : dilation[1],
                ]
                out[:, g, i, j] = (patch * w[g]).sum(axis=(1, 2, 3))
    return out


@case("nn.conv2d")
def _conv2d(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    groups = draw(st.sampled_from([1, 2]))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), 1)
    pad = tuple(draw(st.integers(0, 1)) for _ in range(4))
    x = rand(rng, (draw(st.integers(1, 2)), 2 * groups, 5, 5))
    w = rand(rng, (2 * groups, 2, draw(st.integers(1, 3)), draw(st.integers(1, 3))))
    expected = _conv2d_ref(x, w, stride, pad, dilation, groups)
    return Case(
        [x, w],
        lambda v, k: op.nn.conv2d(v, k, stride, pad, dilation, groups),
        expected,
        rtol=1e-4,
        atol=1e-4,
    )


def _pool_ref(x, kind, size, stride, pad, ceil_mode, count_include_pad):
    n, c, h, w = x.shape
    spans = []
    for axis in range(2):
        extent = (h, w)[axis] + pad[axis] + pad[axis + 2] - size[axis]
        out = (extent + (stride[axis] - 1 if ceil_mode else 0)) // stride[axis] + 1
        if ceil_mode and (out - 1) * stride[axis] >= (h, w)[axis] + pad[axis]:
            out -= 1  # a last window that would start in the padding after the input
        spans.append(out)
    # Windows that rounding up (ceil_mode) moves wholly outside the input read the fill only.
    fill = np.finfo("float32").min if kind == "max" else 0.0
    big = np.full((n, c, h + pad[0] + pad[2] + stride[0], w + pad[1] + pad[3] + stride[1]), fill)
    big[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x
    inside = np.zeros(big.shape[2:])
    inside[pad[0] : pad[0] + h, pad[1] : pad[1] + w] = 1
    padded = np.zeros(big.shape[2:])
    padded[: h + pad[0] + pad[2], : w + pad[1] + pad[3]] = 1
    out = np.zeros((n, c, *spans), "float32")
    for i in range(spans[0]):
        for j in range(spans[1]):
            rows = slice(i * stride[0], i * stride[0] + size[0])
            cols = slice(j * stride[1], j * stride[1] + size[1])
            window = big[:, :, rows, cols]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                count = (padded if count_include_pad else inside)[rows, cols].sum()
                out[:, :, i, j] = window.sum(axis=(2, 3)) / max(count, 1)
    return out


@case("nn.max_pool2d", "nn.avg_pool2d")
def _pool2d(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    kind = name[3:6]
    size = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = tuple(draw(st.integers(0, min(size) // 2)) for _ in range(4))
    ceil_mode = draw(st.booleans())
    count_include_pad = draw(st.booleans())
    x = rand(rng, (draw(st.integers(1, 2)), 2, draw(st.integers(3, 5)), draw(st.integers(3, 5))))
    ctor = getattr(op.nn, f"{kind}_pool2d")
    return Case(
        [x],
        lambda v: ctor(v, size, stride, pad, 1, ceil_mode, count_include_pad),
        _pool_ref(x, kind, size, stride, pad, ceil_mode, count_include_pad),
    )


def _conv2d_transpose_ref(x, w, stride, pad, output_padding, dilation, groups):
    """Each input element scatters its kernel-weighted copy into the output, then the padding
    is cut away."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full = [
        (size - 1) * s + d * (k - 1) + 1 + extra
        for size, s, d, k, extra in zip((h, wd), stride, dilation, (kh, kw), output_padding)
    ]
    out = np.zeros((n, og * groups, *full), "float32")
    for g in range(groups):
        xs, ws = x[:, g * cg : (g + 1) * cg], w[g * cg : (g + 1) * cg]
        for i in range(h):
            for j in range(wd):
                rows = slice(i * stride[0], i * stride[0] + dilation[0] * (kh - 1) + 1, dilation[0])
                cols = slice(j * stride[1], j * stride[1] + dilation[1] * (kw - 1) + 1, dilation[1])
                out[:, g * og : (g + 1) * og, rows, cols] += np.einsum(
                    "nc,cokl->nokl", xs[:, :, i, j], ws
                )
    return out[:, :, pad[0] : full[0] - pad[2], pad[1] : full[1] - pad[3]]


@case("nn.conv2d_transpose")
def _conv2d_transpose(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    groups = draw(st.sampled_from([1, 2]))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), 1)
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(4))
    x = rand(rng, (draw(st.integers(1, 2)), 2 * groups, draw(st.integers(2, 4)), 3))
    w = rand(rng, (2 * groups, draw(st.integers(1, 2)), draw(st.integers(2, 3)), draw(dims)))
    expected = _conv2d_transpose_ref(x, w, stride, pad, output_padding, dilation, groups)
    return Case(
        [x, w],
        lambda v, k: op.nn.conv2d_transpose(v, k, stride, pad, output_padding, dilation, groups),
        expected,
        rtol=1e-4,
        atol=1e-4,
    )


def _pool_backward_ref(g, x, kind, size, stride, pad, dilation, ceil_mode, count_include_pad):
    """Each window's gradient goes to its first largest element (max) or, divided by the
    window's count, to each of its elements (avg); positions in the padding are dropped."""
    n, c, h, w = x.shape
    fill = np.finfo("float32").min if kind == "max" else 0.0
    reach = [
        (o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(g.shape[2:], stride, size, dilation)
    ]
    big = np.full((n, c, max(reach[0], h + pad[0]), max(reach[1], w + pad[1])), fill, "float32")
    big[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x
    padded_size = (h + pad[0] + pad[2], w + pad[1] + pad[3])
    out = np.zeros(big.shape, "float32")
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            rows = np.arange(size[0]) * dilation[0] + i * stride[0]
            cols = np.arange(size[1]) * dilation[1] + j * stride[1]
            window = big[:, :, rows[:, None], cols[None, :]].reshape(n, c, -1)
            if kind == "max":
                first = window.argmax(axis=2)
                r, q = rows[first // size[1]], cols[first % size[1]]
                for b in range(n):
                    for ch in range(c):
                        out[b, ch, r[b, ch], q[b, ch]] += g[b, ch, i, j]
                continue
            lo, hi = (
                ((0, 0), padded_size) if count_include_pad else (pad[:2], (pad[0] + h, pad[1] + w))
            )
            if count_include_pad and not ceil_mode:
                count = size[0] * size[1]
            else:
                inside = [((at >= lo[a]) & (at < hi[a])).sum() for a, at in enumerate((rows, cols))]
                count = inside[0] * inside[1]
            share = g[:, :, i, j] / max(count, 1)
            out[:, :, rows[:, None], cols[None, :]] += share[:, :, None, None]
    return out[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w]


@case("grad.max_pool2d_backward", "grad.avg_pool2d_backward")
def _pool2d_backward(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    kind = name[5:8]
    size = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), 1)
    pad = tuple(draw(st.integers(0, min(size) // 2)) for _ in range(4))
    ceil_mode, count_include_pad = draw(st.booleans()), draw(st.booleans())
    x = rand(rng, (draw(st.integers(1, 2)), 2, draw(st.integers(5, 7)), draw(st.integers(3, 5))))
    attrs = (size, stride, pad, dilation, ceil_mode, count_include_pad)
    data = relax.Var("x", relax.TensorStructInfo(x.shape, "float32"))
    forward = relax.normalize(getattr(op.nn, f"{kind}_pool2d")(data, *attrs))
    g = rand(rng, [int(d) for d in forward.struct_info.shape_values])
    backward = getattr(op.grad, f"{kind}_pool2d_backward")
    return Case(
        [g, x],
        lambda dy, v: backward(dy, v, *attrs),
        _pool_backward_ref(g, x, kind, size, stride, pad, dilation, ceil_mode, count_include_pad),
        batch=(0, 1),
    )


@case("nn.batch_norm")
def _batch_norm(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    shape = [draw(dims), draw(dims) + 1, *[draw(dims) for _ in range(draw(st.integers(0, 2)))]]
    axis = draw(st.sampled_from([1, -1]))
    x = rand(rng, shape)
    channels = shape[axis]
    gamma, beta, mean = (rand(rng, (channels,)) for _ in range(3))
    var = rng.uniform(0.5, 2, channels).astype("float32")
    center, scale = draw(st.booleans()), draw(st.booleans())
    at = [1] * len(shape)
    at[axis] = channels

    def per_channel(v: np.ndarray) -> np.ndarray:
        return v.reshape(at)

    out = (x - per_channel(mean)) / np.sqrt(per_channel(var) + 1e-5)
    out = out * (per_channel(gamma) if scale else 1) + (per_channel(beta) if center else 0)
    return Case(
        [x, gamma, beta, mean, var],
        lambda *a: relax.TupleGetItem(
            op.nn.batch_norm(*a, axis=axis, center=center, scale=scale), 0
        ),
        out.astype("float32"),
    )


@case("nn.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), 2, draw(st.integers(1, 6)), draw(st.integers(1, 6))))
    output_size = draw(st.sampled_from([None, 1, (draw(dims), draw(dims))]))
    if output_size is None:
        out_h, out_w = x.shape[2:]
    else:
        out_h, out_w = (output_size, output_size) if output_size == 1 else output_size
    expected = np.zeros((*x.shape[:2], out_h, out_w), "float32")
    for i in range(out_h):
        rows = slice(i * x.shape[2] // out_h, -(-(i + 1) * x.shape[2] // out_h))
        for j in range(out_w):
            cols = slice(j * x.shape[3] // out_w, -(-(j + 1) * x.shape[3] // out_w))
            expected[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    return Case([x], lambda v: op.nn.adaptive_avg_pool2d(v, output_size), expected)


@case("take")
def _take(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims)))
    axis = draw(st.sampled_from([0, 1, -1]))
    mode = draw(st.sampled_from(["fast", "clip", "wrap"]))
    size = x.shape[axis]
    # "fast" promises in-range indices; the other modes are given some outside the range.
    low, high = (0, size) if mode == "fast" else (-2 * size, 2 * size)
    index_shape = draw(st.sampled_from([(draw(dims),), (draw(dims), draw(dims))]))
    indices = rng.integers(low, high, index_shape).astype(draw(st.sampled_from(["int32", "int64"])))
    expected = np.take(x, indices, axis, mode="raise" if mode == "fast" else mode)
    return Case([x, indices], lambda v, i: op.take(v, i, axis, mode), expected, batch=(1,))


_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@case(*_REDUCE)
def _reduce(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), draw(dims)))
    axis = draw(st.sampled_from([None, 1, [0, 2], -1]))
    keepdims = draw(st.booleans())
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    expected = np.asarray(_REDUCE[name](x, axis=np_axis, keepdims=keepdims), "float32")
    return Case([x], lambda v: getattr(op, name)(v, axis, keepdims), expected)


@case("argmax")
def _arg_reduce(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), draw(dims)))
    axis = draw(st.sampled_from([None, 0, -1]))
    keepdims = draw(st.booleans())
    expected = np.asarray(getattr(np, name)(x, axis=axis, keepdims=keepdims), "int64")
    return Case([x], lambda v: getattr(op, name)(v, axis, keepdims), expected)


@case("reshape", "flatten", "nn.batch_flatten", "permute_dims")
def _layout(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), 2, draw(dims)))
    if name == "reshape":
        return Case([x], lambda v: op.reshape(v, (-1, 2)), x.reshape(-1, 2))
    if name == "flatten":
        return Case([x], op.flatten, x.reshape(-1))
    if name == "nn.batch_flatten":
        return Case([x], op.nn.batch_flatten, x.reshape(x.shape[0], -1))
    axes = draw(st.permutations([0, 1, 2]))
    return Case([x], lambda v: op.permute_dims(v, axes), x.transpose(axes))


@case("concat")
def _concat(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    axis = draw(st.sampled_from([0, 1, -1, None]))
    a = rand(rng, (draw(dims), 3))
    shape = list(a.shape)
    if axis is not None:
        shape[axis] = draw(dims)
    b = rand(rng, shape)
    if axis is None:
        expected = np.concatenate([a.reshape(-1), b.reshape(-1)])
    else:
        expected = np.concatenate([a, b], axis=axis)
    batch = (0, 1) if axis in (1, -1) else (0,)
    return Case([a, b], lambda x, y: op.concat((x, y), axis=axis), expected, batch=batch)


@case("split")
def _split(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(st.integers(1, 7))))
    axis = draw(st.sampled_from([0, 1, -1]))
    size = x.shape[axis]
    if draw(st.booleans()):
        parts: Any = draw(st.integers(1, 3))
        # ceil(size / k) per part, the last what remains (numpy's array_split differs).
        seg = -(-size // parts)
        cuts = [min(seg * i, size) for i in range(1, parts)]
    else:
        parts = cuts = sorted(draw(st.lists(st.integers(0, 8), max_size=3)))
    expected = np.split(x, cuts, axis=axis) if cuts else [x]
    # Along the symbolic axis only sections keep the shapes provable; indices need n >= cut.
    batch = (0,) if axis != 0 or isinstance(parts, int) else ()
    return Case([x], lambda v: op.split(v, parts, axis), expected, batch=batch)


@case("broadcast_to")
def _broadcast_to(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (1, draw(dims)))
    rows = draw(dims)
    return Case(
        [x],
        lambda v: op.broadcast_to(v, (rows, 2, v.struct_info.shape_values[1])),
        np.broadcast_to(x, (rows, 2, x.shape[1])),
        batch=(),
    )


@case("expand_dims", "squeeze")
def _expand_squeeze(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), 1, draw(dims)))
    if name == "expand_dims":
        ndim = 3 + draw(st.integers(1, 2))  # the result's: the axes index it
        count = ndim - 3
        axes = draw(
            st.lists(
                st.integers(-ndim, ndim - 1),
                min_size=count,
                max_size=count,
                unique_by=lambda a: a % ndim,
            )
        )
        return Case([x], lambda v: op.expand_dims(v, axes), np.expand_dims(x, axes))
    axis = draw(st.sampled_from([1, -2, [1], None]))
    # axis=None leaves a symbolic n's rank unknown (not legalized): run those statically.
    expected = np.squeeze(x, tuple(axis) if isinstance(axis, list) else axis)
    return Case([x], lambda v: op.squeeze(v, axis), expected, batch=(0,) if axis else ())


@case("collapse_sum_to", "collapse_sum_like")
def _collapse_sum(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims), draw(dims)))
    # The target: some leading axes dropped, each other axis kept or made 1.
    lead = draw(st.integers(0, 3))
    ones = [draw(st.booleans()) for _ in range(lead, 3)]
    summed = tuple(range(lead)) + tuple(a for a, one in zip(range(lead, 3), ones) if one)
    expected = x.sum(axis=summed, keepdims=True).reshape(
        [1 if one else x.shape[a] for a, one in zip(range(lead, 3), ones)]
    )

    def target(v: relax.Var) -> list[Any]:
        shape = v.struct_info.shape_values
        return [1 if one else shape[a] for a, one in zip(range(lead, 3), ones)]

    if name == "collapse_sum_to":
        return Case([x], lambda v: op.collapse_sum_to(v, target(v)), expected)
    # The target tensor shares the symbolic n when it keeps the data's axis 0.
    batch = (0, 1) if lead == 0 and not ones[0] else (0,)
    return Case([x, np.zeros_like(expected)], op.collapse_sum_like, expected, batch=batch)


@case("nn.nll_loss")
def _nll_loss(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    # (N, C) or (N, C, d): torch.nn.functional.nll_loss is the reference.
    classes, spatial = draw(st.integers(2, 4)), [draw(dims)] * draw(st.integers(0, 1))
    pred = rand(rng, (draw(dims), classes, *spatial))
    targets = rng.integers(0, classes, size=(pred.shape[0], *spatial)).astype("int64")
    targets.flat[0] = 0  # one example not ignored, so the mean is defined
    weights = rng.uniform(0.5, 2, size=classes).astype("float32")
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    weighted = draw(st.booleans())
    expected = torch.nn.functional.nll_loss(
        torch.tensor(pred),
        torch.tensor(targets),
        torch.tensor(weights) if weighted else None,
        reduction=reduction,
        ignore_index=1,
    ).numpy()
    inputs = [pred, targets, weights] if weighted else [pred, targets]
    return Case(
        inputs,
        lambda p, t, *w: op.nn.nll_loss(p, t, *w, reduction=reduction, ignore_index=1),
        expected,
        batch=(0, 1),
    )


@case("nn.cross_entropy_with_logits")
def _cross_entropy(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    pred = rand(rng, [draw(dims) for _ in range(draw(st.integers(1, 2)))])
    labels = rng.uniform(0, 1, size=pred.shape).astype("float32")
    expected = -(pred * labels).sum() / (pred.shape[0] if pred.ndim == 2 else 1)
    return Case([pred, labels], op.nn.cross_entropy_with_logits, expected, batch=(0, 1))


@case("where")
def _where(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    rows, cols = draw(dims), draw(dims)
    cond = rng.integers(0, 2, size=(rows, cols)).astype("bool")
    a, b = rand(rng, (rows, cols)), rand(rng, (cols,))
    return Case([cond, a, b], op.where, np.where(cond, a, b), batch=(0, 1))


@case("zeros", "ones", "full", "full_tensor", "zeros_like", "ones_like", "full_like")
def _create(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    # The input only brings the shape, so that the symbolic run has a symbolic n.
    x = rand(rng, (draw(dims), draw(dims)))

    def build(v: relax.Var) -> relax.Expr:
        shape = v.struct_info.shape_values
        if name == "full":
            return op.full(shape, 2.5)
        if name == "full_tensor":
            return op.full(shape, op.sum(v), "float32")
        if name == "full_like":
            return op.full_like(v, op.sum(v))
        if name == "ones_like":
            return op.ones_like(v)
        if name == "zeros_like":
            return op.zeros_like(v, "int32")
        return getattr(op, name)(shape, "int32")

    expected = {
        "zeros": np.zeros(x.shape, "int32"),
        "ones": np.ones(x.shape, "int32"),
        "full": np.full(x.shape, 2.5, "float32"),
        "full_tensor": np.full(x.shape, x.sum(), "float32"),
        "zeros_like": np.zeros(x.shape, "int32"),
        "ones_like": np.ones(x.shape, "float32"),
        "full_like": np.full(x.shape, x.sum(), "float32"),
    }[name]
    return Case([x], build, expected, rtol=1e-4, atol=1e-4)


@case("astype", "ewise_fma")
def _misc(name: str, draw: Draw, rng: np.random.Generator) -> Case:
    x = rand(rng, (draw(dims), draw(dims)))
    if name == "astype":
        return Case([x], lambda v: op.astype(v, "int32"), x.astype("int32"))
    y, z = rand(rng, x.shape), rand(rng, x.shape)
    return Case([x, y, z], op.ewise_fma, x * y + z, batch=(0, 1, 2))


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_legalized_op_matches_numpy(name, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    run_case(CASES[name](data.draw, rng), symbolic=data.draw(st.booleans()))


def test_every_registered_relax_op_is_covered():
    legalized = {
        name.removeprefix("relax.")
        for name in Op.list_op_names()
        if name.startswith("relax.") and Op.get(name).get_attr("FLegalize") is not None
    }
    assert legalized <= set(CASES), legalized - set(CASES)


def test_every_legalization_is_a_row_of_the_table():
    registered = {
        name: Op.get(name).get_attr("FLegalize")
        for name in Op.list_op_names()
        if Op.get(name).get_attr("FLegalize") is not None
    }
    assert registered == LEGALIZATIONS


@I.ir_module
class ConcatOfATupleVariable:
    @R.function
    def main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((4, 3), "float32")):
        with R.dataflow():
            t = (a, b)
            c = R.concat(t, axis=0)
            R.output(c)
        return c


def test_concat_of_a_tuple_variable_reads_its_fields():
    # The tuple is a variable (what Gradient's split rule and user code write), not a literal.
    mod = LegalizeOps()(ConcatOfATupleVariable)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    a, b = np.ones((2, 3), "float32"), np.arange(12, dtype="float32").reshape(4, 3)
    out = vm["main"](mlckit.nd.array(a), mlckit.nd.array(b))
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, b]))


# ------------------------------------------------------------------------------ the pass
@I.ir_module
class AddRelu:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor((4,), "float32")):
        n = T.int64()
        with R.dataflow():
            lv: R.Tensor((n, 4), "float32") = R.add(x, y)
            gv: R.Tensor((n, 4), "float32") = R.nn.relu(lv)
            R.output(gv)
        return gv


@I.ir_module
class AddReluLegalized:
    @T.prim_func(private=True)
    def add(var_x: T.handle, y: T.Buffer((T.int64(4),), "float32"), var_T_add: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        x = T.match_buffer(var_x, (n, T.int64(4)), "float32")
        T_add = T.match_buffer(var_T_add, (n, T.int64(4)), "float32")
        for ax0, ax1 in T.grid(n, T.int64(4)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + y[v_ax1]

    @T.prim_func(private=True)
    def relu(var_lv: T.handle, var_compute: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        lv = T.match_buffer(var_lv, (n, T.int64(4)), "float32")
        compute = T.match_buffer(var_compute, (n, T.int64(4)), "float32")
        for i0, i1 in T.grid(n, T.int64(4)):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                compute[v_i0, v_i1] = T.max(lv[v_i0, v_i1], T.float32(0.0))

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor((4,), "float32")):
        n = T.int64()
        cls = AddReluLegalized
        with R.dataflow():
            lv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((n, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((n, 4), "float32"))
            R.output(gv)
        return gv


def test_add_relu_legalizes_to_the_expected_module():
    after = LegalizeOps()(AddRelu)
    mlckit.ir.assert_structural_equal(after, AddReluLegalized)
    # The input module is not changed, and the output prints and parses back.
    assert high_level_calls(AddRelu) == ["relax.add", "relax.nn.relu"]
    mlckit.ir.assert_structural_equal(mlckit.script.from_source(after.script()), after)


def _mlp(bb: relax.BlockBuilder) -> None:
    x = relax.Var("x", relax.TensorStructInfo((n_var, 784), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((128, 784), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((128,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((10, 128), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((10,), "float32"))
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(op.nn.dense(x, w0))
            lv1 = bb.emit(op.add(lv0, b0))
            lv2 = bb.emit(op.nn.relu(lv1))
            lv3 = bb.emit(op.nn.dense(lv2, w1))
            gv = bb.emit_output(op.add(lv3, b1))
        bb.emit_func_output(gv)


def _mlp_inputs(batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = [(batch, 784), (128, 784), (128,), (10, 128), (10,)]
    return [rng.standard_normal(s).astype("float32") * 0.1 for s in shapes]


def _mlp_reference(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_course_mlp_with_symbolic_batch_builds_and_matches_numpy(target):
    bb = relax.BlockBuilder()
    _mlp(bb)
    after = LegalizeOps()(bb.get())
    prim_funcs = {gv.name_hint for gv, f in after.functions.items() if isinstance(f, tir.PrimFunc)}
    assert prim_funcs == {"dense", "dense1", "add", "add1", "relu"}
    assert high_level_calls(after) == []
    vm = relax.VirtualMachine(relax.build(after, target))
    for batch in (1, 3) if target == "python" else (2,):
        inputs = _mlp_inputs(batch)
        got = vm["main"](*inputs).numpy()
        np.testing.assert_allclose(got, _mlp_reference(*inputs), rtol=1e-4, atol=1e-4)


def test_customize_legalize_map_takes_precedence():
    def relu_as_maximum(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        return bb.call_te(
            lambda x: topi.maximum(x, tir.const(0.0, "float32")),
            call.args[0],
            primfunc_name_hint="my_relu",
        )

    after = LegalizeOps({"relax.nn.relu": relu_as_maximum})(AddRelu)
    assert "my_relu" in after and "relu" not in after
    x, y = np.array([[-1, 2, -3, 4]], "float32"), np.array([1, 1, 1, 1], "float32")
    got = relax.VirtualMachine(relax.build(after, "python"))["main"](x, y).numpy()
    np.testing.assert_array_equal(got, np.maximum(x + y, 0))


def test_calls_that_cannot_or_need_not_be_legalized_are_kept(monkeypatch):
    @I.ir_module
    class Mixed:
        @T.prim_func
        def copy(A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32")):
            for i in range(2):
                with T.block("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi]

        @R.function
        def main(x: R.Tensor((2,), "float32"), u: R.Tensor(dtype="float32", ndim=2)):
            cls = Mixed
            with R.dataflow():
                a = R.call_tir(cls.copy, (x,), out_sinfo=R.Tensor((2,), "float32"))
                b = R.exp(a)
                c = R.nn.relu(u)
                R.output(b, c)
            return (b, c)

    # exp is legalized; relu of a tensor of unknown shape and the call_tir are kept.
    after = LegalizeOps()(Mixed)
    assert high_level_calls(after) == ["relax.nn.relu"]
    mlckit.ir.assert_structural_equal(after["copy"], Mixed["copy"])
    # An op without a legalization is kept, with a warning when asked for.
    monkeypatch.delitem(Op.get("relax.exp").attrs, "FLegalize")
    with pytest.warns(UserWarning, match="relax.exp has no legalization"):
        kept = LegalizeOps(enable_warning=True)(Mixed)
    assert high_level_calls(kept) == ["relax.exp", "relax.nn.relu"]


def test_a_legalization_must_keep_the_struct_info():
    def wrong(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        return bb.call_te(topi.sum, call.args[0])

    with pytest.raises(MLCError, match="legalization of relax.nn.relu gives"):
        LegalizeOps({"relax.nn.relu": wrong})(AddRelu)


_SPATIAL = {
    "conv2d": lambda x: op.nn.conv2d(x, relax.const(np.ones((2, 3, 3, 3), "float32")), 2, 1),
    "group_conv2d": lambda x: op.nn.conv2d(
        x, relax.const(np.ones((3, 1, 3, 3), "float32")), 2, (1, 0), groups=3
    ),
    "max_pool2d": lambda x: op.nn.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_pool2d": lambda x: op.nn.avg_pool2d(x, 2, 2),
    "batch_flatten": op.nn.batch_flatten,
    "concat": lambda x: op.concat((x, x), axis=None),
}


@pytest.mark.parametrize("name", sorted(_SPATIAL))
def test_symbolic_height_and_width_give_the_static_result(name):
    # Output dims such as (h + 1) // 2 must come out of the kernel exactly as inference says.
    data = np.random.default_rng(1).standard_normal((1, 3, 7, 5)).astype("float32")
    h, w = tir.Var("h", "int64"), tir.Var("w", "int64")
    results = []
    for shape in ((1, 3, h, w), data.shape):
        x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                gv = bb.emit_output(_SPATIAL[name](x))
            bb.emit_func_output(gv)
        mod = LegalizeOps()(bb.get())
        assert high_level_calls(mod) == []
        results.append(relax.VirtualMachine(relax.build(mod, "python"))["main"](data).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
