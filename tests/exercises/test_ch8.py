"""Chapter 8's exercises: the reference solutions pass, and typical wrong answers fail with the
message and hint written for them (never with a traceback)."""

from __future__ import annotations

import pytest
from replies import assert_verdict

from mlckit import tir
from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.ch8 import MatmulNN
from mlckit.exercises.solutions import ch8 as solutions
from mlckit.script import tir as T


def test_the_chapter_has_two_exercises_with_graded_hints():
    names = [e.name for e in exercises(8)]
    assert names == ["ch8.mma16_desc", "ch8.tensorize_mma16"]
    for name in names:
        assert "last hint" in str(hint(name, 3))
        assert solution(name)._repr_markdown_().startswith("```python\ndef ")


@pytest.mark.parametrize("name", ["mma16_desc", "tensorize_mma16"])
def test_each_reference_solution_passes(name):
    result = check(f"ch8.{name}", getattr(solutions, name)())
    assert result.passed, str(result)


@pytest.mark.parametrize("name", ["ch8.mma16_desc", "ch8.tensorize_mma16"])
@pytest.mark.parametrize("answer", [None, 42, "sch", tir.Schedule])
def test_answers_of_the_wrong_kind_never_raise(name, answer):
    result = check(name, answer)
    assert_verdict(result, "expected a PrimFunc")


# ---------------------------------------------------------------------------- mma16_desc
@T.prim_func
def transposed_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    # The chapter's tmm16: C += A @ B.T, the starting point of the exercise.
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


@T.prim_func
def desc_in_global_memory(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16)
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]


@T.prim_func
def desc_with_other_loop_order(a: T.handle, b: T.handle, c: T.handle) -> None:
    # The right tiles, computed k-outermost: not the loop nest tensorize meets.
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for k, i, j in T.grid(16, 16, 16):
            with T.block(""):
                vkk, vii, vjj = T.axis.remap("RSS", [k, i, j])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]


@T.prim_func
def desc_of_two_operands(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", scope="global.A_reg")
    C = T.match_buffer(c, (16, 16), "float32", scope="global.accumulator")
    for i, j in T.grid(16, 16):
        with T.block(""):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = C[vi, vj] + A[vi, vj]


def test_the_transposed_product_is_caught_by_the_numbers():
    result = check("ch8.mma16_desc", transposed_desc)
    assert not result
    assert_verdict(result, "computes C += A @ B.T, the chapter's tmm16")
    assert "A[vii, vkk]" in result.hint


def test_an_operand_in_the_wrong_scope_is_named():
    result = check("ch8.mma16_desc", desc_in_global_memory)
    assert not result
    assert_verdict(result, "parameter 1 (B) is in scope 'global'")
    assert_verdict(result, "'global.B_reg'")
    assert "scope='global.B_reg'" in result.hint


def test_a_description_tensorize_refuses_shows_its_first_difference():
    result = check("ch8.mma16_desc", desc_with_other_loop_order)
    assert not result
    assert_verdict(result, "computes the right tiles, but tensorize refuses it")
    assert_verdict(result, "does not match intrinsic")
    assert "T.grid(16, 16, 16)" in result.hint


def test_the_wrong_number_of_operands_is_named():
    result = check("ch8.mma16_desc", desc_of_two_operands)
    assert not result
    assert_verdict(result, "takes 2 parameters; the instruction has three operands")


# ------------------------------------------------------------------------ tensorize_mma16
def staged(scopes=True):
    """The reference schedule up to tensorize (without the scratch scopes when asked)."""
    sch = tir.Schedule(MatmulNN)
    i, j, k = sch.get_loops("matmul")
    i_0, i_1 = sch.split(i, factors=[None, 16])
    j_0, j_1 = sch.split(j, factors=[None, 16])
    k_0, k_1 = sch.split(k, factors=[None, 16])
    sch.reorder(i_0, j_0, k_0, i_1, j_1, k_1)
    tile = sch.blockize(i_1)
    if scopes:
        sch.compute_at(sch.cache_read(tile, 0, "global.A_reg"), k_0)
        sch.compute_at(sch.cache_read(tile, 1, "global.B_reg"), k_0)
        sch.reverse_compute_at(sch.cache_write(tile, 0, "global.accumulator"), j_0)
    sch.decompose_reduction(tile, k_0)
    return sch


def test_the_unscheduled_program_is_told_to_use_the_scopes():
    result = check("ch8.tensorize_mma16", tir.Schedule(MatmulNN))
    assert not result
    assert_verdict(result, "never calls the instruction ch8_mma16")
    assert "global.A_reg, global.B_reg, global.accumulator" in result.hint


def test_a_staged_program_is_told_to_tensorize():
    result = check("ch8.tensorize_mma16", staged())
    assert not result
    assert_verdict(result, "never calls the instruction ch8_mma16")
    assert "sch.tensorize(tile, 'ch8_mma16')" in result.hint


def test_tensorize_without_the_scopes_is_refused_by_the_schedule():
    sch = staged(scopes=False)
    with pytest.raises(tir.schedule.ScheduleError, match="ch8_mma16"):
        sch.tensorize("matmul_o_update", "ch8_mma16")
