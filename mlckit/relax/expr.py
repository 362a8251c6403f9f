"""Relax graph IR expressions, bindings and functions.

Every expression carries ``struct_info_`` once it has been normalized (by the BlockBuilder or
the TVMScript parser); ``expr.struct_info`` reads it and says so when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlckit.errors import IRError, MLCError, StructInfoError, warn_old_spelling
from mlckit.ir.dtype import check_dtype
from mlckit.ir.module import BaseFunc, GlobalVar
from mlckit.ir.node import Node, check_str
from mlckit.ir.op import Op
from mlckit.runtime.ndarray import NDArray, array
from mlckit.tir.expr import PrimExpr
from mlckit.tir.expr import convert as convert_prim

from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    _as_dim,
    definable_tir_vars_in_struct_info,
    erase_to_well_defined,
    register_expr_classes,
)
from .ty import DynTensorType, annotations_struct_info
from .utils import format_struct_info

_NODE = dict(frozen=True, eq=False, repr=False)

# The relax op constructors behind Expr's arithmetic operators. relax.op builds on these nodes,
# so it installs them here when it loads (mlckit/relax/__init__.py loads it with every relax
# module), as the IR's printer installs itself in mlckit.ir.node.
_OPERATORS: dict[str, Callable[..., Call]] = {}


def register_operators(**ops: Callable[..., Call]) -> None:
    """Install the op constructors Expr's operators and ``astype`` call (the names of
    ``_OPERATOR_METHODS``, ``negative`` and ``astype``)."""
    _OPERATORS.update(ops)


@dataclass(**_NODE)
class Expr(Node):
    """Base class of relax expressions."""

    struct_info_: StructInfo | None = field(default=None, kw_only=True, compare=False)

    @property
    def struct_info(self) -> StructInfo:
        if self.struct_info_ is None:
            raise MLCError(
                f"{type(self).__name__} has no struct info yet: normalize it with "
                "relax.BlockBuilder().normalize(expr) or bind it with bb.emit"
            )
        return self.struct_info_

    # Early Relax's spellings (the MLC course's), read from the struct info (see relax.ty).
    @property
    def shape_(self) -> Expr | None:
        """Early Relax's name for the shape of a tensor-valued expression (None: unknown)."""
        warn_old_spelling("expr.shape_", "expr.struct_info.shape")
        sinfo = self.struct_info
        if not isinstance(sinfo, TensorStructInfo):
            raise IRError(
                f"{_describe(self)} is not a tensor: expr.shape_ is the shape of a tensor; "
                "read expr.struct_info instead"
            )
        return sinfo.shape

    @property
    def _checked_type_(self) -> DynTensorType:
        """Early Relax's type of a tensor-valued expression: its rank and dtype."""
        warn_old_spelling("expr._checked_type_", "expr.struct_info")
        return DynTensorType.of(self.struct_info, _describe(self))

    # Python's operators (+, -, *, /, //, **, @, unary -, <, <=, >, >=) build calls to relax
    # ops, as TVM's ExprWithOp does: installed below from _OPERATOR_METHODS.

    def astype(self, dtype: str) -> "Call":
        """``R.astype(self, dtype)``, TVM's method spelling."""
        return _OPERATORS["astype"](self, dtype)

    def __getitem__(self, index: int) -> "TupleGetItem":
        return TupleGetItem(self, index)

    def __iter__(self) -> Iterator[Expr]:
        # Without this, Python would iterate through __getitem__ with 0, 1, 2, ... and, for an
        # expression whose length is unknown, never stop (list(x), `1 in x`, Tuple(x)).
        sinfo = self.struct_info_
        if isinstance(sinfo, TupleStructInfo):
            return (TupleGetItem(self, i) for i in range(len(sinfo.fields)))
        raise IRError(
            f"{_describe(self)} is not a sequence: a relax expression stands for one value "
            "computed at run time, so it has no items to iterate over. To make a tuple of it, "
            "write relax.Tuple([x]) (a list of fields); to take field i of a tuple-valued "
            "expression, write x[i]"
        )


# Python operator method -> (relax op, whether the expression is the right-hand operand).
_OPERATOR_METHODS = {
    "__add__": ("add", False),
    "__radd__": ("add", True),
    "__sub__": ("subtract", False),
    "__rsub__": ("subtract", True),
    "__mul__": ("multiply", False),
    "__rmul__": ("multiply", True),
    "__truediv__": ("divide", False),
    "__rtruediv__": ("divide", True),
    "__floordiv__": ("floor_divide", False),
    "__rfloordiv__": ("floor_divide", True),
    "__pow__": ("power", False),
    "__rpow__": ("power", True),
    "__matmul__": ("matmul", False),
    "__lt__": ("less", False),
    "__le__": ("less_equal", False),
    "__gt__": ("greater", False),
    "__ge__": ("greater_equal", False),
}


def _operator_method(op: str, reflected: bool) -> Callable[[Expr, Any], "Call"]:
    if reflected:
        return lambda self, other: _OPERATORS[op](other, self)
    return lambda self, other: _OPERATORS[op](self, other)


for _method, (_op, _reflected) in _OPERATOR_METHODS.items():
    setattr(Expr, _method, _operator_method(_op, _reflected))
Expr.__neg__ = lambda self: _OPERATORS["negative"](self)  # type: ignore[method-assign]


@dataclass(**_NODE)
class LeafExpr(Expr):
    pass


@dataclass(**_NODE)
class Var(LeafExpr):
    """A relax variable. Structurally, variables compare by role, not by name."""

    name_hint: str = field(default="v", compare=False)
    _binds_like_var = True

    def __init__(
        self,
        name_hint: str,
        struct_info: StructInfo | None = None,
        type_annotation: DynTensorType | None = None,
        *,
        span: Any = None,
    ):
        if not isinstance(name_hint, str):
            raise IRError(
                f"relax.Var: the name must be a string, got {type(name_hint).__name__} "
                f"({name_hint!r})"
            )
        if type_annotation is not None:
            # Early Relax's relax.Var(name, shape, type): the second argument is a shape.
            struct_info = annotations_struct_info(name_hint, struct_info, type_annotation)
        if struct_info is not None and not isinstance(struct_info, StructInfo):
            raise IRError(
                f"relax.Var({name_hint!r}, ...): expected a StructInfo such as "
                f"relax.TensorStructInfo(shape, dtype), got {type(struct_info).__name__}"
            )
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "struct_info_", struct_info)
        object.__setattr__(self, "span", span)

    def structural_fields(self) -> Iterator[tuple[str, Any]]:
        yield "struct_info", self.struct_info_

    @property
    def vid(self) -> str:
        return self.name_hint


@dataclass(**_NODE)
class DataflowVar(Var):
    """A variable bound inside a dataflow block and not visible outside it."""

    __init__ = Var.__init__


@dataclass(**_NODE)
class Constant(LeafExpr):
    """A constant tensor. ``data`` is an NDArray."""

    data: Any = None

    def __init__(self, data: Any, struct_info: StructInfo | None = None, *, span: Any = None):
        if not isinstance(data, NDArray):
            data = array(np.asarray(data))
        if struct_info is None:
            struct_info = TensorStructInfo(data.shape, data.dtype)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "struct_info_", struct_info)
        object.__setattr__(self, "span", span)

    def structural_fields(self) -> Iterator[tuple[str, Any]]:
        yield "data", self.data.numpy()


@dataclass(**_NODE)
class PrimValue(LeafExpr):
    """A scalar PrimExpr used as a relax value (``R.prim_value``)."""

    value: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, value: Any, *, span: Any = None):
        value = convert_prim(value, "int64" if isinstance(value, int) else None)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "struct_info_", PrimStructInfo(value=value))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class StringImm(LeafExpr):
    value: str = ""

    def __init__(self, value: str, *, span: Any = None):
        object.__setattr__(self, "value", check_str(value, "relax.StringImm"))
        object.__setattr__(self, "struct_info_", ObjectStructInfo())
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class DataTypeImm(LeafExpr):
    value: str = ""

    def __init__(self, value: str, *, span: Any = None):
        object.__setattr__(self, "value", check_dtype(value, "relax.DataTypeImm dtype"))
        object.__setattr__(self, "struct_info_", ObjectStructInfo())
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class ShapeExpr(LeafExpr):
    """A literal shape ``(n, 784)``; dims are int64 PrimExprs."""

    values: tuple[PrimExpr, ...] = ()

    def __init__(self, values: Sequence[Any], *, span: Any = None):
        values = tuple(_as_dim(v) for v in values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "struct_info_", ShapeStructInfo(values))
        object.__setattr__(self, "span", span)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> PrimExpr:  # type: ignore[override]
        return self.values[i]

    def __iter__(self) -> Iterator[PrimExpr]:  # type: ignore[override]
        return iter(self.values)


register_expr_classes(Expr, ShapeExpr)


@dataclass(**_NODE)
class ExternFunc(LeafExpr):
    """A function provided by the runtime's global registry (``R.ExternFunc("env.linear")``)."""

    global_symbol: str = ""

    def __init__(
        self, global_symbol: str, struct_info: StructInfo | None = None, *, span: Any = None
    ):
        object.__setattr__(self, "global_symbol", check_str(global_symbol, "relax.ExternFunc"))
        object.__setattr__(self, "struct_info_", struct_info or FuncStructInfo.opaque_func())
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Call(Expr):
    """``op(args)``: a call of an Op, a GlobalVar, an ExternFunc or a function-valued Var."""

    op: Any = None
    args: tuple[Expr, ...] = ()
    attrs: "Attrs | None" = None
    sinfo_args: tuple[StructInfo, ...] = ()

    def __init__(
        self,
        op: Any,
        args: Sequence[Any],
        attrs: Any = None,
        sinfo_args: Sequence[StructInfo] | None = None,
        *,
        span: Any = None,
    ):
        if not isinstance(op, (Op, GlobalVar, Expr)):
            raise IRError(f"relax.Call: cannot call a {type(op).__name__}")
        if attrs is not None and not isinstance(attrs, Attrs):
            attrs = Attrs(attrs)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", tuple(convert_to_expr(a) for a in args))
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "sinfo_args", tuple(sinfo_args or ()))
        object.__setattr__(self, "struct_info_", None)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Attrs(Node):
    """Operator attributes (``axes`` of permute_dims, ...): a read-only mapping."""

    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, fields: dict[str, Any] | None = None, *, span: Any = None):
        object.__setattr__(self, "fields", dict(fields or {}))
        object.__setattr__(self, "span", span)

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def keys(self):
        return self.fields.keys()


@dataclass(**_NODE)
class Tuple(Expr):
    fields: tuple[Expr, ...] = ()

    def __init__(self, fields: Sequence[Any], *, span: Any = None):
        if not isinstance(fields, (list, tuple)):
            what = _describe(fields) if isinstance(fields, Expr) else type(fields).__name__
            raise IRError(
                f"relax.Tuple expects a list of fields, got {what}: write relax.Tuple([x]) "
                "for a tuple of one field"
            )
        fields = tuple(convert_to_expr(f) for f in fields)
        object.__setattr__(self, "fields", fields)
        sinfos = [f.struct_info_ for f in fields]
        object.__setattr__(
            self,
            "struct_info_",
            TupleStructInfo(sinfos) if all(s is not None for s in sinfos) else None,
        )
        object.__setattr__(self, "span", span)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> Expr:  # type: ignore[override]
        return self.fields[i]

    def __iter__(self) -> Iterator[Expr]:  # type: ignore[override]
        return iter(self.fields)


class TupleIndexError(StructInfoError, IndexError):
    """A field index outside a tuple. An IndexError too, so that unpacking a tuple-valued
    expression (``a, b = t``) stops where the tuple ends."""


@dataclass(**_NODE)
class TupleGetItem(Expr):
    """``t[index]``: field ``index`` of a tuple-valued expression."""

    tuple_value: Expr = None  # type: ignore[assignment]
    index: int = 0

    def __init__(self, tuple_value: Expr, index: int, *, span: Any = None):
        if isinstance(index, np.integer):
            index = int(index)
        if not isinstance(index, int) or isinstance(index, bool):
            raise IRError(
                f"a tuple field is selected by an integer, got {type(index).__name__} "
                f"({index!r}): write t[0], t[1], ..."
            )
        if not isinstance(tuple_value, Expr):
            raise IRError(
                f"relax.TupleGetItem takes a relax expression, got {type(tuple_value).__name__}"
            )
        tuple_field_struct_info(tuple_value, index)  # refuse what the sinfo already rules out
        object.__setattr__(self, "tuple_value", tuple_value)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "struct_info_", None)
        object.__setattr__(self, "span", span)


def tuple_field_struct_info(value: Expr, index: int) -> StructInfo | None:
    """The struct info of ``value[index]`` (None while ``value``'s is unknown), or the error
    that says why there is no such field."""
    sinfo = value.struct_info_
    if isinstance(sinfo, TupleStructInfo):
        if not 0 <= index < len(sinfo.fields):
            raise TupleIndexError(
                f"TupleGetItem: index {index} is out of range: {_label(value)} is a tuple of "
                f"{len(sinfo.fields)} fields ({format_struct_info(sinfo)}); fields count "
                "from 0"
            )
        return sinfo.fields[index]
    if index < 0:
        raise TupleIndexError(f"TupleGetItem: index {index} is negative; tuple fields count from 0")
    if sinfo is None or isinstance(sinfo, ObjectStructInfo):
        return None if sinfo is None else ObjectStructInfo()
    raise StructInfoError(
        f"TupleGetItem: cannot take field {index} of {_label(value)}: it is "
        f"{format_struct_info(sinfo)}, not a tuple"
    )


def _label(expr: Any) -> str:
    return expr.name_hint if isinstance(expr, Var) else type(expr).__name__


def _describe(expr: Any) -> str:
    """How an error names an expression: ``relax.Var x (R.Tensor((4,), "float32"))``."""
    name = f"relax.{type(expr).__name__}"
    if isinstance(expr, Var):
        name += f" {expr.name_hint}"
    sinfo = getattr(expr, "struct_info_", None)
    return f"{name} ({format_struct_info(sinfo)})" if sinfo is not None else name


@dataclass(**_NODE)
class If(Expr):
    """``if cond: ... else: ...`` with branch bodies as SeqExprs."""

    cond: Expr = None  # type: ignore[assignment]
    true_branch: Expr = None  # type: ignore[assignment]
    false_branch: Expr = None  # type: ignore[assignment]


# ----------------------------------------------------------------------------- bindings
@dataclass(**_NODE)
class Binding(Node):
    var: Var = None  # type: ignore[assignment]


@dataclass(**_NODE)
class VarBinding(Binding):
    """``var = value``."""

    value: Expr = None  # type: ignore[assignment]


@dataclass(**_NODE)
class MatchCast(Binding):
    """``var = R.match_cast(value, struct_info)``: check at run time, refine statically."""

    value: Expr = None  # type: ignore[assignment]
    struct_info: StructInfo = None  # type: ignore[assignment]


@dataclass(**_NODE)
class BindingBlock(Node):
    bindings: tuple[Binding, ...] = ()

    def __init__(self, bindings: Sequence[Binding], *, span: Any = None):
        object.__setattr__(self, "bindings", tuple(bindings))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class DataflowBlock(BindingBlock):
    """A block of pure bindings (``with R.dataflow():``)."""

    __init__ = BindingBlock.__init__


@dataclass(**_NODE)
class SeqExpr(Expr):
    """Binding blocks followed by a result expression."""

    blocks: tuple[BindingBlock, ...] = ()
    body: Expr = None  # type: ignore[assignment]

    def __init__(self, blocks: Sequence[BindingBlock], body: Expr, *, span: Any = None):
        object.__setattr__(self, "blocks", tuple(blocks))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "struct_info_", body.struct_info_)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Function(BaseFunc, Expr):
    """A relax function. ``attrs`` holds e.g. ``global_symbol`` and ``Primitive``."""

    params: tuple[Var, ...] = ()
    body: Expr = None  # type: ignore[assignment]
    ret_struct_info: StructInfo = None  # type: ignore[assignment]
    is_pure: bool = True
    attrs: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        params: Sequence[Var],
        body: Expr,
        ret_struct_info: StructInfo | None = None,
        is_pure: bool = True,
        attrs: dict[str, Any] | None = None,
        *,
        span: Any = None,
    ):
        for p in params:
            if not isinstance(p, Var):
                raise IRError(
                    f"relax.Function parameters must be relax.Var, got {type(p).__name__}"
                )
        if ret_struct_info is None:
            ret_struct_info = _deduced_return(params, body)
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ret_struct_info", ret_struct_info)
        object.__setattr__(self, "is_pure", bool(is_pure))
        object.__setattr__(self, "attrs", dict(attrs or {}))
        object.__setattr__(self, "span", span)
        param_sinfo = [p.struct_info_ or ObjectStructInfo() for p in params]
        object.__setattr__(
            self, "struct_info_", FuncStructInfo(param_sinfo, ret_struct_info, self.is_pure)
        )


def _deduced_return(params: Sequence[Var], body: Expr) -> StructInfo:
    """The body's struct info, with the symbolic dims the parameters do not define erased (a
    dim a match_cast defines inside the body means nothing to a caller)."""
    if body.struct_info_ is None:
        return ObjectStructInfo()
    defined = {id(v) for p in params for v in definable_tir_vars_in_struct_info(p.struct_info_)}
    return erase_to_well_defined(body.struct_info_, lambda v: id(v) in defined)


def convert_to_expr(value: Any) -> Expr:
    """Python values become relax expressions: tuples become Tuple, numbers PrimValue, ..."""
    if isinstance(value, (Expr, GlobalVar)):
        return value  # type: ignore[return-value]
    if isinstance(value, PrimExpr) or (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    ):
        return PrimValue(value)
    if isinstance(value, str):
        return StringImm(value)
    if isinstance(value, (list, tuple)):
        return Tuple([convert_to_expr(v) for v in value])
    if isinstance(value, np.ndarray):
        return Constant(value)
    raise IRError(f"cannot use a {type(value).__name__} ({value!r}) as a relax expression")


def const(value: Any, dtype: str | DynTensorType | None = None) -> Constant:
    """A constant tensor from a number, numpy array or NDArray (``relax.const``). A value
    that ``dtype`` cannot hold exactly is refused (``const(300, "int8")`` would wrap to 44).
    Early Relax's ``const(value, relax.DynTensorType(ndim, dtype))`` is ``const(value, dtype)``."""
    if isinstance(value, NDArray):
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except ValueError:
        raise IRError("relax.const: the rows of a nested list must have equal lengths") from None
    if arr.dtype.kind not in "biuf":
        raise IRError(
            f"relax.const takes a number, a numpy array or (nested) lists of numbers, got {value!r}"
        )
    if isinstance(dtype, DynTensorType):
        warn_old_spelling(
            "relax.const(value, relax.DynTensorType(ndim, dtype))", "relax.const(value, dtype)"
        )
        if dtype.ndim not in (-1, arr.ndim):
            raise IRError(
                f"relax.const: the value has {arr.ndim} dims but its type {dtype} says {dtype.ndim}"
            )
        dtype = dtype.dtype
    if dtype is not None:
        target = np.dtype(check_dtype(dtype, "relax.const dtype"))
        with np.errstate(invalid="ignore", over="ignore"):
            cast = arr.astype(target)
            exact = np.array_equal(cast.astype(arr.dtype), arr)
        if target.kind in "biu" and not exact:
            raise IRError(f"relax.const: {value!r} is not exactly representable as {dtype}")
        arr = cast
    elif arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype("float32")
    elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
        arr = arr.astype("int32")
    return Constant(arr)
