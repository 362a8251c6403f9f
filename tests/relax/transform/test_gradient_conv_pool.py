"""Gradients of nn.conv2d, nn.max_pool2d and nn.avg_pool2d through relax.transform.Gradient
(run through the VM) equal torch autograd: strides 1 to 3, asymmetric padding (more than the
kernel too), dilation, groups and depthwise kernels, overlapping, dilated and ceil_mode pooling
with and without count_include_pad, alone and chained as conv2d + relu + pool; a hypothesis
property over random configurations; sizes the rules cannot handle are TransformErrors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import relax
from mlckit.errors import TransformError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import relax as R
from mlckit.testing import check_numerical_grads

torch = pytest.importorskip("torch")
F = torch.nn.functional

F32 = "float32"
# The reference interpreter runs the breadth of cases; one chained case is compiled by numba.
TARGET = "python"


# ------------------------------------------------------------------------------ helpers
def _network(x_shape, w_shape=None, conv=None, pool=None):
    """main(x[, w]) = sum(out * r) for out = pool(relu(conv2d(x, w))), either layer left out
    when its attributes are None, and r a fixed random tensor shaped like out."""
    x = relax.Var("x", R.Tensor(x_shape, F32))
    params = [x] if conv is None else [x, relax.Var("w", R.Tensor(w_shape, F32))]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = x
            if conv is not None:
                out = bb.emit(relax.op.nn.conv2d(x, params[1], **conv))
                out = bb.emit(relax.op.nn.relu(out))
            if pool is not None:
                kind, attrs = pool
                out = bb.emit(getattr(relax.op.nn, f"{kind}_pool2d")(out, **attrs))
            shape = [int(d) for d in out.struct_info.shape_values]
            weights = np.random.default_rng(7).standard_normal(shape).astype(F32)
            gv = bb.emit_output(relax.op.sum(relax.op.multiply(out, relax.const(weights))))
        bb.emit_func_output(gv)
    return bb.get(), weights


def _torch_network(inputs, weights, conv=None, pool=None):
    """The same network in torch: its value and the gradients of its inputs."""
    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    out = tensors[0]
    if conv is not None:
        top, left, bottom, right = _four(conv.get("padding", 0))
        padded = F.pad(out, (left, right, top, bottom))
        out = F.conv2d(
            padded,
            tensors[1],
            stride=conv.get("strides", 1),
            dilation=conv.get("dilation", 1),
            groups=conv.get("groups", 1),
        )
        out = torch.relu(out)
    if pool is not None:
        kind, attrs = pool
        options = {"ceil_mode": attrs.get("ceil_mode", False)}
        if kind == "max":
            options["dilation"] = attrs.get("dilation", 1)
        else:
            options["count_include_pad"] = attrs.get("count_include_pad", False)
        pooling = getattr(F, f"{kind}_pool2d")
        out = pooling(out, attrs["pool_size"], attrs["strides"], attrs.get("padding", 0), **options)
    assert list(out.shape) == list(weights.shape), "mlckit and torch pool to different shapes"
    value = (out * torch.tensor(weights)).sum()
    value.backward()
    return value.item(), [t.grad.numpy() for t in tensors]


def _four(padding):
    items = [padding] if isinstance(padding, int) else list(padding)
    return items * 4 if len(items) == 1 else items * 2 if len(items) == 2 else items


def _adjoint(mod, target=TARGET):
    after = relax.transform.Gradient("main")(mod)
    return relax.VirtualMachine(
        relax.build(relax.transform.LegalizeOps()(after), target), mlckit.cpu()
    )


def _check_against_torch(x_shape, w_shape=None, conv=None, pool=None, seed=0, target=TARGET):
    mod, weights = _network(x_shape, w_shape, conv, pool)
    rng = np.random.default_rng(seed)
    shapes = [x_shape] if conv is None else [x_shape, w_shape]
    inputs = [rng.standard_normal(s).astype(F32) for s in shapes]
    value, grads = _adjoint(mod, target)["main_adjoint"](*inputs)
    expected_value, expected = _torch_network(inputs, weights, conv, pool)
    np.testing.assert_allclose(value.numpy(), expected_value, rtol=1e-4, atol=1e-4)
    for grad, want in zip(grads, expected):
        np.testing.assert_allclose(grad.numpy(), want, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ conv2d
CONV_CASES = {
    "plain": ((2, 3, 6, 6), (4, 3, 3, 3), {}),
    "stride 2, padding 1": ((2, 3, 7, 7), (4, 3, 3, 3), {"strides": 2, "padding": 1}),
    # (3, 2) strides leave input rows past the last window: they get no gradient.
    "uneven strides, rows left over": ((1, 2, 10, 9), (3, 2, 3, 2), {"strides": (3, 2)}),
    "asymmetric padding, stride 3": (
        (2, 2, 8, 7),
        (3, 2, 2, 3),
        {"strides": 3, "padding": (1, 0, 2, 1)},
    ),
    "padding past the kernel": ((1, 2, 5, 5), (2, 2, 2, 2), {"padding": 3, "strides": 2}),
    "dilation 2": ((2, 3, 9, 8), (2, 3, 3, 3), {"dilation": 2, "padding": 1}),
    "dilation and stride": ((1, 2, 11, 11), (3, 2, 3, 2), {"dilation": (2, 3), "strides": 2}),
    "groups 2": ((2, 4, 7, 7), (6, 2, 3, 3), {"groups": 2, "strides": 2, "padding": 1}),
    "depthwise": ((2, 4, 8, 8), (4, 1, 3, 3), {"groups": 4, "padding": 1}),
    "depthwise, multiplier 2": (
        (1, 3, 9, 9),
        (6, 1, 3, 3),
        {"groups": 3, "strides": 2, "dilation": 2},
    ),
}


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_conv2d_gradients_equal_torch(case):
    x_shape, w_shape, attrs = case
    _check_against_torch(x_shape, w_shape, conv=attrs)


def test_conv2d_with_a_symbolic_batch_differentiates():
    n = relax.Var("unused", R.Tensor(("n",), F32)).struct_info.shape_values[0]
    x = relax.Var("x", R.Tensor((n, 4, 7, 7), F32))
    w = relax.Var("w", R.Tensor((4, 2, 3, 3), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(x, w, strides=2, groups=2)
            gv = bb.emit_output(relax.op.sum(relax.op.multiply(conv, conv)))
        bb.emit_func_output(gv)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s).astype(F32) for s in ((3, 4, 7, 7), (4, 2, 3, 3))]
    _, grads = _adjoint(bb.get())["main_adjoint"](*inputs)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in inputs)
    (F.conv2d(tx, tw, stride=2, groups=2) ** 2).sum().backward()
    for grad, want in zip(grads, (tx.grad, tw.grad)):
        np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def _conv_module(x_sinfo, **attrs):
    x = relax.Var("x", x_sinfo)
    w = relax.Var("w", R.Tensor((2, 2, 3, 3), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(x, w, **attrs)
            gv = bb.emit_output(relax.op.sum(relax.op.astype(conv, F32)))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize(
    ("x_sinfo", "attrs", "message"),
    [
        (R.Tensor((1, 2, "h", 8), F32), {}, "static channels, heights and widths"),
        (R.Tensor((1, "c", 8, 8), F32), {}, "static channels, heights and widths"),
        (R.Tensor((1, 2, 8, 8), F32), {"out_dtype": "float64"}, "an out_dtype equal to"),
    ],
)
def test_conv2d_gradient_refuses_what_it_cannot_size(x_sinfo, attrs, message):
    with pytest.raises(TransformError, match=rf"at lv = relax.nn.conv2d\(...\): .*{message}"):
        relax.transform.Gradient("main")(_conv_module(x_sinfo, **attrs))


# ------------------------------------------------------------------------------ pooling
POOL_CASES = {
    "tiling 2x2": {"pool_size": 2, "strides": 2},
    "overlapping 3x3 by 2, padding 1": {"pool_size": 3, "strides": 2, "padding": 1},
    "overlapping 2x2 by 1": {"pool_size": 2, "strides": 1},
    "3x2 by (1, 2), padding (1, 0)": {"pool_size": (3, 2), "strides": (1, 2), "padding": (1, 0)},
    "ceil_mode": {"pool_size": 3, "strides": 2, "ceil_mode": True},
    "ceil_mode, padding 1": {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True},
    "gaps between windows": {"pool_size": 2, "strides": 3},
}


@pytest.mark.parametrize("case", POOL_CASES.values(), ids=POOL_CASES.keys())
@pytest.mark.parametrize(
    "kind",
    [
        ("max", {}),
        ("avg", {"count_include_pad": False}),
        ("avg", {"count_include_pad": True}),
    ],
    ids=["max", "avg", "avg counting padding"],
)
def test_pool_gradients_equal_torch(kind, case):
    name, options = kind
    _check_against_torch((2, 3, 9, 8), pool=(name, {**case, **options}), seed=1)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_dilated_max_pool_gradient_equals_torch(ceil_mode):
    attrs = {"pool_size": 3, "strides": 2, "dilation": 2, "padding": 1, "ceil_mode": ceil_mode}
    _check_against_torch((1, 2, 10, 11), pool=("max", attrs), seed=2)


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_dilated_avg_pool_gradient_equals_numerical(count_include_pad):
    # torch's avg_pool2d has no dilation: the pooling is linear, so central differences are
    # exact up to rounding.
    attrs = {"pool_size": 2, "strides": 1, "dilation": 2, "padding": 1}
    mod, _ = _network((1, 2, 6, 7), pool=("avg", {**attrs, "count_include_pad": count_include_pad}))
    vm = _adjoint(mod)
    x = np.random.default_rng(4).standard_normal((1, 2, 6, 7)).astype(F32)
    _, (grad,) = vm["main_adjoint"](x)
    check_numerical_grads(lambda a: vm["main"](a).numpy(), [x], [grad.numpy()])


def test_max_pool_gradient_goes_to_the_first_of_tied_maxima():
    x = np.array([[[[1.0, 3.0, 3.0], [3.0, 0.0, 3.0], [2.0, 3.0, 1.0]]]], F32)
    attrs = {"pool_size": 2, "strides": 1}
    mod, weights = _network(x.shape, pool=("max", attrs))
    _, (grad,) = _adjoint(mod)["main_adjoint"](x)
    _, (expected,) = _torch_network([x], weights, pool=("max", attrs))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-6)


# ------------------------------------------------------------------------------ chained
CHAINED = {
    "stride 1, tiling max pool": ({"padding": 1}, ("max", {"pool_size": 2, "strides": 2})),
    "stride 1, tiling avg pool": ({}, ("avg", {"pool_size": 2, "strides": 2})),
    "strided conv, overlapping max pool": (
        {"strides": 2, "padding": 1},
        ("max", {"pool_size": 3, "strides": 2, "padding": 1}),
    ),
    "dilated grouped conv, overlapping avg pool": (
        {"dilation": 2, "groups": 2, "padding": 2},
        ("avg", {"pool_size": 3, "strides": 1, "count_include_pad": True}),
    ),
    "strided conv, ceil_mode max pool": (
        {"strides": (2, 1)},
        ("max", {"pool_size": 2, "strides": 2, "ceil_mode": True}),
    ),
}


@pytest.mark.parametrize("case", CHAINED.values(), ids=CHAINED.keys())
def test_conv2d_relu_pool_equal_torch(case):
    conv, pool = case
    _check_against_torch((2, 4, 11, 10), (6, 4 // conv.get("groups", 1), 3, 3), conv, pool)


def test_compiled_conv2d_relu_pool_equals_torch():
    conv, pool = CHAINED["strided conv, overlapping max pool"]
    _check_against_torch((2, 4, 11, 10), (6, 4, 3, 3), conv, pool, target="llvm")


def test_adjoint_names_the_backward_ops_and_round_trips():
    x = relax.Var("x", R.Tensor((2, 4, 11, 10), F32))
    w = relax.Var("w", R.Tensor((6, 2, 3, 3), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, w, dilation=2, groups=2, padding=2))
            pool = relax.op.nn.avg_pool2d(conv, 3, 1, count_include_pad=True)
            gv = bb.emit_output(relax.op.sum(pool))
        bb.emit_func_output(gv)
    after = relax.transform.Gradient("main")(bb.get())
    text = after.script()
    for call in ("R.grad.avg_pool2d_backward(", "R.nn.conv2d_transpose(", "output_padding=[0, 0]"):
        assert call in text
    assert_structural_equal(from_source(text), after)


@st.composite
def _configurations(draw):
    """A conv2d (stride, asymmetric padding, dilation, groups) followed by a pooling that
    torch can express (padding at most half the window; dilation for max only)."""
    groups = draw(st.sampled_from([1, 2]))
    channels, out_channels = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    conv = {
        "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "padding": tuple(draw(st.integers(0, 2)) for _ in range(4)),
        "dilation": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        "groups": groups,
    }
    kind = draw(st.sampled_from(["max", "avg"]))
    window = draw(st.integers(1, 3))
    pool = {
        "pool_size": window,
        "strides": draw(st.integers(1, 3)),
        "padding": draw(st.integers(0, window // 2)),
        "ceil_mode": draw(st.booleans()),
    }
    if kind == "max":
        pool["dilation"] = draw(st.integers(1, 2))
    else:
        pool["count_include_pad"] = draw(st.booleans())
    x_shape = (
        draw(st.integers(1, 2)),
        channels,
        draw(st.integers(6, 10)),
        draw(st.integers(6, 10)),
    )
    w_shape = (out_channels, channels // groups, *kernel)
    return x_shape, w_shape, conv, (kind, pool)


def _torch_pooled_shape(x_shape, w_shape, conv, pool):
    """The output shape torch gives (a ceil_mode window that would start in the padding after
    the input is dropped, by torch as by TVM and mlckit)."""
    x = torch.zeros(x_shape)
    top, left, bottom, right = conv["padding"]
    out = F.conv2d(
        F.pad(x, (left, right, top, bottom)),
        torch.zeros(w_shape),
        stride=conv["strides"],
        dilation=conv["dilation"],
        groups=conv["groups"],
    )
    kind, attrs = pool
    extra = {"dilation": attrs["dilation"]} if kind == "max" else {}
    pooling = getattr(F, f"{kind}_pool2d")
    pooled = pooling(
        out,
        attrs["pool_size"],
        attrs["strides"],
        attrs["padding"],
        ceil_mode=attrs["ceil_mode"],
        **extra,
    )
    return list(pooled.shape)


@settings(max_examples=20, deadline=None)
@given(_configurations())
def test_random_conv_pool_configurations_equal_torch(config):
    x_shape, w_shape, conv, pool = config
    try:
        torch_shape = _torch_pooled_shape(*config)
    except RuntimeError:  # the window does not fit the convolution's output
        assume(False)
    mod_shape = _network(x_shape, w_shape, conv, pool)[1].shape
    assert list(mod_shape) == torch_shape
    _check_against_torch(x_shape, w_shape, conv, pool, seed=5)
