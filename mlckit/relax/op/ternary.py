"""``relax.ewise_fma(x1, x2, x3)`` = ``x1 * x2 + x3`` elementwise, all of one shape and dtype."""

from __future__ import annotations

from typing import Any

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ..utils import dims_equal, format_dim
from ._registry import common_dtype, describe_arg, fail, make_call, register, tensor_arg


def _infer_ewise_fma(call: Call, ctx: Any) -> StructInfo:
    sinfos = [tensor_arg(call, i) for i in range(3)]
    dtype = sinfos[0].dtype
    for i in (1, 2):
        dtype = common_dtype(call, sinfos[0], sinfos[i], 0, i)
    # No broadcasting: the fused kernel reads all three operands at the same index.
    shapes = [s.shape_values for s in sinfos]  # type: ignore[union-attr]
    ndims = [s.ndim for s in sinfos]  # type: ignore[union-attr]
    known_ndims = {n for n in ndims if n >= 0}
    if len(known_ndims) > 1:
        raise fail(
            call,
            "the three operands must have the same rank, but "
            + ", ".join(describe_arg(call, i) for i in range(3)),
        )
    for i in (1, 2):
        if shapes[0] is None or shapes[i] is None:
            continue
        for a, b in zip(shapes[0], shapes[i]):
            if dims_equal(a, b) is False:
                raise fail(
                    call,
                    (
                        f"the operands must have the same shape, but {describe_arg(call, 0)} and "
                        f"{describe_arg(call, i)} ({format_dim(a)} vs {format_dim(b)})"
                    ),
                )
    shape = next((s for s in shapes if s is not None), None)
    ndim = next(iter(known_ndims), -1)
    return TensorStructInfo(shape, dtype, ndim)


register("relax.ewise_fma", _infer_ewise_fma, ("x1", "x2", "x3"))


def ewise_fma(x1: Expr | Any, x2: Expr | Any, x3: Expr | Any) -> Call:
    """``relax.ewise_fma(x1, x2, x3)``: the fused multiply-add ``x1 * x2 + x3``."""
    return make_call("relax.ewise_fma", [x1, x2, x3])


__all__ = ["ewise_fma"]
