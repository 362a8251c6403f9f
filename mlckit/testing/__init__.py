"""Helpers for tests, benchmarks and notebooks."""

from __future__ import annotations

from typing import Any

import numpy as np

from .numerical_grads import check_numerical_grads


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """numpy's ``assert_allclose`` (arrays or NDArrays) that also fails when the shapes differ
    instead of broadcasting one against the other, as ``tvm.testing.assert_allclose`` does."""
    actual, desired = _as_numpy(actual), _as_numpy(desired)
    np.testing.assert_equal(actual.shape, desired.shape, err_msg="the shapes differ")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


def _as_numpy(value: Any) -> np.ndarray:
    # NDArrays (and torch tensors) convert with .numpy(); numbers and lists with numpy.
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


__all__ = ["assert_allclose", "check_numerical_grads"]
