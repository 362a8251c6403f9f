"""topi.nn.conv2d_transpose_nchw / group_conv2d_transpose_nchw and topi.nn.pool_grad against
torch (conv_transpose2d, and the autograd of the poolings); each kernel's TIR round-trips."""

from __future__ import annotations

import numpy as np
import pytest
from topi_helpers import placeholders, random, run

from mlckit import te, topi
from mlckit.errors import StructInfoError

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.mark.parametrize(
    ("cin", "cout", "groups", "stride", "pad", "output_padding", "dilation"),
    [
        (3, 2, 1, 1, 0, 0, 1),
        (4, 6, 2, 2, 1, 1, 1),
        (3, 2, 1, 3, 0, 2, 2),
        (4, 4, 4, 1, 2, 0, 1),
        (2, 3, 1, 2, 3, 0, 1),  # padding past the kernel: the spread input is cropped
    ],
)
def test_conv2d_transpose_equals_torch(cin, cout, groups, stride, pad, output_padding, dilation):
    x, w = random((2, cin, 5, 4), seed=1), random((cin, cout // groups, 3, 2), seed=2)
    X, W = placeholders([x, w])
    if groups == 1:
        out = topi.nn.conv2d_transpose_nchw(X, W, stride, pad, None, output_padding, dilation)
    else:
        out = topi.nn.group_conv2d_transpose_nchw(
            X, W, stride, pad, None, output_padding, groups, dilation
        )
    expected = F.conv_transpose2d(
        torch.tensor(x), torch.tensor(w), None, stride, pad, output_padding, groups, dilation
    )
    np.testing.assert_allclose(run([X, W], out, x, w), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_conv2d_transpose_refuses_channels_that_differ():
    X = te.placeholder((1, 4, 5, 5), "float32", "X")
    W = te.placeholder((3, 2, 3, 3), "float32", "W")
    with pytest.raises(StructInfoError, match="same number of input channels"):
        topi.nn.group_conv2d_transpose_nchw(X, W, 1, 0, None, 0, 2)


@pytest.mark.parametrize(
    ("kernel", "stride", "pad", "dilation", "ceil_mode"),
    [
        ((3, 3), (2, 2), 1, (1, 1), False),
        ((2, 2), (2, 2), 0, (1, 1), True),
        ((3, 2), (1, 2), (1, 0), (2, 1), False),
        ((3, 3), (2, 2), 1, (1, 1), True),
    ],
)
@pytest.mark.parametrize("kind", ["max", "avg", "avg counting padding"])
def test_pool_grad_equals_torch_autograd(kind, kernel, stride, pad, dilation, ceil_mode):
    pool_type = kind[:3]
    if pool_type == "avg" and dilation != (1, 1):
        pytest.skip("torch's avg_pool2d has no dilation")
    x = random((2, 3, 7, 6), seed=1)
    tx = torch.tensor(x, requires_grad=True)
    count_include_pad = kind.endswith("padding")
    extra = (
        {"dilation": dilation} if pool_type == "max" else {"count_include_pad": count_include_pad}
    )
    pooled = getattr(F, f"{pool_type}_pool2d")(
        tx, kernel, stride, pad, ceil_mode=ceil_mode, **extra
    )
    g = random(tuple(pooled.shape), seed=3)
    pooled.backward(torch.tensor(g))
    G, X = placeholders([g, x])
    out = topi.nn.pool_grad(
        G, X, kernel, stride, pad, pool_type, ceil_mode, count_include_pad, dilation=dilation
    )
    np.testing.assert_allclose(run([G, X], out, g, x), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_pool_grad_refuses_a_gradient_of_another_shape():
    X = te.placeholder((1, 2, 6, 6), "float32", "X")
    G = te.placeholder((1, 2, 2, 2), "float32", "G")
    with pytest.raises(
        StructInfoError, match=r"does not have the pooling's output shape \(1, 2, 3, 3\)"
    ):
        topi.nn.pool_grad(G, X, 2, 2, 0, "max")
