"""Binding-level analyses: what each variable is bound to, and dropping unused bindings."""

from __future__ import annotations

from typing import Any

from mlckit.ir.module import GlobalVar, IRModule

from ..expr import (
    Binding,
    BindingBlock,
    DataflowBlock,
    Expr,
    Function,
    If,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
)
from ..expr_functor import ExprVisitor
from .struct_info_analysis import definable_tir_vars_in_struct_info, tir_vars_in_struct_info


class _BindingCollector(ExprVisitor):
    def __init__(self) -> None:
        self.bindings: list[Binding] = []

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.bindings.append(binding)
        super().visit_var_binding_(binding)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.bindings.append(binding)
        super().visit_match_cast_(binding)


def _bindings(expr: Expr) -> list[Binding]:
    collector = _BindingCollector()
    collector.visit_expr(expr)
    return collector.bindings


def get_var2val(func: Function) -> dict[Var, Expr]:
    """Each variable bound in ``func`` (nested scopes included) mapped to its bound value."""
    return {b.var: b.value for b in _bindings(func)}  # type: ignore[attr-defined]


def name_to_binding(func: Function) -> dict[str, list[Binding]]:
    """The bindings of ``func`` grouped by their variable's name."""
    table: dict[str, list[Binding]] = {}
    for binding in _bindings(func):
        table.setdefault(binding.var.name_hint, []).append(binding)
    return table


class _UsedVars(ExprVisitor):
    def __init__(self) -> None:
        self.found: dict[Var, None] = {}

    def visit_var_(self, op: Var) -> None:
        self.found[op] = None

    visit_dataflow_var_ = visit_var_


def used_vars(expr: Expr) -> list[Var]:
    """The relax variables ``expr`` reads (not those it binds), each once, in order of first use."""
    visitor = _UsedVars()
    visitor.visit_expr(expr)
    return list(visitor.found)


class _GlobalVars(ExprVisitor):
    def __init__(self) -> None:
        self.found: dict[GlobalVar, None] = {}

    def visit_global_var_(self, op: GlobalVar) -> None:
        self.found[op] = None


def all_global_vars(expr: Expr) -> list[GlobalVar]:
    """The module functions ``expr`` refers to (calls, call_tir, ...), each once, in order."""
    visitor = _GlobalVars()
    visitor.visit_expr(expr)
    return list(visitor.found)


def remove_all_unused(func: Any) -> Any:
    """``func`` without the bindings nothing uses.

    Inside dataflow blocks every binding is pure, so any unused one goes (also a dataflow
    block's output that the function never reads). Outside them only unused local function
    definitions go: a binding there may have a side effect. A match_cast is kept while a
    symbolic dim it defines is still used. Given an IRModule, cleans each relax function.
    """
    if isinstance(func, IRModule):
        mod = func.copy()
        for gv, f in list(mod.functions.items()):
            if isinstance(f, Function):
                mod.update_func(gv, _clean(f))
        return mod
    return _clean(func)


def _clean(expr: Expr) -> Expr:
    if isinstance(expr, Function):
        body = _clean(expr.body)
        if body is expr.body:
            return expr
        return Function(
            expr.params, body, expr.ret_struct_info, expr.is_pure, expr.attrs, span=expr.span
        )
    if isinstance(expr, If):
        true_branch, false_branch = _clean(expr.true_branch), _clean(expr.false_branch)
        if true_branch is expr.true_branch and false_branch is expr.false_branch:
            return expr
        return If(
            expr.cond, true_branch, false_branch, struct_info_=expr.struct_info_, span=expr.span
        )
    if isinstance(expr, SeqExpr):
        return _clean_seq(expr)
    return expr


def _clean_seq(seq: SeqExpr) -> SeqExpr:
    changed = False
    blocks: list[tuple[BindingBlock, list[Binding]]] = []
    for block in seq.blocks:
        bindings = []
        for binding in block.bindings:
            value = _clean(binding.value)  # type: ignore[attr-defined]
            if value is not binding.value:  # type: ignore[attr-defined]
                changed = True
                binding = binding.with_fields(value=value)
            bindings.append(binding)
        blocks.append((block, bindings))

    # Walk backwards: a binding is live if something after it (or the result) reads it.
    live = set(used_vars(seq.body))
    live_dims = {id(v) for v in tir_vars_in_struct_info(seq.body.struct_info_)}
    kept_blocks: list[BindingBlock] = []
    for block, bindings in reversed(blocks):
        kept: list[Binding] = []
        for binding in reversed(bindings):
            value = binding.value  # type: ignore[attr-defined]
            removable = isinstance(block, DataflowBlock) or isinstance(value, Function)
            needed = binding.var in live
            if isinstance(binding, MatchCast):
                needed = needed or any(
                    id(v) in live_dims
                    for v in definable_tir_vars_in_struct_info(binding.struct_info)
                )
            if removable and not needed:
                changed = True
                continue
            kept.append(binding)
            live.update(used_vars(value))
            live_dims.update(id(v) for v in tir_vars_in_struct_info(binding.var.struct_info_))
        if kept:
            kept.reverse()
            kept_blocks.append(type(block)(kept, span=block.span))
        elif block.bindings:
            changed = True
    if not changed:
        return seq
    kept_blocks.reverse()
    return SeqExpr(kept_blocks, seq.body, span=seq.span)


__all__ = ["all_global_vars", "get_var2val", "name_to_binding", "remove_all_unused", "used_vars"]
