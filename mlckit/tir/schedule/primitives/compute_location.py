"""Compute location: ``compute_at`` and ``reverse_compute_at``.

Both primitives move a block under a loop of a block it depends on and regenerate the moved
block's loops so that, per iteration of that loop, it covers exactly the region the other
side needs (``compute_at``: what the consumers read) or provides (``reverse_compute_at``: what
the producers write). They are one mechanism, :func:`_move_under_loop`, seen from either end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars
from ...buffer import BufferRegion
from ...stmt_functor import substitute
from ..state import BlockRV, LoopRV, ScheduleState, _walk_until_block
from .block_scope import (
    check_sole_writer,
    conjunction,
    conjuncts,
    edit_function,
    in_iter_vars,
    insert_stmt,
    loop_range,
    neighbours,
    relax_region,
    removal_root,
    restates_domains,
    same_expr,
    scope_block,
    used_vars,
)
from .compute_inline import compute_inline


def compute_at(
    sch: ScheduleState,
    block: BlockRV,
    loop: LoopRV | str,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    if isinstance(loop, str):
        if loop not in ("root", "inline"):
            raise ScheduleError(f"compute_at: {loop!r} is not a loop, 'root' or 'inline'")
        if loop == "inline":
            compute_inline(sch, block)
        return
    _move_under_loop(sch, "compute_at", block, loop, preserve_unit_loops, index)


def reverse_compute_at(
    sch: ScheduleState,
    block: BlockRV,
    loop: LoopRV,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    _move_under_loop(sch, "reverse_compute_at", block, loop, preserve_unit_loops, index)


# ---------------------------------------------------------------------- the shared mechanism
def _move_under_loop(
    sch: ScheduleState,
    kind: str,
    block_rv: BlockRV,
    loop_rv: LoopRV,
    preserve_unit_loops: bool,
    index: int,
) -> None:
    """Check, build the block's new loop nest over what one iteration of the loop needs, and
    splice: the block leaves its place and the nest goes into the loop's body at the chosen
    position."""
    realize = sch.block_realize(block_rv)
    target = sch.loop(loop_rv)
    producers, consumers, inner_loops = _check_movable(sch, kind, realize, target)
    name = repr(realize.block.name_hint)
    position = _insertion_point(kind, name, target, index, producers, consumers)
    required = consumers if kind == "compute_at" else producers
    nest = _moved_nest(sch, kind, realize, target, required, inner_loops, preserve_unit_loops)

    def insert(stmt: S.Stmt) -> list[S.Stmt]:
        loop = cast(S.For, stmt)  # the rebuilt ``target``: a mutator rebuilds a For as a For
        return [loop.with_fields(body=insert_stmt(loop.body, position, nest))]

    edit_function(
        sch, {id(removal_root(sch, realize, kind)): lambda _: [], id(target): insert}, kind
    )


def _check_movable(
    sch: ScheduleState, kind: str, realize: S.BlockRealize, target: S.For
) -> tuple[list[S.BlockRealize], list[S.BlockRealize], dict[int, list[S.For]]]:
    """Check that ``target`` is a loop of the block's scope outside the block, that the block
    alone writes its outputs and that every consumer (compute_at) or producer
    (reverse_compute_at) of it is under ``target``. Return the producers, the consumers and,
    for each of those that must be under ``target`` (by id), its loops inside ``target``."""
    forward = kind == "compute_at"
    name, loop_name = repr(realize.block.name_hint), repr(target.loop_var.name_hint)
    if any(loop is target for loop in sch.loops_above(realize)):
        raise ScheduleError(
            f"{kind}: loop {loop_name} already encloses block {name}; choose a loop of "
            f"{'a consumer' if forward else 'a producer'} outside it"
        )
    scope = scope_block(sch, realize)
    if scope is not scope_block(sch, target):
        raise ScheduleError(f"{kind}: block {name} and loop {loop_name} are in different blocks")
    check_sole_writer(kind, realize, scope)

    producers, consumers = neighbours(realize, scope)
    required = consumers if forward else producers
    if not required:
        raise ScheduleError(
            f"{kind}: block {name} has no {'consumer' if forward else 'producer'} block to be "
            "computed at"
        )
    inner_loops: dict[int, list[S.For]] = {}
    for other in required:
        loops = sch.loops_above(other)
        position = next((i for i, loop in enumerate(loops) if loop is target), None)
        if position is None:
            raise ScheduleError(
                f"{kind}: loop {loop_name} does not enclose block {other.block.name_hint!r}, "
                f"a {'consumer' if forward else 'producer'} of block {name}; every one must "
                f"be under the loop"
            )
        inner_loops[id(other)] = loops[position + 1 :]
    return producers, consumers, inner_loops


def _moved_nest(
    sch: ScheduleState,
    kind: str,
    realize: S.BlockRealize,
    target: S.For,
    required: list[S.BlockRealize],
    inner_loops: dict[int, list[S.For]],
    preserve_unit_loops: bool,
) -> S.Stmt:
    """The block in its new loops: iter var ranges covering the region of each shared buffer
    that the ``required`` blocks read (compute_at) or write (reverse_compute_at) in one
    iteration of ``target``, with the predicates the block must keep there."""
    forward = kind == "compute_at"
    block = realize.block
    name, loop_name = repr(block.name_hint), repr(target.loop_var.name_hint)
    outer = [*sch.loops_above(target), target]
    analyzer = Analyzer()
    for loop in outer:
        analyzer.bind(loop.loop_var, loop_range(loop))
    regions = _needed_regions(block, target, outer, required, inner_loops, analyzer, forward)
    own = block.writes if forward else block.reads
    ranges = _iter_ranges(kind, analyzer, block, own, regions, exact=not forward)
    conditions = _carried_predicate(kind, sch, realize, outer)
    if not forward:
        _check_producers_complete(block, loop_name, required, outer)
        _check_reads_produced(name, loop_name, block, ranges, regions, analyzer)
        _check_covered(name, loop_name, block, ranges, outer)
        conditions += _producers_running(name, loop_name, required, outer)
    return _loop_nest(analyzer, block, ranges, preserve_unit_loops, conditions)


def _needed_regions(
    block: S.Block,
    target: S.For,
    outer: list[S.For],
    required: list[S.BlockRealize],
    inner_loops: dict[int, list[S.For]],
    analyzer: Analyzer,
    forward: bool,
) -> dict[int, list[tuple[E.PrimExpr, E.PrimExpr]]]:
    """Per buffer (by id) that ``block`` shares with the ``required`` blocks, the inclusive
    bounds of each dimension those blocks need (compute_at) or provide (reverse_compute_at)
    per iteration of ``target``; ``outer`` are ``target`` and the loops around it."""
    name, loop_name = repr(block.name_hint), repr(target.loop_var.name_hint)
    shared = {id(r.buffer) for r in (block.writes if forward else block.reads)}
    regions: dict[int, list[tuple[E.PrimExpr, E.PrimExpr]]] = {}
    # A shared-memory buffer serves every thread of a GPU thread block: the region computed
    # at the loop is what all its threads need (TVM relaxes by storage scope the same way).
    block_threads = {
        loop.loop_var: loop_range(loop) for loop in outer if S.is_thread_loop(loop, "threadIdx")
    }
    # How many producer regions write each buffer: one alone must have no holes (below).
    writers = Counter(id(r.buffer) for other in required for r in other.block.writes)
    for other in required:
        bindings = dict(zip((iv.var for iv in other.block.iter_vars), other.iter_values))
        dom = {loop.loop_var: loop_range(loop) for loop in inner_loops[id(other)]}
        for region in other.block.reads if forward else other.block.writes:
            if id(region.buffer) not in shared:
                continue
            if region.buffer.scope == "shared":
                dom = {**block_threads, **dom}
            if not forward and writers[id(region.buffer)] == 1:
                _check_dense(name, loop_name, region, bindings, dom, analyzer)
            relaxed = relax_region(region, bindings, dom, analyzer)
            bounds = [
                (rng.min, analyzer.simplify(rng.min + rng.extent - 1)) for rng in relaxed.region
            ]
            regions[id(region.buffer)] = _union(analyzer, regions.get(id(region.buffer)), bounds)
    return regions


def _check_dense(
    block_name: str,
    loop_name: str,
    region: BufferRegion,
    bindings: dict[E.Var, E.PrimExpr],
    dom: dict[E.Var, E.Range],
    analyzer: Analyzer,
) -> None:
    """Refuse a producer region with holes: reverse_compute_at runs the consumer over the
    bounding box of what the producer writes per iteration, so where the producer writes
    every 4th row, the consumer would also copy the 3 rows between, which it never computed.

    A hole in the values one dimension's index takes is a hole in the box. An index affine in
    the loops is judged: sorted by stride, each loop must step by at most one more than the
    span of the loops before it. One through floordiv/floormod that moves with the loops
    (a fused loop split again) is refused: its values need not fill their bounding box.
    """
    for dim, rng in enumerate(substitute(region, dict(bindings)).region):
        strides = _affine_strides(rng, dom, analyzer) if E.is_const_int(rng.extent, 1) else None
        moving = [
            v for v in collect_vars(rng.min) if v in dom and not E.is_const_int(dom[v].extent, 1)
        ]
        if strides is None and E.is_const_int(rng.extent, 1) and moving:
            raise ScheduleError(
                f"reverse_compute_at: under loop {loop_name}, the producer writes dimension "
                f"{dim} of buffer {region.buffer.name!r} at {rng.min.script()}, which loop "
                f"{moving[0].name_hint!r} moves in steps that are not constant, so the "
                f"elements block {block_name} would read there may not all be written; pick "
                "an outer loop (or a loop nest without a split fused loop)"
            )
        span = 0
        for stride, extent, var in sorted(strides or [], key=lambda t: t[0]):
            if stride > span + 1:
                raise ScheduleError(
                    f"reverse_compute_at: under loop {loop_name}, the producer writes "
                    f"dimension {dim} of buffer {region.buffer.name!r} with a stride of "
                    f"{stride} (loop {var.name_hint!r}), leaving holes that block "
                    f"{block_name} would copy without their values; make the loops inside "
                    "the target loop cover a contiguous tile (e.g. split the other way "
                    "round) or pick an outer loop"
                )
            span += stride * (extent - 1)


def _affine_strides(
    rng: E.Range, dom: dict[E.Var, E.Range], analyzer: Analyzer
) -> list[tuple[int, int, E.Var]] | None:
    """(|stride|, extent, loop) of each loop of ``dom`` the index ``rng.min`` moves with, or
    None when the index is not affine in them with constant strides and extents."""
    strides = []
    for var in collect_vars(rng.min):
        if var not in dom or E.is_const_int(dom[var].extent, 1):
            continue
        step = analyzer.simplify(substitute(rng.min, {var: var + 1}) - rng.min)
        extent = analyzer.simplify(dom[var].extent)
        if not (isinstance(step, E.IntImm) and isinstance(extent, E.IntImm)):
            return None
        strides.append((abs(step.value), extent.value, var))
    return strides


def _insertion_point(
    kind: str,
    name: str,
    target: S.For,
    index: int,
    producers: Sequence[S.BlockRealize],
    consumers: Sequence[S.BlockRealize],
) -> int:
    """Where among the statements of ``target``'s body the moved block may go: after every
    one holding a producer of it, before every one holding a consumer."""
    children = list(target.body.seq) if isinstance(target.body, S.SeqStmt) else [target.body]
    holders = [{id(r) for r in _walk_until_block(child)} for child in children]
    first = 0
    last = len(children)
    for i, ids in enumerate(holders):
        if any(id(p) in ids for p in producers):
            first = i + 1
        if last == len(children) and any(id(c) in ids for c in consumers):
            last = i
    loop_name = repr(target.loop_var.name_hint)
    if first > last:
        raise ScheduleError(
            f"{kind}: no position under loop {loop_name} comes after the producers and before "
            f"the consumers of block {name}"
        )
    if index == -1:
        return last
    if index == -2:
        return first
    if not first <= index <= last:
        raise ScheduleError(
            f"{kind}: index {index} puts block {name} where it breaks a dependence; under "
            f"loop {loop_name} it can go at positions {first} to {last} (or -1, -2)"
        )
    return index


def _union(
    analyzer: Analyzer,
    old: list[tuple[E.PrimExpr, E.PrimExpr]] | None,
    new: list[tuple[E.PrimExpr, E.PrimExpr]],
) -> list[tuple[E.PrimExpr, E.PrimExpr]]:
    if old is None:
        return new
    return [
        (_tighter(analyzer, lo_a, lo_b, E.Min), _tighter(analyzer, hi_a, hi_b, E.Max))
        for (lo_a, hi_a), (lo_b, hi_b) in zip(old, new)
    ]


def _tighter(analyzer: Analyzer, a: E.PrimExpr, b: E.PrimExpr, op: type) -> E.PrimExpr:
    """``op(a, b)`` (Min or Max), decided statically when the analyzer can."""
    if analyzer.can_prove(a <= b):
        return a if op is E.Min else b
    if analyzer.can_prove(b <= a):
        return b if op is E.Min else a
    return analyzer.simplify(op(a, b))


def _iter_ranges(
    kind: str,
    analyzer: Analyzer,
    block: S.Block,
    own: Sequence[BufferRegion],
    regions: dict[int, list[tuple[E.PrimExpr, E.PrimExpr]]],
    *,
    exact: bool,
) -> list[tuple[E.PrimExpr, E.PrimExpr]]:
    """The inclusive range of each iter var of ``block`` that covers ``regions``.

    ``own`` is the block's side of the shared buffers (its writes for compute_at, its reads
    for reverse_compute_at). A dimension indexed ``v + c`` (extent 1) pins iter var ``v`` to
    the needed range shifted by ``c``; an iter var no dimension pins keeps its whole domain.
    That over-approximation is harmless for a producer, but a consumer run over its whole
    domain would read what is not produced yet, so with ``exact`` an iter var used in a
    dimension of another form is an error.
    """
    iter_vars = {id(iv.var): iv for iv in block.iter_vars}
    pinned: dict[int, tuple[E.PrimExpr, E.PrimExpr]] = {}
    unsolved: list[E.Var] = []
    for region in own:
        needed = regions.get(id(region.buffer))
        if needed is None:
            continue
        for rng, (lo, hi) in zip(region.region, needed):
            used = [v for v in collect_vars(rng.min) if id(v) in iter_vars]
            if not used:
                continue
            offset = analyzer.simplify(rng.min - used[0])
            if (
                len(used) > 1
                or not E.is_const_int(rng.extent, 1)
                or any(id(v) in iter_vars for v in collect_vars(offset))
            ):
                unsolved.extend(used)
                continue
            span = (analyzer.simplify(lo - offset), analyzer.simplify(hi - offset))
            old = pinned.get(id(used[0]))
            if old is not None:
                span = (
                    _tighter(analyzer, old[0], span[0], E.Max),
                    _tighter(analyzer, old[1], span[1], E.Min),
                )
            pinned[id(used[0])] = span
    if exact:
        loose = [v.name_hint for v in unsolved if id(v) not in pinned]
        if loose:
            raise ScheduleError(
                f"{kind}: block {block.name_hint!r} reads with iter var {loose[0]!r} in an index "
                "that is not 'iter var + offset', so its range cannot be derived from what the "
                "producers write"
            )
    ranges = []
    for iv in block.iter_vars:
        span = pinned.get(id(iv.var))
        if span is None:
            span = (iv.dom.min, analyzer.simplify(iv.dom.min + iv.dom.extent - 1))
        ranges.append(span)
    return ranges


def _carried_predicate(
    kind: str, sch: ScheduleState, realize: S.BlockRealize, outer: list[S.For]
) -> list[E.PrimExpr]:
    """The conditions of the moved block's predicate that its new loops must keep, in terms
    of its iter vars (and of the loops it stays under).

    A conjunct that bounds a binding to its iter var's domain (``i_0 * 4 + i_1 < 7`` for
    ``vi = i_0 * 4 + i_1`` of extent 7) is implied by the new loops, which run over the
    domains. Others relate iter vars (``k_0 * 5 + k_1 < 13`` after an rfactor binds ``vk_0`` to
    ``k_0`` and ``vk_1`` to ``k_1``): they are carried over by substituting the iter vars for
    their loops, and a conjunct that cannot be put in terms of them is refused."""
    block = realize.block
    staying = {id(lp.loop_var) for lp in outer}
    leaving = {id(lp.loop_var) for lp in sch.loops_above(realize)} - staying
    inside = [v.name_hint for v in collect_vars(block) if id(v) in leaving]
    if inside:
        raise ScheduleError(
            f"{kind}: block {block.name_hint!r} uses loop {inside[0]!r} inside it, not through "
            "an iter var, so it cannot leave that loop"
        )
    carried = []
    for cond in conjuncts(realize.predicate):
        cond = in_iter_vars(cond, realize)
        if restates_domains(cond, block):
            continue
        loose = [v.name_hint for v in collect_vars(cond) if id(v) in leaving]
        if loose:
            raise ScheduleError(
                f"{kind}: the predicate {cond.script()} of block {block.name_hint!r} uses "
                f"loop {loose[0]!r}, which it leaves, in a way its iter vars cannot express"
            )
        carried.append(cond)
    return carried


def _check_producers_complete(
    consumer: S.Block,
    loop_name: str,
    producers: Sequence[S.BlockRealize],
    outer: list[S.For],
) -> None:
    """Per iteration of the target loop, the producers must finish what the consumer reads
    there. Refused: an accumulating consumer under one of a producer's reduction loops (the
    producer's results are partial until the reduction ends, and the consumer would add them
    once per step; one that overwrites ends with the last, complete, step), and a
    producer predicate that skips part of its tile inside the target loop for another reason
    than its iter vars' domains (a nested split's ``ax_1 * 4 + ax_2 < 5``): the consumer's
    region, relaxed over the inner loops, would hold elements nobody writes there."""
    name = repr(consumer.name_hint)
    around = {id(lp.loop_var): lp.loop_var.name_hint for lp in outer}
    accumulates = consumer.init is not None or any(
        iv.iter_type != E.IterVarType.DataPar for iv in consumer.iter_vars
    )
    for producer in producers:
        block = producer.block
        for iv, value in zip(block.iter_vars, producer.iter_values):
            reducing = [around[key] for key in used_vars(value) if key in around]
            if accumulates and iv.iter_type == E.IterVarType.CommReduce and reducing:
                raise ScheduleError(
                    f"reverse_compute_at: loop {loop_name} is inside loop {reducing[0]!r}, "
                    f"which reduces producer {block.name_hint!r}: block {name} would read "
                    "partial results once per step; pick a loop outside the reduction"
                )
        for cond in conjuncts(producer.predicate):
            inner = used_vars(cond) - set(around)
            if inner and not restates_domains(in_iter_vars(cond, producer), block):
                raise ScheduleError(
                    f"reverse_compute_at: producer {block.name_hint!r} skips part of its tile "
                    f"under loop {loop_name} ({cond.script()}): block {name} would read "
                    "elements nobody writes there; pick an outer loop"
                )


def _producers_running(
    name: str, loop_name: str, producers: Sequence[S.BlockRealize], outer: list[S.For]
) -> list[E.PrimExpr]:
    """The conditions under which the producers run at all in an iteration of the target
    loop, on loops around it that feed none of their iter vars (a unit loop split past its
    extent repeats them, with a predicate that lets only the first repetition through). The
    consumer runs under the same conditions: in a repetition the producers skip, it would
    read what they wrote in another iteration, which buffer compaction does not keep."""
    around = {id(lp.loop_var) for lp in outer}
    found = []
    for producer in producers:
        idle = around - used_vars(producer.iter_values)
        found.append([c for c in conjuncts(producer.predicate) if used_vars(c) <= idle])
    for other in found[1:]:
        if len(other) != len(found[0]) or not all(map(same_expr, other, found[0])):
            raise ScheduleError(
                f"reverse_compute_at: the producers of block {name} run under different "
                f"conditions in the iterations of loop {loop_name}"
            )
    return found[0] if found else []


def _check_reads_produced(
    name: str,
    loop_name: str,
    block: S.Block,
    ranges: Sequence[tuple[E.PrimExpr, E.PrimExpr]],
    regions: dict[int, list[tuple[E.PrimExpr, E.PrimExpr]]],
    analyzer: Analyzer,
) -> None:
    """Per iteration of the target loop, the consumer may read only what the producers have
    written in it: a tile block reading a whole row must not run where one element of the
    row was written (what other iterations wrote is not kept: buffer compaction allocates the
    buffer per iteration)."""
    dom = {
        iv.var: E.Range.from_min_extent(lo, analyzer.simplify(hi - lo + 1))
        for iv, (lo, hi) in zip(block.iter_vars, ranges)
    }
    for region in block.reads:
        produced = regions.get(id(region.buffer))
        if produced is None:
            continue
        for dim, (rng, (low, high)) in enumerate(zip(region.region, produced)):
            first = analyzer.int_set(rng.min, dom).min_value
            last = analyzer.int_set(rng.min + rng.extent - 1, dom).max_value
            if (
                first is None
                or last is None
                or not analyzer.can_prove(first >= low)
                or not analyzer.can_prove(last <= high)
            ):
                raise ScheduleError(
                    f"reverse_compute_at: under loop {loop_name}, block {name} would read "
                    f"dimension {dim} of buffer {region.buffer.name!r} over "
                    f"[{_text(first)}, {_text(last)}], beyond the [{low.script()}, "
                    f"{high.script()}] the producers write in one iteration; pick an outer loop"
                )


def _check_covered(
    name: str,
    loop_name: str,
    block: S.Block,
    ranges: Sequence[tuple[E.PrimExpr, E.PrimExpr]],
    outer: list[S.For],
) -> None:
    """Over all iterations of the target loop (and the loops around it), the consumer must
    still run over its whole domain: a padding block that reads its producer only inside the
    border would otherwise never write the border."""
    analyzer = Analyzer()
    dom = {lp.loop_var: loop_range(lp) for lp in outer}
    for iv, (lo, hi) in zip(block.iter_vars, ranges):
        first, last = analyzer.int_set(lo, dom).min_value, analyzer.int_set(hi, dom).max_value
        end = iv.dom.min + iv.dom.extent - 1
        if (
            first is None
            or last is None
            or not analyzer.can_prove(first <= iv.dom.min)
            or not analyzer.can_prove(last >= end)
        ):
            span = f"[{_text(first)}, {_text(last)}]"
            raise ScheduleError(
                f"reverse_compute_at: under loop {loop_name}, block {name} would run iter var "
                f"{iv.var.name_hint!r} over {span} only, not its whole domain "
                f"[{iv.dom.min.script()}, {analyzer.simplify(end).script()}]: the rest of "
                "what it computes does not come from the producers there"
            )


def _text(value: E.PrimExpr | None) -> str:
    return "?" if value is None else value.script()


def _loop_nest(
    analyzer: Analyzer,
    block: S.Block,
    ranges: Sequence[tuple[E.PrimExpr, E.PrimExpr]],
    preserve_unit_loops: bool,
    conditions: Sequence[E.PrimExpr],
) -> S.Stmt:
    """Loops ``ax0, ax1, ...`` over ``ranges`` around a realize of ``block`` bound to them.

    Where a range may stick out of its iter var's domain (a consumer tile past the end of a
    non-dividing split), the realize gets a predicate keeping the iter var inside; it also
    keeps ``conditions`` (on the iter vars, which it binds, and on the loops around).
    """
    loops: list[tuple[E.Var, E.PrimExpr, E.PrimExpr]] = []
    values: list[E.PrimExpr] = []
    guards: list[E.PrimExpr] = []
    for iv, (lo, hi) in zip(block.iter_vars, ranges):
        extent = analyzer.simplify(hi - lo + 1)
        if E.is_const_int(extent, 1) and not preserve_unit_loops:
            value = lo
        else:
            var = E.Var(f"ax{len(loops)}", iv.var.dtype)
            loops.append((var, E.make_const(0, var.dtype), extent))
            value = analyzer.simplify(lo + var)
        values.append(value)
        dom_lo = iv.dom.min
        dom_end = analyzer.simplify(iv.dom.min + iv.dom.extent)
        if not analyzer.can_prove(lo >= dom_lo):
            guards.append(dom_lo <= value)
        if not analyzer.can_prove(hi < dom_end):
            guards.append(value < dom_end)
    own = {iv.var: value for iv, value in zip(block.iter_vars, values)}
    guards += [substitute(cond, own) for cond in conditions]
    body: S.Stmt = S.BlockRealize(values, analyzer.simplify(conjunction(guards)), block)
    for var, start, extent in reversed(loops):
        body = S.For(var, start, extent, S.ForKind.SERIAL, body)
    return body
