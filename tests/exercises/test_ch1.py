"""Chapter 1's exercises: each reference passes; typical wrong answers get the intended hint."""

from __future__ import annotations

import numpy as np
import pytest

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
def _loops(X, W, B, Z, relu=True, bias=True):
    """A low-level-numpy linear layer whose mistakes the tests switch on."""
    n, k_size = X.shape
    m = W.shape[0]
    for i in range(n):
        for j in range(m):
            acc = np.float32(0)
            for k in range(k_size):
                acc += X[i, k] * W[j, k]
            if bias:
                acc += B[j]
            Z[i, j] = max(acc, 0) if relu else acc


def test_linear_relu_without_relu_or_bias_is_named():
    result = check("ch1.lnumpy_linear_relu", lambda X, W, B, Z: _loops(X, W, B, Z, relu=False))
    assert "the ReLU is missing" in result.message
    result = check("ch1.lnumpy_linear_relu", lambda X, W, B, Z: _loops(X, W, B, Z, bias=False))
    assert "the bias is missing" in result.message


def test_linear_relu_that_returns_instead_of_writing_is_told_about_dps():
    def returns(X, W, B, Z):
        out = np.empty_like(Z)
        _loops(X, W, B, out)
        return out

    result = check("ch1.lnumpy_linear_relu", returns)
    assert "returned its result instead of writing it into Z" in result.message
    assert "destination-passing style" in result.hint


def test_linear_relu_that_accumulates_into_garbage_is_caught():
    def accumulates(X, W, B, Z):
        for i in range(X.shape[0]):
            for j in range(W.shape[0]):
                for k in range(X.shape[1]):
                    Z[i, j] += X[i, k] * W[j, k]
                Z[i, j] = max(Z[i, j] + B[j], 0)

    result = check("ch1.lnumpy_linear_relu", accumulates)
    assert result.message.startswith("Z[0, 0] is NaN: it was read before")
    assert "set to 0 when k == 0" in result.hint


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
    result = check("ch1.bias_relu", copy_only)
    assert result.message.startswith("numerics differ at index (")


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


def test_row_sum_as_shipped_fails_with_the_generated_code_diff():
    result = check("ch1.row_sum", row_sum_as_shipped)
    assert not result
    assert result.message.startswith("numerics differ at index (0,)") and "nan" in result.message
    assert "the block's init sets it first" in result.hint
    # The diff is of the generated Python: the target's `if k == 0:` is what is missing.
    assert "-            if k == 0:" in result.diff.text
    assert "yours (generated Python)" in result.diff.text


def test_row_sum_with_an_init_but_no_reduction_axis_is_explained():
    result = check("ch1.row_sum", row_sum_init_but_spatial)
    assert "your init runs on every iteration" in result.hint
    assert "+            B[i] = np.float32(0.0)" in result.diff.text


def test_row_sum_with_right_numbers_but_no_reduction_axis_fails():
    result = check("ch1.row_sum", row_sum_in_two_blocks)
    assert result.message.startswith("the numbers are right, but no block declares a reduction")
