"""Loop transformations: ``split``, ``fuse``, ``reorder``; the loop kinds ``parallel``,
``vectorize``, ``unroll`` and ``bind``; and ``annotate``/``unannotate`` of loops and blocks.

A primitive is a function ``impl(sch, ...)`` of the schedule's state, called by the
``Schedule`` method of its name. It reads the current function through the handles
(``sch.loop(rv)``, ``sch.block_realize(rv)``), builds new statements, swaps them in with
``sch.replace(old, new)``, and raises ScheduleError with the violated condition when it cannot
apply (the schedule then rolls back by itself).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from mlckit.arith import Analyzer, simplify
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars, expr_deep_equal
from ...stmt_functor import StmtExprMutator, post_order_visit, substitute
from ..state import BlockRV, LoopRV, ScheduleState, _walk_until_block


def split(
    sch: ScheduleState,
    loop: LoopRV,
    factors: Sequence[int | E.PrimExpr | None],
    preserve_unit_iters: bool = True,
    disable_predication: bool = False,
) -> list[LoopRV]:
    node = sch.loop(loop)
    dtype = node.loop_var.dtype
    analyzer = Analyzer()
    extent = node.extent
    if len(factors) < 2:
        raise ScheduleError(f"split: give at least two factors for loop {_name(node)}")
    unknown = [i for i, f in enumerate(factors) if f is None]
    if len(unknown) > 1:
        raise ScheduleError(f"split: at most one factor of loop {_name(node)} can be None")
    given = {i: _factor(f, dtype, node) for i, f in enumerate(factors) if f is not None}
    product = E.make_const(1, dtype)
    for value in given.values():
        product = product * value
    product = analyzer.simplify(product)
    inferred = analyzer.simplify(E.FloorDiv(extent + product - 1, product))
    extents = [given.get(i, inferred) for i in range(len(factors))]
    total = E.make_const(1, dtype)
    for value in extents:
        total = total * value
    total = analyzer.simplify(total)
    covers = analyzer.can_prove(total >= extent) if not expr_deep_equal(total, extent) else True
    if not covers:
        raise ScheduleError(
            f"split: the factors {_text(extents)} of loop {_name(node)} multiply to "
            f"{total}, less than its extent {extent}"
        )
    exact = expr_deep_equal(total, extent) or analyzer.can_prove_equal(total, extent)
    new_vars = [E.Var(f"{node.loop_var.name_hint}_{i}", dtype) for i in range(len(extents))]
    fused: E.PrimExpr = new_vars[0]
    for var, ext in zip(new_vars[1:], extents[1:]):
        fused = fused * ext + var
    fused = analyzer.simplify(fused)
    body = substitute(node.body, {node.loop_var: analyzer.simplify(node.min + fused)})
    if not exact and not disable_predication:
        body = add_predicate(body, fused < extent)
    for var, ext in reversed(list(zip(new_vars, extents))):
        body = S.For(var, E.make_const(0, dtype), ext, S.ForKind.SERIAL, body)
    sch.replace(node, body)
    return [LoopRV(v) for v in new_vars]


def _factor(value: int | E.PrimExpr, dtype: str, loop: S.For) -> E.PrimExpr:
    """A split factor as an expression of the loop's dtype: a positive integer constant, or an
    integer expression (a loop's extent must be a whole number of iterations)."""
    if isinstance(value, E.PrimExpr) and not value.dtype.startswith(("int", "uint")):
        raise ScheduleError(
            f"split: factor {value.script()} of loop {_name(loop)} has dtype {value.dtype}; "
            "factors must be integers"
        )
    factor = E.convert(int(value), dtype) if isinstance(value, numbers.Integral) else value
    if isinstance(factor, E.IntImm) and factor.value <= 0:
        raise ScheduleError(f"split: factor {factor.value} of loop {_name(loop)} must be positive")
    return factor


def add_predicate(stmt: S.Stmt, condition: E.PrimExpr) -> S.Stmt:
    """``stmt`` with ``condition`` and-ed into the predicate of each outermost block in it."""

    class AddPredicate(StmtExprMutator):
        def visit_block_realize_(self, op: S.BlockRealize) -> S.Stmt:
            predicate = condition if E.is_true(op.predicate) else E.And(op.predicate, condition)
            return op.with_fields(predicate=simplify(predicate))

    return AddPredicate().visit(stmt)


def fuse(
    sch: ScheduleState, *loops: LoopRV | Sequence[LoopRV], preserve_unit_iters: bool = True
) -> LoopRV:
    nodes = [sch.loop(rv) for rv in _loop_list("fuse", loops)]
    if not nodes:
        raise ScheduleError("fuse: give at least one loop to fuse")
    for outer, inner in pairwise(nodes):
        if outer.body is inner:
            continue
        if isinstance(outer.body, S.SeqStmt) and sch.parent_of(inner) is outer.body:
            raise ScheduleError(
                f"fuse: loop {_name(outer)} has other statements besides loop {_name(inner)}; "
                "a loop can be fused only with the loop that is the whole of its body"
            )
        raise ScheduleError(
            f"fuse: loop {_name(inner)} is not directly inside loop {_name(outer)}; give "
            "adjacent nested loops, outermost first"
        )
    analyzer = Analyzer()
    outer_vars: set[int] = set()
    for node in nodes:
        if node.annotations or node.thread_binding is not None:
            raise ScheduleError(
                f"fuse: loop {_name(node)} has annotations or a thread binding; only plain "
                "loops can be fused"
            )
        if not analyzer.can_prove_equal(node.min, 0):
            raise ScheduleError(f"fuse: loop {_name(node)} starts at {node.min}, not at 0")
        # The fused extent is a product of the extents, so none may vary with an outer loop.
        _check_independent("fuse", node, outer_vars)
        outer_vars.add(id(node.loop_var))
    dtype = nodes[0].loop_var.dtype
    fused = E.Var("_".join(n.loop_var.name_hint for n in nodes) + "_fused", dtype)
    extent = E.make_const(1, dtype)
    for node in nodes:
        extent = extent * node.extent
    extent = analyzer.simplify(extent)
    analyzer.bind(fused, E.Range.from_min_extent(E.make_const(0, dtype), extent))
    values: dict[E.Var, E.PrimExpr] = {}
    stride = E.make_const(1, dtype)
    for node in reversed(nodes):
        value: E.PrimExpr = E.FloorDiv(fused, stride)
        if node is not nodes[0]:
            value = E.FloorMod(value, node.extent)
        values[node.loop_var] = analyzer.simplify(value)
        stride = analyzer.simplify(stride * node.extent)
    body = _SimplifyBindings(analyzer).visit(substitute(nodes[-1].body, values))
    sch.replace(nodes[0], S.For(fused, E.make_const(0, dtype), extent, S.ForKind.SERIAL, body))
    return LoopRV(fused)


def add_unit_loop(sch: ScheduleState, block_or_loop: BlockRV | LoopRV) -> LoopRV:
    if isinstance(block_or_loop, BlockRV):
        node: S.Stmt = sch.block_realize(block_or_loop)
        dtype = "int32"
    elif isinstance(block_or_loop, LoopRV):
        node = sch.loop(block_or_loop)
        dtype = node.loop_var.dtype
    else:
        raise ScheduleError(
            f"add_unit_loop: expected a block or loop handle, got {block_or_loop!r}"
        )
    unit = E.Var("u", dtype)
    sch.replace(node, S.For(unit, 0, 1, S.ForKind.SERIAL, node))
    return LoopRV(unit)


class _SimplifyBindings(StmtExprMutator):
    """Simplifies block bindings and predicates, e.g. ``f // 8 * 8 + f % 8`` to ``f``."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    def visit_block_realize_(self, op: S.BlockRealize) -> S.Stmt:
        op = self.generic_visit(op)  # type: ignore[assignment]
        return op.with_fields(
            iter_values=tuple(self.analyzer.simplify(v) for v in op.iter_values),
            predicate=self.analyzer.simplify(op.predicate),
        )


def reorder(sch: ScheduleState, *ordered_loops: LoopRV | Sequence[LoopRV]) -> None:
    nodes = [sch.loop(rv) for rv in _loop_list("reorder", ordered_loops)]
    given: set[int] = set()
    for node in nodes:
        if id(node) in given:
            raise ScheduleError(
                f"reorder: loop {_name(node)} appears more than once; each loop takes exactly "
                "one place in the new order"
            )
        given.add(id(node))
    if len(nodes) < 2:
        return
    chains = {id(node): [*sch.loops_above(node), node] for node in nodes}
    deepest = max(nodes, key=lambda node: len(chains[id(node)]))
    chain = chains[id(deepest)]
    position = {id(loop): i for i, loop in enumerate(chain)}
    for node in nodes:
        if id(node) not in position:
            raise ScheduleError(
                f"reorder: loops {_name(node)} and {_name(deepest)} are not in one chain of "
                "nested loops under the same block (neither is inside the other)"
            )
    span = chain[min(position[id(node)] for node in nodes) :]
    for outer, inner in pairwise(span):
        if outer.body is not inner:
            raise ScheduleError(
                f"reorder: loop {_name(outer)} has other statements besides loop {_name(inner)}; "
                "the loops to reorder must be perfectly nested"
            )
    bottom = span[-1]
    for realize in _walk_until_block(bottom.body):
        for iv in realize.block.iter_vars:
            if iv.iter_type not in (E.IterVarType.DataPar, E.IterVarType.CommReduce):
                raise ScheduleError(
                    f"reorder: block {realize.block.name_hint!r} under loop {_name(bottom)} has "
                    f"the {_ITER_KIND[iv.iter_type]} iter var {iv.var.name_hint!r}, whose "
                    "iterations must run in order; only loops over spatial and reduction iter "
                    "vars can be reordered"
                )
    order = iter(nodes)
    new_span = [next(order) if id(loop) in given else loop for loop in span]
    _check_init_stays_first(span, new_span, list(_walk_until_block(bottom.body)))
    body = bottom.body
    inner_vars: set[int] = set()
    for loop in reversed(new_span):
        _check_independent("reorder", loop, inner_vars)
        inner_vars.add(id(loop.loop_var))
        body = loop.with_fields(body=body)
    sch.replace(span[0], body)


def _check_init_stays_first(
    span: list[S.For], new_span: list[S.For], realizes: list[S.BlockRealize]
) -> None:
    """A reduction block's init runs on the iteration where its reduce iter vars are at their
    start, which must come first among the iterations of each element it reduces into. With
    loops that each feed only spatial or only reduction iter vars, every order keeps that;
    swapping two loops that both feed reduction iter vars, one of which feeds a spatial iter
    var too (loops fused across both kinds, then split), can bring an update first."""
    before = {id(loop): i for i, loop in enumerate(span)}
    swapped = [
        (a, b)
        for i, a in enumerate(new_span)
        for b in new_span[i + 1 :]
        if before[id(a)] > before[id(b)]
    ]
    for realize in realizes:
        if realize.block.init is None:
            continue
        kinds: dict[int, set[bool]] = {}
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            for var in collect_vars(value):
                kinds.setdefault(id(var), set()).add(iv.iter_type == E.IterVarType.CommReduce)
        for a, b in swapped:
            ka, kb = kinds.get(id(a.loop_var), set()), kinds.get(id(b.loop_var), set())
            mixed = next((lp for lp, k in ((a, ka), (b, kb)) if len(k) == 2), None)
            if True in ka and True in kb and mixed is not None:
                raise ScheduleError(
                    f"reorder: loop {_name(mixed)} feeds both spatial and reduction iter vars "
                    f"of block {realize.block.name_hint!r} (loops of both kinds were fused), so "
                    f"swapping it with loop {_name(b if mixed is a else a)} could run an "
                    "update of an element before its T.init()"
                )


def _check_independent(kind: str, loop: S.For, others: set[int]) -> None:
    """Raise when ``loop``'s range uses one of the loop variables ``others`` (by id)."""
    for bound in (loop.min, loop.extent):
        for var in collect_vars(bound):
            if id(var) in others:
                raise ScheduleError(
                    f"{kind}: the range of loop {_name(loop)} depends on loop "
                    f"{var.name_hint!r}, which would no longer be outside it"
                )


def _loop_list(kind: str, loops: Sequence[Any]) -> list[LoopRV]:
    """The loop handles given one per argument, or as a single list (both spellings occur)."""
    if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
        loops = loops[0]
    for rv in loops:
        if not isinstance(rv, LoopRV):
            raise ScheduleError(f"{kind}: expected loop handles (LoopRV), got {rv!r}")
    return list(loops)


# ---------------------------------------------------------------------- loop kinds
# TVM's thread tags: CUDA's block and thread indices and the virtual threads of vthread.
_THREAD_AXIS = re.compile(r"(threadIdx|blockIdx)\.[xyz]|vthread(\.[xyz])?")

_ITER_KIND = {
    E.IterVarType.DataPar: "spatial",
    E.IterVarType.ThreadIndex: "thread index",
    E.IterVarType.CommReduce: "reduction",
    E.IterVarType.Ordered: "scan",
    E.IterVarType.Opaque: "opaque",
}


def parallel(sch: ScheduleState, loop: LoopRV) -> None:
    _set_kind(sch, "parallel", loop, S.ForKind.PARALLEL)


def vectorize(sch: ScheduleState, loop: LoopRV) -> None:
    _set_kind(sch, "vectorize", loop, S.ForKind.VECTORIZED)


def unroll(sch: ScheduleState, loop: LoopRV) -> None:
    node = sch.loop(loop)
    sch.replace(node, node.with_fields(kind=S.ForKind.UNROLLED, thread_binding=None))


def bind(sch: ScheduleState, loop: LoopRV, thread_axis: str) -> None:
    if not isinstance(thread_axis, str) or not _THREAD_AXIS.fullmatch(thread_axis):
        raise ScheduleError(
            f"bind: {thread_axis!r} is not a thread axis (loop {_name(sch.loop(loop))}); use "
            "threadIdx.x/y/z, blockIdx.x/y/z or vthread"
        )
    _set_kind(sch, "bind", loop, S.ForKind.THREAD_BINDING, thread_axis)


def _set_kind(
    sch: ScheduleState, kind: str, loop: LoopRV, for_kind: S.ForKind, thread_axis: str | None = None
) -> None:
    """Give ``loop`` the kind ``for_kind`` once its iterations are shown to be independent."""
    node = sch.loop(loop)
    for realize in ScheduleState.walk_blocks(node.body):
        problem = _dataflow_problem(sch, realize, node)
        if problem is not None:
            raise ScheduleError(
                f"{kind}: block {realize.block.name_hint!r} under loop {_name(node)} {problem}, "
                "so the loop's iterations may depend on each other"
                + _decomposed_fix(sch, kind, realize, node)
            )
        _check_spatial_binding(kind, node, realize)
    binding = None
    if thread_axis is not None:
        # Built exactly as the TVMScript parser builds T.thread_binding, so scripts round-trip.
        binding = E.IterVar(
            None, E.Var(thread_axis, node.loop_var.dtype), E.IterVarType.ThreadIndex, thread_axis
        )
    sch.replace(node, node.with_fields(kind=for_kind, thread_binding=binding))


def _check_spatial_binding(kind: str, loop: S.For, realize: S.BlockRealize) -> None:
    """Raise unless every iter var of the block that ``loop`` feeds is spatial."""
    block = realize.block
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == E.IterVarType.DataPar:
            continue
        if not any(var is loop.loop_var for var in collect_vars(value)):
            continue
        if iv.iter_type == E.IterVarType.CommReduce:
            raise ScheduleError(
                f"{kind}: loop {_name(loop)} is a reduction loop of block "
                f"{block.name_hint!r} (it feeds the reduce iter var {iv.var.name_hint!r}), whose "
                f"iterations accumulate into the same element; {kind} on a reduction loop "
                "needs rfactor first (or reorder it inside a spatial loop)"
            )
        raise ScheduleError(
            f"{kind}: loop {_name(loop)} feeds the {_ITER_KIND[iv.iter_type]} iter var "
            f"{iv.var.name_hint!r} of block {block.name_hint!r}; only loops over spatial iter "
            "vars can run their iterations independently"
        )


def _dataflow_problem(sch: ScheduleState, realize: S.BlockRealize, loop: S.For) -> str | None:
    """Why the block is neither complete nor a reduction block under ``loop`` (TVM's compact
    dataflow), or None. Both kinds are the only writer of their outputs there and read an
    output only at the element they write; a complete block has spatial iter vars only, a
    reduction block has a T.init(), spatial and reduce iter vars, and writes at positions free
    of reduce vars."""
    block = realize.block
    shared = _shared_outputs(sch, realize, loop)
    if shared:
        return f"is not the only block writing buffer {shared[0][0]!r}"
    reduce_vars = set()
    for iv in block.iter_vars:
        if iv.iter_type == E.IterVarType.CommReduce:
            reduce_vars.add(id(iv.var))
        elif iv.iter_type != E.IterVarType.DataPar:
            return f"has the {_ITER_KIND[iv.iter_type]} iter var {iv.var.name_hint!r}"
    if reduce_vars and block.init is None:
        return "has reduce iter vars but no T.init()"
    for region in block.writes:
        for rng in region.region:
            for var in collect_vars(rng.min) + collect_vars(rng.extent):
                if id(var) in reduce_vars:
                    return (
                        f"writes buffer {region.buffer.name!r} at a position that depends "
                        f"on the reduce iter var {var.name_hint!r}"
                    )
    return _reads_other_output_element(block)


def _reads_other_output_element(block: S.Block) -> str | None:
    """Whether the body loads an output buffer anywhere but at the element it stores to
    (``B[vi] = B[vi - 1] + A[vi]``): then one iteration needs another's result. Read regions
    leave written buffers out, so this looks at the loads and stores themselves."""
    stores: dict[int, list[tuple[E.PrimExpr, ...]]] = {}
    loads: list[E.BufferLoad] = []

    def collect(node: Any) -> None:
        if isinstance(node, S.BufferStore):
            stores.setdefault(id(node.buffer), []).append(node.indices)
        elif isinstance(node, E.BufferLoad):
            loads.append(node)

    post_order_visit(block.body, collect)
    for load in loads:
        written = stores.get(id(load.buffer))
        if written is None:
            continue
        if not any(_same_indices(load.indices, indices) for indices in written):
            return (
                f"reads {load.script()} of buffer {load.buffer.name!r}, which it also writes "
                "at another element"
            )
    return None


def _same_indices(a: Sequence[E.PrimExpr], b: Sequence[E.PrimExpr]) -> bool:
    return len(a) == len(b) and all(expr_deep_equal(x, y) for x, y in zip(a, b))


def _decomposed_fix(sch: ScheduleState, kind: str, realize: S.BlockRealize, loop: S.For) -> str:
    """The way out when the other writer is the other half of a reduction decompose_reduction
    split (an init block of spatial iter vars beside an update block with reduce iter vars and
    no T.init()): neither is the loop's only writer any more (TVM's "local dominant" condition
    of a complete block), while the reduction before the split qualified."""
    writers = [realize, *(other for _, other in _shared_outputs(sch, realize, loop))]
    kinds = {
        any(iv.iter_type == E.IterVarType.CommReduce for iv in w.block.iter_vars)
        and w.block.init is None
        for w in writers
    }
    if len(writers) != 2 or kinds != {True, False}:
        return ""
    names = " and ".join(repr(w.block.name_hint) for w in writers)
    return (
        f"; blocks {names} are the init and update of one reduction split by "
        f"decompose_reduction: call {kind} on loop {_name(loop)} before decompose_reduction"
    )


def _shared_outputs(
    sch: ScheduleState, realize: S.BlockRealize, loop: S.For
) -> list[tuple[str, S.BlockRealize]]:
    """The buffers ``realize``'s block writes that another block of its scope under ``loop``
    writes too, each with that other block. A writer outside ``loop`` runs before or after all
    of its iterations, so it does not matter (``Y_update`` beside the loop of a decomposed
    reduction's ``Y_init``)."""
    within: S.Stmt | None = sch.parent_of(realize)
    while within is not loop and not isinstance(within, S.Block):
        within = sch.parent_of(within)
    siblings = _walk_until_block(within.body)
    written = {id(region.buffer): region.buffer.name for region in realize.block.writes}
    shared = []
    for other in siblings:
        if other is realize:
            continue
        for region in other.block.writes:
            if id(region.buffer) in written:
                shared.append((written[id(region.buffer)], other))
    return shared


# ---------------------------------------------------------------------- annotations
def annotate(
    sch: ScheduleState, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any
) -> None:
    node = _annotatable(sch, "annotate", block_or_loop)
    if not isinstance(ann_key, str) or not ann_key:
        raise ScheduleError(
            f"annotate: the annotation key {ann_key!r} of {_describe(node)} must be a "
            "non-empty string"
        )
    value = _annotation_value(ann_val, f"annotation {ann_key!r} of {_describe(node)}")
    sch.replace(node, node.with_fields(annotations={**node.annotations, ann_key: value}))


def unannotate(sch: ScheduleState, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
    node = _annotatable(sch, "unannotate", block_or_loop)
    if ann_key not in node.annotations:
        existing = ", ".join(map(repr, node.annotations)) or "none"
        raise ScheduleError(
            f"unannotate: {_describe(node)} has no annotation {ann_key!r} (it has: {existing})"
        )
    annotations = {k: v for k, v in node.annotations.items() if k != ann_key}
    sch.replace(node, node.with_fields(annotations=annotations))


def _annotatable(sch: ScheduleState, kind: str, rv: BlockRV | LoopRV) -> S.Block | S.For:
    if isinstance(rv, BlockRV):
        return sch.block_realize(rv).block
    if isinstance(rv, LoopRV):
        return sch.loop(rv)
    raise ScheduleError(f"{kind}: expected a block or loop handle, got {rv!r}")


def _annotation_value(value: Any, where: str) -> Any:
    """``value`` as stored in annotations: what TVMScript can print and parse back."""
    if isinstance(value, (bool, str, float, E.PrimExpr)):
        return value
    if isinstance(value, int):
        return int(value)  # a sampled ExprRV is stored as the number it is
    if isinstance(value, (list, tuple)):
        return type(value)(_annotation_value(v, where) for v in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _annotation_value(v, where) for k, v in value.items()}
    raise ScheduleError(
        f"annotate: the value {value!r} of the {where} is a {type(value).__name__}; use a "
        "string, a number, a PrimExpr, or lists and string-keyed dicts of them"
    )


def _describe(node: S.Block | S.For) -> str:
    if isinstance(node, S.Block):
        return f"block {node.name_hint!r}"
    return f"loop {_name(node)}"


def _name(loop: S.For) -> str:
    return repr(loop.loop_var.name_hint)


def _text(values: Sequence[E.PrimExpr]) -> str:
    return "[" + ", ".join(str(v.script()) for v in values) + "]"
