"""Bounds follow the dtype: integer arithmetic wraps around at its width, as generated code does."""

from __future__ import annotations

import pytest

from mlckit import tir
from mlckit.arith import Analyzer
from mlckit.tir import IntImm, Range, SizeVar, Var

INT32_MAX = 2**31 - 1


def bound(ana: Analyzer, expr) -> tuple[int, int]:
    b = ana.const_int_bound(expr)
    return b.min_value, b.max_value


def loops(dtype: str, extent: int) -> tuple[Analyzer, Var, Var]:
    i, j = Var("i", dtype), Var("j", dtype)
    ana = Analyzer()
    ana.bind(i, Range(IntImm(dtype, 0), IntImm(dtype, extent)))
    ana.bind(j, Range(IntImm(dtype, 0), IntImm(dtype, extent)))
    return ana, i, j


def test_int32_product_that_may_overflow_has_no_bound():
    ana, i, j = loops("int32", 65536)
    # 65535 * 65535 passes 2**31 - 1: the int32 product wraps and can be any int32 value.
    assert bound(ana, i * j) == (-(2**31), INT32_MAX)
    assert not ana.can_prove(i * j <= INT32_MAX)
    assert not ana.can_prove(i * j >= 0)
    assert not ana.can_prove(i * j + 1 > 0)
    assert not isinstance(ana.simplify(i * j < 0), IntImm)
    assert ana.int_set(i * j, {i: Range(0, 65536), j: Range(0, 65536)}).is_everything()


def test_int32_sum_past_the_limit_is_not_a_constant():
    ana, i, _ = loops("int32", 65536)
    # Clamping [2**31 - 1, 2**31 + 65534] to the dtype made this the constant 2**31 - 1.
    assert bound(ana, IntImm("int32", INT32_MAX) + i) == (-(2**31), INT32_MAX)
    assert not ana.can_prove(IntImm("int32", INT32_MAX) + i == INT32_MAX)


def test_products_that_fit_keep_their_bounds():
    ana, i, j = loops("int32", 256)
    assert bound(ana, i * j) == (0, 255 * 255)
    assert ana.can_prove(i * j >= 0)
    ana, i, j = loops("int64", 65536)
    assert bound(ana, i * j) == (0, 65535 * 65535)
    assert ana.can_prove(i * j <= 65535 * 65535)
    assert ana.can_prove(i * j >= 0)


def test_int64_bounds_are_int64():
    ana, i, j = loops("int64", 2**40)
    # 2**80 passes the int64 range: wraps.
    assert not ana.can_prove(i * j >= 0)
    assert bound(ana, i * 1024) == (0, (2**40 - 1) * 1024)


@pytest.mark.parametrize(
    "dtype, lo, hi", [("int8", -128, 127), ("uint8", 0, 255), ("int16", -(2**15), 2**15 - 1)]
)
def test_narrow_dtypes_wrap_at_their_width(dtype, lo, hi):
    ana, i, j = loops(dtype, 100)
    assert bound(ana, i + j) == ((0, 198) if hi >= 198 else (lo, hi))
    assert bound(ana, i - j) == ((-99, 99) if lo < 0 else (lo, hi))


def test_unknown_variables_are_unbounded_not_wrapping():
    x = Var("x")
    ana = Analyzer()
    assert ana.can_prove(x < x + 1)
    assert bound(ana, x) == (-(2**31), INT32_MAX)
    n = SizeVar("n", "int64")
    assert ana.can_prove(n + 1 >= 1)


def test_comparisons_of_equal_polynomials_hold_even_when_wrapping():
    ana, i, j = loops("int32", 65536)
    assert ana.can_prove(i * j == j * i)
    assert not ana.can_prove(i * j + 1 > i * j)


def test_symbolic_proof_needs_values_that_fit():
    i, n = Var("i", "int64"), Var("n", "int64")
    ana = Analyzer()
    ana.bind(i, Range(IntImm("int64", 0), n))
    assert ana.can_prove(i * 4 + 3 < n * 4)
    i32, m = Var("i"), SizeVar("m")
    ana = Analyzer()
    ana.bind(i32, Range(0, m))
    assert ana.can_prove(i32 < m)
    assert ana.can_prove(tir.convert(i32) + 1 <= m)
