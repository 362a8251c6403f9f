"""Reference solutions of chapter 2's exercises (TensorIR)."""

from __future__ import annotations

from mlckit import tir
from mlckit.script import tir as T


def broadcast_add():
    @T.prim_func
    def add(
        A: T.Buffer((4, 4), "int64"),
        B: T.Buffer((4,), "int64"),
        C: T.Buffer((4, 4), "int64"),
    ):
        T.func_attr({"global_symbol": "add", "tir.noalias": True})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    return add


def conv2d():
    N, CI, H, W, CO, K = 1, 1, 8, 8, 2, 3
    OUT_H, OUT_W = H - K + 1, W - K + 1

    @T.prim_func
    def conv(
        data: T.Buffer((N, CI, H, W), "int64"),
        weight: T.Buffer((CO, CI, K, K), "int64"),
        out: T.Buffer((N, CO, OUT_H, OUT_W), "int64"),
    ):
        T.func_attr({"global_symbol": "conv", "tir.noalias": True})
        for n, co, h, w, ci, kh, kw in T.grid(N, CO, OUT_H, OUT_W, CI, K, K):
            with T.block("out"):
                vn, vco, vh, vw, vci, vkh, vkw = T.axis.remap("SSSSRRR", [n, co, h, w, ci, kh, kw])
                with T.init():
                    out[vn, vco, vh, vw] = T.int64(0)
                out[vn, vco, vh, vw] = (
                    out[vn, vco, vh, vw]
                    + data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, vkh, vkw]
                )

    return conv


def bmm_relu():
    from mlckit.exercises.ch2 import MyBmmRelu

    sch = tir.Schedule(MyBmmRelu)
    block_Y = sch.get_block("Y", func_name="bmm_relu")
    block_C = sch.get_block("C", func_name="bmm_relu")
    n, _, j, k = sch.get_loops(block_Y)
    j_0, j_1 = sch.split(j, factors=[None, 8])
    k_0, k_1 = sch.split(k, factors=[None, 4])
    sch.reorder(j_0, k_0, k_1, j_1)
    sch.reverse_compute_at(block_C, j_0)
    # mlckit lets a loop run in parallel only while one block writes Y under it: mark n
    # before decompose_reduction splits Y into Y_init and Y_update.
    sch.parallel(n)
    block_Y_init = sch.decompose_reduction(block_Y, k_0)
    sch.vectorize(sch.get_loops(block_Y_init)[-1])
    sch.unroll(k_1)
    sch.vectorize(sch.get_loops(block_C)[-1])
    return sch
