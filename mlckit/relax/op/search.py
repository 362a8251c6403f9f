"""Searching: ``relax.argmax`` (attrs ``axis``, ``keepdims``; int64 result) and
``relax.where(condition, x1, x2)`` (elementwise choice with numpy broadcasting)."""

from __future__ import annotations

from typing import Any

from mlckit.tir.expr import IntImm

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ._registry import (
    common_dtype,
    describe_arg,
    fail,
    int_attr,
    make_call,
    normalize_axis,
    register,
    tensor_arg,
)
from .binary import broadcast_shapes


def _infer_arg_reduce(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    axis = call.attrs["axis"]  # type: ignore[index]
    keepdims = bool(call.attrs["keepdims"])  # type: ignore[index]
    ndim = x.ndim  # type: ignore[union-attr]
    if ndim < 0:
        # Without an axis every dimension is reduced: a scalar, or all ones if kept.
        return TensorStructInfo([] if axis is None and not keepdims else None, "int64", -1)
    reduced = set(range(ndim)) if axis is None else {normalize_axis(call, axis, ndim)}
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, "int64", ndim if keepdims else ndim - len(reduced))
    one = IntImm("int64", 1)
    out = [one if i in reduced else d for i, d in enumerate(values) if keepdims or i not in reduced]
    return TensorStructInfo(out, "int64")


register("relax.argmax", _infer_arg_reduce, ("x",), ("axis", "keepdims"))


def argmax(x: Expr | Any, axis: int | None = None, keepdims: bool = False) -> Call:
    """``relax.argmax(x, axis=None, keepdims=False)``: the int64 index of the maximum along
    ``axis`` (of the flattened tensor when None; the first one on ties)."""
    attr = int_attr(axis, "axis", "relax.argmax")
    return make_call("relax.argmax", [x], {"axis": attr, "keepdims": bool(keepdims)})


def _infer_where(call: Call, ctx: Any) -> StructInfo:
    cond, x1, x2 = (tensor_arg(call, i) for i in range(3))
    if cond.dtype not in ("bool", "void"):
        raise fail(
            call,
            f"the condition must be a bool tensor (e.g. from R.greater), but "
            f"{describe_arg(call, 0)} and dtype {cond.dtype}",
        )
    dtype = common_dtype(call, x1, x2, 1, 2)
    shapes = [s.shape_values for s in (cond, x1, x2)]  # type: ignore[union-attr]
    if any(s is None for s in shapes):
        ndims = [s.ndim for s in (cond, x1, x2)]  # type: ignore[union-attr]
        return TensorStructInfo(None, dtype, -1 if min(ndims) < 0 else max(ndims))
    # Each pair is checked so that a message names the two tensors that disagree.
    for i, j in ((0, 1), (0, 2)):
        broadcast_shapes(call, shapes[i], shapes[j], i, j)  # type: ignore[arg-type]
    both = broadcast_shapes(call, shapes[1], shapes[2], 1, 2)  # type: ignore[arg-type]
    return TensorStructInfo(broadcast_shapes(call, shapes[0], tuple(both), 0, 1), dtype)


register("relax.where", _infer_where, ("condition", "x1", "x2"))


def where(condition: Expr | Any, x1: Expr | Any, x2: Expr | Any) -> Call:
    """``relax.where(condition, x1, x2)``: ``x1`` where ``condition`` holds, else ``x2``,
    elementwise with numpy broadcasting of all three."""
    return make_call("relax.where", [condition, x1, x2])


__all__ = ["argmax", "where"]
