"""TensorIR intrinsics: math functions, min/max and select, as ``T.exp(x)`` etc. build them."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlckit.errors import IRError
from mlckit.ir.dtype import is_float
from mlckit.ir.op import register_op

from .expr import Call, Max, Min, PrimExpr, Select, _match_types, convert, make_const

# Unary float intrinsics: name -> numpy equivalent (used by constant folding and codegen).
UNARY_MATH = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "erf": None,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "fabs": np.abs,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}
for _name in UNARY_MATH:
    register_op(f"tir.{_name}", 1)
register_op("tir.if_then_else", 3)
register_op("tir.pow", 2)
register_op("tir.abs", 1)


def _unary(name: str):
    def intrinsic(x: Any) -> PrimExpr:
        x = convert(x)
        if not is_float(x.dtype):
            raise IRError(f"T.{name} needs a float argument, got dtype {x.dtype}")
        return Call(x.dtype, f"tir.{name}", [x])

    intrinsic.__name__ = name
    intrinsic.__doc__ = f"The elementwise intrinsic ``{name}`` (``T.{name}(x)``)."
    return intrinsic


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
rsqrt = _unary("rsqrt")
fabs = _unary("fabs")


def abs(x: Any) -> PrimExpr:
    x = convert(x)
    return Call(x.dtype, "tir.abs", [x])


def pow(x: Any, y: Any) -> PrimExpr:
    x, y = _match_types(convert(x), convert(y), "pow")
    return Call(x.dtype, "tir.pow", [x, y])


def max(a: Any, b: Any) -> PrimExpr:
    a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    return Max(a, convert(b, a.dtype))


def min(a: Any, b: Any) -> PrimExpr:
    a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    return Min(a, convert(b, a.dtype))


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """Select one of two values, evaluating only the chosen one (unlike Select)."""
    t = convert(t, f.dtype if isinstance(f, PrimExpr) else None)
    f = convert(f, t.dtype)
    t, f = _match_types(t, f, "if_then_else")
    cond = convert(cond)
    if cond.dtype != "bool":
        raise IRError(f"if_then_else needs a bool condition, got dtype {cond.dtype}")
    return Call(t.dtype, "tir.if_then_else", [cond, t, f])


def select(cond: Any, t: Any, f: Any) -> PrimExpr:
    return Select(cond, t, f)


def floordiv(a: Any, b: Any) -> PrimExpr:
    return (
        convert(a) // b if isinstance(a, PrimExpr) else convert(a, getattr(b, "dtype", None)) // b
    )


def floormod(a: Any, b: Any) -> PrimExpr:
    return convert(a) % b if isinstance(a, PrimExpr) else convert(a, getattr(b, "dtype", None)) % b


def max_value(dtype: str) -> PrimExpr:
    if is_float(dtype):
        return make_const(float(np.finfo(dtype).max), dtype)
    return make_const(int(np.iinfo(dtype).max), dtype)


def min_value(dtype: str) -> PrimExpr:
    if is_float(dtype):
        return make_const(float(np.finfo(dtype).min), dtype)
    return make_const(int(np.iinfo(dtype).min), dtype)
