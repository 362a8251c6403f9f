"""Small helpers shared by struct-info inference, the BlockBuilder and the analyses.

Shapes are compared with :mod:`mlckit.arith`: two dimensions are *equal* when the analyzer
proves it, *different* when their difference simplifies to a non-zero constant, and *unknown*
otherwise. Inference accepts "unknown" (the program may still be correct at run time) and only
rejects what is provably wrong, as TVM does.
"""

from __future__ import annotations

from typing import Any

from mlckit.arith import Analyzer
from mlckit.tir import expr as texpr

from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)


def const_int(dim: Any) -> int | None:
    """The value of a constant dimension, or None when it is symbolic."""
    if isinstance(dim, texpr.IntImm):
        return dim.value
    if isinstance(dim, int) and not isinstance(dim, bool):
        return dim
    return None


def dims_equal(a: texpr.PrimExpr, b: texpr.PrimExpr) -> bool | None:
    """True when ``a`` and ``b`` are provably equal, False when provably different, else None."""
    if a is b:
        return True
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    analyzer = Analyzer()
    if analyzer.can_prove_equal(a, b):
        return True
    diff = const_int(analyzer.simplify(a - b))
    if diff is not None:
        return diff == 0
    return None


def is_const_one(dim: texpr.PrimExpr) -> bool:
    return const_int(dim) == 1


# ------------------------------------------------------------------------------ formatting
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}


def format_dim(expr: Any) -> str:
    """A dimension as a student would write it (``n``, ``784``, ``n * 2``).

    Error messages must never fail, so this does not depend on the TVMScript printer.
    """
    return _format_prim(expr, 0)


def _format_prim(expr: Any, parent_prec: int) -> str:
    if isinstance(expr, texpr.IntImm):
        return str(bool(expr.value)) if expr.dtype == "bool" else str(expr.value)
    if isinstance(expr, texpr.FloatImm):
        return repr(expr.value)
    if isinstance(expr, texpr.Var):
        return expr.name_hint
    if isinstance(expr, texpr.Cast):
        return _format_prim(expr.value, parent_prec)
    if isinstance(expr, (texpr.Min, texpr.Max)):
        name = "min" if isinstance(expr, texpr.Min) else "max"
        return f"T.{name}({_format_prim(expr.a, 0)}, {_format_prim(expr.b, 0)})"
    if isinstance(expr, texpr.BinaryOpExpr) and expr.symbol in _PRECEDENCE:
        prec = _PRECEDENCE[expr.symbol]
        # The right operand of - / // % needs parentheses at equal precedence.
        text = f"{_format_prim(expr.a, prec)} {expr.symbol} {_format_prim(expr.b, prec + 1)}"
        return f"({text})" if prec < parent_prec else text
    if isinstance(expr, (int, float)):
        return repr(expr)
    try:
        return expr.script()
    except Exception:
        return type(expr).__name__


def format_shape(values: Any) -> str:
    dims = [format_dim(v) for v in values]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def format_tensor_shape(sinfo: StructInfo | None) -> str:
    """The shape part of a message: ``(n, 784)``, ``(ndim 2, dims unknown)`` or ``unknown``."""
    if isinstance(sinfo, TensorStructInfo):
        values = sinfo.shape_values
        if values is not None:
            return format_shape(values)
        return f"(ndim {sinfo.ndim}, dims unknown)" if sinfo.ndim >= 0 else "(unknown)"
    if isinstance(sinfo, PrimStructInfo):
        return "() (a scalar)"
    return f"(not a tensor: {format_struct_info(sinfo)})"


def format_struct_info(sinfo: StructInfo | None) -> str:
    """Struct info in TVMScript's spelling, for messages."""
    if sinfo is None:
        return "<no struct info>"
    if isinstance(sinfo, ObjectStructInfo):
        return "R.Object"
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            return f"R.Prim(value={format_dim(sinfo.value)})"
        return f'R.Prim("{sinfo.dtype}")'
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(format_dim(v) for v in sinfo.values)}])"
        return f"R.Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, TensorStructInfo):
        values = sinfo.shape_values
        if values is not None:
            return f'R.Tensor({format_shape(values)}, dtype="{sinfo.dtype}")'
        if sinfo.ndim >= 0:
            return f'R.Tensor(dtype="{sinfo.dtype}", ndim={sinfo.ndim})'
        return f'R.Tensor(dtype="{sinfo.dtype}")' if sinfo.dtype != "void" else "R.Tensor"
    if isinstance(sinfo, TupleStructInfo):
        return f"R.Tuple({', '.join(format_struct_info(f) for f in sinfo.fields)})"
    if isinstance(sinfo, FuncStructInfo):
        if sinfo.params is None:
            return "R.Callable"
        params = [format_struct_info(p) for p in sinfo.params]
        listed = f"({params[0]},)" if len(params) == 1 else f"({', '.join(params)})"
        return f"R.Callable({listed}, {format_struct_info(sinfo.ret)})"
    return type(sinfo).__name__
