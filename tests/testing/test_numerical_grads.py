"""mlckit.testing.check_numerical_grads: central differences accept true gradients and reject
wrong ones with a message naming the input and the worst element."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit.errors import MLCError, StructInfoError
from mlckit.testing import check_numerical_grads


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")


def _loss(x, b):
    return np.sum(np.tanh(x + b) ** 2)


def _true_grads(x, b):
    t = np.tanh(x + b)
    dx = 2 * t * (1 - t**2)
    return [dx, dx.sum(axis=0)]


def test_true_gradients_pass_positional_and_by_name():
    x, b = _inputs()
    check_numerical_grads(_loss, [x, b], _true_grads(x, b))
    dx, db = _true_grads(x, b)
    check_numerical_grads(_loss, {"x": x, "b": b}, {"b": db})
    check_numerical_grads(_loss, {"x": x, "b": b}, {"x": dx, "b": db}, function_value=_loss(x, b))


def test_quadratic_is_exact():
    # Central differences are exact on a quadratic, up to rounding.
    x = np.array([1.0, 2.0, -3.0])
    check_numerical_grads(lambda x: np.sum(x**2), [x], [2 * x], atol=1e-6, rtol=1e-6)


def test_wrong_gradient_names_the_input_and_worst_element():
    x, b = _inputs()
    dx, db = _true_grads(x, b)
    wrong = dx.copy()
    wrong[2, 1] += 5.0
    with pytest.raises(AssertionError) as info:
        check_numerical_grads(_loss, {"x": x, "b": b}, {"x": wrong, "b": db})
    message = str(info.value)
    assert "input 'x'" in message and "worst element (2, 1)" in message
    assert f"given {wrong[2, 1]:.6g}" in message


def test_bad_requests():
    x, b = _inputs()
    dx, db = _true_grads(x, b)
    with pytest.raises(StructInfoError, match=r"input 1 has shape \(3,\), but the input has"):
        check_numerical_grads(_loss, [x, b], [dx, db[:3]])
    with pytest.raises(MLCError, match="must return a scalar"):
        check_numerical_grads(lambda x, b: x + b, [x, b], [dx, db])
    with pytest.raises(MLCError, match="for 'w', no input"):
        check_numerical_grads(_loss, {"x": x, "b": b}, {"w": dx})
