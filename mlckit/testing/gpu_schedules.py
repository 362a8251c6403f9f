"""The course's GPU matmul schedules, shared by the cuda tests and the cuda benchmark.

Each takes a PrimFunc whose block ``C`` is a matmul over loops ``i, j, k`` and returns the
schedule, in the three steps of chapter 6: one thread per element, a tile of C per thread
accumulated in local memory, and the tiles of A and B a thread block needs staged in shared
memory.
"""

from __future__ import annotations

from mlckit import tir
from mlckit.tir.function import PrimFunc


def one_thread_per_element(func: PrimFunc, threads: tuple[int, int] = (8, 8)) -> tir.Schedule:
    """2-D thread blocks of ``threads``, each thread running the whole k loop of one C[i, j]."""
    sch = tir.Schedule(func)
    block_C = sch.get_block("C")
    i, j, k = sch.get_loops(block_C)
    i0, i1 = sch.split(i, [None, threads[0]])
    j0, j1 = sch.split(j, [None, threads[1]])
    sch.reorder(i0, j0, i1, j1, k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k)
    return sch


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


def local_blocking_matmul(
    func: PrimFunc,
    local: tuple[int, int] = (2, 2),
    block: tuple[int, int] = (4, 4),
    tile_k: int = 4,
    shared_vector: int | None = None,
) -> tir.Schedule:
    """Each thread accumulates a ``local`` tile of C in registers, and a thread block of
    ``block`` threads covers a ``local * block`` tile. With ``shared_vector``, the A and B
    tiles of each ``tile_k`` step are first fetched into shared memory by all the block's
    threads, ``shared_vector`` consecutive elements each per round."""
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
    # One thread index for the block: the cooperative fetch splits its copy loop by it.
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    if shared_vector is not None:
        threads = block[0] * block[1]
        cooperative_fetch(sch, block_C, 0, k0, threads, shared_vector)
        cooperative_fetch(sch, block_C, 1, k0, threads, shared_vector)
    sch.decompose_reduction(block_C, k0)
    return sch


def shared_memory_matmul(
    func: PrimFunc,
    local: tuple[int, int] = (2, 2),
    block: tuple[int, int] = (4, 4),
    tile_k: int = 4,
    vector: int = 2,
) -> tir.Schedule:
    """The course's shared-memory matmul: local blocking with the A and B tiles of each k step
    fetched into shared memory cooperatively."""
    return local_blocking_matmul(func, local, block, tile_k, shared_vector=vector)
