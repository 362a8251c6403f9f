"""TVMScript's TensorIR namespace: ``from mlckit.script import tir as T``.

Three kinds of names live here:

* the decorator ``T.prim_func``;
* expression builders, called while a script is parsed and returning TensorIR nodes
  (``T.max``, ``T.exp``, ``T.float32(0.0)``, ``T.Cast``, ``T.Buffer((4,), "float32")``);
* statement builders (``T.block``, ``T.axis.remap``, ``T.reads``, ``T.grid``, ...), which the
  parser recognizes and handles; they have no meaning outside a parsed function.

Several names shadow Python builtins on purpose (``T.bool``, ``T.max``, ``T.abs``): they are
TVM's spelling.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from mlckit import tir as _tir
from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype, is_int
from mlckit.tir import op as _op
from mlckit.tir.expr import Cast, Div, Mod, PrimExpr, Select, convert

from .parser.decorator import prim_func
from .parser.markers import DType, StatementGroup, SymbolicVar, statement

__all__ = [
    "Buffer",
    "Cast",
    "Select",
    "abs",
    "alloc_buffer",
    "axis",
    "block",
    "block_attr",
    "bool",
    "call_extern",
    "ceil",
    "cos",
    "erf",
    "evaluate",
    "exp",
    "fabs",
    "float16",
    "float32",
    "float64",
    "floor",
    "floordiv",
    "floormod",
    "func_attr",
    "grid",
    "handle",
    "if_then_else",
    "init",
    "int8",
    "int16",
    "int32",
    "int64",
    "log",
    "match_buffer",
    "max",
    "max_value",
    "min",
    "min_value",
    "parallel",
    "pow",
    "prim_func",
    "reads",
    "round",
    "rsqrt",
    "sblock",
    "sblock_alloc_buffer",
    "serial",
    "sigmoid",
    "sin",
    "sqrt",
    "tanh",
    "thread_binding",
    "truncdiv",
    "truncmod",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "unroll",
    "var",
    "vectorized",
    "where",
    "writes",
]


# ------------------------------------------------------------------------------ types
# The parameters of TVM's buffer declarations that mlckit's buffers do not have, with the
# values that mean "none of it" (T.Buffer and T.alloc_buffer default differently in TVM).
_ABSENT_LAYOUT: dict[str, tuple[Any, ...]] = {
    "align": (0, -1),
    "buffer_type": ("", "default"),
    "axis_separators": (None, (), []),
}


def is_index(value: Any) -> builtins.bool:
    """Whether ``value`` is an integer or an integer TensorIR expression (a shape, an index)."""
    if isinstance(value, PrimExpr):
        return is_int(value.dtype)
    return isinstance(value, (int, np.integer)) and not isinstance(value, (builtins.bool, np.bool_))


def buffer_fields(
    what: str,
    shape: Any,
    dtype: Any,
    data: Any,
    strides: Any,
    elem_offset: Any,
    scope: Any,
    offset_factor: Any = 0,
    **layout: Any,
) -> dict[str, Any]:
    """The checked fields of the buffer that ``T.Buffer``, ``T.alloc_buffer`` or
    ``T.match_buffer`` (``what``) declares, as :class:`mlckit.tir.Buffer` takes them.

    What mlckit's buffers cannot hold is refused rather than dropped: a printed buffer must
    read back the same."""
    dims = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if not all(is_index(d) for d in dims):
        raise MLCError(f"{what}: the shape is a tuple of integers such as (128, n), got {shape!r}")
    if any(isinstance(d, (int, np.integer)) and d < 0 for d in dims):
        raise MLCError(f"{what}: a dimension cannot be negative, got shape {shape!r}")
    strides = () if strides is None else strides
    if not isinstance(strides, (list, tuple)) or not all(is_index(s) for s in strides):
        raise MLCError(f"{what}: strides are a tuple of integers, got {strides!r}")
    if strides and len(strides) != len(dims):
        raise MLCError(f"{what}: {len(strides)} strides for {len(dims)} dimensions")
    if elem_offset is not None and not is_index(elem_offset):
        raise MLCError(f"{what}: elem_offset is an integer, got {elem_offset!r}")
    if not isinstance(offset_factor, (int, np.integer)) or offset_factor < 0:
        raise MLCError(f"{what}: offset_factor is a non-negative integer, got {offset_factor!r}")
    if not isinstance(scope, str) or not scope:
        raise MLCError(f'{what}: the scope is a string such as "global" or "shared", got {scope!r}')
    if data is not None:
        raise MLCError(
            f"{what}: data= (a view of another buffer's memory) is not supported: every "
            "buffer has its own; allocate one with T.alloc_buffer"
        )
    for name, value in layout.items():
        if not any(
            value == absent and type(value) is type(absent) for absent in _ABSENT_LAYOUT[name]
        ):
            raise MLCError(
                f"{what}: {name}={value!r} is not supported (mlckit's buffers have no "
                f"{name.replace('_', ' ')}); leave it out"
            )
    return {
        "data": None,
        "dtype": check_dtype(dtype, f"{what} dtype"),
        "shape": dims,
        "strides": tuple(strides),
        "elem_offset": elem_offset,
        "scope": scope,
        "offset_factor": int(offset_factor),
    }


class BufferType:
    """``T.Buffer(shape, dtype)`` (and the older ``T.Buffer[shape, dtype]``) declares a
    parameter's buffer, as its annotation."""

    def __call__(
        self,
        shape: Any,
        dtype: str = "float32",
        data: Any = None,
        strides: Any = None,
        elem_offset: Any = None,
        scope: str = "global",
        align: int = 0,
        offset_factor: int = 0,
        buffer_type: str = "",
        axis_separators: Any = None,
    ) -> _tir.Buffer:
        fields = buffer_fields(
            "T.Buffer",
            shape,
            dtype,
            data,
            strides,
            elem_offset,
            scope,
            align=align,
            offset_factor=offset_factor,
            buffer_type=buffer_type,
            axis_separators=axis_separators,
        )
        return _tir.Buffer(**fields)

    def __getitem__(self, key: Any) -> _tir.Buffer:
        return self(*key) if isinstance(key, tuple) else self(key)

    def __repr__(self) -> str:
        return "T.Buffer"


Buffer = BufferType()
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
float16, float32, float64 = DType("float16"), DType("float32"), DType("float64")
handle = DType("handle")


# ------------------------------------------------------------------------------ expressions
def _operands(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    # A literal takes the dtype of the other operand, as with Python operators.
    a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    return a, convert(b, a.dtype)


def truncdiv(a: Any, b: Any) -> PrimExpr:
    """Integer division rounding toward zero (C semantics)."""
    return Div(*_operands(a, b))


def truncmod(a: Any, b: Any) -> PrimExpr:
    """The remainder of :func:`truncdiv` (sign of the dividend)."""
    return Mod(*_operands(a, b))


def call_extern(*args: Any, dtype: str | None = None) -> PrimExpr:
    """``T.call_extern("int32", "name", *args)``: call an external function (see
    :func:`mlckit.tir.op.register_extern`). The older ``T.call_extern("name", *args,
    dtype="int32")`` reads the same."""
    if dtype is None:
        if len(args) < 2 or not isinstance(args[0], str) or not isinstance(args[1], str):
            raise MLCError(
                "T.call_extern takes the result dtype, then the function name: "
                'T.call_extern("int32", "name", *args) (or T.call_extern("name", *args, '
                'dtype="int32"))'
            )
        dtype, *args = args  # type: ignore[assignment]
    if not args:
        raise MLCError("T.call_extern needs the name of the function to call")
    return _op.call_extern(dtype, *args)


def evaluate(value: Any) -> _tir.Evaluate:
    """``T.evaluate(expr)``: evaluate an expression for its side effect."""
    return _tir.Evaluate(value)


exp, log, sqrt, rsqrt, tanh, sigmoid = _op.exp, _op.log, _op.sqrt, _op.rsqrt, _op.tanh, _op.sigmoid
erf, sin, cos, floor, ceil, round = _op.erf, _op.sin, _op.cos, _op.floor, _op.ceil, _op.round
fabs, abs, pow = _op.fabs, _op.abs, _op.pow
max, min = _op.max, _op.min
if_then_else, floordiv, floormod = _op.if_then_else, _op.floordiv, _op.floormod
max_value, min_value = _op.max_value, _op.min_value


# ------------------------------------------------------------------------------ statements
@statement("T", "with T.block(name):")
def block(name: str = "", no_realize: bool = False) -> None:
    """A block: the unit of computation that schedules transform."""


@statement("T", "with T.init():")
def init() -> None:
    """The statements that initialize a reduction block's output, run on the first iteration."""


@statement("T", "T.where(condition)")
def where(predicate: Any) -> None:
    """The condition under which a block instance runs (its predicate)."""


@statement("T", "T.reads(A[vi, 0:K], ...)")
def reads(*regions: Any) -> None:
    """The buffer regions a block reads (inferred when omitted)."""


@statement("T", "T.writes(C[vi, vj], ...)")
def writes(*regions: Any) -> None:
    """The buffer regions a block writes (inferred when omitted)."""


@statement("T", 'T.block_attr({"key": value})')
def block_attr(attrs: dict) -> None:
    """Annotations of a block."""


@statement("T", 'T.func_attr({"key": value})')
def func_attr(attrs: dict) -> None:
    """Attributes of the function (``tir.noalias``, ...)."""


@statement("T", 'X = T.match_buffer(x, shape, "float32")')
def match_buffer(
    param: Any,
    shape: Any = None,
    dtype: str = "float32",
    data: Any = None,
    strides: Any = None,
    elem_offset: Any = None,
    scope: str = "global",
    align: int = -1,
    offset_factor: int = 0,
    buffer_type: str = "default",
    axis_separators: Any = None,
) -> None:
    """Give a handle parameter (or, in a block, a buffer region) a buffer."""


@statement("T", 'Y = T.alloc_buffer(shape, "float32")')
def alloc_buffer(
    shape: Any,
    dtype: str = "float32",
    data: Any = None,
    strides: Any = None,
    elem_offset: Any = None,
    scope: str = "global",
    align: int = -1,
    offset_factor: int = 0,
    buffer_type: str = "default",
    axis_separators: Any = None,
) -> None:
    """Allocate a buffer in the function's root block or in the enclosing block."""


@statement("T", "for i, j in T.grid(n, m):")
def grid(*extents: Any) -> None:
    """Perfectly nested serial loops, each from 0 to its extent."""


@statement("T", "for i in T.serial(n):")
def serial(start: Any, stop: Any = None, *, annotations: dict | None = None) -> None:
    """A serial loop over ``range(start, stop)`` (or ``range(start)``)."""


@statement("T", "for i in T.parallel(n):")
def parallel(start: Any, stop: Any = None, *, annotations: dict | None = None) -> None:
    """A loop whose iterations run in parallel on CPU threads."""


@statement("T", "for i in T.vectorized(n):")
def vectorized(start: Any, stop: Any = None, *, annotations: dict | None = None) -> None:
    """A loop to be turned into vector instructions."""


@statement("T", "for i in T.unroll(n):")
def unroll(start: Any, stop: Any = None, *, annotations: dict | None = None) -> None:
    """A loop to be unrolled."""


@statement("T", 'for i in T.thread_binding(n, thread="threadIdx.x"):')
def thread_binding(
    start: Any, stop: Any = None, thread: str | None = None, *, annotations: dict | None = None
) -> None:
    """A loop bound to a GPU thread axis (``blockIdx.x``, ``threadIdx.x``, ...)."""


class _Axis(StatementGroup):
    """``T.axis``: declare block iteration variables and bind them to loop expressions."""

    __all__ = ("remap", "spatial", "reduce", "scan", "opaque", "S", "R")

    @staticmethod
    @statement("T.axis", 'vi, vj, vk = T.axis.remap("SSR", [i, j, k])')
    def remap(kinds: str, bindings: Any, dtype: str = "int32") -> None:
        """One iter var per loop variable; each letter says its kind: S spatial, R reduce."""

    @staticmethod
    @statement("T.axis", "vi = T.axis.spatial(extent, i)")
    def spatial(dom: Any, binding: Any, dtype: str = "int32") -> None:
        """A spatial (data-parallel) iter var over ``dom`` bound to ``binding``."""

    @staticmethod
    @statement("T.axis", "vk = T.axis.reduce(extent, k)")
    def reduce(dom: Any, binding: Any, dtype: str = "int32") -> None:
        """A reduction iter var over ``dom`` bound to ``binding``."""

    @staticmethod
    @statement("T.axis", "vi = T.axis.scan(extent, i)")
    def scan(dom: Any, binding: Any, dtype: str = "int32") -> None:
        """An ordered (scan) iter var."""

    @staticmethod
    @statement("T.axis", "vi = T.axis.opaque(extent, i)")
    def opaque(dom: Any, binding: Any, dtype: str = "int32") -> None:
        """An iter var of opaque kind."""

    S = spatial
    R = reduce

    def __repr__(self) -> str:
        return "T.axis"


axis = _Axis()

# ``sa = T.var("int32")``: TVM's older spelling of ``sa = T.int32()``, a symbolic variable.
var = SymbolicVar()

# Newer TVM spellings of the same statements.
sblock = block
sblock_alloc_buffer = alloc_buffer

# Defined last: from here on `bool` in this module is TVMScript's type, not Python's.
bool = DType("bool")
