"""``blockize``: wrap the loops under a loop, and the block they hold, into a new outer block.

After ``split(j, [None, 4])`` a block bound to ``vj = j_0 * 4 + j_1`` can be blockized at
``j_1``: the new block ``Y_o`` iterates over tiles (``vj_o = j_0``, extent 32) and holds the
loop ``j_1`` with the original block, now bound to ``vj_i = j_1`` and indexing with
``vj_o * 4 + vj_i``. The outer block's regions are the tiles the inner loops touch; that is
the unit tensorize replaces by a hardware intrinsic.

Each binding must split into a part that uses only the loops above the target loop and a part
that uses only the target loop and the loops under it, the latter ranging over ``[0, c)`` and
the former a multiple of ``c`` (``outer * c + inner``); other bindings are an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute
from ..state import BlockRV, LoopRV, ScheduleState
from .block_scope import (
    at_first_iteration,
    check_reduced_once,
    child_blocks,
    conjunction,
    conjuncts,
    in_iter_vars,
    loop_range,
    path_to,
    relax_region,
    restates_domains,
    unique_block_name,
    used_vars,
    within,
)


def blockize(sch: ScheduleState, target_loop: LoopRV) -> BlockRV:
    """Check, divide every binding at the loop, build the inner block and the outer block
    around it, and splice the outer block in place of the loop."""
    loop = sch.loop(target_loop)
    realize, inner_loops = _check_blockizable(sch, loop)
    analyzer = Analyzer()
    division = _divide_bindings(analyzer, realize, loop, inner_loops)
    outer_pred, inner_pred = _predicates(sch, loop, realize, inner_loops, division)
    moved = substitute(realize.block, division.sub)
    inner_realize = _inner_realize(realize, moved, division, inner_pred)
    outer_block = _outer_block(sch, analyzer, realize, moved, inner_realize, inner_loops, division)
    sch.replace(loop, S.BlockRealize(division.outer_values, outer_pred, outer_block))
    return BlockRV(outer_block.name_hint)


@dataclass
class _Division:
    """The block's bindings divided at the target loop, ``v = v_o * c + v_i``: the outer
    block's iter vars and bindings, the inner block's, and each old iter var in new ones."""

    outer_iters: list[E.IterVar] = field(default_factory=list)
    outer_values: list[E.PrimExpr] = field(default_factory=list)
    inner_iters: list[E.IterVar] = field(default_factory=list)
    inner_values: list[E.PrimExpr] = field(default_factory=list)
    sub: dict[E.Var, E.PrimExpr] = field(default_factory=dict)


def _check_blockizable(sch: ScheduleState, loop: S.For) -> tuple[S.BlockRealize, list[S.For]]:
    """Check that ``loop`` holds exactly one block with nothing but loops between them;
    return the block and those loops (``loop`` first)."""
    lname = repr(loop.loop_var.name_hint)
    realizes = list(child_blocks(loop))
    if len(realizes) != 1:
        raise ScheduleError(
            f"blockize: loop {lname} must contain exactly one block, it contains {len(realizes)}"
        )
    realize = realizes[0]
    path = path_to(sch, realize)
    between = path[path.index(loop) : -1]
    for node in between:
        if not isinstance(node, S.For):
            raise ScheduleError(
                f"blockize: only loops may stand between loop {lname} and block "
                f"{realize.block.name_hint!r}, found a {type(node).__name__}"
            )
    return realize, between


def _divide_bindings(
    analyzer: Analyzer, realize: S.BlockRealize, loop: S.For, inner_loops: list[S.For]
) -> _Division:
    """Divide each binding into a part over the loops above ``loop`` and a part over the
    inner loops (:func:`_divide`); a binding without an inner part stays outer only."""
    lname = repr(loop.loop_var.name_hint)
    block = realize.block
    inner_ids = {id(lp.loop_var) for lp in inner_loops}
    inner_dom = {lp.loop_var: loop_range(lp) for lp in inner_loops}
    division = _Division()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        outer, inner, extent = _divide(analyzer, iv, value, inner_ids, inner_dom, block, lname)
        name, dtype = iv.var.name_hint, iv.var.dtype
        zero = E.make_const(0, dtype)
        if inner is None:
            outer_var = E.Var(f"{name}_o", dtype)
            division.outer_iters.append(E.IterVar(iv.dom, outer_var, iv.iter_type))
            division.outer_values.append(value)
            division.sub[iv.var] = outer_var
            continue
        outer_extent = analyzer.simplify(E.FloorDiv(iv.dom.extent, extent))
        outer_var = E.Var(f"{name}_o", dtype)
        inner_var = E.Var(f"{name}_i", dtype)
        division.outer_iters.append(
            E.IterVar(E.Range.from_min_extent(zero, outer_extent), outer_var, iv.iter_type)
        )
        division.outer_values.append(outer if outer is not None else zero)
        division.inner_iters.append(
            E.IterVar(E.Range.from_min_extent(zero, extent), inner_var, iv.iter_type)
        )
        division.inner_values.append(inner)
        division.sub[iv.var] = inner_var if outer is None else outer_var * extent + inner_var
    return division


def _predicates(
    sch: ScheduleState,
    loop: S.For,
    realize: S.BlockRealize,
    inner_loops: list[S.For],
    division: _Division,
) -> tuple[E.PrimExpr, E.PrimExpr]:
    """The block's predicate shared out: conditions on outer loops only (and guards keeping
    the outer bindings in their domains) for the outer block, the rest for the inner one."""
    # A split's bound on a binding the tile divides (``vi < 7``) says no more than the range
    # guards of the outer binding, which are exact there: only other conditions stay.
    kept = [
        cond
        for cond in conjuncts(realize.predicate)
        if not restates_domains(in_iter_vars(cond, realize), realize.block)
    ]
    inner_ids = {id(lp.loop_var) for lp in inner_loops}
    outer_pred, inner_pred = _split_predicate(conjunction(kept), inner_ids)
    # Inside the outer block, a loop above it is seen through the outer iter var bound to it.
    outer_loops = {
        v: iv.var
        for iv, v in zip(division.outer_iters, division.outer_values)
        if isinstance(v, E.Var)
    }
    inner_pred = substitute(inner_pred, outer_loops)
    guards = _range_guards(sch.loops_above(loop), division.outer_iters, division.outer_values)
    return conjunction([outer_pred, *guards]), inner_pred


def _inner_realize(
    realize: S.BlockRealize, moved: S.Block, division: _Division, inner_pred: E.PrimExpr
) -> S.BlockRealize:
    """The original block (``moved``: in terms of the new iter vars) bound to the inner
    iter vars, without its init when the outer block takes the reduction's start."""
    has_outer_reduction = realize.block.init is not None and any(
        iv.iter_type == E.IterVarType.CommReduce for iv in division.outer_iters
    )
    # The inner block no longer starts the reduction (the outer block's init does), so it
    # reads what it accumulates into, as TVM records it.
    inner_block = moved.with_fields(
        iter_vars=tuple(division.inner_iters),
        init=None,
        reads=(*moved.writes, *moved.reads) if has_outer_reduction else moved.reads,
    )
    return S.BlockRealize(division.inner_values, inner_pred, inner_block)


def _outer_block(
    sch: ScheduleState,
    analyzer: Analyzer,
    realize: S.BlockRealize,
    moved: S.Block,
    inner_realize: S.BlockRealize,
    inner_loops: list[S.For],
    division: _Division,
) -> S.Block:
    """The block ``<block>_o`` over the outer iter vars: the inner loops around the inner
    block, the tiles they touch as its regions, and the old init (:func:`_outer_init`)."""
    body: S.Stmt = inner_realize
    for lp in reversed(inner_loops):
        body = lp.with_fields(body=body)
    iter_dom = {iv.var: iv.dom for iv in division.inner_iters}
    for iv in division.outer_iters:
        analyzer.bind(iv.var, iv.dom)
    block = realize.block
    init = None
    if moved.init is not None:
        check_reduced_once("blockize", realize, inner_loops)
        init = _outer_init(moved.init, inner_realize, inner_loops, sch, block.name_hint)
    return S.Block(
        division.outer_iters,
        [relax_region(r, {}, iter_dom, analyzer) for r in moved.reads],
        [relax_region(r, {}, iter_dom, analyzer) for r in moved.writes],
        unique_block_name(sch, f"{block.name_hint}_o"),
        body,
        init,
    )


def _divide(
    analyzer: Analyzer,
    iv: E.IterVar,
    value: E.PrimExpr,
    inner_ids: set[int],
    inner_dom: dict[E.Var, E.Range],
    block: S.Block,
    lname: str,
) -> tuple[E.PrimExpr | None, E.PrimExpr | None, E.PrimExpr]:
    """``value`` as ``outer * extent + inner``: (outer or None, inner or None, extent)."""

    def fail(why: str) -> ScheduleError:
        return ScheduleError(
            f"blockize: the binding {iv.var.name_hint} = {value.script()} of block "
            f"{block.name_hint!r} cannot be divided at loop {lname} into "
            f"outer * c + inner (loops above {lname} / loops from {lname} down): {why}"
        )

    outer_terms: list[E.PrimExpr] = []
    inner_terms: list[E.PrimExpr] = []
    for term in _terms(analyzer.simplify(value)):
        uses = used_vars(term)
        if not uses & inner_ids:
            outer_terms.append(term)
        elif uses <= inner_ids:
            inner_terms.append(term)
        else:
            raise fail(f"the term {term.script()} mixes both")
    outer = _sum(outer_terms)
    if not inner_terms:
        return outer, None, E.make_const(1, value.dtype)
    inner = _sum(inner_terms)
    bounds = analyzer.int_set(inner, inner_dom)
    if bounds.min_value is None or bounds.max_value is None:
        raise fail(f"the inner part {inner.script()} has no bounds")
    if not analyzer.can_prove_equal(bounds.min_value, 0):
        raise fail(f"the inner part {inner.script()} does not start at 0")
    extent = analyzer.simplify(bounds.max_value + 1)
    if not analyzer.can_prove_equal(E.FloorMod(iv.dom.extent, extent), 0):
        raise fail(
            f"the inner part covers {extent.script()} values, which does not divide the "
            f"extent {iv.dom.extent.script()}"
        )
    if outer is None:
        return None, inner, extent
    quotient = analyzer.simplify(E.FloorDiv(outer, extent))
    if not analyzer.can_prove_equal(quotient * extent, outer):
        raise fail(f"the outer part {outer.script()} is not a multiple of {extent.script()}")
    return quotient, inner, extent


def _terms(expr: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(expr, E.Add):
        return _terms(expr.a) + _terms(expr.b)
    return [expr]


def _sum(terms: list[E.PrimExpr]) -> E.PrimExpr | None:
    if not terms:
        return None
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _split_predicate(pred: E.PrimExpr, inner_ids: set[int]) -> tuple[E.PrimExpr, E.PrimExpr]:
    """The conjuncts of ``pred`` on outer loops only (for the outer block) and the rest."""
    parts = conjuncts(pred)
    outer = [cond for cond in parts if not used_vars(cond) & inner_ids]
    inner = [cond for cond in parts if used_vars(cond) & inner_ids]
    return conjunction(outer), conjunction(inner)


def _range_guards(
    loops: list[S.For], iters: list[E.IterVar], values: list[E.PrimExpr]
) -> list[E.PrimExpr]:
    """Conditions keeping each outer binding inside its iter var's domain where the loops
    above may take it out: after a split that does not divide its loop, the last tiles lie
    past the end, and none of their inner iterations passes the block's predicate."""
    analyzer = Analyzer()
    for lp in loops:
        analyzer.bind(lp.loop_var, loop_range(lp))
    return [
        guard
        for iv, value in zip(iters, values)
        for guard in within(analyzer, value, iv.dom.min, iv.dom.extent)
    ]


def _outer_init(
    init: S.Stmt,
    inner_realize: S.BlockRealize,
    inner_loops: list[S.For],
    sch: ScheduleState,
    name: str,
) -> S.Stmt:
    """The outer block's init: the old init in a block ``<name>_init`` over the inner spatial
    iter vars it uses, under copies of the inner loops those are bound to."""
    inner = inner_realize.block
    subst: dict[E.Var, E.PrimExpr] = {}
    iters, values = [], []
    init_uses = used_vars(init)
    for iv, value in zip(inner.iter_vars, inner_realize.iter_values):
        if iv.iter_type == E.IterVarType.DataPar and id(iv.var) in init_uses:
            new = E.IterVar(iv.dom, E.Var(f"{iv.var.name_hint}_init", iv.var.dtype), iv.iter_type)
            subst[iv.var] = new.var
            iters.append(new)
            values.append(value)
    block = S.Block(iters, [], inner.writes, unique_block_name(sch, f"{name}_init"), init)
    bound = used_vars(values)
    # The inner loops the init does not copy (reduction loops) sit at their first iteration.
    unbound = {id(lp.loop_var) for lp in inner_loops} - bound
    predicate = at_first_iteration(inner_realize.predicate, inner_loops, unbound)
    stmt: S.Stmt = S.BlockRealize(values, predicate, block)
    for lp in reversed(inner_loops):
        if id(lp.loop_var) in bound:
            new_var = E.Var(lp.loop_var.name_hint, lp.loop_var.dtype)
            subst[lp.loop_var] = new_var
            stmt = lp.with_fields(loop_var=new_var, body=stmt)
    return substitute(stmt, subst)
