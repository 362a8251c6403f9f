"""Elementwise unary operators: ``exp``, ``sqrt``, ``negative``, ``cast``, ...

Each is one ``te.compute`` over the input's shape. As in TVM's operator library, the math
functions name their block ``compute`` and their indices ``i0, i1, ...``; ``cast`` names its
block ``T_cast``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit import te
from mlckit.ir.dtype import check_dtype
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, convert

from .utils import axis_names


def unary(
    x: te.Tensor | PrimExpr, f: Callable[[PrimExpr], PrimExpr], name: str = "compute"
) -> te.Tensor | PrimExpr:
    """``f`` applied to every element of ``x`` (or to ``x`` itself when it is a scalar)."""
    if not isinstance(x, te.Tensor):
        return f(convert(x))
    return te.compute(x.shape, lambda *i: f(x(*i)), name=name, tag="elemwise")


def _math(name: str, f: Callable[[PrimExpr], PrimExpr], doc: str) -> Callable[..., Any]:
    def op(x: te.Tensor | PrimExpr) -> te.Tensor | PrimExpr:
        return unary(x, f)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``{doc}`` elementwise."
    return op


negative = _math("negative", lambda v: -v, "-x")
exp = _math("exp", tir_op.exp, "exp(x)")
log = _math("log", tir_op.log, "log(x)")
sqrt = _math("sqrt", tir_op.sqrt, "sqrt(x)")
rsqrt = _math("rsqrt", tir_op.rsqrt, "1 / sqrt(x)")
tanh = _math("tanh", tir_op.tanh, "tanh(x)")
sigmoid = _math("sigmoid", tir_op.sigmoid, "1 / (1 + exp(-x))")
erf = _math("erf", tir_op.erf, "erf(x)")
abs = _math("abs", tir_op.abs, "|x|")
floor = _math("floor", tir_op.floor, "floor(x)")
ceil = _math("ceil", tir_op.ceil, "ceil(x)")


def cast(x: te.Tensor | PrimExpr, dtype: str) -> te.Tensor | PrimExpr:
    """``x`` converted to ``dtype`` elementwise (block ``T_cast``)."""
    dtype = check_dtype(dtype)
    if not isinstance(x, te.Tensor):
        return convert(x).astype(dtype)
    return te.compute(
        x.shape,
        lambda *i: x(*i).astype(dtype),
        name="T_cast",
        tag="elemwise",
        varargs_names=axis_names(x.ndim),
    )
