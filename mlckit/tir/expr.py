"""TensorIR scalar expressions (PrimExpr) with Python operators that build expressions.

As in TVM, ``i + 1`` builds an ``Add`` node, ``x < n`` an ``LT`` node. ``a == b`` builds an
``EQ`` node that, used as a Python bool (``if a == b``, dict lookup), means "same object".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mlckit.errors import IRError, MLCError
from mlckit.ir.dtype import bits, check_dtype, is_bool, is_float, is_int
from mlckit.ir.node import Node
from mlckit.ir.op import Op

if TYPE_CHECKING:
    from .buffer import Buffer

_NODE = dict(frozen=True, eq=False, repr=False)


@dataclass(**_NODE)
class PrimExpr(Node):
    """A scalar expression of some dtype."""

    dtype: str = field(init=False, default="int32")

    __hash__ = Node.__hash__

    # Python operators build expressions -------------------------------------------------
    def __add__(self, other: Any) -> PrimExpr:
        return _binary(Add, self, other)

    def __radd__(self, other: Any) -> PrimExpr:
        return _binary(Add, other, self)

    def __sub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, self, other)

    def __rsub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, other, self)

    def __mul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, self, other)

    def __rmul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, other, self)

    def __truediv__(self, other: Any) -> PrimExpr:
        return _binary(Div, self, other)

    def __rtruediv__(self, other: Any) -> PrimExpr:
        return _binary(Div, other, self)

    def __floordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, other, self)

    def __mod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, self, other)

    def __rmod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, other, self)

    def __neg__(self) -> PrimExpr:
        return _binary(Sub, make_const(0, self.dtype), self)

    def __pos__(self) -> PrimExpr:
        return self

    def __lt__(self, other: Any) -> PrimExpr:
        return _binary(LT, self, other)

    def __le__(self, other: Any) -> PrimExpr:
        return _binary(LE, self, other)

    def __gt__(self, other: Any) -> PrimExpr:
        return _binary(GT, self, other)

    def __ge__(self, other: Any) -> PrimExpr:
        return _binary(GE, self, other)

    def __eq__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(EQ, self, other)

    def __ne__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(NE, self, other)

    def __and__(self, other: Any) -> PrimExpr:
        return _logical(And, self, other)

    def __rand__(self, other: Any) -> PrimExpr:
        return _logical(And, other, self)

    def __or__(self, other: Any) -> PrimExpr:
        return _logical(Or, self, other)

    def __ror__(self, other: Any) -> PrimExpr:
        return _logical(Or, other, self)

    def __invert__(self) -> PrimExpr:
        return Not(self)

    def __bool__(self) -> bool:
        raise MLCError(
            f"the symbolic expression `{self.script()}` has no Python truth value; "
            "use T.if_then_else / T.Select, or `and`/`or` inside TVMScript"
        )

    def astype(self, dtype: str) -> PrimExpr:
        return Cast(dtype, self) if dtype != self.dtype else self


# ------------------------------------------------------------------------------- leaves
@dataclass(**_NODE)
class Var(PrimExpr):
    """A scalar variable (loop variable, symbolic shape, parameter)."""

    name_hint: str = field(default="", compare=False)
    type_annotation: str = "int32"
    _binds_like_var = True

    def __init__(self, name_hint: str, dtype: str = "int32", *, span: Any = None):
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "type_annotation", check_dtype(dtype))
        object.__setattr__(self, "dtype", self.type_annotation)
        object.__setattr__(self, "span", span)

    @property
    def name(self) -> str:
        return self.name_hint


@dataclass(**_NODE)
class SizeVar(Var):
    """A variable known to be non-negative (a shape dimension)."""

    __init__ = Var.__init__


@dataclass(**_NODE)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    value: int = 0

    def __init__(self, dtype: str, value: int, *, span: Any = None):
        dtype = check_dtype(dtype)
        if not (is_int(dtype) or is_bool(dtype)):
            raise IRError(f"IntImm needs an integer or bool dtype, got {dtype}")
        value = int(value)
        if is_bool(dtype):
            value = 1 if value else 0
        else:
            lo, hi = _int_range(dtype)
            if not lo <= value <= hi:
                raise IRError(f"{value} does not fit in {dtype}")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "span", span)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


@dataclass(**_NODE)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float = 0.0

    def __init__(self, dtype: str, value: float, *, span: Any = None):
        dtype = check_dtype(dtype)
        if not is_float(dtype):
            raise IRError(f"FloatImm needs a float dtype, got {dtype}")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "value", float(value))
        object.__setattr__(self, "span", span)

    def __float__(self) -> float:
        return self.value


@dataclass(**_NODE)
class StringImm(PrimExpr):
    value: str = ""

    def __init__(self, value: str, *, span: Any = None):
        object.__setattr__(self, "dtype", "handle")
        object.__setattr__(self, "value", str(value))
        object.__setattr__(self, "span", span)


# ------------------------------------------------------------------------------- composite
@dataclass(**_NODE)
class Cast(PrimExpr):
    value: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, dtype: str, value: Any, *, span: Any = None):
        object.__setattr__(self, "dtype", check_dtype(dtype))
        object.__setattr__(self, "value", convert(value))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class BinaryOpExpr(PrimExpr):
    """Base of the two-operand arithmetic nodes; both operands share one dtype."""

    a: PrimExpr = None  # type: ignore[assignment]
    b: PrimExpr = None  # type: ignore[assignment]
    symbol = "?"

    def __init__(self, a: Any, b: Any, *, span: Any = None):
        a, b = _match_types(convert(a), convert(b), type(self).__name__)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "dtype", self._result_dtype(a.dtype))
        object.__setattr__(self, "span", span)

    @staticmethod
    def _result_dtype(operand_dtype: str) -> str:
        return operand_dtype


@dataclass(**_NODE)
class Add(BinaryOpExpr):
    symbol = "+"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Sub(BinaryOpExpr):
    symbol = "-"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Mul(BinaryOpExpr):
    symbol = "*"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Div(BinaryOpExpr):
    """Division; truncating for integers (C semantics), exact for floats."""

    symbol = "/"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Mod(BinaryOpExpr):
    """Truncated modulo (C semantics); see FloorMod for Python's."""

    symbol = "%"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class FloorDiv(BinaryOpExpr):
    symbol = "//"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class FloorMod(BinaryOpExpr):
    symbol = "%"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Min(BinaryOpExpr):
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class Max(BinaryOpExpr):
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class CmpExpr(BinaryOpExpr):
    """Base of comparisons: operands share a dtype, the result is bool."""

    @staticmethod
    def _result_dtype(operand_dtype: str) -> str:
        return "bool"


@dataclass(**_NODE)
class EQ(CmpExpr):
    symbol = "=="
    __init__ = BinaryOpExpr.__init__

    def __bool__(self) -> bool:
        # `a == b` between expressions asks "same object?" when Python needs a bool
        # (dict lookup, `in`), exactly as TVM does.
        return self.a is self.b or _same_const(self.a, self.b)


@dataclass(**_NODE)
class NE(CmpExpr):
    symbol = "!="
    __init__ = BinaryOpExpr.__init__

    def __bool__(self) -> bool:
        return not (self.a is self.b or _same_const(self.a, self.b))


@dataclass(**_NODE)
class LT(CmpExpr):
    symbol = "<"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class LE(CmpExpr):
    symbol = "<="
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class GT(CmpExpr):
    symbol = ">"
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class GE(CmpExpr):
    symbol = ">="
    __init__ = BinaryOpExpr.__init__


@dataclass(**_NODE)
class And(BinaryOpExpr):
    symbol = "and"

    def __init__(self, a: Any, b: Any, *, span: Any = None):
        BinaryOpExpr.__init__(self, _as_bool(a, "and"), _as_bool(b, "and"), span=span)


@dataclass(**_NODE)
class Or(BinaryOpExpr):
    symbol = "or"

    def __init__(self, a: Any, b: Any, *, span: Any = None):
        BinaryOpExpr.__init__(self, _as_bool(a, "or"), _as_bool(b, "or"), span=span)


@dataclass(**_NODE)
class Not(PrimExpr):
    a: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, a: Any, *, span: Any = None):
        object.__setattr__(self, "a", _as_bool(a, "not"))
        object.__setattr__(self, "dtype", "bool")
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Select(PrimExpr):
    """``true_value if condition else false_value``; both branches are evaluated."""

    condition: PrimExpr = None  # type: ignore[assignment]
    true_value: PrimExpr = None  # type: ignore[assignment]
    false_value: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, condition: Any, true_value: Any, false_value: Any, *, span: Any = None):
        true_value, false_value = _match_types(convert(true_value), convert(false_value), "Select")
        object.__setattr__(self, "condition", _as_bool(condition, "Select"))
        object.__setattr__(self, "true_value", true_value)
        object.__setattr__(self, "false_value", false_value)
        object.__setattr__(self, "dtype", true_value.dtype)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Let(PrimExpr):
    var: Var = None  # type: ignore[assignment]
    value: PrimExpr = None  # type: ignore[assignment]
    body: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, var: Var, value: Any, body: Any, *, span: Any = None):
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "value", convert(value))
        object.__setattr__(self, "body", convert(body))
        object.__setattr__(self, "dtype", self.body.dtype)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Call(PrimExpr):
    """A call to an intrinsic (``tir.exp``, ``tir.if_then_else``, ...)."""

    op: Op = None  # type: ignore[assignment]
    args: tuple[PrimExpr, ...] = ()

    def __init__(self, dtype: str, op: Op | str, args: Sequence[Any], *, span: Any = None):
        if isinstance(op, str):
            op = Op.get(op)
        object.__setattr__(self, "dtype", check_dtype(dtype))
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", tuple(convert(a) for a in args))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class BufferLoad(PrimExpr):
    """``A[i, j]``: read one element of a buffer."""

    buffer: "Buffer" = None  # type: ignore[assignment]
    indices: tuple[PrimExpr, ...] = ()

    def __init__(self, buffer: "Buffer", indices: Sequence[Any], *, span: Any = None):
        indices = tuple(convert(i) for i in indices)
        if len(indices) != len(buffer.shape):
            raise IRError(
                f"buffer {buffer.name} has {len(buffer.shape)} dimensions but is indexed with "
                f"{len(indices)} indices"
            )
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "dtype", buffer.dtype)
        object.__setattr__(self, "span", span)


# ------------------------------------------------------------------------------- ranges
@dataclass(**_NODE)
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr = None  # type: ignore[assignment]
    extent: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, begin: Any, end: Any = None, *, span: Any = None):
        # Range(end) or Range(begin, end), as in TVM; from_min_extent for the other form. The
        # extent is ``end - begin`` with constants folded, as TVM builds it; simplifying a
        # symbolic one (``vi * 4 + 4 - vi * 4`` is 4) is arith's work, done by the callers
        # that build ranges from text (the parser, te.reduce_axis).
        if end is None:
            begin, end = 0, begin
        begin, end = convert(begin), convert(end)
        begin, end = _match_types(begin, end, "Range")
        if is_const_int(begin, 0):
            extent = end
        elif isinstance(begin, IntImm) and isinstance(end, IntImm):
            extent = IntImm(end.dtype, end.value - begin.value)
        else:
            extent = end - begin
        object.__setattr__(self, "min", begin)
        object.__setattr__(self, "extent", extent)
        object.__setattr__(self, "span", span)

    @staticmethod
    def from_min_extent(min_value: Any, extent: Any) -> "Range":
        rng = Range.__new__(Range)
        min_value, extent = _match_types(convert(min_value), convert(extent), "Range")
        object.__setattr__(rng, "min", min_value)
        object.__setattr__(rng, "extent", extent)
        object.__setattr__(rng, "span", None)
        return rng


class IterVarType:
    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    Opaque = 4


@dataclass(**_NODE)
class IterVar(Node):
    """A block iteration variable: its domain, variable, kind (spatial/reduce) and thread tag."""

    dom: Range = None  # type: ignore[assignment]
    var: Var = None  # type: ignore[assignment]
    iter_type: int = IterVarType.DataPar
    thread_tag: str = ""

    DataPar = IterVarType.DataPar
    ThreadIndex = IterVarType.ThreadIndex
    CommReduce = IterVarType.CommReduce
    Ordered = IterVarType.Ordered
    Opaque = IterVarType.Opaque


# ------------------------------------------------------------------------------- helpers
@functools.cache  # np.iinfo is slow next to building an IntImm, which checks its range
def _int_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def make_const(value: Any, dtype: str) -> PrimExpr:
    """A constant of ``dtype`` (IntImm or FloatImm)."""
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    return IntImm(dtype, int(value))


const = make_const


def convert(value: Any, dtype_hint: str | None = None) -> PrimExpr:
    """Turn a Python number into a constant; leave PrimExprs alone."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (bool, np.bool_)):
        return IntImm("bool", int(value))
    if isinstance(value, (int, np.integer)):
        if dtype_hint is not None and (is_int(dtype_hint) or is_float(dtype_hint)):
            return make_const(value, dtype_hint)
        return IntImm("int64" if not -(2**31) <= int(value) < 2**31 else "int32", int(value))
    if isinstance(value, (float, np.floating)):
        if dtype_hint is not None and is_float(dtype_hint):
            return FloatImm(dtype_hint, float(value))
        return FloatImm("float32", float(value))
    if isinstance(value, str):
        return StringImm(value)
    raise IRError(f"cannot use a {type(value).__name__} ({value!r}) as a TensorIR expression")


def _match_types(a: PrimExpr, b: PrimExpr, what: str) -> tuple[PrimExpr, PrimExpr]:
    """Bring two operands to one dtype the way TVM's BinaryOpMatchTypes does."""
    if a.dtype == b.dtype:
        return a, b
    # A literal adopts the other side's type.
    if _literal_fits(b, a):
        return a, make_const(b.value, a.dtype)
    if _literal_fits(a, b):
        return make_const(a.value, b.dtype), b
    if is_float(a.dtype) and not is_float(b.dtype):
        return a, Cast(a.dtype, b)
    if is_float(b.dtype) and not is_float(a.dtype):
        return Cast(b.dtype, a), b
    if (is_float(a.dtype) and is_float(b.dtype)) or (is_int(a.dtype) and is_int(b.dtype)):
        if bits(a.dtype) < bits(b.dtype):
            return Cast(b.dtype, a), b
        return a, Cast(a.dtype, b)
    raise IRError(f"{what}: cannot combine operands of dtype {a.dtype} and {b.dtype}")


def _literal_fits(literal: PrimExpr, other: PrimExpr) -> bool:
    """Whether ``literal`` is a constant that can take the dtype of the non-constant ``other``."""
    if not isinstance(literal, (IntImm, FloatImm)) or isinstance(other, (IntImm, FloatImm)):
        return False
    return (is_int(other.dtype) and isinstance(literal, IntImm)) or is_float(other.dtype)


def _binary(cls: type, a: Any, b: Any) -> PrimExpr:
    a = convert(a, b.dtype if isinstance(b, PrimExpr) else None)
    b = convert(b, a.dtype)
    return cls(a, b)


def _logical(cls: type, a: Any, b: Any) -> PrimExpr:
    return cls(a, b)


def is_const_int(expr: Any, value: int) -> bool:
    """Whether ``expr`` is the integer literal ``value`` (an ``IntImm`` of any dtype)."""
    return isinstance(expr, IntImm) and expr.value == value


def is_true(expr: Any) -> bool:
    """Whether ``expr`` is the boolean literal ``True`` (e.g. a block with no predicate)."""
    return isinstance(expr, IntImm) and expr.dtype == "bool" and expr.value == 1


def _as_bool(value: Any, what: str) -> PrimExpr:
    value = convert(value)
    if value.dtype != "bool":
        raise IRError(
            f"`{what}` needs a boolean condition, got an expression of dtype {value.dtype}"
        )
    return value


def _same_const(a: PrimExpr, b: PrimExpr) -> bool:
    return (
        isinstance(a, (IntImm, FloatImm))
        and type(a) is type(b)
        and a.dtype == b.dtype
        and a.value == b.value  # type: ignore[attr-defined]
    )
