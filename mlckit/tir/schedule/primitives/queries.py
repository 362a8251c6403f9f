"""Queries: handles to the blocks and loops of the scheduled function (``get_block``,
``get_loops``, ``get_child_blocks``) and to a block's neighbours in the dataflow
(``get_producers``, ``get_consumers``). They change nothing, but they are recorded like every
other primitive: a replayed trace needs the handles they returned."""

from __future__ import annotations

from ..state import BlockRV, LoopRV, ScheduleState, _walk_until_block


def get_block(sch: ScheduleState, name: str, func_name: str | None = None) -> BlockRV:
    if func_name is not None:
        sch.work_on(func_name)
    rv = BlockRV(name)
    sch.block_realize(rv)  # raises when there is no such block
    return rv


def get_loops(sch: ScheduleState, block: BlockRV) -> list[LoopRV]:
    realize = sch.block_realize(block)
    return [LoopRV(loop.loop_var) for loop in sch.loops_above(realize)]


def get_child_blocks(sch: ScheduleState, parent: BlockRV | LoopRV) -> list[BlockRV]:
    if isinstance(parent, BlockRV):
        body = sch.block_realize(parent).block.body
    else:
        body = sch.loop(parent).body
    return [BlockRV(realize.block.name_hint) for realize in _walk_until_block(body)]


def get_producers(sch: ScheduleState, block: BlockRV) -> list[BlockRV]:
    return _neighbours(sch, block, "producers")


def get_consumers(sch: ScheduleState, block: BlockRV) -> list[BlockRV]:
    return _neighbours(sch, block, "consumers")


def _neighbours(sch: ScheduleState, block: BlockRV, direction: str) -> list[BlockRV]:
    """Blocks writing what ``block`` reads (producers) or reading what it writes (consumers)."""
    realize = sch.block_realize(block)
    mine = realize.block.reads if direction == "producers" else realize.block.writes
    buffers = {id(region.buffer) for region in mine}
    result = []
    for other in sch.walk_blocks(sch.func.body):
        if other is realize:
            continue
        theirs = other.block.writes if direction == "producers" else other.block.reads
        if any(id(region.buffer) in buffers for region in theirs):
            result.append(BlockRV(other.block.name_hint))
    return result
