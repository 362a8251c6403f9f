"""Chapter 2's exercises: the reference solutions pass, and typical wrong answers fail with the
hint written for them (never with a traceback)."""

from __future__ import annotations

import pytest
from replies import assert_verdict

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.exercises import check, exercises, hint
from mlckit.exercises.ch2 import MyBmmRelu, TargetModule
from mlckit.exercises.solutions import ch2 as solutions
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


@pytest.mark.parametrize("name", ["broadcast_add", "conv2d", "bmm_relu"])
def test_each_reference_solution_passes(name):
    result = check(f"ch2.{name}", getattr(solutions, name)())
    assert result.passed, str(result)


def test_the_chapter_has_three_exercises_with_graded_hints():
    names = [e.name for e in exercises(2)]
    assert names == ["ch2.broadcast_add", "ch2.conv2d", "ch2.bmm_relu"]
    for name in names:
        assert "last hint" in str(hint(name, 3))


@pytest.mark.parametrize("name", ["ch2.broadcast_add", "ch2.conv2d", "ch2.bmm_relu"])
@pytest.mark.parametrize("answer", [None, 42, "add", tir.Schedule])
def test_answers_of_the_wrong_kind_never_raise(name, answer):
    result = check(name, answer)
    assert_verdict(result, "expected a PrimFunc")


# ---------------------------------------------------------------------------- broadcast_add


def test_broadcasting_along_the_rows_is_named():
    @T.prim_func
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"), C: T.Buffer((4, 4), "int64")):
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi]

    result = check("ch2.broadcast_add", add)
    assert not result
    assert_verdict(result, "broadcast along the wrong axis")
    assert "B[vj]" in result.hint


def test_float_buffers_are_named_not_a_numba_error():
    @T.prim_func
    def add(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4,), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    result = check("ch2.broadcast_add", add)
    assert not result
    assert result.message == "parameter 0 (A) has dtype float32; the exercise passes int64 arrays"


def test_a_spatial_axis_declared_a_reduction_is_named():
    @T.prim_func
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"), C: T.Buffer((4, 4), "int64")):
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SR", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    result = check("ch2.broadcast_add", add)
    assert not result
    assert_verdict(result, "declares vj a reduction axis")
    assert "'S'" in result.hint


# ----------------------------------------------------------------------------------- conv2d


def conv(axes: str = "SSSSRRR", out_hw: int = 6):
    """The convolution with the block axes declared as ``axes`` and an output of
    ``(1, 2, out_hw, out_hw)``."""

    @T.prim_func
    def conv(
        data: T.Buffer((1, 1, 8, 8), "int64"),
        weight: T.Buffer((2, 1, 3, 3), "int64"),
        out: T.Buffer((1, 2, out_hw, out_hw), "int64"),
    ):
        for n, co, h, w, ci, kh, kw in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.block("out"):
                vn, vco, vh, vw, vci, vkh, vkw = T.axis.remap(axes, [n, co, h, w, ci, kh, kw])
                with T.init():
                    out[vn, vco, vh, vw] = T.int64(0)
                out[vn, vco, vh, vw] = (
                    out[vn, vco, vh, vw]
                    + data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, vkh, vkw]
                )

    return conv


def test_the_mistake_helper_builds_the_right_convolution_by_default():
    assert check("ch2.conv2d", conv())


def test_a_convolution_without_init_is_told_to_add_one():
    @T.prim_func
    def conv(
        data: T.Buffer((1, 1, 8, 8), "int64"),
        weight: T.Buffer((2, 1, 3, 3), "int64"),
        out: T.Buffer((1, 2, 6, 6), "int64"),
    ):
        for n, co, h, w, ci, kh, kw in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.block("out"):
                vn, vco, vh, vw, vci, vkh, vkw = T.axis.remap("SSSSRRR", [n, co, h, w, ci, kh, kw])
                out[vn, vco, vh, vw] = (
                    out[vn, vco, vh, vw]
                    + data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, vkh, vkw]
                )

    result = check("ch2.conv2d", conv)
    assert not result
    assert_verdict(result, "starts from what `out` held")
    assert "T.init()" in result.hint


def test_a_flipped_kernel_is_named():
    @T.prim_func
    def conv(
        data: T.Buffer((1, 1, 8, 8), "int64"),
        weight: T.Buffer((2, 1, 3, 3), "int64"),
        out: T.Buffer((1, 2, 6, 6), "int64"),
    ):
        for n, co, h, w, ci, kh, kw in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.block("out"):
                vn, vco, vh, vw, vci, vkh, vkw = T.axis.remap("SSSSRRR", [n, co, h, w, ci, kh, kw])
                with T.init():
                    out[vn, vco, vh, vw] = T.int64(0)
                out[vn, vco, vh, vw] = (
                    out[vn, vco, vh, vw]
                    + data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, 2 - vkh, 2 - vkw]
                )

    result = check("ch2.conv2d", conv)
    assert_verdict(result, "flips the kernel")


def test_a_reduction_axis_declared_spatial_is_named():
    result = check("ch2.conv2d", conv(axes="SSSSSRR"))
    assert not result
    assert_verdict(result, "declares vci spatial")
    assert "T.axis.reduce" in result.hint


def test_a_wrong_output_shape_is_named():
    result = check("ch2.conv2d", conv(out_hw=8))
    assert not result
    assert_verdict(result, "parameter 2 (out) has shape (1, 2, 8, 8)")
    assert_verdict(result, "(1, 2, 6, 6)")


def test_the_notebook_skeleton_of_conv2d_is_told_to_sum():
    @T.prim_func
    def conv(
        data: T.Buffer((1, 1, 8, 8), "int64"),
        weight: T.Buffer((2, 1, 3, 3), "int64"),
        out: T.Buffer((1, 2, 6, 6), "int64"),
    ):
        for n, co, h, w in T.grid(1, 2, 6, 6):
            with T.block("out"):
                vn, vco, vh, vw = T.axis.remap("SSSS", [n, co, h, w])
                out[vn, vco, vh, vw] = T.int64(0)

    result = check("ch2.conv2d", conv)
    assert_verdict(result, "every element of out is 0")


# --------------------------------------------------------------------------------- bmm_relu


def test_the_reference_schedule_is_the_course_target_program():
    assert_structural_equal(solutions.bmm_relu().mod, TargetModule)


def test_the_target_passes_with_its_own_loop_names():
    # TargetModule's loops are i0, i1, i2_0, ax0...; the reference schedule's n, i, j_0, ...
    assert check("ch2.bmm_relu", TargetModule)


def schedule(
    j_factor=8,
    k_factor=4,
    reorder=True,
    compute_c_at_j0=True,
    parallel=True,
    decompose=True,
    unroll=True,
):
    """A schedule of MyBmmRelu that leaves out or changes one step of the reference."""
    sch = tir.Schedule(MyBmmRelu)
    block_Y = sch.get_block("Y", func_name="bmm_relu")
    block_C = sch.get_block("C", func_name="bmm_relu")
    n, _, j, k = sch.get_loops(block_Y)
    j_0, j_1 = sch.split(j, factors=[None, j_factor])
    k_0, k_1 = sch.split(k, factors=[None, k_factor])
    if reorder:
        sch.reorder(j_0, k_0, k_1, j_1)
    if compute_c_at_j0:
        sch.reverse_compute_at(block_C, j_0)
    if parallel:
        sch.parallel(n)
    if decompose:
        sch.decompose_reduction(block_Y, k_0)
    if unroll:
        sch.unroll(k_1)
    return sch


def vectorized(sch: tir.Schedule, *blocks: str) -> tir.Schedule:
    for name in blocks:
        sch.vectorize(sch.get_loops(sch.get_block(name))[-1])
    return sch


# (the wrong schedule, words of the verdict's first sentence, words of the hint)
WRONG_SCHEDULES = {
    "unscheduled": (
        lambda: tir.Schedule(MyBmmRelu),
        "your j loop is not split (one loop of extent 128); the exercise asks for extents (16, 8)",
        "sch.split(j, factors=[None, 8])",
    ),
    "j-split-by-4": (
        lambda: vectorized(schedule(j_factor=4), "Y_init", "C"),
        "block 'Y_update': your j loop is split into extents (32, 4); the exercise asks for "
        "(16, 8)",
        "sch.split(j, factors=[None, 8]) on the unsplit loop",
    ),
    "k-split-by-8": (
        lambda: vectorized(schedule(k_factor=8), "Y_init", "C"),
        "your k loop is split into extents (16, 8); the exercise asks for (32, 4)",
        "sch.split(k, factors=[None, 4])",
    ),
    "not-reordered": (
        lambda: schedule(reorder=False, decompose=False),
        "walk the axes (n, i, j, j, k, k), outermost first; the target's walk (n, i, j, k, k, j)",
        "sch.reorder(j_0, k_0, k_1, j_1)",
    ),
    "C-not-moved": (
        lambda: vectorized(schedule(compute_c_at_j0=False), "Y_init", "C"),
        "block C runs in a loop nest of its own, not under Y's j_0 loop",
        "sch.reverse_compute_at(block_C, j_0)",
    ),
    "no-decompose": (
        lambda: vectorized(schedule(decompose=False), "C"),
        "block Y still sets Y to 0 inside its reduction",
        "sch.decompose_reduction(block_Y, k_0)",
    ),
    # The trap of issue 23: the hint for parallel must not lead to decompose_reduction first.
    "no-parallel-nor-decompose": (
        lambda: vectorized(schedule(parallel=False, decompose=False), "C"),
        "your batch loop n is serial; in the target it is parallel",
        "sch.parallel(n), before decompose_reduction",
    ),
    "no-parallel": (
        lambda: vectorized(schedule(parallel=False), "Y_init", "C"),
        "your batch loop n is serial; in the target it is parallel",
        "start again from MyBmmRelu and call sch.parallel(n) before decompose_reduction",
    ),
    "no-unroll": (
        lambda: vectorized(schedule(unroll=False), "Y_init", "C"),
        "block 'Y_update': your loop k_1 (extent 4) is serial; in the target it is unrolled",
        "sch.unroll(k_1)",
    ),
    "Y_init-not-vectorized": (
        lambda: vectorized(schedule(), "C"),
        "block 'Y_init': your loop j_1_init (extent 8) is serial; in the target it is vectorized",
        "sch.vectorize(j_1_init)",
    ),
    "C-not-vectorized": (
        lambda: vectorized(schedule(), "Y_init"),
        "block 'C': your loop ax0 (extent 8) is serial; in the target it is vectorized",
        "sch.vectorize(ax0)",
    ),
}


@pytest.mark.parametrize("mistake", WRONG_SCHEDULES)
def test_a_wrong_schedule_gets_a_short_verdict_for_its_mistake(mistake):
    answer, cause, fix = WRONG_SCHEDULES[mistake]
    result = check("ch2.bmm_relu", answer())
    assert_verdict(result, cause)
    assert fix in result.hint
    # The diff is against the reference's spelling (j_0, j_1), so only what differs shows.
    assert "i2_0" not in result.diff.text


def test_the_hint_for_a_missing_parallel_leads_to_a_schedule_that_passes():
    sch = vectorized(schedule(parallel=False, decompose=False), "C")
    assert "before decompose_reduction" in check("ch2.bmm_relu", sch).hint
    sch.parallel(sch.get_loops(sch.get_block("Y"))[0])
    sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[3])
    vectorized(sch, "Y_init")
    assert check("ch2.bmm_relu", sch)


def test_a_hand_written_bmm_without_relu_fails_on_numerics():
    @T.prim_func
    def bmm(
        A: T.Buffer((16, 128, 128), "float32"),
        B: T.Buffer((16, 128, 128), "float32"),
        C: T.Buffer((16, 128, 128), "float32"),
    ):
        for n, i, j, k in T.grid(16, 128, 128, 128):
            with T.block("C"):
                vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
                with T.init():
                    C[vn, vi, vj] = T.float32(0)
                C[vn, vi, vj] = C[vn, vi, vj] + A[vn, vi, vk] * B[vn, vk, vj]

    result = check("ch2.bmm_relu", bmm)
    assert_verdict(result, "elements of C are wrong")


def test_vectorizing_the_init_loop_after_decompose_reduction_is_allowed():
    # Y_update writes Y too, but outside the loop: it runs after all of the loop's iterations.
    sch = schedule()
    vectorized(sch, "Y_init")
    assert sch.get(sch.get_loops(sch.get_block("Y_init"))[-1]).kind == tir.ForKind.VECTORIZED


def test_parallel_after_decompose_reduction_is_refused_as_the_task_says():
    sch = schedule(parallel=False)
    n = sch.get_loops(sch.get_block("Y_init"))[0]
    with pytest.raises(ScheduleError, match="block 'Y_init' under loop 'n' is not the only") as err:
        sch.parallel(n)
    assert str(err.value).endswith("call parallel on loop 'n' before decompose_reduction")
