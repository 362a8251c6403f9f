"""The course's GPU matmul schedule, shared by the cuda tests and the cuda benchmark."""

from __future__ import annotations

from mlckit import tir
from mlckit.tir.function import PrimFunc


def cooperative_fetch(
    sch: tir.Schedule, block: tir.schedule.BlockRV, index: int, loop, threads: int, vector: int
) -> None:
    """Stage the block's ``index``-th input in shared memory at ``loop``: every thread of the
    block copies ``vector`` consecutive elements per round until the tile is in."""
    shared = sch.cache_read(block, index, "shared")
    sch.compute_at(shared, loop)
    fused = sch.fuse(*sch.get_loops(shared)[-2:])
    _, thread, lanes = sch.split(fused, [None, threads, vector])
    sch.vectorize(lanes)
    sch.bind(thread, "threadIdx.x")


def shared_memory_matmul(
    func: PrimFunc,
    local: tuple[int, int] = (2, 2),
    block: tuple[int, int] = (4, 4),
    tile_k: int = 4,
    vector: int = 2,
) -> tir.Schedule:
    """Schedule a matmul block ``C`` (loops i, j, k) as the MLC course does: each thread
    accumulates a ``local`` tile of C in registers, a thread block of ``block`` threads covers
    a ``local * block`` tile, and the A and B tiles of each ``tile_k`` step are fetched into
    shared memory cooperatively."""
    sch = tir.Schedule(func)
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block_C)
    i0, i1, i2 = sch.split(i, [None, block[0], local[0]])
    j0, j1, j2 = sch.split(j, [None, block[1], local[1]])
    k0, k1 = sch.split(k, [None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    threads = block[0] * block[1]
    cooperative_fetch(sch, block_C, 0, k0, threads, vector)
    cooperative_fetch(sch, block_C, 1, k0, threads, vector)
    sch.decompose_reduction(block_C, k0)
    return sch
