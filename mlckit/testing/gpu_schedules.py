"""The course's GPU matmul schedules, shared by the cuda tests and the cuda benchmark.

Each takes a PrimFunc whose block ``C`` is a matmul over loops ``i, j, k`` and returns the
schedule, in the three steps of chapter 6: one thread per element, a tile of C per thread
accumulated in local memory, and the tiles of A and B a thread block needs staged in shared
memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    sch: tir.Schedule,
    block: tir.schedule.BlockRV,
    index: int,
    loop,
    threads: int,
    vector: int,
    layout: Callable[[Any, Any], list[Any]] | None = None,
) -> None:
    """Stage the block's ``index``-th input in shared memory at ``loop``: every thread of the
    block copies ``vector`` consecutive elements per round until the tile is in. ``layout``,
    an index map for ``transform_layout``, stores the tile in another order."""
    shared = sch.cache_read(block, index, "shared")
    sch.compute_at(shared, loop)
    if layout is not None:
        # After compute_at, which sizes the copy by the region of the tile the block reads.
        sch.transform_layout(shared, ("write", 0), layout)
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
    interleaved: bool = False,
) -> tir.Schedule:
    """Each thread accumulates a ``local`` tile of C in registers, and a thread block of
    ``block`` threads covers a ``local * block`` tile. With ``shared_vector``, the A and B
    tiles of each ``tile_k`` step are first fetched into shared memory by all the block's
    threads, ``shared_vector`` consecutive elements each per round; see
    :func:`local_blocking` for ``interleaved``."""
    sch = tir.Schedule(func)
    local_blocking(sch, local, block, tile_k, shared_vector, interleaved)
    return sch


def local_blocking(
    sch: tir.Schedule,
    local: tuple[int, int],
    block: tuple[int, int],
    tile_k: int,
    shared_vector: int | None = None,
    interleaved: bool = False,
) -> None:
    """:func:`local_blocking_matmul` on a given schedule.

    ``interleaved`` lays the shared tiles out so that a warp reads them without bank
    conflicts. In each step of k, thread t of a row of threads reads the B tile's row at
    columns ``8t .. 8t+7`` (8 per thread): stored in order, those 16 threads' first reads fall
    on 4 of the 32 banks, 4 threads each, and are served one after another. Stored as
    ``(k, column % 8, column // 8)``, the same reads are 16 neighbouring words. The A tile is
    stored likewise, transposed: ``(k, row % 8, row // 8)``."""
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
        a_layout = b_layout = None
        if interleaved:
            a_layout = lambda i, k: [k, i % local[0], i // local[0]]  # noqa: E731
            b_layout = lambda k, j: [k, j % local[1], j // local[1]]  # noqa: E731
        cooperative_fetch(sch, block_C, 0, k0, threads, shared_vector, a_layout)
        cooperative_fetch(sch, block_C, 1, k0, threads, shared_vector, b_layout)
    sch.decompose_reduction(block_C, k0)


def shared_memory_matmul(
    func: PrimFunc,
    local: tuple[int, int] = (2, 2),
    block: tuple[int, int] = (4, 4),
    tile_k: int = 4,
    vector: int = 2,
    interleaved: bool = False,
) -> tir.Schedule:
    """The course's shared-memory matmul: local blocking with the A and B tiles of each k step
    fetched into shared memory cooperatively."""
    return local_blocking_matmul(func, local, block, tile_k, vector, interleaved)


# The shared-memory matmul's knobs, as a search space for ``tune_tir`` (``sgemm_space``): the
# tiles of common CUDA sgemm kernels lie among these.
SGEMM_CHOICES = {
    "local": (4, 8),
    "block": (8, 16),
    "tile_k": (8, 16, 32),
    "vector": (1, 2, 4),
    "interleaved": (0, 1),
}


def sgemm_space(sch: tir.Schedule) -> None:
    """A stochastic schedule function: the shared-memory matmul with each knob of
    ``SGEMM_CHOICES`` drawn by ``sample_categorical`` (the per-thread tile and the thread block
    square). A draw whose tiles do not fit the matmul fails a primitive, and the space draws
    again."""

    def draw(knob: str) -> int:
        choices = SGEMM_CHOICES[knob]
        return int(sch.sample_categorical(list(choices), [1.0] * len(choices)))

    local, block = draw("local"), draw("block")
    tile_k, vector, interleaved = draw("tile_k"), draw("vector"), bool(draw("interleaved"))
    local_blocking(sch, (local, local), (block, block), tile_k, vector, interleaved)
