"""topi.expand_dims, topi.squeeze and topi.split vs numpy."""

from __future__ import annotations

import numpy as np
import pytest
from topi_helpers import placeholders, random, run

from mlckit import topi
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
