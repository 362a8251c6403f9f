"""``rfactor``: turn one reduction loop into a spatial axis of partial results.

For ``B[vi] = B[vi] + A[vi, vk]`` with ``k`` split into ``k_0, k_1``, ``rfactor(k_1, 0)``
makes a block ``B_rf`` that computes ``B_rf[vk_1, vi]``, the partial sums over ``k_0`` for each
value of ``k_1`` (a loop that now carries no dependence, so it can run in parallel or be
vectorized), and rewrites ``B`` to reduce ``B_rf`` over ``k_1``. Sums, products, max and min
are recognised from the block's update (``B = B + x``, ``B = B * x``, ``T.max(B, x)``,
``T.min(B, x)``).

A block under a split that does not divide its loop has a predicate (``T.where(k_0 * 16 + k_1
< 10)``). A partial result is started by the block's init on its first reduction iteration,
and TVM's rfactor leaves the write-back reading every partial result, so a partial result
whose iterations the predicate all leaves out (``k_1 >= 10``) would be read unwritten. Here
the write-back only reads the partial results whose first iteration runs (the predicate with
the reduction loops at their start: ``T.where(k_1 < 10)``), which is exactly the ones that
have iterations when the predicate only ever turns false as a reduction loop grows, as a
split's ``fused < extent`` does; other predicates on reduction loops are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars
from ...buffer import Buffer, BufferRegion, decl_buffer
from ...stmt_functor import StmtExprMutator, post_order_visit, substitute
from ..state import BlockRV, LoopRV, ScheduleState
from .block_scope import (
    add_alloc,
    at_first_iteration,
    child_blocks,
    conjuncts,
    loop_range,
    point_region,
    replace_with_seq,
    same_expr,
    unique_block_name,
    used_vars,
)

# The update's operation -> (the reducer's name, its identity when it must be checked).
_REDUCERS: dict[type, tuple[str, int | None]] = {
    E.Add: ("sum", 0),
    E.Mul: ("product", 1),
    E.Max: ("max", None),  # max/min are idempotent: any init value gives the same result
    E.Min: ("min", None),
}


@dataclass
class _Reduction:
    """``store.buffer[store.indices] = combine(store.buffer[...], rhs)``, starting at ``init``."""

    store: S.BufferStore
    init: E.PrimExpr
    combine: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]
    rhs: E.PrimExpr


def rfactor(sch: ScheduleState, loop: LoopRV, factor_axis: int) -> BlockRV:
    rf_loop = sch.loop(loop)
    lname = repr(rf_loop.loop_var.name_hint)
    realizes = list(child_blocks(rf_loop))
    if len(realizes) != 1:
        raise ScheduleError(
            f"rfactor: loop {lname} must contain exactly one block, it contains {len(realizes)}"
        )
    realize = realizes[0]
    block = realize.block
    red = _match_reduction(block)
    if rf_loop.kind != S.ForKind.SERIAL:
        raise ScheduleError(f"rfactor: loop {lname} must be a serial loop, it is {rf_loop.kind}")
    loops = sch.loops_above(realize)
    spatial, reduce = _loops_used_by(realize)
    _check_loops(block, loops, rf_loop, spatial, reduce, realize)
    ndim = len(red.store.buffer.shape)
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError(
            f"rfactor: factor_axis {factor_axis} is out of range for buffer "
            f"{red.store.buffer.name!r} of {ndim} dimension(s): use {-(ndim + 1)} to {ndim}"
        )
    axis = factor_axis + ndim + 1 if factor_axis < 0 else factor_axis
    dropped = {id(lp.loop_var) for lp in loops if id(lp.loop_var) in reduce and lp is not rf_loop}
    wb_predicate = _write_back_predicate(realize, loops, rf_loop, dropped)

    buffer = red.store.buffer
    shape = list(buffer.shape)
    shape.insert(axis, rf_loop.extent)
    rf_buffer = decl_buffer(shape, buffer.dtype, f"{buffer.name}_rf", scope=buffer.scope)
    rf_name = unique_block_name(sch, f"{block.name_hint}_rf")
    rf_realize, rf_iter = _rf_block(realize, red, loops, rf_loop, rf_buffer, axis, rf_name)
    wb_realize = _write_back_block(realize, red, rf_loop, rf_buffer, axis, rf_iter, wb_predicate)

    # The rfactor block runs under copies of all the loops; the write-back keeps the rfactor
    # loop and the spatial loops.
    new_vars = {lp.loop_var: E.Var(lp.loop_var.name_hint, lp.loop_var.dtype) for lp in loops}
    rf_nest: S.Stmt = rf_realize.with_fields(
        iter_values=tuple(substitute(v, new_vars) for v in rf_realize.iter_values),
        predicate=substitute(rf_realize.predicate, new_vars),
    )
    for lp in reversed(loops):
        rf_nest = lp.with_fields(loop_var=new_vars[lp.loop_var], body=rf_nest)
    write_back = _WriteBackNest(realize, wb_realize, {id(lp.loop_var) for lp in loops}, dropped)
    replace_with_seq(sch, loops[0], [rf_nest, write_back.visit(loops[0])])
    add_alloc(sch, rf_nest, rf_buffer)
    return BlockRV(rf_name)


# ---------------------------------------------------------------------------- checks
def _match_reduction(block: S.Block) -> _Reduction:
    name = repr(block.name_hint)

    def fail(why: str) -> ScheduleError:
        return ScheduleError(f"rfactor: block {name} is not a reduction block: {why}")

    if block.init is None:
        raise fail("it has no T.init()")
    if not any(iv.iter_type == E.IterVarType.CommReduce for iv in block.iter_vars):
        raise fail("it has no reduction iter var (T.axis.reduce)")
    for iv in block.iter_vars:
        if iv.iter_type not in (E.IterVarType.DataPar, E.IterVarType.CommReduce):
            raise fail(f"iter var {iv.var.name_hint!r} is neither spatial nor reduction")
    store, init = block.body, block.init
    if not isinstance(store, S.BufferStore):
        raise fail("its body is not a single store B[...] = ...")
    if not (
        isinstance(init, S.BufferStore)
        and init.buffer is store.buffer
        and all(same_expr(a, b) for a, b in zip(init.indices, store.indices))
    ):
        raise fail("its T.init() does not store to the element the update writes")

    def is_self(e: E.PrimExpr) -> bool:
        return (
            isinstance(e, E.BufferLoad)
            and e.buffer is store.buffer
            and all(same_expr(a, b) for a, b in zip(e.indices, store.indices))
        )

    value = store.value
    kind = _REDUCERS.get(type(value))
    if kind is None or not (is_self(value.a) or is_self(value.b)):
        raise fail(
            f"its update of {store.buffer.name!r} is not a sum, product, max or min of "
            f"{store.buffer.name}[...] itself"
        )
    rhs = value.b if is_self(value.a) else value.a
    if any(isinstance(n, E.BufferLoad) and n.buffer is store.buffer for n in _loads(rhs)):
        raise fail(f"the reduced value reads {store.buffer.name!r} again")
    reducer, identity = kind
    if identity is not None and not (
        isinstance(init.value, E.IntImm | E.FloatImm) and init.value.value == identity
    ):
        raise fail(f"a {reducer} must start from {identity} in T.init()")
    return _Reduction(store, init.value, type(value), rhs)


def _loads(expr: E.PrimExpr) -> list[E.BufferLoad]:
    found: list[E.BufferLoad] = []
    post_order_visit(expr, lambda n: found.append(n) if isinstance(n, E.BufferLoad) else None)
    return found


def _loops_used_by(realize: S.BlockRealize) -> tuple[dict[int, str], dict[int, str]]:
    """Loop var id -> the name of an iter var using it, for spatial and reduction iter vars."""
    spatial: dict[int, str] = {}
    reduce: dict[int, str] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        table = reduce if iv.iter_type == E.IterVarType.CommReduce else spatial
        for var in collect_vars(value):
            table.setdefault(id(var), iv.var.name_hint)
    return spatial, reduce


def _check_loops(
    block: S.Block,
    loops: list[S.For],
    rf_loop: S.For,
    spatial: dict[int, str],
    reduce: dict[int, str],
    realize: S.BlockRealize,
) -> None:
    name, lname = repr(block.name_hint), repr(rf_loop.loop_var.name_hint)
    key = id(rf_loop.loop_var)
    if key in spatial:
        raise ScheduleError(
            f"rfactor: loop {lname} is a spatial loop of block {name}: the spatial iter var "
            f"{spatial[key]!r} uses it; rfactor needs a loop only reduction iter vars use"
        )
    if key not in reduce:
        raise ScheduleError(
            f"rfactor: loop {lname} is not used by any reduction iter var of block {name}"
        )
    if next(child_blocks(loops[0]), None) is not realize:
        raise ScheduleError(
            f"rfactor: block {name} must be the first block under its outermost loop "
            f"{loops[0].loop_var.name_hint!r}"
        )
    under_reduction = False
    for lp in loops:
        var = id(lp.loop_var)
        if var in spatial and var in reduce:
            raise ScheduleError(
                f"rfactor: loop {lp.loop_var.name_hint!r} of block {name} is used by both a "
                f"spatial ({spatial[var]!r}) and a reduction ({reduce[var]!r}) iter var"
            )
        if var in reduce and not under_reduction:
            under_reduction = True
            if len(list(child_blocks(lp))) != 1:
                raise ScheduleError(
                    f"rfactor: reduction loop {lp.loop_var.name_hint!r} of block {name} must "
                    "contain only that block"
                )
        elif (
            under_reduction
            and var not in spatial
            and var not in reduce
            and not (isinstance(lp.extent, E.IntImm) and lp.extent.value == 1)
        ):
            raise ScheduleError(
                f"rfactor: loop {lp.loop_var.name_hint!r} under a reduction loop of block "
                f"{name} is used by no iter var"
            )


def _write_back_predicate(
    realize: S.BlockRealize, loops: list[S.For], rf_loop: S.For, dropped: set[int]
) -> E.PrimExpr:
    """The predicate of the write-back block: the block's predicate with the reduction loops
    it loses at their first iteration (see the module docstring). Raises unless each conjunct
    on a reduction loop can only turn false as that loop grows."""
    analyzer = Analyzer()
    for lp in loops:
        analyzer.bind(lp.loop_var, loop_range(lp))
    reduction = dropped | {id(rf_loop.loop_var)}
    for cond in conjuncts(realize.predicate):
        for var in collect_vars(cond):
            if id(var) in reduction and not _grows_false(analyzer, cond, var):
                raise ScheduleError(
                    f"rfactor: the predicate {cond.script()} of block "
                    f"{realize.block.name_hint!r} may hold at a later iteration of reduction "
                    f"loop {var.name_hint!r} but not at its first, where the partial result "
                    "starts; rfactor needs predicates that only turn false as a reduction "
                    "loop grows (such as a split's)"
                )
    return at_first_iteration(realize.predicate, loops, dropped)


# ``a < b`` and friends as (the side that must stay below, the other side).
_BELOW: dict[type, Callable[[E.CmpExpr], tuple[E.PrimExpr, E.PrimExpr]]] = {
    E.LT: lambda c: (c.a, c.b),
    E.LE: lambda c: (c.a, c.b),
    E.GT: lambda c: (c.b, c.a),
    E.GE: lambda c: (c.b, c.a),
}


def _grows_false(analyzer: Analyzer, cond: E.PrimExpr, var: E.Var) -> bool:
    """Whether ``cond`` is a comparison whose low side minus its high side never decreases
    when ``var`` steps up by one (so once false, it stays false)."""
    sides = _BELOW.get(type(cond))
    if sides is None:
        return False
    low, high = sides(cond)  # type: ignore[arg-type]
    gap = low - high
    step = analyzer.simplify(substitute(gap, {var: var + 1}) - gap)
    return analyzer.can_prove(step >= 0)


# ---------------------------------------------------------------------------- new blocks
def _rf_block(
    realize: S.BlockRealize,
    red: _Reduction,
    loops: list[S.For],
    rf_loop: S.For,
    rf_buffer: Buffer,
    axis: int,
    name: str,
) -> tuple[S.BlockRealize, E.IterVar]:
    """The block computing the partial reductions, bound to the original loop variables.

    Its iter vars: a spatial one for the rfactor loop, the old iter vars that do not use the
    rfactor loop, and a reduction iter var per other loop that an old reduction iter var
    using the rfactor loop was bound to (that old iter var becomes an expression of them).
    """
    block = realize.block
    rf_iter = E.IterVar(
        loop_range(rf_loop),
        E.Var(f"v{rf_loop.loop_var.name_hint}", rf_loop.loop_var.dtype),
        E.IterVarType.DataPar,
    )
    loop_of = {id(lp.loop_var): lp for lp in loops}
    loop_to_iter: dict[E.Var, E.PrimExpr] = {rf_loop.loop_var: rf_iter.var}
    iters, values = [rf_iter], [rf_loop.loop_var]
    var_map: dict[E.Var, E.PrimExpr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == E.IterVarType.DataPar or id(rf_loop.loop_var) not in used_vars(value):
            iters.append(iv)
            values.append(value)
            continue
        for var in collect_vars(value):
            lp = loop_of.get(id(var))
            if lp is None or var in loop_to_iter:
                continue
            new = E.IterVar(
                loop_range(lp), E.Var(f"v{var.name_hint}", var.dtype), E.IterVarType.CommReduce
            )
            loop_to_iter[var] = new.var
            iters.append(new)
            values.append(var)
        var_map[iv.var] = substitute(value, loop_to_iter)
    indices = list(red.store.indices)
    indices.insert(axis, rf_iter.var)
    init: S.Stmt | None = None
    if any(iv.iter_type == E.IterVarType.CommReduce for iv in iters):
        update = red.combine(E.BufferLoad(rf_buffer, indices), red.rhs)
        init = substitute(S.BufferStore(rf_buffer, red.init, indices), var_map)
    else:
        # Each partial result is a single term: store it, nothing to reduce.
        update = red.rhs
    body = S.BufferStore(rf_buffer, update, indices)
    writes = []
    for region in block.writes:
        ranges = list(region.region)
        ranges.insert(axis, E.Range.from_min_extent(rf_iter.var, E.make_const(1, "int32")))
        writes.append(BufferRegion(rf_buffer, ranges))
    rf_block = S.Block(
        iters,
        [substitute(r, var_map) for r in block.reads],
        [substitute(r, var_map) for r in writes],
        name,
        substitute(body, var_map),
        init,
        annotations=block.annotations,
    )
    return S.BlockRealize(values, realize.predicate, rf_block), rf_iter


def _write_back_block(
    realize: S.BlockRealize,
    red: _Reduction,
    rf_loop: S.For,
    rf_buffer: Buffer,
    axis: int,
    rf_iter: E.IterVar,
    predicate: E.PrimExpr,
) -> S.BlockRealize:
    """The original block, now reducing ``rf_buffer`` over the rfactor loop."""
    block = realize.block
    wb_iter = E.IterVar(
        loop_range(rf_loop),
        E.Var(f"v{rf_loop.loop_var.name_hint}", rf_loop.loop_var.dtype),
        E.IterVarType.CommReduce,
    )
    iters, values = [wb_iter], [rf_loop.loop_var]
    var_map: dict[E.Var, E.PrimExpr] = {rf_iter.var: wb_iter.var}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == E.IterVarType.DataPar:
            new = E.IterVar(iv.dom, E.Var(iv.var.name_hint, iv.var.dtype), iv.iter_type)
            var_map[iv.var] = new.var
            iters.append(new)
            values.append(value)
    buffer = red.store.buffer
    indices = [substitute(i, var_map) for i in red.store.indices]
    rf_indices = list(indices)
    rf_indices.insert(axis, wb_iter.var)
    rf_load = E.BufferLoad(rf_buffer, rf_indices)
    wb_block = S.Block(
        iters,
        [point_region(rf_buffer, rf_indices)],
        [point_region(buffer, indices)],
        block.name_hint,
        S.BufferStore(buffer, red.combine(E.BufferLoad(buffer, indices), rf_load), indices),
        S.BufferStore(buffer, substitute(red.init, var_map), indices),
        annotations=block.annotations,
    )
    return S.BlockRealize(values, predicate, wb_block)


class _WriteBackNest(StmtExprMutator):
    """The original loop nest with the write-back block in place of the reduction block and
    the reduction loops other than the rfactor loop removed."""

    def __init__(
        self, old: S.BlockRealize, new: S.BlockRealize, loop_ids: set[int], dropped: set[int]
    ):
        self.old, self.new, self.loop_ids, self.dropped = old, new, loop_ids, dropped

    def visit_block_realize_(self, op: S.BlockRealize) -> S.Stmt:
        return self.new if op is self.old else op

    def visit_for_(self, op: S.For) -> S.Stmt:
        if id(op.loop_var) not in self.loop_ids:
            return op
        body = self.visit(op.body)
        return body if id(op.loop_var) in self.dropped else op.with_fields(body=body)

    def visit_seq_stmt_(self, op: S.SeqStmt) -> S.Stmt:
        return S.SeqStmt.flatten([self.visit(s) for s in op.seq])
