"""topi.expand_dims, topi.squeeze and topi.split vs numpy."""

from __future__ import annotations

import numpy as np
import pytest
from topi_helpers import placeholders, random, run

import mlckit
from mlckit import te, tir, topi
from mlckit.errors import StructInfoError


@pytest.mark.parametrize(
    ("axis", "num_newaxis", "shape"),
    [(0, 1, (1, 4, 3)), (2, 2, (4, 3, 1, 1)), (-1, 1, (4, 3, 1)), ([0, 2], 1, (1, 4, 1, 3))],
)
def test_expand_dims(axis, num_newaxis, shape):
    a = random((4, 3))
    inputs = placeholders([a])
    got = run(inputs, topi.expand_dims(inputs[0], axis, num_newaxis), a)
    np.testing.assert_array_equal(got, a.reshape(shape))


@pytest.mark.parametrize("axis", [None, 0, [0, 2], -1])
def test_squeeze(axis):
    a = random((1, 4, 1))
    inputs = placeholders([a])
    got = run(inputs, topi.squeeze(inputs[0], axis), a)
    np.testing.assert_array_equal(
        got, np.squeeze(a, tuple(axis) if isinstance(axis, list) else axis)
    )


def test_bad_axes():
    a = placeholders([random((1, 4, 1))])[0]
    with pytest.raises(StructInfoError, match="axis 1 of a tensor of shape"):
        topi.squeeze(a, 1)
    with pytest.raises(StructInfoError, match="repeats an axis"):
        topi.expand_dims(a, [0, -5])


@pytest.mark.parametrize(
    ("parts", "axis", "cuts"),
    [(3, 0, [4, 8]), (2, 1, [3]), ([2, 5], 0, [2, 5]), ([4, 2, 12], 0, [4, 2, 12]), (1, 0, [])],
)
def test_split_matches_numpy(parts, axis, cuts):
    a = random((10, 6))
    inputs = placeholders([a])
    outs = topi.split(inputs[0], parts, axis)
    func = te.create_prim_func([*inputs, *outs])
    got = [np.zeros([int(d) for d in o.shape], "float32") for o in outs]
    mlckit.build(func, "python")["main"](a, *got)
    want = np.split(a, cuts, axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_split_sizes_along_a_symbolic_axis():
    n = tir.Var("n", "int64")
    first, last = topi.split(te.placeholder((n, 3), name="A"), 2)
    assert first.shape[0].script() == "(n + T.int64(1)) // T.int64(2)"
    assert last.shape[0].script() == "n - (n + T.int64(1)) // T.int64(2)"
    with pytest.raises(StructInfoError, match="sections must be positive"):
        topi.split(te.placeholder((n, 3), name="A"), 0)
