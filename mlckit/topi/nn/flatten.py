"""``flatten``: keep the first dimension, merge the others."""

from __future__ import annotations

from mlckit import te
from mlckit.errors import StructInfoError
from mlckit.tir.expr import PrimExpr

from ..transform import unravel
from ..utils import prod


def flatten(data: te.Tensor) -> te.Tensor:
    """``data`` of shape ``(b, d1, d2, ...)`` as ``(b, d1 * d2 * ...)``, in row-major order."""
    if data.ndim < 1:
        raise StructInfoError("topi.nn.flatten needs a tensor with at least one dimension")
    rest = list(data.shape[1:])

    def body(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        return data[(i, *unravel(j, rest))]

    return te.compute((data.shape[0], prod(rest)), body, name="compute", tag="injective")
