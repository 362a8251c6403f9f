"""Reductions, matmul/dense, softmax, layer_norm, conv2d, pooling and layout ops vs numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_helpers import conv2d_ref, placeholders, random, run

from mlckit import te, tir, topi
from mlckit.errors import StructInfoError

REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "argmax": np.argmax}


@st.composite
def shape_and_axis(draw: st.DrawFn) -> tuple[list[int], int | None, bool]:
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    axis = draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    return shape, axis, draw(st.booleans())


@pytest.mark.parametrize("name", sorted(REDUCE))
@settings(max_examples=8, deadline=None)
@given(case=shape_and_axis())
def test_reductions_match_numpy(name, case):
    shape, axis, keepdims = case
    if name == "argmax" and axis is None:
        keepdims = False  # numpy's argmax(axis=None) has no keepdims form to compare with
    a = random(shape)
    (A,) = placeholders([a])
    out = run([A], getattr(topi, name)(A, axis, keepdims), a)
    kwargs = {} if name == "argmax" and axis is None else {"keepdims": keepdims}
    np.testing.assert_allclose(out, REDUCE[name](a, axis=axis, **kwargs), rtol=1e-5)


def test_sum_over_several_axes_with_symbolic_shape():
    a = random((2, 3, 4))
    (A,) = placeholders([a], symbolic=True)
    np.testing.assert_allclose(run([A], topi.sum(A, axis=[0, 2]), a), a.sum((0, 2)), rtol=1e-5)


@st.composite
def matmul_case(draw: st.DrawFn) -> tuple[list[int], list[int], bool, bool]:
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 2), max_size=2))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = [*batch, k, m] if ta else [*batch, m, k]
    b_batch = [1 if draw(st.booleans()) else d for d in batch][draw(st.integers(0, len(batch))) :]
    b = [*b_batch, n, k] if tb else [*b_batch, k, n]
    if draw(st.booleans()):
        a, ta = [k], False  # a vector
    return a, b, ta, tb


@settings(max_examples=15, deadline=None)
@given(case=matmul_case())
def test_matmul_broadcasts_batches_as_numpy(case):
    a_shape, b_shape, ta, tb = case
    a, b = random(a_shape, seed=1), random(b_shape, seed=2)
    A, B = placeholders([a, b])
    ref = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    out = run([A, B], topi.matmul(A, B, transpose_a=ta, transpose_b=tb), a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_dense_with_bias_and_symbolic_batch():
    x, w, b = random((3, 5), seed=1), random((4, 5), seed=2), random((4,), seed=3)
    n = tir.Var("n", "int64")
    X = te.placeholder((n, 5), "float32", "X")
    W, B = placeholders([w, b])
    out = run([X, W, B], topi.nn.dense(X, W, B), x, w, b)
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5)
    with pytest.raises(StructInfoError, match="input features"):
        topi.nn.dense(X, te.placeholder((4, 6), "float32", "W"))


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_and_log_softmax(axis):
    a = random((3, 4))
    (A,) = placeholders([a])
    e = np.exp(a - a.max(axis, keepdims=True))
    soft = e / e.sum(axis, keepdims=True)
    np.testing.assert_allclose(run([A], topi.nn.softmax(A, axis), a), soft, rtol=1e-5)
    np.testing.assert_allclose(run([A], topi.nn.log_softmax(A, axis), a), np.log(soft), rtol=1e-4)


def test_layer_norm():
    x, g, b = random((2, 3, 4), seed=1), random((4,), seed=2), random((4,), seed=3)
    X, G, B = placeholders([x, g, b])
    mean = x.mean(-1, keepdims=True)
    ref = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    out = run([X, G, B], topi.nn.layer_norm(X, G, B, axis=[-1], epsilon=1e-5), x, g, b)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@settings(max_examples=6, deadline=None)
@given(stride=st.integers(1, 2), pad=st.integers(0, 1), dil=st.integers(1, 2))
def test_conv2d_nchw(stride, pad, dil):
    x, w = random((1, 2, 5, 5), seed=1), random((3, 2, 2, 2), seed=2)
    X, W = placeholders([x, w])
    out = run([X, W], topi.nn.conv2d_nchw(X, W, stride, pad, dil), x, w)
    np.testing.assert_allclose(out, conv2d_ref(x, w, stride, pad, dil), rtol=1e-4, atol=1e-5)


def _pool_ref(x, k, s, pad, kind, include_pad, ceil_mode):
    fill = -np.inf if kind == "max" else 0.0
    h = x.shape[2]
    out_h = -(-(h + 2 * pad - k) // s) + 1 if ceil_mode else (h + 2 * pad - k) // s + 1
    extra = max(0, (out_h - 1) * s + k - (h + 2 * pad))
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad + extra), (pad, pad + extra)), constant_values=fill)
    valid = np.pad(np.ones((h, h)), ((pad, pad + extra), (pad, pad + extra)))
    inside = np.pad(np.ones((h + 2 * pad, h + 2 * pad)), ((0, extra), (0, extra)))
    out = np.zeros((*x.shape[:2], out_h, out_h), "float32")
    for i in range(out_h):
        for j in range(out_h):
            win = xp[:, :, i * s : i * s + k, j * s : j * s + k]
            if kind == "max":
                out[:, :, i, j] = win.max((2, 3))
            else:
                count = (inside if include_pad else valid)[i * s : i * s + k, j * s : j * s + k]
                out[:, :, i, j] = win.sum((2, 3)) / max(count.sum(), 1)
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pool2d(kind, include_pad, ceil_mode):
    x = random((1, 2, 6, 6))
    (X,) = placeholders([x])
    out = run([X], topi.nn.pool2d(X, 3, 2, 1, 1, kind, ceil_mode, count_include_pad=include_pad), x)
    ref = _pool_ref(x, 3, 2, 1, kind, include_pad, ceil_mode)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_max_and_avg_pool2d_shortcuts():
    x = random((1, 1, 4, 4))
    (X,) = placeholders([x])
    blocks = x.reshape(1, 1, 2, 2, 2, 2)
    np.testing.assert_allclose(run([X], topi.nn.max_pool2d(X, 2), x), blocks.max((3, 5)))
    np.testing.assert_allclose(
        run([X], topi.nn.avg_pool2d(X, 2), x), blocks.mean((3, 5)), rtol=1e-6
    )


@settings(max_examples=10, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_reshape_transpose_flatten(shape, data):
    a = random(shape)
    (A,) = placeholders([a])
    size = a.size
    first = data.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    np.testing.assert_array_equal(run([A], topi.reshape(A, (first, -1)), a), a.reshape(first, -1))
    axes = data.draw(st.permutations(range(a.ndim)))
    np.testing.assert_array_equal(run([A], topi.transpose(A, axes), a), a.transpose(axes))
    np.testing.assert_array_equal(run([A], topi.nn.flatten(A), a), a.reshape(a.shape[0], -1))


def test_reshape_with_symbolic_shape():
    a = random((2, 6))
    n = tir.Var("n", "int64")
    A = te.placeholder((n, 6), "float32", "A")
    np.testing.assert_array_equal(run([A], topi.reshape(A, (n, 3, 2)), a), a.reshape(2, 3, 2))
    with pytest.raises(StructInfoError, match="cannot reshape"):
        topi.reshape(A, (n, 5))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(axis):
    arrays = [random((2, 3), seed=1), random((2, 3), seed=2), random((2, 3), seed=3)]
    tensors = placeholders(arrays)
    out = run(tensors, topi.concatenate(tensors, axis), *arrays)
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize(
    "kernel, stride, pad, size",
    [(2, 2, 1, 5), (3, 3, 1, 5), (3, 2, 1, 6), (2, 3, 1, 6), (4, 3, 2, 6)],
)
def test_pool2d_ceil_mode_equals_torch(kind, include_pad, kernel, stride, pad, size):
    """With ceil_mode a last window that would start in the padding after the input is
    dropped, as torch (and TVM) drop it: (2, 2, 1) over 5 gives 3 windows, not 4."""
    torch = pytest.importorskip("torch")
    x = random((1, 2, size, size))
    (X,) = placeholders([x])
    pool = topi.nn.pool2d(X, kernel, stride, 1, pad, kind, True, count_include_pad=include_pad)
    out = run([X], pool, x)
    if kind == "max":
        ref = torch.nn.functional.max_pool2d(
            torch.from_numpy(x), kernel, stride, pad, ceil_mode=True
        )
    else:
        ref = torch.nn.functional.avg_pool2d(
            torch.from_numpy(x), kernel, stride, pad, ceil_mode=True, count_include_pad=include_pad
        )
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-6)
