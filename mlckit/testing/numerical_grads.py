"""Checking gradients against central differences, as ``tvm.testing.check_numerical_grads``.

The partial derivative of a scalar function ``f`` with respect to element ``j`` of input ``x``
is estimated by the central difference

    (f(x + delta * e_j) - f(x - delta * e_j)) / (2 * delta),

whose error shrinks like ``delta**2`` (a one-sided difference shrinks only like ``delta``).
Worked example: ``f(x) = sum(x**2)`` at ``x = [1, 2]`` with ``delta = 1e-3`` gives
``((1.001**2 + 4) - (0.999**2 + 4)) / 0.002 = 2.0`` for element 0, the exact ``2 * x[0]``.

One input's gradient passes when the distance between the numerical and the given gradient,
``||numerical - given||``, is at most ``atol * sqrt(n) + rtol * ||numerical||`` (n elements),
TVM's rule: the absolute part grows with the size, the relative part with the gradient's
norm. A failure names the input, the worst element, both values there, and the distance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mlckit.errors import MLCError, StructInfoError


def check_numerical_grads(
    function: Callable[..., Any],
    input_values: Sequence[Any] | Mapping[str, Any],
    grad_values: Sequence[Any] | Mapping[str, Any],
    function_value: float | None = None,
    delta: float = 1e-3,
    atol: float = 1e-2,
    rtol: float = 0.1,
) -> None:
    """Assert that ``grad_values`` are the gradients of ``function`` at ``input_values``.

    ``function`` returns a scalar (a number or a one-element array or NDArray) and takes the
    inputs positionally (``input_values`` a list) or by name (a dict). ``grad_values`` lists
    the gradients in the same way; a dict may name only some of the inputs. ``function_value``
    is unused by the central difference and accepted for TVM's signature.
    """
    del function_value
    by_name = isinstance(input_values, Mapping)
    names = list(input_values) if by_name else list(range(len(input_values)))
    inputs = {
        name: _as_numpy(input_values[name])  # type: ignore[index]
        for name in names
    }
    grads = (
        dict(grad_values.items())
        if isinstance(grad_values, Mapping)
        else dict(enumerate(grad_values))
    )

    def evaluate(values: dict[Any, np.ndarray]) -> float:
        result = function(**values) if by_name else function(*(values[n] for n in names))
        array = _as_numpy(result)
        if array.size != 1:
            raise MLCError(
                f"check_numerical_grads: the function must return a scalar, but it returned "
                f"an array of shape {array.shape}"
            )
        return float(array.reshape(()))

    for name, grad in grads.items():
        if name not in inputs:
            raise MLCError(f"check_numerical_grads: a gradient is given for {name!r}, no input")
        _check_one(name, inputs, _as_numpy(grad), evaluate, delta, atol, rtol)


def _check_one(
    name: Any,
    inputs: dict[Any, np.ndarray],
    grad: np.ndarray,
    evaluate: Callable[[dict[Any, np.ndarray]], float],
    delta: float,
    atol: float,
    rtol: float,
) -> None:
    value = inputs[name]
    label = f"input {name!r}"
    if grad.shape != value.shape:
        raise StructInfoError(
            f"check_numerical_grads: the gradient of {label} has shape {grad.shape}, but the "
            f"input has shape {value.shape}"
        )
    numerical = np.zeros(value.shape, dtype="float64")
    for j in range(value.size):
        numerical.reshape(-1)[j] = (
            evaluate(_moved(inputs, name, j, delta)) - evaluate(_moved(inputs, name, j, -delta))
        ) / (2 * delta)
    difference = numerical - grad.astype("float64")
    distance = float(np.sqrt(np.sum(difference**2)))
    norm = float(np.sqrt(np.sum(numerical**2)))
    if not (np.isfinite(distance) and np.isfinite(norm)):
        raise AssertionError(
            f"check_numerical_grads: NaN or infinity in the gradients of {label}:\n"
            f"given {grad}\nnumerical {numerical}"
        )
    allowed = atol * np.sqrt(float(max(value.size, 1))) + rtol * norm
    if distance > allowed:
        worst = np.unravel_index(int(np.argmax(np.abs(difference))), value.shape)
        raise AssertionError(
            f"check_numerical_grads: the gradient of {label} differs from central "
            f"differences: distance {distance:.6g} > atol * sqrt(n) + rtol * norm = "
            f"{allowed:.6g}; worst element {tuple(int(i) for i in worst)}: given "
            f"{float(grad[worst]):.6g}, numerical {float(numerical[worst]):.6g}"
        )


def _moved(inputs: dict[Any, np.ndarray], name: Any, index: int, step: float) -> dict:
    """The inputs with element ``index`` of ``name`` moved by ``step`` (a copy)."""
    moved = inputs[name].copy()
    moved.reshape(-1)[index] += step
    return {**inputs, name: moved}


def _as_numpy(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


__all__ = ["check_numerical_grads"]
