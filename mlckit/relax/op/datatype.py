"""``relax.astype(x, dtype)``: convert a tensor's elements to another dtype (attr ``dtype``)."""

from __future__ import annotations

from typing import Any

from mlckit.ir.dtype import check_dtype

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ._registry import make_call, register, tensor_arg


def _infer_astype(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    return TensorStructInfo(x.shape, call.attrs["dtype"], x.ndim)  # type: ignore[index]


register("relax.astype", _infer_astype, ("x",), ("dtype",))


def astype(x: Expr | Any, dtype: str) -> Call:
    """``relax.astype(x, dtype)``: the same tensor with elements converted to ``dtype``."""
    return make_call("relax.astype", [x], {"dtype": check_dtype(dtype)})


__all__ = ["astype"]
