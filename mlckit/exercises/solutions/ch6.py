"""Reference solutions of chapter 6's exercises (GPU acceleration)."""

from __future__ import annotations

from mlckit import tir


def bind_transpose():
    from mlckit.exercises.ch6 import Transpose

    sch = tir.Schedule(Transpose)
    block_B = sch.get_block("B")
    i, j = sch.get_loops(block_B)
    # One 8 x 8 tile of B per thread block, one element per thread.
    i_0, i_1 = sch.split(i, factors=[None, 8])
    j_0, j_1 = sch.split(j, factors=[None, 8])
    sch.reorder(i_0, j_0, i_1, j_1)
    sch.bind(i_0, "blockIdx.y")
    sch.bind(j_0, "blockIdx.x")
    sch.bind(i_1, "threadIdx.y")
    # Neighbouring threads write neighbouring elements of a row of B.
    sch.bind(j_1, "threadIdx.x")
    return sch


def local_matmul():
    from mlckit.exercises.ch6 import Matmul

    sch = tir.Schedule(Matmul)
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block_C)
    # Extents: (blocks, threads of a block, the thread's own tile).
    i_0, i_1, i_2 = sch.split(i, factors=[None, 8, 2])
    j_0, j_1, j_2 = sch.split(j, factors=[None, 16, 2])
    sch.reorder(i_0, j_0, i_1, j_1, k, i_2, j_2)
    # Each thread writes its own 2 x 2 tile back to C.
    sch.reverse_compute_at(C_local, j_1)
    sch.bind(i_0, "blockIdx.y")
    sch.bind(j_0, "blockIdx.x")
    sch.bind(i_1, "threadIdx.y")
    sch.bind(j_1, "threadIdx.x")
    sch.decompose_reduction(block_C, k)
    return sch
