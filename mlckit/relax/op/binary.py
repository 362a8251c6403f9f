"""Elementwise binary operators with numpy broadcasting (``relax.add``, ``relax.less``, ...).

One mechanism defines them all: ``_binary(name, returns_bool)`` registers the op with the
shared broadcasting inference and returns its constructor; comparisons return a bool mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit.tir.expr import PrimExpr

from ..expr import Call, Expr
from ..struct_info import PrimStructInfo, StructInfo, TensorStructInfo
from ..utils import const_int, dims_equal, format_dim, is_const_one
from ._registry import common_dtype, describe_arg, fail, make_call, register, tensor_arg


def broadcast_shapes(
    call: Call,
    lhs: tuple[PrimExpr, ...],
    rhs: tuple[PrimExpr, ...],
    lhs_index: int = 0,
    rhs_index: int = 1,
) -> list[PrimExpr]:
    """numpy broadcasting of two shapes, aligned at the last dimension.

    A pair of dims broadcasts when they are equal or one is 1. When equality can neither be
    proved nor refuted (``n`` vs ``m``, ``n`` vs ``256``) the call is accepted, and the result
    takes the dim that is not 1, preferring a constant (``n`` vs ``256`` can only mean 256).
    """
    out: list[PrimExpr] = []
    for k in range(1, max(len(lhs), len(rhs)) + 1):
        a = lhs[-k] if k <= len(lhs) else None
        b = rhs[-k] if k <= len(rhs) else None
        if a is None or b is None:
            out.append(a if b is None else b)  # type: ignore[arg-type]
            continue
        same = dims_equal(a, b)
        if same or is_const_one(b):
            out.append(a)
        elif is_const_one(a):
            out.append(b)
        elif same is False:
            raise fail(
                call,
                (
                    f"the shapes cannot be broadcast together: {describe_arg(call, lhs_index)} and "
                    f"{describe_arg(call, rhs_index)} "
                    f"(dimension {format_dim(a)} vs {format_dim(b)}; "
                    "broadcasting needs equal dimensions or a 1)"
                ),
            )
        else:
            out.append(b if const_int(a) is None and const_int(b) is not None else a)
    out.reverse()
    return out


def _make_infer(returns_bool: bool) -> Callable[[Call, Any], StructInfo]:
    def infer(call: Call, ctx: Any) -> StructInfo:
        a = tensor_arg(call, 0, allow_prim=True)
        b = tensor_arg(call, 1, allow_prim=True)
        dtype = common_dtype(call, a, b)
        if returns_bool:
            dtype = "bool"
        if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo):
            return PrimStructInfo(dtype if dtype != "void" else "int64")
        # A scalar (R.Prim) operand behaves like a 0-d tensor.
        sa = () if isinstance(a, PrimStructInfo) else a.shape_values
        sb = () if isinstance(b, PrimStructInfo) else b.shape_values
        if sa is not None and sb is not None:
            return TensorStructInfo(broadcast_shapes(call, sa, sb), dtype)
        na = 0 if isinstance(a, PrimStructInfo) else a.ndim
        nb = 0 if isinstance(b, PrimStructInfo) else b.ndim
        ndim = max(na, nb) if na >= 0 and nb >= 0 else -1
        return TensorStructInfo(None, dtype, ndim)

    return infer


def _binary(name: str, returns_bool: bool = False) -> Callable[[Any, Any], Call]:
    """Register ``relax.<name>`` and return its constructor ``name(x1, x2)``."""
    op_name = f"relax.{name}"
    register(op_name, _make_infer(returns_bool), ("x1", "x2"))

    def constructor(x1: Expr | Any, x2: Expr | Any) -> Call:
        return make_call(op_name, [x1, x2])

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (
        f"``{op_name}(x1, x2)``: elementwise {name.replace('_', ' ')} with "
        "numpy broadcasting (an un-normalized relax.Call)."
    )
    return constructor


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
floor_divide = _binary("floor_divide")
power = _binary("power")
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal", returns_bool=True)
not_equal = _binary("not_equal", returns_bool=True)
less = _binary("less", returns_bool=True)
less_equal = _binary("less_equal", returns_bool=True)
greater = _binary("greater", returns_bool=True)
greater_equal = _binary("greater_equal", returns_bool=True)

__all__ = [
    "add",
    "divide",
    "equal",
    "floor_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "maximum",
    "minimum",
    "multiply",
    "not_equal",
    "power",
    "subtract",
]
