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
from .block_scope import at_first_iteration, check_reduced_once
from .compute_location import edit_function


def decompose_reduction(sch: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    kind = "decompose_reduction"
    realize = sch.block_realize(block)
    original = realize.block
    name = repr(original.name_hint)
    target = sch.loop(loop)
    loop_name = repr(target.loop_var.name_hint)
    if original.init is None:
        raise ScheduleError(f"{kind}: block {name} has no init to decompose")
    loops = sch.loops_above(realize)
    position = next((i for i, node in enumerate(loops) if node is target), None)
    if position is None:
        raise ScheduleError(f"{kind}: loop {loop_name} does not enclose block {name}")
    reduce_uses = {
        id(v)
        for iv, value in zip(original.iter_vars, realize.iter_values)
        if iv.iter_type != E.IterVarType.DataPar
        for v in collect_vars(value)
    }
    for outer in loops[:position]:
        if id(outer.loop_var) in reduce_uses:
            raise ScheduleError(
                f"{kind}: loop {loop_name} is inside reduction loop "
                f"{outer.loop_var.name_hint!r} of block {name}; the init must go before every "
                "reduction loop"
            )
    check_reduced_once(kind, realize, loops[position:])

    spatial = [
        (iv, value)
        for iv, value in zip(original.iter_vars, realize.iter_values)
        if iv.iter_type == E.IterVarType.DataPar
    ]
    spatial_uses = {id(v) for _, value in spatial for v in collect_vars(value)}
    inner = loops[position:]
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
                f"{kind}: the init of block {name} uses reduction iter var {v.name_hint!r}"
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
    # Without its init, the update block reads the value it accumulates into: its writes come
    # first among its reads, as TVM records them (so cache_read's indices agree with TVM's).
    read_buffers = {id(region.buffer) for region in original.reads}
    reads = [r for r in original.writes if id(r.buffer) not in read_buffers] + list(original.reads)
    update = realize.with_fields(
        block=original.with_fields(
            init=None, name_hint=f"{original.name_hint}_update", reads=tuple(reads)
        )
    )
    edit_function(
        sch,
        {id(realize): lambda _: [update], id(target): lambda new_loop: [nest, new_loop]},
        kind,
    )
    # As in TVM, the handle the caller holds now names the update block.
    block.name = update.block.name_hint
    return BlockRV(init_block.name_hint)
