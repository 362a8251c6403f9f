"""decompose_reduction: the init becomes its own block before the chosen loop."""

from __future__ import annotations

import pytest
from schedule_helpers import (
    assert_same_numerics,
    mm_relu,
    recomputed_row_sum,
    row_normalize,
    row_sum_13,
)

from mlckit import tir
from mlckit.backend import generate_function
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


def test_decompose_at_the_reduction_loop():
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    _, _, k = sch.get_loops(y)
    init = sch.decompose_reduction(y, k)
    assert init.name == "Y_init" and y.name == "Y_update"

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i, j in T.grid(128, 128):
            with T.block("Y_init"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.float32(0)
            for k in range(128):
                with T.block("Y_update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)
    source = generate_function(sch.mod["main"], "mm_relu").source
    assert "if k == 0" not in source and "# block Y_init" in source


def test_decompose_at_an_outer_loop_copies_the_spatial_loops():
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    i, _, _ = sch.get_loops(y)
    sch.decompose_reduction(y, i)

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i_init, j_init in T.grid(128, 128):
            with T.block("Y_init"):
                vi, vj = T.axis.remap("SS", [i_init, j_init])
                Y[vi, vj] = T.float32(0)
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y_update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_a_reduction_predicate_stays_with_the_update():
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    _, _, k = sch.get_loops(y)
    k0, _ = sch.split(k, factors=[None, 5])
    sch.decompose_reduction(y, k0)
    text = sch.mod.script()
    assert text.count("T.where(k_0 * 5 + k_1 < 128)") == 1
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def _assert_fails(sch, call, message):
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        call()
    assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == steps


def test_bad_decompositions_raise_and_leave_the_schedule_unchanged():
    sch = tir.Schedule(mm_relu)
    y, c = sch.get_block("Y"), sch.get_block("C")
    _, j, k = sch.get_loops(y)
    c_i, _ = sch.get_loops(c)
    _assert_fails(
        sch, lambda: sch.decompose_reduction(c, c_i), "decompose_reduction: block 'C' has no init"
    )
    _assert_fails(
        sch,
        lambda: sch.decompose_reduction(y, c_i),
        "decompose_reduction: loop 'i' does not enclose block 'Y'",
    )
    sch.reorder(k, j)
    _assert_fails(
        sch,
        lambda: sch.decompose_reduction(y, j),
        "decompose_reduction: loop 'j' is inside reduction loop 'k' of block 'Y'",
    )


def test_decompose_refuses_a_reduction_recomputed_under_the_loop():
    # Moved before loop j, B's init would run once per row, and B's terms add up 10 times.
    sch = recomputed_row_sum()
    assert_same_numerics(row_normalize, sch.mod, [(6, 10), (6, 10)])
    block = sch.get_block("B")
    _, j, _ = sch.get_loops(block)
    before = sch.mod
    with pytest.raises(ScheduleError, match="may compute an instance more than once"):
        sch.decompose_reduction(block, j)
    assert_structural_equal(sch.mod, before)
    # Inside loop j every instance runs once per run of the loops left.
    _, _, k = sch.get_loops(block)
    sch.decompose_reduction(block, k)
    assert_same_numerics(row_normalize, sch.mod, [(6, 10), (6, 10)])


def test_decompose_a_blockized_tile_under_a_non_dividing_split():
    # The tiles of B_o past row 7 are skipped by B_o's own predicate; the init nest that
    # decompose_reduction builds for B_o must not refer to B_o's loops.
    sch = tir.Schedule(row_sum_13)
    i, _ = sch.get_loops(sch.get_block("B"))
    i0, _, i2 = sch.split(i, factors=[None, 4, 1])
    outer = sch.blockize(i2)
    sch.decompose_reduction(outer, i0)
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])
