"""Questions about struct info: which symbolic variables it uses (answered in
:mod:`mlckit.relax.struct_info`, which relax.expr builds on, and exported here as TVM's
``relax.analysis`` does), what two struct infos have in common (the join of an ``if``'s
branches), and struct info with variables substituted."""

from __future__ import annotations

from collections.abc import Mapping
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
    definable_tir_vars_in_struct_info,
    erase_to_well_defined,
    tir_vars_in_prim_expr,
    tir_vars_in_struct_info,
)
from ..utils import dims_equal


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
