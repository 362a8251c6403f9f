"""Chapter 4's exercise: the reference solution passes, and typical wrong answers fail with the
message and hint written for them (never with a traceback)."""

from __future__ import annotations

import pytest
from replies import assert_verdict

from mlckit import tir
from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.ch4 import TileMatmul
from mlckit.exercises.solutions import ch4 as solutions

NAME = "ch4.stochastic_tile_ij"


def test_the_chapter_has_one_exercise_with_graded_hints():
    assert [e.name for e in exercises(4)] == [NAME]
    assert "last hint" in str(hint(NAME, 3))
    assert solution(NAME)._repr_markdown_().startswith("```python\ndef ")


def test_the_reference_solution_passes():
    result = check(NAME, solutions.stochastic_tile_ij())
    assert result.passed, str(result)


def test_decomposing_the_reduction_still_passes():
    def with_init_apart(sch):
        solutions.stochastic_tile_ij()(sch)
        block = sch.get_block("C")
        sch.decompose_reduction(block, sch.get_loops(block)[2])

    result = check(NAME, with_init_apart)
    assert result.passed, str(result)


@pytest.mark.parametrize("answer", [None, 42, "sch", tir.Schedule(TileMatmul), TileMatmul])
def test_answers_of_the_wrong_kind_never_raise(answer):
    result = check(NAME, answer)
    assert_verdict(result, "expected a schedule function")


def tiled(sample=("i", "j"), order=True, use_samples=True, n=2):
    """A schedule function like the solution, with one typical mistake."""

    def fn(sch):
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        loops = {"i": i, "j": j, "k": k}
        parts = {}
        for name, fixed in (("i", [None, 8]), ("j", [None, 8])):
            factors = fixed
            if name in sample:
                drawn = sch.sample_perfect_tile(loop=loops[name], n=n)
                factors = drawn if use_samples else fixed
            parts[name] = sch.split(loops[name], factors)
        if order:
            sch.reorder(parts["i"][0], parts["j"][0], k, parts["i"][-1], parts["j"][-1])
        return sch

    return fn


def test_fixed_factors_are_named():
    result = check(NAME, tiled(sample=()))
    assert not result
    assert_verdict(result, "no sample_perfect_tile step")
    assert "sch.sample_perfect_tile(loop=i, n=2)" in result.hint


def test_sampling_only_j_names_the_loop_not_sampled():
    result = check(NAME, tiled(sample=("j",)))
    assert not result
    assert_verdict(result, "samples the tiling of j but not of i")
    assert "loop=i" in result.hint


def test_a_sample_that_is_not_used_is_named():
    result = check(NAME, tiled(use_samples=False))
    assert not result
    assert_verdict(result, "all 8 seeds give the same program")
    assert "factors=i_factors" in result.hint


def test_three_levels_are_named():
    result = check(NAME, tiled(n=3))
    assert not result
    assert_verdict(result, "into 3 loops (n=3)")


def test_the_wrong_loop_order_is_named():
    result = check(NAME, tiled(order=False))
    assert not result
    assert_verdict(result, "loops nest as (i_0, i_1, j_0, j_1, k)")
    assert "sch.reorder(i_0, j_0, k, i_1, j_1)" in result.hint


def test_a_schedule_error_in_the_function_is_a_message():
    def splits_badly(sch):
        i = sch.get_loops(sch.get_block("C"))[0]
        sch.split(i, sch.sample_perfect_tile(loop=i, n=2))
        sch.split(i, [None, 2])  # i is gone after the split

    result = check(NAME, splits_badly)
    assert not result
    assert_verdict(result, "with seed 0, your function stopped with a schedule error")


def test_returning_the_module_is_named():
    def returns_mod(sch):
        return tiled()(sch).mod

    result = check(NAME, returns_mod)
    assert not result
    assert_verdict(result, "returned a value of type IRModule")
    assert "return sch" in result.hint
