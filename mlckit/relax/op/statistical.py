"""Reductions over axes (``relax.sum``, ``relax.mean``, ``relax.max``, ``relax.min``).

They share one inference: attrs ``axis`` (a list of ints, or None for all axes) and
``keepdims`` (keep reduced axes as size 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlckit.tir.expr import IntImm

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ._registry import describe_arg, fail, int_list, make_call, normalize_axis, register, tensor_arg


def _infer_reduce(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    axis = call.attrs["axis"] if call.attrs is not None else None
    keepdims = bool(call.attrs["keepdims"]) if call.attrs is not None else False
    ndim = x.ndim  # type: ignore[union-attr]
    if ndim < 0:
        if axis is None:
            return TensorStructInfo(None if keepdims else [], x.dtype, -1 if keepdims else 0)
        return TensorStructInfo(None, x.dtype, -1)
    if axis is None:
        reduced = set(range(ndim))
    else:
        normalized = [normalize_axis(call, a, ndim) for a in axis]
        if len(set(normalized)) != len(normalized):
            raise fail(call, f"axis={list(axis)} names an axis twice for {describe_arg(call, 0)}")
        reduced = set(normalized)
    out_ndim = ndim if keepdims else ndim - len(reduced)
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    one = IntImm("int64", 1)
    out = [one if i in reduced else d for i, d in enumerate(values) if keepdims or i not in reduced]
    return TensorStructInfo(out, x.dtype)


def _reduction(name: str) -> Callable[..., Call]:
    op_name = f"relax.{name}"
    register(op_name, _infer_reduce, ("x",), ("axis", "keepdims"))

    def constructor(
        x: Expr | Any, axis: int | Sequence[int] | None = None, keepdims: bool = False
    ) -> Call:
        axes = int_list(axis, "axis", op_name)
        return make_call(op_name, [x], {"axis": axes, "keepdims": bool(keepdims)})

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (
        f"``{op_name}(x, axis=None, keepdims=False)``: reduce over ``axis`` (all axes when None)."
    )
    return constructor


sum = _reduction("sum")
mean = _reduction("mean")
max = _reduction("max")
min = _reduction("min")

__all__ = ["max", "mean", "min", "sum"]
