"""Elementwise topi operators against numpy: broadcasting, scalars, unary math, casts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from topi_helpers import broadcastable_shapes, placeholders, random, run, shapes

from mlckit import te, tir, topi
from mlckit.errors import StructInfoError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T

BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "floor_divide": np.floor_divide,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=8, deadline=None)
@given(pair=broadcastable_shapes())
def test_binary_broadcasts_as_numpy(name, pair):
    a, b = random(pair[0], seed=1), random(pair[1], seed=2) + 3.0  # b > 0: divisions are safe
    A, B = placeholders([a, b])
    out = run([A, B], getattr(topi, name)(A, B), a, b)
    np.testing.assert_allclose(out, BINARY[name](a, b), rtol=1e-5)


def test_power_and_integer_floor_divide():
    a = np.abs(random((2, 3))) + 0.5
    (A,) = placeholders([a])
    np.testing.assert_allclose(run([A], topi.power(A, 2.5), a), a**2.5, rtol=1e-5)
    x = np.array([[-7, 7, 5], [3, -3, 0]], "int32")
    y = np.array([2, -2, 3], "int32")
    X, Y = placeholders([x, y])
    np.testing.assert_array_equal(run([X, Y], topi.floor_divide(X, Y), x, y), x // y)


def test_scalar_operands():
    a = random((2, 3))
    (A,) = placeholders([a])
    np.testing.assert_allclose(run([A], topi.subtract(1.0, A), a), 1.0 - a)
    np.testing.assert_allclose(run([A], topi.multiply(A, 2), a), a * 2)
    both = topi.add(tir.const(1.0, "float32"), 2.0)
    assert isinstance(both, tir.PrimExpr)


def test_add_block_matches_tvm():
    A = te.placeholder((2, 3), name="A")
    B = te.placeholder((3,), name="B")

    @T.prim_func(private=True)
    def expected(
        A: T.Buffer((2, 3), "float32"),
        B: T.Buffer((3,), "float32"),
        T_add: T.Buffer((2, 3), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for ax0, ax1 in T.grid(2, 3):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_add[v_ax0, v_ax1] = A[v_ax0, v_ax1] + B[v_ax1]

    assert_structural_equal(te.create_prim_func([A, B, topi.add(A, B)]), expected)


def test_symbolic_shapes_broadcast():
    a, b = random((3, 4)), random((1, 4))
    A, B = placeholders([a, b], symbolic=True)
    # The second operand's dims differ symbolically: give it the first operand's last dim.
    B = te.placeholder((1, A.shape[1]), "float32", "B")
    np.testing.assert_allclose(run([A, B], topi.add(A, B), a, b), a + b)
    with pytest.raises(StructInfoError, match="do not broadcast"):
        topi.add(A, te.placeholder((tir.Var("m", "int64"),), "float32", "C"))


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


UNARY = {
    "negative": (topi.negative, np.negative),
    "exp": (topi.exp, np.exp),
    "log": (topi.log, np.log),
    "sqrt": (topi.sqrt, np.sqrt),
    "tanh": (topi.tanh, np.tanh),
    "sigmoid": (topi.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "abs": (topi.abs, np.abs),
    "relu": (topi.nn.relu, lambda x: np.maximum(x, 0)),
    "gelu": (topi.nn.gelu, _gelu),
    "silu": (topi.nn.silu, lambda x: x / (1 + np.exp(-x))),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=5, deadline=None)
@given(shape=shapes)
def test_unary_matches_numpy(name, shape):
    op, ref = UNARY[name]
    a = random(shape)
    if name in ("log", "sqrt"):
        a = np.abs(a) + np.float32(0.1)
    (A,) = placeholders([a])
    np.testing.assert_allclose(run([A], op(A), a), ref(a), rtol=1e-5, atol=1e-6)


def test_cast_where_fma_full_broadcast_to():
    a, b = random((2, 3), seed=1), random((3,), seed=2)
    A, B = placeholders([a, b])
    np.testing.assert_array_equal(run([A], topi.cast(A, "int32"), a), a.astype("int32"))
    cond = topi.greater(A, B)
    np.testing.assert_allclose(run([A, B], topi.where(cond, A, B), a, b), np.where(a > b, a, b))
    c = random((2, 1), seed=3)
    C = te.placeholder((2, 1), "float32", "C")
    np.testing.assert_allclose(
        run([A, B, C], topi.ewise_fma(A, B, C), a, b, c), a * b + c, rtol=1e-5
    )
    np.testing.assert_array_equal(run([], topi.full((2, 2), "float32", 7.0)), np.full((2, 2), 7.0))
    np.testing.assert_allclose(
        run([B], topi.broadcast_to(B, (4, 3)), b), np.broadcast_to(b, (4, 3))
    )
    with pytest.raises(StructInfoError, match="cannot be broadcast"):
        topi.broadcast_to(A, (3,))
