"""Reference solutions of chapter 8's exercises (hardware specialization)."""

from __future__ import annotations

from mlckit import tir
from mlckit.script import tir as T


def mma16_desc():
    @T.prim_func
    def mma16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
        B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
        C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")

        with T.block("root"):
            T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            for i, j, k in T.grid(16, 16, 16):
                with T.block(""):
                    vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                    # B is read in its own layout, (k, j): no transpose.
                    C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]

    return mma16_desc


def tensorize_mma16():
    from mlckit.exercises.ch8 import MatmulNN

    sch = tir.Schedule(MatmulNN)
    i, j, k = sch.get_loops("matmul")
    i_0, i_1 = sch.split(i, factors=[None, 16])
    j_0, j_1 = sch.split(j, factors=[None, 16])
    k_0, k_1 = sch.split(k, factors=[None, 16])
    sch.reorder(i_0, j_0, k_0, i_1, j_1, k_1)
    # One 16 x 16 x 16 tile of the product: the shape of the instruction.
    tile = sch.blockize(i_1)
    A_reg = sch.cache_read(tile, 0, "global.A_reg")
    B_reg = sch.cache_read(tile, 1, "global.B_reg")
    sch.compute_at(A_reg, k_0)
    sch.compute_at(B_reg, k_0)
    C_acc = sch.cache_write(tile, 0, "global.accumulator")
    sch.reverse_compute_at(C_acc, j_0)
    # The instruction only adds into the accumulator: the init goes into a block of its own.
    sch.decompose_reduction(tile, k_0)
    sch.tensorize(tile, "ch8_mma16")
    return sch
