"""Types of relax's first releases, kept only to point at their replacement.

Early Relax gave a variable a shape and a separate type, ``relax.Var("x", (1, 784),
relax.DynTensorType(2, "float32"))``. Current Relax (and mlckit) describes both with one
struct info: ``relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))``.
"""

from __future__ import annotations

from typing import Any

from mlckit.errors import MLCError


class DynTensorType:
    """Constructing one raises an error that shows the current spelling."""

    def __init__(self, ndim: int = -1, dtype: str = "float32", *args: Any, **kwargs: Any):
        example_shape = (
            "(1, 784)"
            if ndim in (-1, 2)
            else ("(" + ", ".join(["n"] * ndim) + ("," if ndim == 1 else "") + ")")
        )
        raise MLCError(
            "relax.DynTensorType belongs to an older Relax API: a variable's shape and dtype are "
            "now one struct info. Write "
            f'relax.Var("x", relax.TensorStructInfo({example_shape}, "{dtype}")) '
            f'(in TVMScript: x: R.Tensor({example_shape}, "{dtype}")) instead of '
            f'relax.Var("x", {example_shape}, relax.DynTensorType({ndim}, "{dtype}"))'
        )


__all__ = ["DynTensorType"]
