"""Questions about struct info: which symbolic variables it uses, what two struct infos have
in common (the join of an ``if``'s branches), and struct info with variables substituted."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mlckit.arith import simplify
from mlckit.ir.node import Node
from mlckit.ir.structural import structural_equal
from mlckit.tir import expr as texpr

from ..expr import Expr, ShapeExpr
from ..struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ..utils import dims_equal


# ------------------------------------------------------------------------------ tir vars
def _walk_prim_vars(value: Any) -> Iterator[texpr.Var]:
    if isinstance(value, texpr.Var):
        yield value
    elif isinstance(value, texpr.PrimExpr):
        for _, child in value.structural_fields():
            yield from _walk_prim_vars(child)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk_prim_vars(item)


def tir_vars_in_prim_expr(expr: texpr.PrimExpr) -> list[texpr.Var]:
    """The distinct tir variables of ``expr``, in order of first appearance."""
    return _unique(_walk_prim_vars(expr))


def _sinfo_dims(sinfo: StructInfo | None) -> Iterator[tuple[texpr.PrimExpr, bool]]:
    """Each PrimExpr of a struct info, with whether it stands alone (a bare dim or value)."""
    if isinstance(sinfo, TensorStructInfo):
        values = sinfo.shape_values if isinstance(sinfo.shape, ShapeExpr) else None
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


def tir_vars_in_struct_info(sinfo: StructInfo | None) -> list[texpr.Var]:
    """Every symbolic variable the struct info uses (``n`` in ``R.Tensor((n * 2, 4))``)."""
    return _unique(v for dim, _ in _sinfo_dims(sinfo) for v in _walk_prim_vars(dim))


def definable_tir_vars_in_struct_info(sinfo: StructInfo | None) -> list[texpr.Var]:
    """The variables a parameter or match_cast with this struct info defines: those that
    appear as a whole dimension (``n`` in ``(n, 4)``; not in ``(n * 2, 4)``, which cannot be
    solved for ``n``)."""
    return _unique(dim for dim, alone in _sinfo_dims(sinfo) if alone and isinstance(dim, texpr.Var))


def _unique(items: Iterator[texpr.Var] | Any) -> list[texpr.Var]:
    seen: set[int] = set()
    out = []
    for v in items:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


# ------------------------------------------------------------------------------ substitution
def substitute_prim_expr(
    expr: texpr.PrimExpr, vmap: Mapping[texpr.Var, texpr.PrimExpr]
) -> texpr.PrimExpr:
    """``expr`` with tir variables replaced by ``vmap``'s values (identity-keyed)."""
    if not vmap:
        return expr
    result = _subst(expr, vmap)
    return result if result is expr else simplify(result)


def _subst(value: Any, vmap: Mapping[texpr.Var, texpr.PrimExpr]) -> Any:
    if isinstance(value, texpr.Var):
        return vmap.get(value, value)
    if isinstance(value, (list, tuple)):
        items = [_subst(v, vmap) for v in value]
        changed = any(a is not b for a, b in zip(items, value))
        return type(value)(items) if changed else value
    if not isinstance(value, texpr.PrimExpr):
        return value
    changes = {}
    for name, child in value.structural_fields():
        if isinstance(child, (Node, list, tuple)):
            new = _subst(child, vmap)
            if new is not child:
                changes[name] = new
    return value.with_fields(**changes) if changes else value


def substitute_struct_info(
    sinfo: StructInfo, vmap: Mapping[texpr.Var, texpr.PrimExpr]
) -> StructInfo:
    """Struct info with its symbolic variables replaced (a callee's return type at a call)."""
    if not vmap:
        return sinfo

    def dims(values: tuple[texpr.PrimExpr, ...]) -> list[texpr.PrimExpr]:
        return [substitute_prim_expr(v, vmap) for v in values]

    if isinstance(sinfo, TensorStructInfo):
        if isinstance(sinfo.shape, ShapeExpr):
            return TensorStructInfo(dims(sinfo.shape.values), sinfo.dtype)
        return sinfo
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is None:
            return sinfo
        return ShapeStructInfo(dims(sinfo.values), sinfo.ndim)
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is None:
            return sinfo
        return PrimStructInfo(sinfo.dtype, substitute_prim_expr(sinfo.value, vmap))
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([substitute_struct_info(f, vmap) for f in sinfo.fields])
    if isinstance(sinfo, FuncStructInfo):
        params = (
            None
            if sinfo.params is None
            else [substitute_struct_info(p, vmap) for p in sinfo.params]
        )
        return FuncStructInfo(params, substitute_struct_info(sinfo.ret, vmap), sinfo.purity)
    return sinfo


def erase_to_well_defined(sinfo: StructInfo, is_defined: Callable[[texpr.Var], bool]) -> StructInfo:
    """``sinfo`` without the dims that use variables undefined where it is used.

    A function result ``R.Tensor((k, 4))`` whose ``k`` comes from a match_cast in the body
    means nothing to a caller: it becomes ``R.Tensor(dtype, ndim=2)``; rank and dtype stay.
    """

    def uses_undefined(dims: Any) -> bool:
        return any(not is_defined(v) for d in dims or () for v in _walk_prim_vars(d))

    if isinstance(sinfo, TensorStructInfo):
        if isinstance(sinfo.shape, ShapeExpr) and uses_undefined(sinfo.shape.values):
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


# ------------------------------------------------------------------------------ join
def struct_info_lca(lhs: StructInfo, rhs: StructInfo) -> StructInfo:
    """The most precise struct info that describes values of both ``lhs`` and ``rhs``
    (TVM's least common ancestor): dims that provably agree are kept, the rest forgotten."""
    if lhs is rhs:
        return lhs
    if isinstance(lhs, TensorStructInfo) and isinstance(rhs, TensorStructInfo):
        dtype = lhs.dtype if lhs.dtype == rhs.dtype else "void"
        ndim = lhs.ndim if lhs.ndim == rhs.ndim else -1
        shape = _common_dims(lhs.shape_values, rhs.shape_values)
        if shape is None and isinstance(lhs.shape, Expr) and lhs.shape is rhs.shape:
            return TensorStructInfo(lhs.shape, dtype)
        return TensorStructInfo(shape, dtype, ndim)
    if isinstance(lhs, ShapeStructInfo) and isinstance(rhs, ShapeStructInfo):
        values = _common_dims(lhs.values, rhs.values)
        return ShapeStructInfo(values, lhs.ndim if lhs.ndim == rhs.ndim else -1)
    if isinstance(lhs, PrimStructInfo) and isinstance(rhs, PrimStructInfo):
        if lhs.dtype != rhs.dtype:
            return ObjectStructInfo()
        same_value = (
            lhs.value is not None and rhs.value is not None and dims_equal(lhs.value, rhs.value)
        )
        return PrimStructInfo(lhs.dtype, lhs.value if same_value else None)
    if isinstance(lhs, TupleStructInfo) and isinstance(rhs, TupleStructInfo):
        if len(lhs.fields) != len(rhs.fields):
            return ObjectStructInfo()
        return TupleStructInfo([struct_info_lca(a, b) for a, b in zip(lhs.fields, rhs.fields)])
    if isinstance(lhs, FuncStructInfo) and isinstance(rhs, FuncStructInfo):
        if structural_equal(lhs, rhs):
            return lhs
        return FuncStructInfo.opaque_func(purity=lhs.purity and rhs.purity)
    return ObjectStructInfo()


def _common_dims(
    a: tuple[texpr.PrimExpr, ...] | None, b: tuple[texpr.PrimExpr, ...] | None
) -> list[texpr.PrimExpr] | None:
    if a is None or b is None or len(a) != len(b):
        return None
    if all(dims_equal(x, y) for x, y in zip(a, b)):
        return list(a)
    return None


__all__ = [
    "definable_tir_vars_in_struct_info",
    "erase_to_well_defined",
    "struct_info_lca",
    "substitute_prim_expr",
    "substitute_struct_info",
    "tir_vars_in_prim_expr",
    "tir_vars_in_struct_info",
]
