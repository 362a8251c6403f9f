"""The exercise machinery: verdicts, hints, solutions, and answers that break."""

from __future__ import annotations

import numpy as np
import pytest
from replies import assert_verdict

from mlckit import tir
from mlckit.exercises import ExerciseError, check, exercises, hint, solution
from mlckit.exercises.checks import (
    as_prim_func,
    assert_close,
    assert_same_program,
    loop_nest_hint,
    program_diff,
    random_inputs,
    run_prim_func,
)
from mlckit.exercises.core import _REGISTRY, REPLY_LIMIT, CheckResult, Mismatch, exercise
from mlckit.script import tir as T


@T.prim_func
def mm_relu(
    A: T.Buffer((16, 16), "float32"),
    B: T.Buffer((16, 16), "float32"),
    C: T.Buffer((16, 16), "float32"),
):
    Y = T.alloc_buffer((16, 16), "float32")
    for i, j, k in T.grid(16, 16, 16):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def split_j(factor: int) -> tir.Schedule:
    sch = tir.Schedule(mm_relu)
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, factor])
    return sch


def reference_answer() -> tir.Schedule:
    return split_j(4)


def checker(answer):
    func = as_prim_func(answer)
    a, b = random_inputs([(16, 16), (16, 16)])
    (c,) = run_prim_func(func, [a, b], [((16, 16), "float32")])
    assert_close(c, np.maximum(a @ b, 0))
    assert_same_program(func, as_prim_func(reference_answer()))


@pytest.fixture
def demo_exercise():
    exercise(
        "ch99.split",
        title="Split j by 4",
        task="Split the j loop of block Y by 4.",
        hints=("use sch.split", "factors=[None, 4]"),
        solution=reference_answer,
    )(checker)
    yield "ch99.split"
    del _REGISTRY["ch99.split"]


def test_the_reference_passes(demo_exercise):
    result = check(demo_exercise, reference_answer())
    assert result and result.passed and "correct" in str(result)
    assert "✓ correct" in result._repr_html_()


def test_a_wrong_split_fails_with_the_factor_named(demo_exercise):
    result = check(demo_exercise, split_j(8))
    assert_verdict(result, "your j loop is split into extents (2, 8)", "asks for (4, 4)")
    assert result.hint == "split j with factors=[None, 4]"
    assert "-    for i, j_0, j_1, k in T.grid(16, 2, 8, 16):" in result.diff.text
    assert "+    for i, j_0, j_1, k in T.grid(16, 4, 4, 16):" in result.diff.text
    html = result._repr_html_()
    assert "✗ not yet" in html and "<summary" in html and "yours (left)" in html


def test_a_long_diff_is_cut_to_the_hunks_that_fit():
    lines = [f"line {n}: " + "x" * 60 for n in range(200)]
    changed = [line.replace("x", "y") if n % 20 == 0 else line for n, line in enumerate(lines)]
    result = CheckResult(
        "ch99.split",
        False,
        "the lines differ",
        "look",
        program_diff("\n".join(lines), "\n".join(changed)),
    )
    text = str(result)
    assert len(text) < REPLY_LIMIT
    assert "-line 0: xxx" in text and "+line 0: yyy" in text
    assert text.rstrip().endswith("more diff lines)")
    assert result.diff.text.count("@@") == 2 * 10  # all ten hunks stay in result.diff


def test_a_numerically_wrong_answer_names_an_index(demo_exercise):
    @T.prim_func
    def wrong(
        A: T.Buffer((16, 16), "float32"),
        B: T.Buffer((16, 16), "float32"),
        C: T.Buffer((16, 16), "float32"),
    ):
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]

    result = check(demo_exercise, wrong)
    assert_verdict(result, "255 of 256 elements of the output are wrong")
    assert "(first at index (0, 0): got" in result.message


def test_answers_of_the_wrong_kind_or_shape_never_raise(demo_exercise):
    assert "expected a PrimFunc" in check(demo_exercise, 42).message

    @T.prim_func
    def two_params(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]

    result = check(demo_exercise, two_params)
    assert "takes 2 parameters; the exercise passes 3" in result.message

    @T.prim_func
    def small(
        A: T.Buffer((8, 8), "float32"),
        B: T.Buffer((16, 16), "float32"),
        C: T.Buffer((16, 16), "float32"),
    ):
        T.evaluate(0)

    assert "has shape (8, 8)" in check(demo_exercise, small).message


def test_a_crashing_answer_is_reported_with_its_line(demo_exercise):
    def answer_that_raises(*args):
        raise ZeroDivisionError("boom")

    exercise(
        "ch99.callable",
        title="a function",
        task="t",
        hints=("h",),
        solution=reference_answer,
    )(lambda answer: answer())
    try:
        result = check("ch99.callable", answer_that_raises)
    finally:
        del _REGISTRY["ch99.callable"]
    assert not result
    assert "ZeroDivisionError: boom" in result.message
    assert "test_core.py" in result.message


def test_hints_are_graded_and_bounded(demo_exercise):
    assert "Hint 1" in str(hint(demo_exercise)) and "use sch.split" in str(hint(demo_exercise))
    assert "last hint" in str(hint(demo_exercise, 2))
    with pytest.raises(ExerciseError, match="hints 1 to 2; there is no hint 3"):
        hint(demo_exercise, 3)


def test_solution_shows_the_reference_source(demo_exercise):
    text = solution(demo_exercise)._repr_markdown_()
    assert text.startswith("```python") and "def reference_answer" in text


def test_unknown_names_suggest_the_closest(demo_exercise):
    with pytest.raises(ExerciseError, match="did you mean 'ch99.split'"):
        check("ch99.splt", None)


def test_exercises_are_listed_by_chapter(demo_exercise):
    assert [e.name for e in exercises(99)] == ["ch99.split"]
    assert exercises(99)[0].chapter == 99


def test_loop_nest_hint_names_order_and_kind():
    reordered = tir.Schedule(mm_relu)
    i, _, k = reordered.get_loops(reordered.get_block("Y"))
    reordered.reorder(k, i)
    target = as_prim_func(tir.Schedule(mm_relu))
    cause, fix = loop_nest_hint(as_prim_func(reordered), target)
    assert "nest as (k, j, i)" in cause and "(i, j, k)" in cause and "reorder" in fix
    parallel = tir.Schedule(mm_relu)
    parallel.parallel(parallel.get_loops(parallel.get_block("C"))[0])
    cause, fix = loop_nest_hint(as_prim_func(parallel), target)
    assert cause == "block 'C': your loop i is parallel; the target's i is serial"
    assert fix == "leave i serial"


def _dps_runner(write):
    """An answer in destination-passing style as ``rerun`` sees it: Z prefilled, then
    ``write(Z)``."""

    def run(fill):
        z = np.full((4, 3), fill, "float32")
        write(z)
        return z

    return run


def _rows_but_last(z):
    z[:-1] = 1.0


def _adds_to_z(z):
    z += 1.0


@pytest.mark.parametrize(
    ("write", "cause"),
    [
        (_rows_but_last, "Z is never written at 3 of 12 elements, all at the last index of axis 0"),
        (_adds_to_z, "Z depends on what it held before the call"),
    ],
)
def test_assert_close_tells_unwritten_from_uninitialized_by_the_numbers(write, cause):
    run = _dps_runner(write)
    with pytest.raises(Mismatch) as wrong:
        assert_close(run(np.nan), np.ones((4, 3), "float32"), "Z", rerun=run)
    assert wrong.value.message.startswith(cause)


def test_assert_close_without_rerun_names_the_edge_of_the_wrong_elements():
    got = np.ones((4, 3))
    got[:, 0] = 5
    with pytest.raises(
        Mismatch, match=r"4 of 12 elements of Z are wrong, all at the first index of axis 1"
    ):
        assert_close(got, np.ones((4, 3)), "Z")


def test_assert_close_reports_shapes():
    with pytest.raises(Exception, match=r"has shape \(2,\); expected \(3,\)"):
        assert_close(np.zeros(2), np.zeros(3))
