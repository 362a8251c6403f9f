"""Reduction: ``decompose_reduction`` turns a block's ``T.init()`` into a block of its own.

A reduction block with an init runs the init on the first step of its reduction; code
generation turns that into an ``if`` inside the innermost loop. Decomposing it puts the
initialization in a separate loop nest before the reduction loops, leaving the update loop
free of the test (the form vectorization and tensorization need).
"""

from __future__ import annotations

from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars, infer_block_regions
from ...stmt_functor import substitute
from ..state import BlockRV, LoopRV, ScheduleState
from .block_scope import at_first_iteration, check_reduced_once, edit_function

KIND = "decompose_reduction"


def decompose_reduction(sch: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Check, build the init nest and the update block, and splice them in: the nest just
    before ``loop``, the update block in place of the block."""
    realize = sch.block_realize(block)
    target = sch.loop(loop)
    loops, inner = _check_decomposable(sch, realize, target)
    nest = _init_nest(realize, loops, inner)
    update = _update_block(realize)
    edit_function(
        sch,
        {id(realize): lambda _: [update], id(target): lambda new_loop: [nest, new_loop]},
        KIND,
    )
    # As in TVM, the handle the caller holds now names the update block.
    block.name = update.block.name_hint
    return BlockRV(f"{realize.block.name_hint}_init")


def _check_decomposable(
    sch: ScheduleState, realize: S.BlockRealize, target: S.For
) -> tuple[list[S.For], list[S.For]]:
    """Check that the block has an init, that ``target`` encloses it outside every reduction
    loop and that the loops from ``target`` down reach each reduction element once; return
    the loops above the block and those from ``target`` down."""
    original = realize.block
    name = repr(original.name_hint)
    loop_name = repr(target.loop_var.name_hint)
    if original.init is None:
        raise ScheduleError(f"{KIND}: block {name} has no init to decompose")
    loops = sch.loops_above(realize)
    position = next((i for i, node in enumerate(loops) if node is target), None)
    if position is None:
        raise ScheduleError(f"{KIND}: loop {loop_name} does not enclose block {name}")
    reduce_uses = {
        id(v)
        for iv, value in zip(original.iter_vars, realize.iter_values)
        if iv.iter_type != E.IterVarType.DataPar
        for v in collect_vars(value)
    }
    for outer in loops[:position]:
        if id(outer.loop_var) in reduce_uses:
            raise ScheduleError(
                f"{KIND}: loop {loop_name} is inside reduction loop "
                f"{outer.loop_var.name_hint!r} of block {name}; the init must go before every "
                "reduction loop"
            )
    check_reduced_once(KIND, realize, loops[position:])
    return loops, loops[position:]


def _init_nest(realize: S.BlockRealize, loops: list[S.For], inner: list[S.For]) -> S.Stmt:
    """The ``<name>_init`` block over the block's spatial iter vars, under copies
    (``<loop>_init``) of the loops of ``inner`` that the spatial bindings use."""
    original = realize.block
    spatial = [
        (iv, value)
        for iv, value in zip(original.iter_vars, realize.iter_values)
        if iv.iter_type == E.IterVarType.DataPar
    ]
    spatial_uses = {id(v) for _, value in spatial for v in collect_vars(value)}
    copies = {
        node.loop_var: E.Var(f"{node.loop_var.name_hint}_init", node.loop_var.dtype)
        for node in inner
        if id(node.loop_var) in spatial_uses
    }
    copied = {id(var) for var in copies}
    init_vars = {iv.var: E.Var(iv.var.name_hint, iv.var.dtype) for iv, _ in spatial}
    spatial_vars = {id(var) for var in init_vars}
    for v in collect_vars(original.init):
        if id(v) not in spatial_vars and any(v is iv.var for iv in original.iter_vars):
            raise ScheduleError(
                f"{KIND}: the init of block {original.name_hint!r} uses reduction iter var "
                f"{v.name_hint!r}"
            )
    # The init nest has no reduction loops: the predicate holds for an element to initialize
    # when it holds at their first iteration, where the block's own init ran. (An init that
    # uses loops itself, a blockized tile's, sees them the same way.)
    dropped = {id(node.loop_var) for node in inner if id(node.loop_var) not in copied}
    starts = {node.loop_var: node.min for node in inner if id(node.loop_var) in dropped}
    init_block = infer_block_regions(
        S.Block(
            [iv.with_fields(var=init_vars[iv.var]) for iv, _ in spatial],
            [],
            [],
            f"{original.name_hint}_init",
            substitute(original.init, {**init_vars, **copies, **starts}),
        )
    )
    predicate = substitute(at_first_iteration(realize.predicate, loops, dropped), copies)
    nest: S.Stmt = S.BlockRealize(
        [substitute(value, copies) for _, value in spatial], predicate, init_block
    )
    for node in reversed(inner):
        if id(node.loop_var) in copied:
            nest = node.with_fields(
                loop_var=copies[node.loop_var],
                min=substitute(node.min, copies),
                extent=substitute(node.extent, copies),
                body=nest,
            )
    return nest


def _update_block(realize: S.BlockRealize) -> S.BlockRealize:
    """The block without its init, renamed ``<name>_update``.

    Without its init, the update block reads the value it accumulates into: its writes come
    first among its reads, as TVM records them (so cache_read's indices agree with TVM's)."""
    original = realize.block
    read_buffers = {id(region.buffer) for region in original.reads}
    reads = [r for r in original.writes if id(r.buffer) not in read_buffers] + list(original.reads)
    return realize.with_fields(
        block=original.with_fields(
            init=None, name_hint=f"{original.name_hint}_update", reads=tuple(reads)
        )
    )
