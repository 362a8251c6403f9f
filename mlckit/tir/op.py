"""TensorIR intrinsics: math functions, min/max and select, as ``T.exp(x)`` etc. build them.

Also calls out of TensorIR: ``call_extern(dtype, "name", *args)`` calls a function the kernel
does not define. At build time the name resolves to a C function of a library attached to
the function (``sch.annotate(loop, "pragma_import_llvm", clang.create_llvm(code))``) or to a
Python function registered here with :func:`register_extern`, which numba compiles into the
kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit.errors import IRError, MLCError
from mlckit.ir.dtype import check_dtype, is_float
from mlckit.ir.op import register_op

from .expr import Call, Max, Min, PrimExpr, Select, StringImm, _match_types, convert, make_const

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
# call_extern("name", *args): its first argument is the callee's name, a StringImm.
CALL_EXTERN = register_op("tir.call_extern")


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


def call_extern(dtype: str, func_name: str, *args: Any) -> Call:
    """A call of the external function ``func_name`` returning ``dtype`` (TVM's
    ``tir.call_extern``); see :func:`register_extern` for how the name is found."""
    if not isinstance(func_name, str) or not func_name.isidentifier():
        raise IRError(f"call_extern: the function name is an identifier, got {func_name!r}")
    return Call(check_dtype(dtype, "call_extern dtype"), CALL_EXTERN, [StringImm(func_name), *args])


# Python functions that call_extern may call, by name: numba compiles them into the kernel.
_EXTERNS: dict[str, Callable[..., Any]] = {}


def register_extern(
    name: str, fn: Callable[..., Any] | None = None, override: bool = False
) -> Callable[..., Any]:
    """Register ``fn`` as the extern ``name``: ``T.call_extern(dtype, name, ...)`` calls it.

    Use it as a decorator, ``@tir.register_extern("tmm16")``, or call it with the function.
    The function must compile under ``numba.njit`` (the ``llvm`` target inlines it into the
    kernel; the ``python`` target calls it as it is). Each ``buf.access_ptr(...)`` argument
    arrives as the buffer's array (a strided view for a matched region), scalars as numbers.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise MLCError(f"register_extern: the name is an identifier, got {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise MLCError(f"register_extern({name!r}): {fn!r} is not a function")
        if name in _EXTERNS and _EXTERNS[name] is not fn and not override:
            raise MLCError(
                f"an extern named {name!r} is registered already; pass override=True to replace it"
            )
        _EXTERNS[name] = fn
        return fn

    return register if fn is None else register(fn)


def get_extern(name: str) -> Callable[..., Any] | None:
    """The Python function registered as the extern ``name``, or None."""
    return _EXTERNS.get(name)


def list_externs() -> list[str]:
    """The names of the registered Python externs."""
    return sorted(_EXTERNS)
