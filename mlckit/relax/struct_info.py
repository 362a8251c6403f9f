"""StructInfo: what relax knows statically about a value (its kind, shape and dtype), and the
symbolic variables (``n`` in ``R.Tensor((n, 4))``) it uses and defines."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlckit.errors import IRError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.node import Node
from mlckit.tir.expr import Cast, IntImm, PrimExpr, convert
from mlckit.tir.expr import Var as TirVar

if TYPE_CHECKING:
    from .expr import Expr

_NODE = dict(frozen=True, eq=False, repr=False)

# A tensor's shape is a relax expression, usually a literal ShapeExpr, and every relax
# expression carries struct info: relax.expr builds on this module, so it registers its Expr and
# ShapeExpr classes here when it loads (TVM's C++ declares both in one header and defines them
# apart; in Python one module has to come first).
_EXPR_CLASSES: dict[str, type] = {}


def register_expr_classes(expr: type, shape_expr: type) -> None:
    """Install relax.expr's ``Expr`` and ``ShapeExpr``, which a tensor's shape is made of."""
    _EXPR_CLASSES.update(Expr=expr, ShapeExpr=shape_expr)


def literal_dims(shape: Expr | None) -> tuple[PrimExpr, ...] | None:
    """The dims of a tensor's shape when it is a literal ShapeExpr, else None."""
    if isinstance(shape, _EXPR_CLASSES["ShapeExpr"]):
        return shape.values
    return None


@dataclass(**_NODE)
class StructInfo(Node):
    """Base class of struct info."""


@dataclass(**_NODE)
class ObjectStructInfo(StructInfo):
    """Any value; nothing more is known (``R.Object``)."""


@dataclass(**_NODE)
class PrimStructInfo(StructInfo):
    """A scalar of ``dtype``, possibly with a known symbolic ``value`` (``R.Prim``)."""

    dtype: str = "int64"
    value: PrimExpr | None = None

    def __init__(self, dtype: str | None = None, value: Any = None, *, span: Any = None):
        if value is not None:
            # The value has the struct info's dtype: PrimStructInfo("int64", 1) is an int64 1.
            value = convert(value, None if dtype is None else check_dtype(dtype))
            if dtype is not None and value.dtype != dtype:
                raise IRError(f"PrimStructInfo: the value is {value.dtype}, the dtype says {dtype}")
            dtype = value.dtype
        object.__setattr__(self, "dtype", check_dtype(dtype or "int64"))
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class ShapeStructInfo(StructInfo):
    """A shape value: its dims as int64 PrimExprs when known, else only its rank (``R.Shape``)."""

    values: tuple[PrimExpr, ...] | None = None
    ndim: int = -1

    def __init__(self, values: Sequence[Any] | None = None, ndim: int = -1, *, span: Any = None):
        if values is not None:
            values = tuple(_as_dim(v) for v in values)
            if ndim not in (-1, len(values)):
                raise IRError(f"ShapeStructInfo: ndim={ndim} but {len(values)} values given")
            ndim = len(values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class TensorStructInfo(StructInfo):
    """A tensor: its shape (a relax expression, usually a ShapeExpr) if known, dtype and rank."""

    shape: "Expr | None" = None
    dtype: str = "float32"
    ndim: int = -1

    def __init__(
        self, shape: Any = None, dtype: str = "float32", ndim: int = -1, *, span: Any = None
    ):
        if shape is not None and not isinstance(shape, _EXPR_CLASSES["Expr"]):
            shape = _EXPR_CLASSES["ShapeExpr"](shape)
        if shape is not None:
            shape_ndim = _shape_ndim(shape)
            if ndim not in (-1, shape_ndim) and shape_ndim != -1:
                raise IRError(f"TensorStructInfo: ndim={ndim} but the shape has {shape_ndim} dims")
            ndim = shape_ndim
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", "void" if dtype is None else check_dtype(dtype))
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "span", span)

    @property
    def shape_values(self) -> tuple[PrimExpr, ...] | None:
        """The dims as PrimExprs when the shape is a literal ShapeExpr, else None."""
        values = literal_dims(self.shape)
        if values is not None:
            return values
        if self.shape is not None:
            sinfo = self.shape.struct_info_
            if isinstance(sinfo, ShapeStructInfo):
                return sinfo.values
        return None


@dataclass(**_NODE)
class TupleStructInfo(StructInfo):
    fields: tuple[StructInfo, ...] = ()

    def __init__(self, fields: Sequence[StructInfo], *, span: Any = None):
        if not isinstance(fields, (list, tuple)) or not all(
            isinstance(f, StructInfo) for f in fields
        ):
            raise IRError(
                "relax.TupleStructInfo expects a list of StructInfo, one per field, got "
                f"{_kinds(fields)}: write relax.TupleStructInfo([sinfo]) (an expression's is "
                "x.struct_info)"
            )
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class FuncStructInfo(StructInfo):
    """A function's signature; ``params`` is None for an opaque function."""

    params: tuple[StructInfo, ...] | None = None
    ret: StructInfo = None  # type: ignore[assignment]
    purity: bool = True

    def __init__(
        self,
        params: Sequence[StructInfo] | None,
        ret: StructInfo,
        purity: bool = True,
        *,
        span: Any = None,
    ):
        object.__setattr__(self, "params", None if params is None else tuple(params))
        object.__setattr__(self, "ret", ret)
        object.__setattr__(self, "purity", purity)
        object.__setattr__(self, "span", span)

    @staticmethod
    def opaque_func(ret: StructInfo | None = None, purity: bool = False) -> "FuncStructInfo":
        return FuncStructInfo(None, ret or ObjectStructInfo(), purity)

    def is_opaque(self) -> bool:
        return self.params is None


def _as_dim(value: Any) -> PrimExpr:
    """Relax shapes are int64: literals become int64, int32 expressions are widened."""
    if isinstance(value, PrimExpr):
        if value.dtype == "int64":
            return value
        if value.dtype.startswith("int"):
            if isinstance(value, IntImm):
                return IntImm("int64", value.value)
            return Cast("int64", value)
        raise IRError(f"a shape dimension must be an integer, got dtype {value.dtype}")
    if isinstance(value, bool) or (not isinstance(value, int) and not hasattr(value, "__index__")):
        raise IRError(f"a shape dimension must be an integer, got {value!r}")
    return convert(int(value), "int64")


def _shape_ndim(shape: Expr) -> int:
    values = literal_dims(shape)
    if values is not None:
        return len(values)
    sinfo = shape.struct_info_
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.ndim
    return -1


def _kinds(value: Any) -> str:
    """What was passed where StructInfo was expected: ``a Var`` or ``a list of [int, Var]``."""
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of [{', '.join(type(v).__name__ for v in value)}]"
    return f"a {type(value).__name__}"


# ------------------------------------------------------------------------------ symbolic variables
def _walk_prim_vars(value: Any) -> Iterator[TirVar]:
    if isinstance(value, TirVar):
        yield value
    elif isinstance(value, PrimExpr):
        for _, child in value.structural_fields():
            yield from _walk_prim_vars(child)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk_prim_vars(item)


def tir_vars_in_prim_expr(expr: PrimExpr) -> list[TirVar]:
    """The distinct tir variables of ``expr``, in order of first appearance."""
    return _unique(_walk_prim_vars(expr))


def _sinfo_dims(sinfo: StructInfo | None) -> Iterator[tuple[PrimExpr, bool]]:
    """Each PrimExpr of a struct info, with whether it stands alone (a bare dim or value)."""
    if isinstance(sinfo, TensorStructInfo):
        values = literal_dims(sinfo.shape)
        for v in values or ():
            yield v, True
    elif isinstance(sinfo, ShapeStructInfo):
        for v in sinfo.values or ():
            yield v, True
    elif isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            yield sinfo.value, True
    elif isinstance(sinfo, TupleStructInfo):
        for field in sinfo.fields:
            yield from _sinfo_dims(field)
    elif isinstance(sinfo, FuncStructInfo):
        for param in sinfo.params or ():
            yield from _sinfo_dims(param)
        yield from _sinfo_dims(sinfo.ret)


def tir_vars_in_struct_info(sinfo: StructInfo | None) -> list[TirVar]:
    """Every symbolic variable the struct info uses (``n`` in ``R.Tensor((n * 2, 4))``)."""
    return _unique(v for dim, _ in _sinfo_dims(sinfo) for v in _walk_prim_vars(dim))


def definable_tir_vars_in_struct_info(sinfo: StructInfo | None) -> list[TirVar]:
    """The variables a parameter or match_cast with this struct info defines: those that
    appear as a whole dimension (``n`` in ``(n, 4)``; not in ``(n * 2, 4)``, which cannot be
    solved for ``n``)."""
    return _unique(dim for dim, alone in _sinfo_dims(sinfo) if alone and isinstance(dim, TirVar))


def _unique(items: Iterator[TirVar] | Any) -> list[TirVar]:
    seen: set[int] = set()
    out = []
    for v in items:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def erase_to_well_defined(sinfo: StructInfo, is_defined: Callable[[TirVar], bool]) -> StructInfo:
    """``sinfo`` without the dims that use variables undefined where it is used.

    A function result ``R.Tensor((k, 4))`` whose ``k`` comes from a match_cast in the body
    means nothing to a caller: it becomes ``R.Tensor(dtype, ndim=2)``; rank and dtype stay.
    """

    def uses_undefined(dims: Any) -> bool:
        return any(not is_defined(v) for d in dims or () for v in _walk_prim_vars(d))

    if isinstance(sinfo, TensorStructInfo):
        if uses_undefined(literal_dims(sinfo.shape)):
            return TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
        return sinfo
    if isinstance(sinfo, ShapeStructInfo):
        return ShapeStructInfo(None, sinfo.ndim) if uses_undefined(sinfo.values) else sinfo
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None and uses_undefined([sinfo.value]):
            return PrimStructInfo(sinfo.dtype)
        return sinfo
    if isinstance(sinfo, TupleStructInfo):
        fields = [erase_to_well_defined(f, is_defined) for f in sinfo.fields]
        changed = any(a is not b for a, b in zip(fields, sinfo.fields))
        return TupleStructInfo(fields) if changed else sinfo
    if isinstance(sinfo, FuncStructInfo) and sinfo.params is not None:
        # A signature may bind its own variables in its params; judge only the others.
        own = {id(v) for p in sinfo.params for v in definable_tir_vars_in_struct_info(p)}
        if tir_vars_in_struct_info(sinfo) and any(
            id(v) not in own and not is_defined(v) for v in tir_vars_in_struct_info(sinfo)
        ):
            return FuncStructInfo.opaque_func(purity=sinfo.purity)
    return sinfo
