"""Inlining: ``compute_inline`` (a producer into its consumers) and ``reverse_compute_inline``
(a consumer into its producer). Both remove a block and the intermediate buffer between the
two, so the value is computed where it is used instead of being stored and loaded."""

from __future__ import annotations

from typing import Any

from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars, expr_deep_equal, infer_block_regions
from ...buffer import Buffer
from ...stmt_functor import StmtExprMutator, post_order_visit, substitute
from ..state import BlockRV, ScheduleState
from .block_scope import (
    block_names,
    check_sole_writer,
    edit_function,
    neighbours,
    removal_root,
    scope_block,
)


def compute_inline(sch: ScheduleState, block: BlockRV) -> None:
    kind = "compute_inline"
    realize = sch.block_realize(block)
    store = _single_store(kind, realize)
    name = repr(realize.block.name_hint)
    iter_vars = {id(iv.var) for iv in realize.block.iter_vars}
    if len({id(i) for i in store.indices}) != len(store.indices) or not all(
        isinstance(i, E.Var) and id(i) in iter_vars for i in store.indices
    ):
        raise ScheduleError(
            f"{kind}: block {name} stores to {store.buffer.name}"
            f"[{', '.join(i.script() for i in store.indices)}]; the store indices must be "
            "distinct iter vars of the block"
        )
    free = [
        v.name_hint
        for v in collect_vars(store.value)
        if id(v) in iter_vars and not any(v is i for i in store.indices)
    ]
    if free:
        raise ScheduleError(
            f"{kind}: the value block {name} stores depends on iter var {free[0]!r}, which is "
            "not a store index"
        )
    buffer = store.buffer
    _check_intermediate(sch, kind, realize, buffer)
    for other in sch.walk_blocks(sch.func.body):
        if any(m.source.buffer is buffer for m in other.block.match_buffers):
            raise ScheduleError(
                f"{kind}: block {other.block.name_hint!r} views {buffer.name} with "
                "T.match_buffer; only loads of it can be replaced by the value of block "
                f"{name}"
            )
    scope = scope_block(sch, realize)
    check_sole_writer(kind, realize, scope)

    edit_function(sch, {id(removal_root(sch, realize, kind)): lambda _: []}, kind)
    mapping = tuple(store.indices)
    inliner = _InlineLoads(
        buffer, lambda indices: substitute(store.value, dict(zip(mapping, indices)))
    )
    sch.set_func(sch.func.with_body(inliner.visit(sch.func.body)))


def reverse_compute_inline(sch: ScheduleState, block: BlockRV) -> None:
    kind = "reverse_compute_inline"
    realize = sch.block_realize(block)
    name = repr(realize.block.name_hint)
    store = _single_store(kind, realize)
    if not E.is_true(realize.predicate):
        raise ScheduleError(
            f"{kind}: block {name} has a predicate (T.where); its producer would compute "
            "elements the predicate leaves out"
        )
    scope = scope_block(sch, realize)
    producers, _ = neighbours(realize, scope)
    if len(producers) != 1:
        raise ScheduleError(
            f"{kind}: block {name} has {len(producers)} producer blocks "
            f"({block_names(producers) or 'none'}); it needs exactly one"
        )
    (producer,) = producers
    producer_store = _single_store(kind, producer, role="producer block")
    buffer = producer_store.buffer
    check_sole_writer(kind, producer, scope)
    _check_intermediate(sch, kind, producer, buffer)
    # The producer's store is replaced: anyone else reading its buffer would read nothing.
    others = [c for c in neighbours(producer, scope)[1] if c is not realize]
    if others:
        raise ScheduleError(
            f"{kind}: buffer {buffer.name} of producer {producer.block.name_hint!r} is also read "
            f"by {block_names(others)}; inlining block {name} would leave them nothing to read"
        )

    loads: list[tuple[E.PrimExpr, ...]] = []
    post_order_visit(
        store.value,
        lambda n: isinstance(n, E.BufferLoad) and n.buffer is buffer and loads.append(n.indices),
    )
    if not loads:
        raise ScheduleError(
            f"{kind}: block {name} reads {buffer.name} other than by loading it in the value "
            "it stores"
        )
    first = loads[0]
    iter_vars = {id(iv.var): iv for iv in realize.block.iter_vars}
    if (
        any(not all(map(expr_deep_equal, first, other)) for other in loads[1:])
        or len({id(i) for i in first}) != len(first)
        or not all(isinstance(i, E.Var) and id(i) in iter_vars for i in first)
        or len(first) != len(iter_vars)
    ):
        raise ScheduleError(
            f"{kind}: block {name} must load {buffer.name} at one point whose indices are all "
            "of its iter vars, each once"
        )
    # Consumer iter var k is the producer's k-th store index.
    mapping = dict(zip(first, producer_store.indices))
    value = _InlineLoads(buffer, lambda _: producer_store.value).visit(store.value)
    new_store = S.BufferStore(
        store.buffer, substitute(value, mapping), substitute(store.indices, mapping)
    )
    new_block = infer_block_regions(producer.block.with_fields(body=new_store))
    edit_function(
        sch,
        {
            id(removal_root(sch, realize, kind)): lambda _: [],
            id(producer): lambda old: [old.with_fields(block=new_block)],
        },
        kind,
    )
    sch.set_func(sch.func.with_body(_InlineLoads(buffer, None).visit(sch.func.body)))


def _single_store(kind: str, realize: S.BlockRealize, role: str = "block") -> S.BufferStore:
    """The body of a block computing each element once, a single BufferStore."""
    block = realize.block
    name = f"{role} {block.name_hint!r}"
    if block.init is not None or any(
        iv.iter_type != E.IterVarType.DataPar for iv in block.iter_vars
    ):
        raise ScheduleError(
            f"{kind}: {name} is a reduction (it has an init or a non-spatial iter var); "
            "only a block computing each element once can be inlined"
        )
    if not isinstance(block.body, S.BufferStore) or block.alloc_buffers or block.match_buffers:
        raise ScheduleError(f"{kind}: the body of {name} is not a single BufferStore")
    return block.body


def _check_intermediate(
    sch: ScheduleState, kind: str, realize: S.BlockRealize, buffer: Buffer
) -> None:
    """The buffer between the two blocks goes away, so it must not be a function parameter."""
    if any(b is buffer for b in sch.func.buffer_map.values()):
        raise ScheduleError(
            f"{kind}: block {realize.block.name_hint!r} writes {buffer.name}, an output of the "
            "function; only an intermediate buffer can be inlined away"
        )


class _InlineLoads(StmtExprMutator):
    """Replaces loads of ``buffer`` by ``replace(indices)`` (None: leave them), drops the
    buffer's allocation, and re-infers the regions of the blocks that read it."""

    def __init__(self, buffer: Buffer, replace: Any) -> None:
        self.buffer = buffer
        self.replace = replace

    def visit_buffer_load_(self, op: E.BufferLoad) -> E.PrimExpr:
        op = super().visit_buffer_load_(op)
        if op.buffer is not self.buffer or self.replace is None:
            return op
        new = self.replace(op.indices)
        return op if new is None else new

    def visit_block_(self, op: S.Block) -> S.Stmt:
        new = super().visit_block_(op)
        if any(b is self.buffer for b in new.alloc_buffers):
            new = new.with_fields(
                alloc_buffers=tuple(b for b in new.alloc_buffers if b is not self.buffer)
            )
        if any(r.buffer is self.buffer for r in (*op.reads, *op.writes)):
            new = infer_block_regions(new)
        return new
