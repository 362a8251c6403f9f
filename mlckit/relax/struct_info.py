"""StructInfo: what relax knows statically about a value (its kind, shape and dtype)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlckit.errors import IRError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.node import Node
from mlckit.tir.expr import Cast, IntImm, PrimExpr, convert

if TYPE_CHECKING:
    from .expr import Expr

_NODE = dict(frozen=True, eq=False, repr=False)


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
        from .expr import Expr, ShapeExpr

        if shape is not None and not isinstance(shape, Expr):
            shape = ShapeExpr(shape)
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
        from .expr import ShapeExpr

        if isinstance(self.shape, ShapeExpr):
            return self.shape.values
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


def _shape_ndim(shape: "Expr") -> int:
    from .expr import ShapeExpr

    if isinstance(shape, ShapeExpr):
        return len(shape.values)
    sinfo = shape.struct_info_
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.ndim
    return -1


def _kinds(value: Any) -> str:
    """What was passed where StructInfo was expected: ``a Var`` or ``a list of [int, Var]``."""
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of [{', '.join(type(v).__name__ for v in value)}]"
    return f"a {type(value).__name__}"
