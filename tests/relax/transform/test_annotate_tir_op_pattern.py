"""AnnotateTIROpPattern: each PrimFunc gets the op pattern of its loop nest."""

from __future__ import annotations

import pytest

from mlckit.relax.analysis.op_pattern import OpPatternKind, analyze_op_pattern
from mlckit.relax.transform.annotate_tir_op_pattern import AnnotateTIROpPattern
from mlckit.script import ir as I
from mlckit.script import tir as T


@I.ir_module
class Kernels:
    @T.prim_func
    def relu(X: T.Buffer((4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @T.prim_func
    def add(
        A: T.Buffer((4, 8), "float32"),
        B: T.Buffer((4, 8), "float32"),
        C: T.Buffer((4, 8), "float32"),
    ):
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]

    @T.prim_func
    def bias_add(
        A: T.Buffer((4, 8), "float32"),
        B: T.Buffer((8,), "float32"),
        C: T.Buffer((4, 8), "float32"),
    ):
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    @T.prim_func
    def broadcast_to(B: T.Buffer((8,), "float32"), C: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vj]

    @T.prim_func
    def broadcast_unit(B: T.Buffer((1, 8), "float32"), C: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[0, vj]

    @T.prim_func
    def transpose(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi]

    @T.prim_func
    def row_sum(A: T.Buffer((4, 8), "float32"), S: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0.0)
                S[vi] = S[vi] + A[vi, vk]

    @T.prim_func
    def matmul(
        A: T.Buffer((4, 8), "float32"),
        B: T.Buffer((8, 16), "float32"),
        C: T.Buffer((4, 16), "float32"),
    ):
        for i, j, k in T.grid(4, 16, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def matmul_add(
        A: T.Buffer((4, 8), "float32"),
        B: T.Buffer((8, 16), "float32"),
        bias: T.Buffer((16,), "float32"),
        D: T.Buffer((4, 16), "float32"),
    ):
        C = T.alloc_buffer((4, 16), "float32")
        for i, j, k in T.grid(4, 16, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(4, 16):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = C[vi, vj] + bias[vj]

    @T.prim_func
    def sum_then_scale(A: T.Buffer((4, 8), "float32"), D: T.Buffer((4, 8), "float32")):
        S = T.alloc_buffer((4,), "float32")
        for i, k in T.grid(4, 8):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0.0)
                S[vi] = S[vi] + A[vi, vk]
        for i, j in T.grid(4, 8):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = A[vi, vj] / S[vi]

    @T.prim_func
    def pool(A: T.Buffer((8,), "float32"), P: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 2):
            with T.block("P"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    P[vi] = T.float32(0.0)
                P[vi] = P[vi] + A[vi * 2 + vk]

    @T.prim_func
    def two_stores(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]
                B[3 - vi] = A[vi]

    @T.prim_func
    def no_blocks(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("relu", OpPatternKind.kElemWise),
        ("add", OpPatternKind.kElemWise),
        # elementwise in A, broadcast in B: the block follows A, so element-wise (as TVM)
        ("bias_add", OpPatternKind.kElemWise),
        ("broadcast_to", OpPatternKind.kBroadcast),
        ("broadcast_unit", OpPatternKind.kBroadcast),
        ("transpose", OpPatternKind.kInjective),
        ("row_sum", OpPatternKind.kCommReduce),
        ("matmul", OpPatternKind.kOutEWiseFusable),
        ("matmul_add", OpPatternKind.kOutEWiseFusable),
        ("sum_then_scale", OpPatternKind.kOutEWiseFusable),
        ("pool", OpPatternKind.kOutEWiseFusable),
        ("two_stores", OpPatternKind.kOpaque),
        ("no_blocks", OpPatternKind.kOpaque),
    ],
)
def test_analyze_op_pattern(name: str, kind: OpPatternKind) -> None:
    assert analyze_op_pattern(Kernels[name]) == kind


def test_pass_sets_int_attr_and_leaves_input_alone() -> None:
    after = AnnotateTIROpPattern()(Kernels)
    assert after["matmul"].attrs["op_pattern"] == 4
    assert type(after["matmul"].attrs["op_pattern"]) is int
    assert after["transpose"].attrs["op_pattern"] == 2
    assert "op_pattern" not in Kernels["matmul"].attrs
    # The attribute prints and parses back.
    assert 'T.func_attr({"op_pattern": 0})' in after["relu"].script()


def test_existing_attr_is_kept() -> None:
    mod = Kernels.copy()
    mod["relu"] = mod["relu"].with_attr("op_pattern", 8)
    after = AnnotateTIROpPattern()(mod)
    assert after["relu"].attrs["op_pattern"] == 8
