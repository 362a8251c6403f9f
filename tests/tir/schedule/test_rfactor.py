"""rfactor: partial reductions into an ``_rf`` buffer for sum and max, numerics, errors."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


@T.prim_func
def row_sum(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 128):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_max(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-3.0e38)
            B[vi] = T.max(B[vi], A[vi, vk])


def test_rfactor_of_the_inner_part_of_a_split_reduction():
    sch = tir.Schedule(row_sum)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(k1, factor_axis=0)
    assert rf.name == "B_rf"

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
        T.func_attr({"global_symbol": "row_sum"})
        B_rf = T.alloc_buffer((4, 128), "float32")
        for i, k_0, k_1 in T.grid(128, 32, 4):
            with T.block("B_rf"):
                vk_1, vi, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])
                with T.init():
                    B_rf[vk_1, vi] = T.float32(0)
                B_rf[vk_1, vi] = B_rf[vk_1, vi] + A[vi, vk_0 * 4 + vk_1]
        for i, k_1 in T.grid(128, 4):
            with T.block("B"):
                vk_1, vi = T.axis.remap("RS", [k_1, i])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + B_rf[vk_1, vi]

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(row_sum, sch.mod, [(128, 128), (128,)])


def test_rfactor_of_a_max_with_a_negative_factor_axis():
    sch = tir.Schedule(row_max)
    _, k = sch.get_loops(sch.get_block("B"))
    k0, _ = sch.split(k, factors=[8, None])
    sch.rfactor(k0, factor_axis=-1)

    @T.prim_func
    def expected(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16,), "float32")):
        T.func_attr({"global_symbol": "row_max"})
        B_rf = T.alloc_buffer((16, 8), "float32")
        for i, k_0, k_1 in T.grid(16, 8, 8):
            with T.block("B_rf"):
                vk_0, vi, vk_1 = T.axis.remap("SSR", [k_0, i, k_1])
                with T.init():
                    B_rf[vi, vk_0] = T.float32(-3.0e38)
                B_rf[vi, vk_0] = T.max(B_rf[vi, vk_0], A[vi, vk_0 * 8 + vk_1])
        for i, k_0 in T.grid(16, 8):
            with T.block("B"):
                vk_0, vi = T.axis.remap("RS", [k_0, i])
                with T.init():
                    B[vi] = T.float32(-3.0e38)
                B[vi] = T.max(B[vi], B_rf[vi, vk_0])

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(row_max, sch.mod, [(16, 64), (16,)])


def test_rfactor_of_the_whole_reduction_loop_stores_each_term():
    sch = tir.Schedule(mm_relu)
    _, _, k = sch.get_loops(sch.get_block("Y"))
    sch.rfactor(k, factor_axis=2)
    rf = sch.get(sch.get_block("Y_rf"))
    # With no reduction left in it the rfactor block just stores the products.
    assert rf.init is None
    assert [iv.var.name_hint for iv in rf.iter_vars] == ["vk", "vi", "vj"]
    assert tuple(d.value for d in rf.writes[0].buffer.shape) == (128, 128, 128)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_trace_replays():
    sch = tir.Schedule(row_sum)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 8])
    sch.rfactor(k1, 1)
    assert "sch.rfactor(loop=l4, factor_axis=1)" in str(sch.trace)
    fresh = tir.Schedule(row_sum)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


def test_bad_rfactors_raise_and_leave_the_schedule_unchanged():
    sch = tir.Schedule(mm_relu)
    i, _, k = sch.get_loops(sch.get_block("Y"))
    ci, _ = sch.get_loops(sch.get_block("C"))
    before = sch.mod
    cases = [
        (i, 0, r"rfactor: loop 'i' is a spatial loop of block 'Y': the spatial iter var 'vi'"),
        (ci, 0, r"rfactor: block 'C' is not a reduction block: it has no T.init\(\)"),
        (k, 3, r"rfactor: factor_axis 3 is out of range for buffer 'Y' of 2 dimension\(s\)"),
    ]
    for loop, axis, message in cases:
        with pytest.raises(ScheduleError, match=message):
            sch.rfactor(loop, axis)
        assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == 4


@T.prim_func
def not_a_reduction(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = A[vi, vk] - B[vi]


def test_an_update_that_is_not_a_known_reducer_is_rejected():
    sch = tir.Schedule(not_a_reduction)
    _, k = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="is not a sum, product, max or min of B"):
        sch.rfactor(k, 0)
    assert len(sch.trace) == 2


@T.prim_func
def row_sum_10(A: T.Buffer((7, 10), "float32"), B: T.Buffer((7,), "float32")):
    for i, k in T.grid(7, 10):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_max_10(A: T.Buffer((7, 10), "float32"), B: T.Buffer((7,), "float32")):
    for i, k in T.grid(7, 10):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-3.0e38)
            B[vi] = T.max(B[vi], A[vi, vk])


@pytest.mark.parametrize("func", [row_sum_10, row_max_10], ids=["sum", "max"])
@pytest.mark.parametrize("target", ["python", "llvm"])
def test_rfactor_after_a_split_wider_than_the_loop_reads_only_started_partials(func, target):
    # k = 10 split by 16: partial results 10..15 have no iteration at all.
    sch = tir.Schedule(func)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 16])
    sch.rfactor(k1, 0)
    assert "T.where(k_1 < 10)" in sch.mod.script()
    assert_same_numerics(func, sch.mod, [(7, 10), (7,)], target=target)


def test_rfactor_keeps_a_spatial_predicate_on_the_write_back():
    sch = tir.Schedule(row_sum_10)
    i, k = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 4])
    _, k1 = sch.split(k, factors=[None, 3])
    sch.rfactor(k1, 0)
    write_back = sch.get(sch.get_block("B"))
    realize = next(r for r in sch.walk_blocks(sch.func.body) if r.block is write_back)
    assert realize.predicate.script() == "i_0 * 4 + i_1 < 7"
    assert_same_numerics(row_sum_10, sch.mod, [(7, 10), (7,)])


@T.prim_func
def row_sum_from_3(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k >= 3)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_rfactor_refuses_a_predicate_that_skips_the_first_reduction_iteration():
    sch = tir.Schedule(row_sum_from_3)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 4])
    before = sch.mod
    with pytest.raises(
        ScheduleError, match=r"rfactor: the predicate k_0 \* 4 \+ k_1 >= 3 of block .B. may hold"
    ):
        sch.rfactor(k1, 0)
    assert_structural_equal(sch.mod, before)
