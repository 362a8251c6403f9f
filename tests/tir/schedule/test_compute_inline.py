"""compute_inline and reverse_compute_inline: the block and its buffer go, numerics stay."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


@T.prim_func
def elementwise_chain(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


@T.prim_func
def transpose_then_add(A: T.Buffer((16, 8), "float32"), C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vj, vi] = A[vi, vj]
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + B[vi, vj]


@T.prim_func
def shifted_store(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi + 1] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi + 1]


@T.prim_func
def two_producers(
    A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")
):
    B = T.alloc_buffer((16,), "float32")
    E = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("E"):
            vi = T.axis.remap("S", [i])
            E[vi] = D[vi] * T.float32(3)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] * E[vi]


def test_compute_inline_replaces_each_load_by_the_producer_value():
    sch = tir.Schedule(elementwise_chain)
    sch.compute_inline(sch.get_block("B"))

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "elementwise_chain"})
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(elementwise_chain, sch.mod, [(128, 128)] * 2)


def test_compute_inline_maps_permuted_store_indices():
    sch = tir.Schedule(transpose_then_add)
    sch.compute_inline(sch.get_block("B"))

    @T.prim_func
    def expected(A: T.Buffer((16, 8), "float32"), C: T.Buffer((8, 16), "float32")):
        T.func_attr({"global_symbol": "transpose_then_add"})
        for i, j in T.grid(8, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vj, vi] + A[vj, vi]

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(transpose_then_add, sch.mod, [(16, 8), (8, 16)])


def test_reverse_compute_inline_moves_the_consumer_store_into_the_producer():
    sch = tir.Schedule(elementwise_chain)
    sch.reverse_compute_inline(sch.get_block("C"))

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "elementwise_chain"})
        for i, j in T.grid(128, 128):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(elementwise_chain, sch.mod, [(128, 128)] * 2)


def test_reverse_compute_inline_through_a_transposing_producer():
    sch = tir.Schedule(transpose_then_add)
    sch.reverse_compute_inline(sch.get_block("C"))

    @T.prim_func
    def expected(A: T.Buffer((16, 8), "float32"), C: T.Buffer((8, 16), "float32")):
        T.func_attr({"global_symbol": "transpose_then_add"})
        for i, j in T.grid(16, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vj, vi] = A[vi, vj] + A[vi, vj]

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(transpose_then_add, sch.mod, [(16, 8), (8, 16)])


def _assert_fails(sch, call, message):
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        call()
    assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == steps


def test_blocks_that_cannot_be_inlined_raise_and_leave_the_schedule_unchanged():
    sch = tir.Schedule(mm_relu)
    y, c = sch.get_block("Y"), sch.get_block("C")
    _assert_fails(sch, lambda: sch.compute_inline(y), "compute_inline: block 'Y' is a reduction")
    _assert_fails(
        sch, lambda: sch.compute_inline(c), "compute_inline: block 'C' writes C, an output"
    )
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_inline(c),
        "reverse_compute_inline: producer block 'Y' is a reduction",
    )

    sch = tir.Schedule(shifted_store)
    b, c = sch.get_block("B"), sch.get_block("C")
    _assert_fails(
        sch,
        lambda: sch.compute_inline(b),
        r"compute_inline: block 'B' stores to B\[vi \+ 1\]; the store indices must be distinct",
    )
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_inline(c),
        "reverse_compute_inline: block 'C' must load B at one point",
    )

    sch = tir.Schedule(two_producers)
    c = sch.get_block("C")
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_inline(c),
        r"reverse_compute_inline: block 'C' has 2 producer blocks \('B', 'E'\); it needs exactly",
    )


@T.prim_func
def two_consumers(
    A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")
):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] + T.float32(1)
    for i in range(8):
        with T.block("D"):
            vi = T.axis.remap("S", [i])
            D[vi] = B[vi] * T.float32(3)


def test_reverse_compute_inline_refuses_a_producer_read_by_another_block():
    # Inlining C replaced B's store, and D then read a buffer nobody wrote.
    sch = tir.Schedule(two_consumers)
    with pytest.raises(ScheduleError, match="also read by 'D'"):
        sch.reverse_compute_inline(sch.get_block("C"))
