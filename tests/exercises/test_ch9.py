"""Chapter 9's exercises: the reference solutions pass, and typical wrong answers fail with the
message and hint written for them (never with a traceback)."""

from __future__ import annotations

import numpy as np
import pytest
from replies import assert_verdict

from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.ch9 import layer_inputs, layer_loss, sigmoid
from mlckit.exercises.solutions import ch9 as reference
from mlckit.relax.training.optimizer import SGD, Adam, MomentumSGD

NAMES = ["ch9.sigmoid_grads", "ch9.sigmoid_jvp", "ch9.one_epoch"]


def test_the_chapter_has_three_exercises_with_graded_hints():
    assert [e.name for e in exercises(9)] == NAMES
    for name in NAMES:
        assert "last hint" in str(hint(name, 3))
        assert solution(name)._repr_markdown_().startswith("```python\ndef ")


@pytest.mark.parametrize("name", NAMES)
def test_each_reference_solution_passes(name):
    result = check(name, getattr(reference, name.split(".")[1])())
    assert result.passed, str(result)


@pytest.mark.parametrize("name", NAMES[:2])
@pytest.mark.parametrize("answer", [None, 42, "grads"])
def test_answers_that_are_not_functions_are_reported(name, answer):
    assert_verdict(check(name, answer), "expected a function")


def test_the_worked_example_of_the_module_doc():
    zeros = {name: np.zeros_like(value) for name, value in layer_inputs().items()}
    assert layer_loss(**zeros) == 4
    assert np.allclose(reference.sigmoid_grads()(**zeros)[2], [1, 1])


# ------------------------------------------------------------------------ ch9.sigmoid_grads
def grads_with(mistake: str):
    """The reference gradients with one of the usual mistakes."""

    def grads(x, w, b):
        s = sigmoid(x @ w + b)
        lv1_adjoint = {"linear": np.ones_like(s), "sigmoid": s}.get(mistake, s * (1 - s))
        b_adjoint = {"unsummed": lv1_adjoint, "mean": lv1_adjoint.mean(axis=0)}.get(
            mistake, lv1_adjoint.sum(axis=0)
        )
        x_adjoint = lv1_adjoint @ w.T
        w_adjoint = {"transposed": lv1_adjoint.T @ x, "square": x.T @ lv1_adjoint * 2}.get(
            mistake, x.T @ lv1_adjoint
        )
        if mistake in ("x_scaled", "both_scaled"):
            x_adjoint = -x_adjoint
        if mistake == "both_scaled":
            w_adjoint = -w_adjoint
        return x_adjoint, w_adjoint, b_adjoint

    return grads


@pytest.mark.parametrize(
    ("mistake", "cause", "fix"),
    [
        ("unsummed", "b_adjoint has shape (4, 2), b's is (2,)", "sum(axis=0)"),
        ("transposed", "w_adjoint has shape (2, 3)", "x.T @ lv0_adjoint"),
        ("linear", "all three gradients differ from central differences", "s * (1 - s)"),
        ("sigmoid", "the adjoint they share, lv1_adjoint", "s * (1 - s)"),
        ("mean", "b_adjoint differs", "the sum (not the mean)"),
        ("square", "w_adjoint differs", "x.T @ lv0_adjoint"),
        ("x_scaled", "x_adjoint differs", "lv0_adjoint @ w.T"),
        ("both_scaled", "x_adjoint and w_adjoint differ", "they share lv0_adjoint"),
    ],
)
def test_gradient_mistakes_are_named(mistake, cause, fix):
    result = check("ch9.sigmoid_grads", grads_with(mistake))
    assert_verdict(result, cause)
    assert fix in result.hint


def test_a_wrong_gradient_names_its_worst_element():
    result = check("ch9.sigmoid_grads", grads_with("x_scaled"))
    assert "worst element (" in result.message and "numerical" in result.message


def test_a_gradient_function_that_returns_two_arrays_is_told_three():
    result = check("ch9.sigmoid_grads", lambda x, w, b: (x, w))
    assert_verdict(result, "returned 2 values", "three arrays")


def test_a_gradient_function_that_fails_is_reported_with_its_error():
    result = check("ch9.sigmoid_grads", lambda x, w, b: x @ b)
    assert not result.passed
    assert "running your answer raised ValueError" in result.message


# ------------------------------------------------------------------------ ch9.sigmoid_jvp
def jvp_with(mistake: str):
    """The reference tangent with one of the usual mistakes."""

    def jvp(x, w, b, x_dot, w_dot, b_dot):
        lv0_dot = {"no_w_term": x_dot @ w, "no_x_term": x @ w_dot}.get(
            mistake, x_dot @ w + x @ w_dot
        )
        lv1_dot = lv0_dot if mistake == "no_b_term" else lv0_dot + b_dot
        s = sigmoid(x @ w + b)
        lv2_dot = s * lv1_dot if mistake == "sigmoid" else s * (1 - s) * lv1_dot
        if mistake == "unsummed":
            return s.sum(), lv2_dot
        if mistake == "value":
            return (x @ w + b).sum(), lv2_dot.sum()
        return s.sum(), lv2_dot.sum()

    return jvp


@pytest.mark.parametrize(
    ("mistake", "cause", "fix"),
    [
        ("no_w_term", "wrong when only w moves", "x @ w_dot"),
        ("no_x_term", "wrong when only x moves", "x_dot @ w"),
        ("no_b_term", "wrong when only b moves", "lv0_dot + b_dot"),
        ("sigmoid", "wrong whichever input moves", "s * (1 - s) * lv1_dot"),
        ("unsummed", "your tangent (4, 2)", "sum the last instruction"),
        ("value", "your value is", "the forward computation"),
    ],
)
def test_tangent_mistakes_are_named(mistake, cause, fix):
    result = check("ch9.sigmoid_jvp", jvp_with(mistake))
    assert_verdict(result, cause)
    assert fix in result.hint


def test_a_tangent_function_that_returns_one_number_is_told_two():
    result = check("ch9.sigmoid_jvp", lambda *args: 0.0)
    assert_verdict(result, "returned float", "two numbers")


# ------------------------------------------------------------------------ ch9.one_epoch
def test_momentum_sgd_reaches_the_bar_too():
    assert check("ch9.one_epoch", MomentumSGD(0.02, 0.9)).passed


def test_an_optimizer_used_before_can_be_checked_again():
    optimizer = Adam(5e-3)
    assert check("ch9.one_epoch", optimizer).passed
    assert check("ch9.one_epoch", optimizer).passed


@pytest.mark.parametrize(
    ("answer", "cause", "fix"),
    [
        (SGD(0.01), "below 72%: the loss fell from 2.64 to", "take larger steps"),
        (SGD(10.0), "your steps are too large: the loss went from 2.64 to", "lower the"),
        (Adam, "the class Adam, not an optimizer", "Adam(lr, ...)"),
        (1e-3, "expected an optimizer such as SGD(0.01), got float", "SGD, MomentumSGD"),
    ],
)
def test_optimizer_mistakes_are_named(answer, cause, fix):
    result = check("ch9.one_epoch", answer)
    assert_verdict(result, cause)
    assert fix in result.hint
