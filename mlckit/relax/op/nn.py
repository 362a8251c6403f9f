"""``relax.op.nn``: neural-network operators (activations, softmax, dense)."""

from __future__ import annotations

from typing import Any

from ..expr import Call, Expr
from ..struct_info import StructInfo
from ._registry import make_call, normalize_axis, register, tensor_arg
from .linear_algebra import dense
from .unary import unary

relu = unary("relax.nn.relu")
gelu = unary("relax.nn.gelu", float_only=True)
silu = unary("relax.nn.silu", float_only=True)


def _infer_softmax(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    if x.ndim >= 0:  # type: ignore[union-attr]
        normalize_axis(call, call.attrs["axis"], x.ndim)  # type: ignore[index, union-attr]
    return x


register("relax.nn.softmax", _infer_softmax, ("data",), ("axis",))


def softmax(data: Expr | Any, axis: int = -1) -> Call:
    """``relax.nn.softmax(data, axis=-1)``: normalized exponentials along ``axis``."""
    return make_call("relax.nn.softmax", [data], {"axis": int(axis)})


__all__ = ["dense", "gelu", "relu", "silu", "softmax"]
