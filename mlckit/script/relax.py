"""TVMScript's Relax namespace: ``from mlckit.script import relax as R``.

* the decorator ``R.function``;
* struct info: ``R.Tensor``, ``R.Tuple``, ``R.Shape``, ``R.Prim``, ``R.Object``, ``R.Callable``;
* expression builders: every operator of :mod:`mlckit.relax.op` (``R.add``, ``R.nn.relu``,
  ``R.call_tir``, ...) and ``R.const``, ``R.shape``, ``R.prim_value``, ``R.str``,
  ``R.ExternFunc``;
* statement builders the parser handles: ``R.dataflow``, ``R.output``, ``R.func_attr``,
  ``R.match_cast``.

A string dimension (``R.Tensor(("n", 784), "float32")``) names a symbolic int64 variable;
within one parsed function every use of the same name is the same variable.
"""

from __future__ import annotations

import builtins
import inspect
import numbers
from collections.abc import Callable as _Callable
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mlckit import relax as _relax
from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype
from mlckit.relax import op as _op
from mlckit.relax.op import memory
from mlckit.relax.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from mlckit.tir.expr import PrimExpr
from mlckit.tir.expr import Var as _TirVar

from .parser.decorator import function
from .parser.markers import statement

__all__ = [
    "Callable",
    "ExternFunc",
    "Object",
    "Prim",
    "Shape",
    "Tensor",
    "Tuple",
    "builtin",
    "call_dps_packed",
    "call_packed",
    "call_pure_packed",
    "call_tir",
    "const",
    "dataflow",
    "dtype",
    "func_attr",
    "function",
    "match_cast",
    "memory",
    "output",
    "prim_value",
    "shape",
    "str",
    "symbol_scope",
    "to_struct_info",
]
# Every relax operator is also an R name (R.add, R.nn.relu, ...), as in TVM.
__all__ += [name for name in _op.__all__ if name not in __all__]

# ------------------------------------------------------------------------------ symbolic dims
# The symbolic variables of the function being parsed, by name; None outside the parser, where
# each struct info gets its own fresh variables.
_SYMBOLS: ContextVar[dict[str, _TirVar] | None] = ContextVar("mlckit_script_symbols", default=None)


@contextmanager
def symbol_scope(table: dict[str, _TirVar]) -> Iterator[dict[str, _TirVar]]:
    """Within this scope string dims resolve through (and add to) ``table``."""
    token = _SYMBOLS.set(table)
    try:
        yield table
    finally:
        _SYMBOLS.reset(token)


def _dims(values: Sequence[Any]) -> list[Any]:
    table = _SYMBOLS.get()
    if table is None:
        table = {}
    dims = []
    for value in values:
        if isinstance(value, builtins.str):
            if not value.isidentifier():
                raise MLCError(
                    f"a symbolic dimension must be named by an identifier, got {value!r}"
                )
            value = table.setdefault(value, _TirVar(value, "int64"))
        dims.append(value)
    return dims


# ------------------------------------------------------------------------------ struct info
class StructInfoBuilder:
    """``R.Tensor`` and friends: called, they build a struct info; written bare as an
    annotation (``x: R.Tensor``), they mean the least specific struct info of their kind."""

    def __init__(self, name: str, build: _Callable[..., StructInfo], bare: StructInfo | None):
        self.name = name
        self.build = build
        self.bare = bare
        self.__doc__ = build.__doc__
        self.__name__ = name
        # What a wrong call's error message shows as the expected arguments.
        self.__signature__ = inspect.signature(build)

    def __call__(self, *args: Any, **kwargs: Any) -> StructInfo:
        return self.build(*args, **kwargs)

    def __repr__(self) -> str:
        return f"R.{self.name}"


def to_struct_info(value: Any) -> StructInfo:
    """``value`` as a StructInfo (a bare ``R.Tensor`` is ``R.Tensor()``), or an error."""
    if isinstance(value, StructInfo):
        return value
    if isinstance(value, StructInfoBuilder) and value.bare is not None:
        return value.bare
    if isinstance(value, StructInfoBuilder):
        raise MLCError(f"R.{value.name} needs arguments to be a struct info")
    raise MLCError(
        f'expected a struct info such as R.Tensor((3, 4), "float32"), got '
        f"{type(value).__name__} {value!r}"
    )


def _expect(what: str, value: Any, kinds: type | tuple[type, ...], expected: builtins.str) -> Any:
    """``value`` when it is one of ``kinds`` (a bool is no int here), else an error."""
    is_bool = isinstance(value, builtins.bool)
    if not isinstance(value, kinds) or (is_bool and builtins.bool not in _as_tuple(kinds)):
        raise MLCError(f"{what} is {expected}, got {value!r}")
    return value


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _ndim(what: str, ndim: Any) -> int:
    if _expect(what, ndim, int, "the number of dimensions (-1: unknown)") < -1:
        raise MLCError(f"{what} is the number of dimensions (-1: unknown), got {ndim}")
    return ndim


def _tensor(
    shape: Any = None, dtype: str | None = None, ndim: int = -1, vdevice: Any = None
) -> TensorStructInfo:
    """A tensor's struct info: ``R.Tensor((n, 784), "float32")``, ``R.Tensor(ndim=2)``."""
    if isinstance(shape, builtins.str) and dtype is None:
        # The older R.Tensor("float32", ndim=2).
        shape, dtype = None, shape
    _expect("R.Tensor's shape", shape, (list, tuple, _relax.Expr, type(None)), "a tuple of dims")
    _expect("R.Tensor's dtype", dtype, (builtins.str, type(None)), 'a dtype such as "float32"')
    if vdevice is not None:
        raise MLCError("R.Tensor: vdevice (virtual devices) is not supported; leave it out")
    if isinstance(shape, (list, tuple)):
        shape = _dims(shape)
    return TensorStructInfo(shape, dtype, _ndim("R.Tensor's ndim", ndim))


def _tuple(*fields: Any) -> TupleStructInfo:
    """``R.Tuple(R.Tensor(...), R.Tensor(...))``."""
    if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
        fields = tuple(fields[0])
    return TupleStructInfo([to_struct_info(f) for f in fields])


def _shape(values: Any = None, ndim: int = -1) -> ShapeStructInfo:
    """A shape value's struct info: ``R.Shape([n, 4])`` or ``R.Shape(ndim=2)``."""
    _expect("R.Shape's values", values, (list, tuple, type(None)), "a list of dims")
    return ShapeStructInfo(None if values is None else _dims(values), _ndim("R.Shape's ndim", ndim))


def _prim(dtype: str | None = None, value: Any = None) -> PrimStructInfo:
    """A scalar's struct info: ``R.Prim("int64")`` or ``R.Prim(value=n)``."""
    _expect("R.Prim's dtype", dtype, (builtins.str, type(None)), 'a dtype such as "int64"')
    kinds = (numbers.Real, PrimExpr, type(None))
    _expect("R.Prim's value", value, kinds, "a number or expression")
    return PrimStructInfo(dtype, value)


def _object() -> ObjectStructInfo:
    """Any value (``R.Object``)."""
    return ObjectStructInfo()


def _callable(
    params: Sequence[Any] | None = None, ret: Any = None, purity: bool = True
) -> FuncStructInfo:
    """A function's struct info: ``R.Callable((R.Tensor(...),), R.Tensor(...))``."""
    _expect("R.Callable's params", params, (list, tuple, type(None)), "a tuple of struct infos")
    _expect("R.Callable's purity", purity, builtins.bool, "True or False")
    param_sinfo = None if params is None else [to_struct_info(p) for p in params]
    return FuncStructInfo(
        param_sinfo, ObjectStructInfo() if ret is None else to_struct_info(ret), purity
    )


Tensor = StructInfoBuilder("Tensor", _tensor, TensorStructInfo(None, None, -1))
Tuple = StructInfoBuilder("Tuple", _tuple, None)
Shape = StructInfoBuilder("Shape", _shape, ShapeStructInfo(None, -1))
Prim = StructInfoBuilder("Prim", _prim, None)
Object = StructInfoBuilder("Object", _object, ObjectStructInfo())
Callable = StructInfoBuilder("Callable", _callable, FuncStructInfo.opaque_func())


# ------------------------------------------------------------------------------ expressions
def _out_sinfo(op: str, out_sinfo: Any, out_ty: Any) -> Any:
    out = out_sinfo if out_sinfo is not None else out_ty
    if out is None:
        raise MLCError(
            f'{op} needs the struct info of its output: out_sinfo=R.Tensor(shape, "float32")'
        )
    if isinstance(out, (list, tuple)) and any(
        isinstance(o, (StructInfo, StructInfoBuilder)) for o in out
    ):
        return [to_struct_info(o) for o in out]
    return to_struct_info(out) if isinstance(out, StructInfoBuilder) else out


def call_tir(
    gvar: Any,
    args: Any,
    out_sinfo: Any = None,
    tir_vars: Any = None,
    dtype: str | None = None,
    *,
    out_ty: Any = None,
) -> _relax.Call:
    """``R.call_tir(cls.f, (x, w), out_sinfo=R.Tensor(...))``: call a TensorIR function of the
    module in destination-passing style (also the older ``(shape), dtype=`` and ``out_ty=``)."""
    return _op.call_tir(
        gvar, args, _out_sinfo("R.call_tir", out_sinfo, out_ty), tir_vars, dtype=dtype
    )


def call_dps_packed(
    func: Any, args: Any, out_sinfo: Any = None, dtype: str | None = None, *, out_ty: Any = None
) -> _relax.Call:
    """``R.call_dps_packed("env.linear", (x, w), out_sinfo=R.Tensor(...))``."""
    return _op.call_dps_packed(
        func, args, _out_sinfo("R.call_dps_packed", out_sinfo, out_ty), dtype=dtype
    )


def call_pure_packed(func: Any, *args: Any, sinfo_args: Any = None) -> _relax.Call:
    """``R.call_pure_packed("env.f", x, sinfo_args=R.Tensor(...))``."""
    return _op.call_pure_packed(func, *args, sinfo_args=_sinfo_args(sinfo_args))


def call_packed(func: Any, *args: Any, sinfo_args: Any = None) -> _relax.Call:
    """``R.call_packed("env.f", x, sinfo_args=...)``: a call that may have side effects."""
    return _op.call_packed(func, *args, sinfo_args=_sinfo_args(sinfo_args))


def _sinfo_args(sinfo_args: Any) -> Any:
    if isinstance(sinfo_args, (list, tuple)):
        return [to_struct_info(s) for s in sinfo_args]
    return None if sinfo_args is None else to_struct_info(sinfo_args)


def const(value: Any, dtype: str | None = None) -> _relax.Constant:
    """A constant tensor: ``R.const(1.5, "float32")``, ``R.const([[1, 2]], "int32")``."""
    return _relax.const(value, dtype)


def shape(values: Sequence[Any]) -> _relax.ShapeExpr:
    """A shape value ``R.shape([n, 4])``."""
    return _relax.ShapeExpr(_dims(_expect("R.shape", values, (list, tuple), "a list of dims")))


def prim_value(value: Any) -> _relax.PrimValue:
    """A scalar value ``R.prim_value(T.int64(3))``."""
    kinds = (builtins.bool, numbers.Real, PrimExpr)
    return _relax.PrimValue(_expect("R.prim_value", value, kinds, "a number or expression"))


def str(value: Any) -> _relax.StringImm:
    """A string value ``R.str("text")``."""
    return _relax.StringImm(_expect("R.str", value, builtins.str, "a string"))


def dtype(value: Any) -> _relax.DataTypeImm:
    """A data type value ``R.dtype("float32")``."""
    return _relax.DataTypeImm(check_dtype(value, "R.dtype's dtype"))


ExternFunc = _relax.ExternFunc
# Explicit memory (after CallTIRRewrite): R.builtin.alloc_tensor, R.memory.alloc_storage, ...
builtin = memory.builtin


# ------------------------------------------------------------------------------ statements
@statement("R", "with R.dataflow():")
def dataflow() -> None:
    """A dataflow block: pure bindings; only the variables named by R.output leave it."""


@statement("R", "R.output(gv0, gv1)")
def output(*vars: Any) -> None:
    """The last statement of a dataflow block: the variables visible after it."""


@statement("R", 'R.func_attr({"key": value})')
def func_attr(attrs: dict) -> None:
    """Attributes of the function."""


@statement("R", 'y = R.match_cast(x, R.Tensor((n, 4), "float32"))')
def match_cast(value: Any, struct_info: Any) -> None:
    """Bind ``value`` with a more specific struct info, checked at run time."""


# ------------------------------------------------------------------------------ operators
# The relax operators that R does not define itself (see __all__), as attributes of R.
globals().update({name: getattr(_op, name) for name in _op.__all__ if name not in globals()})
