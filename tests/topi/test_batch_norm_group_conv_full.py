"""batch_norm, group_conv2d_nchw, full/full_like, concatenate without an axis and mixed
precision matmul vs numpy: the kernels relax's legalizations call."""

from __future__ import annotations

import numpy as np
import pytest
from topi_helpers import conv2d_ref, placeholders, random, run

from mlckit import te, tir, topi
from mlckit.errors import StructInfoError


@pytest.mark.parametrize("axis", [1, -1])
@pytest.mark.parametrize(("center", "scale"), [(True, True), (False, True), (True, False)])
def test_batch_norm_normalizes_each_channel(axis, center, scale):
    x = random((2, 3, 4, 3), seed=1)
    channels = x.shape[axis]
    gamma, beta, mean = (random((channels,), seed=s) for s in (2, 3, 4))
    var = np.abs(random((channels,), seed=5)) + np.float32(0.5)
    tensors = placeholders([x, gamma, beta, mean, var])
    out = run(
        tensors, topi.nn.batch_norm(*tensors, axis, 1e-3, center, scale), x, gamma, beta, mean, var
    )
    at = [1] * x.ndim
    at[axis] = channels
    expected = (x - mean.reshape(at)) / np.sqrt(var.reshape(at) + np.float32(1e-3))
    if scale:
        expected = expected * gamma.reshape(at)
    if center:
        expected = expected + beta.reshape(at)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("in_channels", "out_channels", "groups", "stride", "pad", "dil"),
    [(4, 6, 2, 1, 1, 1), (3, 3, 3, 2, 1, 1), (4, 4, 2, 1, 0, 2)],
)
def test_group_conv2d_nchw(in_channels, out_channels, groups, stride, pad, dil):
    x = random((2, in_channels, 6, 5), seed=1)
    w = random((out_channels, in_channels // groups, 3, 2), seed=2)
    X, W = placeholders([x, w])
    out = run([X, W], topi.nn.group_conv2d_nchw(X, W, stride, pad, dil, groups), x, w)
    expected = conv2d_ref(x, w, stride, pad, dil, groups)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_group_conv2d_nchw_widens_to_out_dtype():
    x, w = random((1, 4, 4, 4), seed=1), random((2, 2, 1, 1), seed=2)
    X, W = placeholders([x, w])
    result = topi.nn.group_conv2d_nchw(X, W, 1, 0, 1, 2, "float64")
    assert result.dtype == "float64"
    expected = conv2d_ref(x, w, 1, 0, 1, 2)
    np.testing.assert_allclose(run([X, W], result, x, w), expected, rtol=1e-5)


def test_group_conv2d_nchw_refuses_channels_that_do_not_split():
    X = te.placeholder((1, 4, 5, 5), "float32", "X")
    W = te.placeholder((3, 2, 3, 3), "float32", "W")
    with pytest.raises(StructInfoError, match="with 2 groups"):
        topi.nn.group_conv2d_nchw(X, W, 1, 0, 1, 2)


def test_full_takes_a_number_or_a_0d_tensor():
    np.testing.assert_array_equal(run([], topi.full((2, 3), "int32", 4)), np.full((2, 3), 4))
    value = np.array(2.5, "float32")
    (V,) = placeholders([value])
    out = run([V], topi.full((3, 2), "float64", V), value)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, np.full((3, 2), 2.5))
    with pytest.raises(StructInfoError, match="must be a scalar"):
        topi.full((2,), "float32", te.placeholder((2,), "float32", "V"))


def test_full_like_has_the_shape_and_dtype_of_its_input():
    x = random((2, 3), "float32")
    (X,) = placeholders([x], symbolic=True)
    out = run([X], topi.full_like(X, 1.5), x)
    np.testing.assert_array_equal(out, np.full_like(x, 1.5))


def test_concatenate_without_an_axis_flattens_first():
    arrays = [random((2, 3), seed=1), random((4,), seed=2), random((1, 2, 2), seed=3)]
    tensors = placeholders(arrays)
    out = run(tensors, topi.concatenate(tensors, None), *arrays)
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis=None))


def test_matmul_converts_the_operands_to_out_dtype():
    a, b = random((2, 3), "float32", seed=1), random((3, 4), "float32", seed=2)
    A, B = placeholders([a, b])
    result = topi.matmul(A, B, out_dtype="float64")
    assert result.dtype == "float64"
    out = run([A, B], result, a, b)
    np.testing.assert_allclose(out, a.astype("float64") @ b.astype("float64"), rtol=1e-12)
    # The operands' own dtype needs no conversion: the kernel is the plain matmul.
    same = te.create_prim_func([A, B, topi.matmul(A, B, out_dtype="float32")])
    assert "T_cast" not in same.script() and isinstance(same, tir.PrimFunc)
