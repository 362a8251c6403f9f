"""Bounds, integer sets and proofs."""

from __future__ import annotations

import pytest

from mlckit import MLCError, tir
from mlckit.arith import Analyzer, ArithError, ConstIntBound, IntervalSet
from mlckit.tir import FloorDiv, FloorMod, IntImm, Max, Min, Range, Select, Var
from mlckit.tir.analysis import expr_deep_equal

i, j, n, x = Var("i"), Var("j"), Var("n"), Var("x")


def same(a, b) -> bool:
    return expr_deep_equal(a, tir.convert(b, a.dtype))


def test_const_int_bound_of_affine_expression():
    ana = Analyzer()
    ana.bind(i, Range(0, 8))
    ana.bind(j, Range(0, 4))
    b = ana.const_int_bound(i * 4 + j)
    assert (b.min_value, b.max_value) == (0, 31)
    b = ana.const_int_bound(j * -2 + 1)
    assert (b.min_value, b.max_value) == (-5, 1)
    b = ana.const_int_bound((i * 4 + j) // 8)
    assert (b.min_value, b.max_value) == (0, 3)
    b = ana.const_int_bound(FloorMod(x, 16))
    assert (b.min_value, b.max_value) == (0, 15)
    b = ana.const_int_bound(Min(i, j) + Max(i, 2))
    assert (b.min_value, b.max_value) == (2, 10)
    b = ana.const_int_bound(Select(x < 0, i, j + 10))
    assert (b.min_value, b.max_value) == (0, 13)


def test_const_int_bound_of_constant_and_unknowns():
    ana = Analyzer()
    b = ana.const_int_bound(IntImm("int32", 7))
    assert b.min_value == b.max_value == 7 and b.is_const()
    b = ana.const_int_bound(x)  # an int32 var: its dtype's range
    assert (b.min_value, b.max_value) == (-(2**31), 2**31 - 1)
    v = Var("v", "int64")
    b = ana.const_int_bound(v)
    assert (b.min_value, b.max_value) == (ConstIntBound.NEG_INF, ConstIntBound.POS_INF)
    b = ana.const_int_bound(v - v)
    assert (b.min_value, b.max_value) == (0, 0)


def test_update_with_const_int_bound():
    ana = Analyzer()
    ana.update(x, ConstIntBound(0, 100))
    ana.update(x, ConstIntBound(-5, 10))  # intersected
    b = ana.const_int_bound(x)
    assert (b.min_value, b.max_value) == (0, 10)
    ana.update(x, ConstIntBound(3, 3), override=True)
    assert ana.const_int_bound(x * 2).max_value == 6


def test_int_set_symbolic_bounds():
    ana = Analyzer()
    s = ana.int_set(i * 4 + j, {i: Range(0, n), j: Range(0, 4)})
    assert same(s.min_value, 0)
    assert same(s.max_value, n * 4 - 1)
    # variables not in the domain stay symbolic
    s = ana.int_set(i + x, {i: Range(0, 8)})
    assert same(s.min_value, x) and same(s.max_value, x + 7)
    # negative coefficient swaps the ends
    s = ana.int_set(10 - i, {i: Range(0, 8)})
    assert same(s.min_value, 3) and same(s.max_value, 10)
    s = ana.int_set(x, {})
    assert s.is_single_point()


def test_int_set_division_and_modulo():
    ana = Analyzer()
    dom = {i: Range(0, n * 4)}
    s = ana.int_set(i // 4, dom)
    assert same(s.min_value, 0) and same(s.max_value, n - 1)
    s = ana.int_set(i % 4, dom)
    assert same(s.min_value, 0) and same(s.max_value, 3)
    s = ana.int_set(j % 8, {j: Range(0, 4)})
    assert same(s.min_value, 0) and same(s.max_value, 3)
    s = ana.int_set(Min(i, 5), {i: Range(0, 8)})
    assert same(s.min_value, 0) and same(s.max_value, 5)


def test_int_set_products():
    ana = Analyzer()
    s = ana.int_set(i * j, {i: Range(0, 4), j: Range(0, n)})
    assert same(s.min_value, 0) and same(s.max_value, n * 3 - 3)
    s = ana.int_set(i * j, {i: Range(-2, 3), j: Range(-1, 2)})
    assert same(s.min_value, -2) and same(s.max_value, 2)
    s = ana.int_set(i * x, {i: Range(-2, 3)})  # x unbounded: no finite bound
    assert s.is_everything()


def test_int_set_accepts_interval_sets_and_rejects_other_domains():
    ana = Analyzer()
    s = ana.int_set(i + 1, {i: IntervalSet(IntImm("int32", 2), n)})
    assert same(s.min_value, 3) and same(s.max_value, n + 1)
    with pytest.raises(ArithError, match="Range or an IntervalSet"):
        ana.int_set(i, {i: (0, 4)})
    assert issubclass(ArithError, MLCError)


def test_can_prove_with_symbolic_range():
    ana = Analyzer()
    ana.bind(i, Range(0, n))
    assert ana.can_prove(i < n)
    assert ana.can_prove(i >= 0)
    assert not ana.can_prove(i < n - 1)
    assert ana.can_prove(i * 4 + 3 < n * 4)
    assert ana.simplify(Min(i, n)) is i


def test_can_prove_equal_and_prove():
    ana = Analyzer()
    assert ana.can_prove_equal(n * 256, 256 * n)
    assert ana.can_prove_equal((x + 2) * 3, 3 * x + 6)
    assert not ana.can_prove_equal(x, n)
    f = Var("f", "float32")
    assert ana.can_prove_equal(f + 1.0, f + 1.0)
    assert not ana.can_prove(x < n)
    assert ana.can_prove(x * x >= 0) is False  # bounds alone cannot see squares


def test_constraint_scope():
    ana = Analyzer()
    ana.bind(i, Range(0, 16))
    with ana.constraint_scope(i < 4):
        assert ana.can_prove(i < 4)
        assert ana.simplify((x * 4 + i) // 4) is x
    assert not ana.can_prove(i < 4)
    with ana.constraint_scope(tir.And(x >= 1, n > x)):
        assert ana.can_prove(x > 0)
        assert ana.can_prove(x < n)
    assert not ana.can_prove(x > 0)


def test_a_repeated_question_gets_the_same_answer_until_the_facts_change():
    ana = Analyzer()
    question = (x * 4 + i) // 4
    first = ana.simplify(question)
    assert ana.simplify(question) is first and ana.simplify(first) is first
    ana.bind(i, Range(0, 4))  # a new fact: the answer is asked again, and changes
    assert ana.simplify(question) is x
    eighth = FloorDiv(j, 8)
    assert ana.simplify(eighth) is eighth
    ana.update(j, ConstIntBound(0, 7))  # constant bounds are facts too
    assert same(ana.simplify(eighth), 0)


def test_leaving_a_constraint_scope_brings_back_the_answers_from_before_it():
    ana = Analyzer()
    question = FloorDiv(i, 4)
    outside = ana.simplify(question)
    with ana.constraint_scope(tir.And(i >= 0, i < 4)):
        assert same(ana.simplify(question), 0)
    assert ana.simplify(question) is outside


def test_a_substitution_bound_inside_a_constraint_scope_outlives_it():
    ana = Analyzer()
    question = j + 1
    assert ana.simplify(question) is question
    with ana.constraint_scope(i < 4):
        ana.bind(j, 2)
    assert same(ana.simplify(question), 3)


def test_rebinding_needs_override():
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    ana.bind(i, Range(0, 4))  # the same binding again is fine
    with pytest.raises(ArithError, match="already bound"):
        ana.bind(i, Range(0, 8))
    ana.bind(i, Range(0, 8), allow_override=True)
    assert ana.const_int_bound(i).max_value == 7


def test_floordiv_bounds_with_negative_numerator():
    ana = Analyzer()
    ana.bind(x, Range(-7, 8))
    b = ana.const_int_bound(FloorDiv(x, 4))
    assert (b.min_value, b.max_value) == (-2, 1)
    assert ana.simplify(FloorDiv(x + 8, 16)) is not None
    assert same(ana.simplify(FloorDiv(x + 8, 16)), 0)
