"""relax.nn.conv2d_transpose and relax.grad.max_pool2d_backward / avg_pool2d_backward: struct
info, errors naming the op and its arguments, TVMScript round trip, and the legalized kernels
run through the VM against torch (conv_transpose2d, and the autograd of the poolings)."""

from __future__ import annotations

import numpy as np
import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, n, raises, var

import mlckit
from mlckit import relax
from mlckit.errors import StructInfoError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source

torch = pytest.importorskip("torch")

nn, grad = relax.op.nn, relax.op.grad


def _run(call_of, *arrays):
    """Legalize and run ``main(*params) = call_of(*params)`` on the reference interpreter."""
    params = [var(f"p{i}", a.shape, str(a.dtype)) for i, a in enumerate(arrays)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(call_of(*params))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert_structural_equal(from_source(mod.script()), mod)
    ex = relax.build(relax.transform.LegalizeOps()(mod), "python")
    return relax.VirtualMachine(ex, mlckit.cpu())["main"](*arrays).numpy()


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# ------------------------------------------------------------------------------ conv2d_transpose
def test_conv2d_transpose_output_shape():
    x, w = var("x", (2, 4, 5, 5)), var("w", (4, 3, 3, 3))
    call = nn.conv2d_transpose(x, w)
    assert call.attrs.kernel_layout == "IOHW" and call.attrs.output_padding == [0, 0]
    assert_tensor(infer(call), (2, 3, 7, 7))
    # (5 - 1) * 2 - 1 - 1 + 1 * (3 - 1) + 1 + 1 = 10
    assert_tensor(infer(nn.conv2d_transpose(x, w, 2, 1, output_padding=1)), (2, 3, 10, 10))
    # padding (top, left, bottom, right), dilation 2: the kernel spans 5 positions.
    asym = nn.conv2d_transpose(x, w, padding=(1, 0, 2, 0), dilation=2)
    assert_tensor(infer(asym), (2, 3, 6, 9))
    grouped = nn.conv2d_transpose(x, var("w", (4, 2, 3, 3)), groups=2)
    assert_tensor(infer(grouped), (2, 4, 7, 7))
    symbolic = var("x", (n, 4, 5, 5), "float16")
    assert_tensor(
        infer(
            nn.conv2d_transpose(symbolic, var("w", (4, 3, 1, 1), "float16"), out_dtype="float32")
        ),
        (n, 3, 5, 5),
        "float32",
    )
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 4))
    assert_rank_only(infer(nn.conv2d_transpose(unknown, w)), 4)


def test_conv2d_transpose_errors():
    x = var("x", (2, 4, 5, 5))
    raises(
        nn.conv2d_transpose(x, var("w", (3, 3, 3, 3))),
        "relax.nn.conv2d_transpose",
        "input channels differ",
        "x has shape (2, 4, 5, 5)",
        "w has shape (3, 3, 3, 3)",
    )
    raises(nn.conv2d_transpose(x, var("w", (4, 1, 3, 3)), groups=3), "not divisible by groups=3")
    raises(
        nn.conv2d_transpose(x, var("w", (4, 1, 3, 3)), strides=2, output_padding=2),
        "output_padding [2, 2] must be smaller than the stride or the dilation",
    )
    raises(nn.conv2d_transpose(x, var("w", (4, 1, 3, 3)), kernel_layout="OIHW"), "only IOHW")
    raises(nn.conv2d_transpose(x, var("w", (4, 1, 3, 3)), data_layout="NHWC"), "NCHW")
    raises(nn.conv2d_transpose(x, var("w", (4, 1, 1, 1)), padding=3), "removes the whole output")
    with pytest.raises(StructInfoError, match="groups must be a positive integer"):
        nn.conv2d_transpose(x, var("w", (4, 1, 3, 3)), groups=0)


CONV_TRANSPOSE_CASES = [
    # (channels in, out, groups, strides, padding, output_padding, dilation)
    (3, 2, 1, 1, 0, 0, 1),
    (4, 6, 2, 2, 1, 1, 1),
    (3, 2, 1, (3, 2), (0, 1), (2, 1), 2),
    (4, 4, 4, 1, 2, 0, 1),  # depthwise; padding 2 crops more than the 3x2 kernel adds
    (2, 3, 1, 2, 3, 0, 1),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSE_CASES)
def test_conv2d_transpose_equals_torch(case):
    cin, cout, groups, strides, padding, output_padding, dilation = case
    x, w = _random((2, cin, 5, 4), 1), _random((cin, cout // groups, 3, 2), 2)
    attrs = {"strides": strides, "padding": padding, "dilation": dilation, "groups": groups}
    got = _run(lambda a, b: nn.conv2d_transpose(a, b, output_padding=output_padding, **attrs), x, w)
    expected = torch.nn.functional.conv_transpose2d(
        torch.tensor(x),
        torch.tensor(w),
        stride=strides,
        padding=padding,
        output_padding=output_padding,
        groups=groups,
        dilation=dilation,
    )
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ pool backward
def test_pool2d_backward_has_the_data_struct_info():
    x = var("x", (n, 3, 9, 9))
    g = var("g", (n, 3, 4, 4))
    call = grad.max_pool2d_backward(g, x, pool_size=3, strides=2)
    assert call.attrs.padding == [0, 0, 0, 0] and call.attrs.count_include_pad is False
    assert_tensor(infer(call), (n, 3, 9, 9))
    ceil = grad.avg_pool2d_backward(var("g", (n, 3, 5, 5)), x, 3, 2, 1, ceil_mode=True)
    assert_tensor(infer(ceil), (n, 3, 9, 9))


def test_pool2d_backward_errors():
    x = var("x", (1, 3, 9, 9))
    raises(
        grad.max_pool2d_backward(var("g", (1, 3, 5, 5)), x, pool_size=3, strides=2),
        "relax.grad.max_pool2d_backward",
        "g has shape (1, 3, 5, 5)",
        "pooling x has shape (1, 3, 9, 9) gives (1, 3, 4, 4)",
    )
    raises(
        grad.avg_pool2d_backward(var("g", (1, 3, 4, 4), "float64"), x, 3, 2),
        "the output gradient's dtype float64 differs from the data's float32",
    )
    raises(grad.avg_pool2d_backward(var("g", (1, 3, 4, 4)), x, 10), "does not fit", "x has shape")
    raises(grad.max_pool2d_backward(var("g", (1, 3, 4, 4)), x, 3, 2, layout="NHWC"), "NCHW")


POOL_BACKWARD_CASES = [
    {"pool_size": 3, "strides": 2, "padding": 1},
    {"pool_size": (2, 3), "strides": 1, "dilation": (2, 1)},
    {"pool_size": 3, "strides": 2, "ceil_mode": True, "count_include_pad": True},
]


@pytest.mark.parametrize("attrs", POOL_BACKWARD_CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_backward_equals_torch_autograd(kind, attrs):
    if kind == "avg" and "dilation" in attrs:
        pytest.skip("torch's avg_pool2d has no dilation (tested against central differences)")
    x = _random((2, 3, 8, 9), 3)
    tx = torch.tensor(x, requires_grad=True)
    # torch's option for the kind: dilation for max, count_include_pad (False in relax) for avg
    own = ("dilation", 1) if kind == "max" else ("count_include_pad", False)
    options = {"ceil_mode": attrs.get("ceil_mode", False), own[0]: attrs.get(*own)}
    pooled = getattr(torch.nn.functional, f"{kind}_pool2d")(
        tx, attrs["pool_size"], attrs["strides"], attrs.get("padding", 0), **options
    )
    g = _random(tuple(pooled.shape), 4)
    pooled.backward(torch.tensor(g))
    backward = getattr(grad, f"{kind}_pool2d_backward")
    got = _run(lambda a, b: backward(a, b, **attrs), g, x)
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
