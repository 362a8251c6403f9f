"""Chapter 1's exercises: each reference passes; typical wrong answers get the intended hint."""

from __future__ import annotations

import numpy as np
import pytest
from replies import assert_verdict

from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.solutions import ch1 as solutions
from mlckit.script import tir as T

NAMES = ["ch1.lnumpy_linear_relu", "ch1.bias_relu", "ch1.row_sum"]


def test_the_chapter_lists_its_exercises():
    assert [e.name for e in exercises(1)] == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_reference_solution_passes(name):
    result = check(name, getattr(solutions, name.split(".", 1)[1])())
    assert result.passed, str(result)


@pytest.mark.parametrize("name", NAMES)
def test_hints_and_solution_are_there(name):
    assert str(hint(name, 1)).startswith("**Hint 1:**")
    assert "last hint" in str(hint(name, 3))
    assert solution(name).text.startswith("```python\ndef ")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("answer", [42, None, "def f(): pass"])
def test_answers_of_the_wrong_type_never_raise(name, answer):
    result = check(name, answer)
    assert not result
    assert "expected a" in result.message


# ------------------------------------------------------------------ ch1.lnumpy_linear_relu
def _loops(X, W, B, Z, relu=True, bias=True, rows=0, cols=0, terms=0, init=True):
    """A low-level-numpy linear layer whose mistakes the tests switch on: ``rows``, ``cols``
    and ``terms`` shorten the i, j and k loops by that many; ``init=False`` sums into an
    np.empty temporary that is never set to 0."""
    n, k_size = X.shape
    m = W.shape[0]
    Y = np.empty((n, m), dtype="float32")
    for i in range(n - rows):
        for j in range(m - cols):
            for k in range(k_size - terms):
                if k == 0 and init:
                    Y[i, j] = 0
                Y[i, j] += X[i, k] * W[j, k]
            acc = Y[i, j] + B[j] if bias else Y[i, j]
            Z[i, j] = max(acc, 0) if relu else acc


def _accumulates_into_z(X, W, B, Z):
    for i in range(X.shape[0]):
        for j in range(W.shape[0]):
            for k in range(X.shape[1]):
                Z[i, j] += X[i, k] * W[j, k]
            Z[i, j] = max(Z[i, j] + B[j], 0)


# mistake: (the keyword arguments of _loops, or an answer; words of the verdict's first sentence)
LINEAR_RELU_MISTAKES = {
    "no-relu": ({"relu": False}, "the ReLU is missing"),
    "no-bias": ({"bias": False}, "the bias is missing"),
    "last-column-never-written": (
        {"cols": 1},
        "Z is never written at 3 of 21 elements, all at the last index of axis 1 (6): a loop "
        "likely stops one short",
    ),
    "last-row-never-written": ({"rows": 1}, "all at the last index of axis 0 (2)"),
    "k-stops-one-short": ({"terms": 1}, "each sum leaves out its last term"),
    "temporary-without-init": (
        {"init": False},
        "Z depends on what it held before the call: each sum starts from that garbage instead "
        "of 0, so its init is missing",
    ),
    "accumulates-into-Z": (_accumulates_into_z, "so its init is missing"),
}


@pytest.mark.parametrize("mistake", LINEAR_RELU_MISTAKES)
def test_linear_relu_mistakes_get_a_verdict_naming_the_cause(mistake):
    switches, cause = LINEAR_RELU_MISTAKES[mistake]
    answer = switches if callable(switches) else lambda X, W, B, Z: _loops(X, W, B, Z, **switches)
    assert_verdict(check("ch1.lnumpy_linear_relu", answer), cause)


def test_a_missing_init_and_an_off_by_one_get_different_hints():
    # Both used to get "only some elements differ: check loop bounds, ...".
    never_written = check("ch1.lnumpy_linear_relu", lambda *a: _loops(*a, cols=1))
    garbage = check("ch1.lnumpy_linear_relu", lambda *a: _loops(*a, init=False))
    assert "range(n)" in never_written.hint and "set to 0 when k == 0" in garbage.hint


def test_np_empty_is_itself_again_after_a_check():
    saved = np.empty
    check("ch1.lnumpy_linear_relu", lambda *a: _loops(*a, init=False))
    assert np.empty is saved


def test_linear_relu_that_returns_instead_of_writing_is_told_about_dps():
    def returns(X, W, B, Z):
        out = np.empty_like(Z)
        _loops(X, W, B, out)
        return out

    result = check("ch1.lnumpy_linear_relu", returns)
    assert "returned its result instead of writing it into Z" in result.message
    assert "destination-passing style" in result.hint


def test_linear_relu_with_hard_coded_sizes_or_layout_gets_the_size_hint():
    def mlp_sizes(X, W, B, Z):
        for i in range(1):
            for j in range(128):
                Z[i, j] = 0

    def wrong_layout(X, W, B, Z):
        for i in range(X.shape[0]):
            for j in range(W.shape[0]):
                Z[i, j] = sum(X[i, k] * W[k, j] for k in range(X.shape[1]))

    for answer in (mlp_sizes, wrong_layout):
        result = check("ch1.lnumpy_linear_relu", answer)
        assert "indexed past the end of an array" in result.message
        assert "index W as W[j, k]" in result.hint


def test_linear_relu_with_a_matmul_or_changed_input_is_refused():
    def uses_matmul(X, W, B, Z):
        Z[:] = np.maximum(X @ W.T + B, 0)

    assert "multiplies whole matrices" in check("ch1.lnumpy_linear_relu", uses_matmul).message

    def writes_input(X, W, B, Z):
        B[:] = 0
        _loops(X, W, B, Z)

    result = check("ch1.lnumpy_linear_relu", writes_input)
    assert result.message == "your function changed its input B"


def test_linear_relu_that_writes_nothing_is_told_so():
    result = check("ch1.lnumpy_linear_relu", lambda X, W, B, Z: None)
    assert "did not write Z" in result.message


# ---------------------------------------------------------------------------- ch1.bias_relu
@T.prim_func
def bias_by_row(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(A[vi, vj] + B[vi], T.float32(0))


@T.prim_func
def no_relu(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vj]


@T.prim_func
def reduce_axis(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SR", [i, j])
            C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))


@T.prim_func
def copy_only(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj]


@T.prim_func
def one_column_too_many(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 17):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))


@T.prim_func
def last_column_skipped(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 15):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))


def test_bias_relu_with_a_loop_past_the_buffer_is_rejected():
    # It used to be "correct": the llvm kernel wrote C[3, 16] past the end, silently.
    result = check("ch1.bias_relu", one_column_too_many)
    assert not result
    assert "when j = 16, axis 1 of A is indexed with 16, past its last index 15" in result.message
    assert "loop j in range(17)" in result.hint and "A has shape (4, 16)" in result.hint


def test_bias_relu_mistakes_get_their_hints():
    result = check("ch1.bias_relu", bias_by_row)
    assert "broadcast along the wrong axis" in result.message and "B[vj]" in result.hint
    assert "the ReLU is missing" in check("ch1.bias_relu", no_relu).message
    result = check("ch1.bias_relu", reduce_axis)
    assert "marks vj as a reduction axis" in result.message
    assert 'T.axis.remap("SS", [i, j])' in result.hint
    assert_verdict(check("ch1.bias_relu", copy_only), "C holds A: neither the bias nor the ReLU")


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        (bias_by_row, "the bias is broadcast along the wrong axis"),
        (no_relu, "the ReLU is missing"),
        (copy_only, "neither the bias nor the ReLU is applied"),
        (reduce_axis, "marks vj as a reduction axis"),
        (one_column_too_many, "your function does not build"),
        (last_column_skipped, "C is never written at 4 of 64 elements"),
    ],
    ids=["bias-by-row", "no-relu", "copy-only", "reduce-axis", "past-the-end", "short-of-the-end"],
)
def test_bias_relu_mistakes_get_a_verdict_naming_the_cause(answer, cause):
    assert_verdict(check("ch1.bias_relu", answer), cause)


# ------------------------------------------------------------------------------ ch1.row_sum
@T.prim_func
def row_sum_as_shipped(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_sum_init_but_spatial(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_sum_in_two_blocks(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.float32(0)
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_sum_one_term_short(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 15):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_row_sum_as_shipped_fails_with_the_generated_code_diff():
    result = check("ch1.row_sum", row_sum_as_shipped)
    assert_verdict(result, "B depends on what it held before the call", "init is missing")
    assert "with T.init(): B[vi] = T.float32(0)" in result.hint
    # The diff is of the generated Python: the target's `if k == 0:` is what is missing.
    assert "+            if k == 0:" in result.diff.text
    assert result.diff.text.startswith("--- yours (generated Python)")


def test_row_sum_with_an_init_but_no_reduction_axis_is_explained():
    result = check("ch1.row_sum", row_sum_init_but_spatial)
    assert_verdict(result, "your init runs on every iteration")
    assert "-            B[i] = np.float32(0.0)" in result.diff.text


def test_row_sum_one_term_short_is_a_formula_difference():
    assert_verdict(check("ch1.row_sum", row_sum_one_term_short), "every element of B is wrong")


def test_row_sum_with_right_numbers_but_no_reduction_axis_fails():
    result = check("ch1.row_sum", row_sum_in_two_blocks)
    assert result.message.startswith("the numbers are right, but no block declares a reduction")
