"""split: nested loops, inferred factors, predicates, handles, the trace, and bad splits."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


def test_split_by_a_divisor_matches_the_expected_loop_nest():
    sch = tir.Schedule(mm_relu)
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    assert sch.get(j0).extent.value == 32 and sch.get(j1).extent.value == 4

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i, j_0, j_1, k in T.grid(128, 32, 4, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_non_dividing_split_adds_a_predicate_and_keeps_numerics():
    sch = tir.Schedule(mm_relu)
    _, _, k = sch.get_loops(sch.get_block("Y"))
    k0, _ = sch.split(k, factors=[None, 5])
    assert sch.get(k0).extent.value == 26
    assert "T.where(k_0 * 5 + k_1 < 128)" in sch.mod.script()
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_trace_prints_and_replays():
    sch = tir.Schedule(mm_relu)
    i, _, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(i, factors=[2, None, 8])
    text = str(sch.trace)
    assert 'b0 = sch.get_block(name="Y")' in text.replace("'", '"')
    assert "l4, l5, l6 = sch.split(loop=l1, factors=[2, None, 8])" in text
    fresh = tir.Schedule(mm_relu)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


def test_bad_splits_raise_and_leave_the_schedule_unchanged():
    sch = tir.Schedule(mm_relu)
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    before = sch.mod
    cases = [
        ([None, None], "at most one factor"),
        ([4], "at least two factors"),
        ([0, None], "must be positive"),
        ([2, 4], "multiply to 8, less than its extent 128"),
    ]
    for factors, message in cases:
        with pytest.raises(ScheduleError, match=f"split: .*{message}"):
            sch.split(j, factors=factors)
        assert sch.mod is before or assert_structural_equal(sch.mod, before) is None
    assert len(sch.trace) == 2
    sch.split(j, factors=[None, 4])
    with pytest.raises(ScheduleError, match="loop 'j' no longer exists"):
        sch.split(j, factors=[None, 2])
    with pytest.raises(ScheduleError, match="no block named 'Z'.*blocks: Y, C"):
        sch.get_block("Z")


def test_split_by_another_symbolic_extent_is_not_taken_as_exact():
    # Two different shape variables are different extents (not "equal up to renaming"):
    # splitting a loop over n by [m, 1] cannot be proven to cover it.
    @T.prim_func
    def copy(a: T.handle, b: T.handle):
        n = T.int32()
        m = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (m,), "float32")
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi]

    sch = tir.Schedule(copy)
    (i,) = sch.get_loops(sch.get_block("B"))
    m = copy.buffer_map[copy.params[1]].shape[0]
    with pytest.raises(ScheduleError, match="less than its extent"):
        sch.split(i, [m, 1])
