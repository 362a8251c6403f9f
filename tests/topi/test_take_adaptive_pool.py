"""``topi.take`` (numpy's take, with its index modes) and ``topi.nn.adaptive_pool`` (PyTorch's
adaptive pooling windows) against numpy."""

import math

import numpy as np
import pytest
from topi_helpers import placeholders, random, run

from mlckit import te, tir, topi
from mlckit.errors import StructInfoError


# ------------------------------------------------------------------------------ take
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("index_shape", [(4,), (2, 3), ()])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_in_range_matches_numpy(index_dtype, index_shape, axis):
    x = random((5, 3, 2))
    ids = np.random.default_rng(1).integers(0, x.shape[axis], index_shape).astype(index_dtype)
    X, ids_t = placeholders([x, ids])
    for mode in ("fast", "clip", "wrap"):
        np.testing.assert_array_equal(
            run([X, ids_t], topi.take(X, ids_t, axis, mode), x, ids), np.take(x, ids, axis)
        )


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_out_of_range_indices_clip_or_wrap(mode):
    x = random((4, 3))
    ids = np.array([-5, -1, 0, 3, 4, 9], "int64")
    X, ids_t = placeholders([x, ids])
    out = run([X, ids_t], topi.take(X, ids_t, 0, mode), x, ids)
    np.testing.assert_array_equal(out, np.take(x, ids, 0, mode=mode))


def test_take_without_axis_reads_the_flattened_tensor():
    x = random((3, 4))
    ids = np.array([[0, 5], [11, 7]], "int32")
    X, ids_t = placeholders([x, ids])
    out = run([X, ids_t], topi.take(X, ids_t), x, ids)
    np.testing.assert_array_equal(out, np.take(x, ids))


def test_take_with_a_symbolic_number_of_indices():
    x, ids = random((6, 2)), np.array([5, 0, 2], "int64")
    X = te.placeholder((6, 2), "float32", "X")
    ids_t = te.placeholder((tir.Var("n", "int64"),), "int64", "ids")
    np.testing.assert_array_equal(run([X, ids_t], topi.take(X, ids_t, 0), x, ids), x[ids])


def test_take_errors():
    X = te.placeholder((4, 3), "float32", "X")
    with pytest.raises(StructInfoError, match="indices must be integers"):
        topi.take(X, te.placeholder((2,), "float32", "I"), 0)
    with pytest.raises(StructInfoError, match="mode must be"):
        topi.take(X, te.placeholder((2,), "int64", "I"), 0, "nan")


# ------------------------------------------------------------------------------ adaptive pool
def _adaptive_ref(x: np.ndarray, out_h: int, out_w: int, reduce) -> np.ndarray:
    height, width = x.shape[2:]
    out = np.zeros((*x.shape[:2], out_h, out_w), x.dtype)
    for i in range(out_h):
        rows = slice(i * height // out_h, math.ceil((i + 1) * height / out_h))
        for j in range(out_w):
            cols = slice(j * width // out_w, math.ceil((j + 1) * width / out_w))
            out[:, :, i, j] = reduce(x[:, :, rows, cols], axis=(2, 3))
    return out


@pytest.mark.parametrize("pool_type", ["avg", "max"])
@pytest.mark.parametrize(
    "in_size, out_size",
    [((6, 6), 1), ((6, 4), (3, 2)), ((5, 5), 3), ((5, 7), (2, 3)), ((3, 4), (5, 6)), ((4, 4), 4)],
)
def test_adaptive_pool_matches_the_pytorch_windows(pool_type, in_size, out_size):
    x = random((2, 3, *in_size))
    (X,) = placeholders([x])
    out_h, out_w = (out_size, out_size) if isinstance(out_size, int) else out_size
    got = run([X], topi.nn.adaptive_pool(X, out_size, pool_type), x)
    reduce = np.mean if pool_type == "avg" else np.max
    np.testing.assert_allclose(got, _adaptive_ref(x, out_h, out_w, reduce), rtol=1e-5)


def test_adaptive_pool_masks_only_ragged_windows():
    (X,) = placeholders([random((1, 1, 6, 5))])
    func = te.create_prim_func([X, topi.nn.adaptive_pool(X, (3, 3), "avg")])
    # 3 divides 6 (rows: windows of 2, no mask), not 5 (columns: windows of 2 or 3, masked).
    text = func.script()
    assert "T.grid(1, 1, 3, 3, 2, 3)" in text and "T.if_then_else(v_rv1 <" in text
    assert "v_rv0 <" not in text


def test_adaptive_pool_errors():
    n = tir.Var("h", "int64")
    with pytest.raises(StructInfoError, match="static height and width"):
        topi.nn.adaptive_pool(te.placeholder((1, 3, n, 4), "float32", "X"), 1, "avg")
    X = te.placeholder((1, 3, 4, 4), "float32", "X")
    with pytest.raises(StructInfoError, match="only the NCHW layout"):
        topi.nn.adaptive_pool(X, 1, "avg", layout="NHWC")
    with pytest.raises(StructInfoError, match="pool_type"):
        topi.nn.adaptive_pool(X, 1, "min")
    with pytest.raises(StructInfoError, match="output_size must be positive"):
        topi.nn.adaptive_pool(X, (0, 1), "avg")
