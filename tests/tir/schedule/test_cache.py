"""cache_read / cache_write / set_scope: placement, regions, renamed accesses, numerics, errors."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T

SHAPES = [(128, 128)] * 3


def test_cache_read_of_an_input_copies_it_first():
    sch = tir.Schedule(mm_relu)
    block = sch.cache_read(sch.get_block("Y"), 0, "shared")
    assert block.name == "A_shared"

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        A_shared = T.alloc_buffer((128, 128), "float32", scope="shared")
        for ax0, ax1 in T.grid(128, 128):
            with T.block("A_shared"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                A_shared[v0, v1] = A[v0, v1]
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A_shared[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert sch.get(block).writes[0].buffer.scope == "shared"
    assert_same_numerics(mm_relu, sch.mod, SHAPES)


def test_cache_write_then_cache_read_of_an_intermediate_sit_between_producer_and_consumer():
    sch = tir.Schedule(mm_relu)
    assert sch.cache_write(sch.get_block("Y"), 0, "local").name == "Y_local"
    # Y's only reader now is the copy-back block: a cache_read of C's input goes after it.
    sch.cache_read(sch.get_block("C"), 0, "shared")

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        Y_local = T.alloc_buffer((128, 128), "float32", scope="local")
        Y_shared = T.alloc_buffer((128, 128), "float32", scope="shared")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y_local[vi, vj] = T.float32(0)
                Y_local[vi, vj] = Y_local[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0, ax1 in T.grid(128, 128):
            with T.block("Y_local"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                Y[v0, v1] = Y_local[v0, v1]
        for ax0, ax1 in T.grid(128, 128):
            with T.block("Y_shared"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                Y_shared[v0, v1] = Y[v0, v1]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y_shared[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, SHAPES)


@T.prim_func
def fused_rows(A: T.Buffer((64, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    B = T.alloc_buffer((64, 32), "float32")
    for i in range(64):
        for j in range(32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(32):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)


def test_cache_write_under_a_shared_loop_copies_one_row_inside_it():
    sch = tir.Schedule(fused_rows)
    sch.cache_write(sch.get_block("B"), 0, "local")

    @T.prim_func
    def expected(A: T.Buffer((64, 32), "float32"), C: T.Buffer((64, 32), "float32")):
        T.func_attr({"global_symbol": "fused_rows"})
        B = T.alloc_buffer((64, 32), "float32")
        B_local = T.alloc_buffer((64, 32), "float32", scope="local")
        for i in range(64):
            for j in range(32):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B_local[vi, vj] = A[vi, vj] * T.float32(2)
            for ax0, ax1 in T.grid(1, 32):
                with T.block("B_local"):
                    v0 = T.axis.spatial(64, i + ax0)
                    v1 = T.axis.spatial(32, ax1)
                    B[v0, v1] = B_local[v0, v1]
            for j in range(32):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(fused_rows, sch.mod, [(64, 32), (64, 32)])


def test_cache_read_of_a_row_under_a_shared_loop_keeps_numerics_on_llvm():
    sch = tir.Schedule(fused_rows)
    sch.cache_read(sch.get_block("C"), 0, "local")
    script = sch.mod.script()
    assert "v0 = T.axis.spatial(64, i + ax0)" in script
    assert "C[vi, vj] = B_local[vi, vj] + T.float32(1.0)" in script
    assert_same_numerics(fused_rows, sch.mod, [(64, 32), (64, 32)], target="llvm")


def test_set_scope_moves_an_intermediate_and_every_access():
    sch = tir.Schedule(mm_relu)
    sch.set_scope(sch.get_block("Y"), 0, "shared")
    text = sch.mod.script()
    assert 'Y_shared = T.alloc_buffer((128, 128), "float32", scope="shared")' in text
    assert "C[vi, vj] = T.max(Y_shared[vi, vj], T.float32(0.0))" in text
    assert "Y[" not in text
    assert_same_numerics(mm_relu, sch.mod, SHAPES)


def test_trace_prints_and_replays():
    sch = tir.Schedule(mm_relu)
    sch.cache_read(sch.get_block("Y"), 1, "shared")
    sch.cache_write(sch.get_block("Y"), 0, "local")
    text = str(sch.trace)
    assert "b1 = sch.cache_read(block=b0, read_buffer_index=1, storage_scope='shared')" in text
    assert "sch.cache_write(block=b2, write_buffer_index=0, storage_scope='local')" in text
    fresh = tir.Schedule(mm_relu)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


def test_bad_caching_raises_and_leaves_the_schedule_unchanged():
    sch = tir.Schedule(mm_relu)
    before = sch.mod
    y, c = sch.get_block("Y"), sch.get_block("C")
    cases = [
        (
            lambda: sch.cache_read(y, 2, "shared"),
            r"cache_read: read_buffer_index 2 is out of range",
        ),
        (lambda: sch.cache_write(c, 1, "local"), r"cache_write: write_buffer_index 1 is out of"),
        (lambda: sch.cache_read(y, 0, "texture"), r"cache_read: unknown storage scope 'texture'"),
        (lambda: sch.set_scope(c, 0, "local"), r"set_scope: buffer 'C' .* is a parameter"),
        (lambda: sch.set_scope(y, 3, "local"), r"set_scope: buffer_index 3 is out of range"),
    ]
    for call, message in cases:
        with pytest.raises(ScheduleError, match=message):
            call()
        assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == 2


def test_cache_write_of_an_update_block_without_init_is_refused():
    # After blockize and decompose_reduction, block Y accumulates into what Y_o_init starts.
    sch = tir.Schedule(mm_relu)
    _, j, k = sch.get_loops(sch.get_block("Y"))
    outer = sch.blockize(k)
    sch.decompose_reduction(outer, j)
    before = sch.mod
    with pytest.raises(ScheduleError, match="reads buffer 'Y', which it updates, and has no T"):
        sch.cache_write(sch.get_block("Y"), 0, "local")
    assert_structural_equal(sch.mod, before)


def test_a_copy_under_a_split_that_does_not_divide_its_loop_is_guarded():
    sch = tir.Schedule(fused_rows)
    (i,) = sch.get_loops(sch.get_block("B"))[:1]
    sch.split(i, factors=[None, 5])
    sch.cache_write(sch.get_block("B"), 0, "local")
    copy = next(r for r in sch.walk_blocks(sch.func.body) if r.block.name_hint == "B_local")
    assert copy.predicate.script() == "i_0 * 5 + i_1 + ax0 < 64"
    assert_same_numerics(fused_rows, sch.mod, [(64, 32), (64, 32)], target="llvm")
