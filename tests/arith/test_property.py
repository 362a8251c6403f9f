"""Property: simplification never changes the value of an integer expression."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlckit import tir
from mlckit.arith import Analyzer
from mlckit.tir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Var,
)

VARS = [Var("x"), Var("y"), Var("z")]
BOUNDS = {"x": (0, 8), "y": (-5, 6), "z": (0, 3)}  # inclusive ranges the values are drawn from


def evaluate(e, env):
    """A reference evaluator with Python's floor semantics for FloorDiv/FloorMod."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e.name_hint]
    if isinstance(e, Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, Select):
        c = evaluate(e.condition, env)
        return evaluate(e.true_value if c else e.false_value, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    ops = {
        Add: lambda: a + b,
        Sub: lambda: a - b,
        Mul: lambda: a * b,
        FloorDiv: lambda: a // b,
        FloorMod: lambda: a % b,
        Min: lambda: min(a, b),
        Max: lambda: max(a, b),
        LT: lambda: int(a < b),
        LE: lambda: int(a <= b),
        GT: lambda: int(a > b),
        GE: lambda: int(a >= b),
        EQ: lambda: int(a == b),
        NE: lambda: int(a != b),
        And: lambda: int(bool(a) and bool(b)),
        Or: lambda: int(bool(a) or bool(b)),
    }
    return ops[type(e)]()


leaves = st.one_of(
    st.sampled_from(VARS),
    st.integers(-6, 6).map(lambda v: IntImm("int32", v)),
)


def _extend(children):
    divisor = st.integers(1, 6).map(lambda v: IntImm("int32", v))
    arith = st.one_of(
        st.tuples(st.sampled_from([Add, Sub, Mul, Min, Max]), children, children).map(
            lambda t: t[0](t[1], t[2])
        ),
        st.tuples(st.sampled_from([FloorDiv, FloorMod]), children, divisor).map(
            lambda t: t[0](t[1], t[2])
        ),
        st.tuples(
            st.sampled_from([LT, LE, GT, GE, EQ, NE]), children, children, children, children
        ).map(lambda t: Select(t[0](t[1], t[2]), t[3], t[4])),
    )
    return arith


int_exprs = st.recursive(leaves, _extend, max_leaves=12)


@st.composite
def environments(draw):
    return {name: draw(st.integers(lo, hi)) for name, (lo, hi) in BOUNDS.items()}


@settings(max_examples=400, deadline=None)
@given(int_exprs, environments())
def test_simplify_preserves_value(expr, env):
    simplified = Analyzer().simplify(expr)
    assert simplified.dtype == expr.dtype
    assert evaluate(simplified, env) == evaluate(expr, env)


@settings(max_examples=400, deadline=None)
@given(int_exprs, environments())
def test_simplify_with_bounds_preserves_value(expr, env):
    ana = Analyzer()
    for var in VARS:
        lo, hi = BOUNDS[var.name_hint]
        ana.bind(var, Range(lo, hi + 1))
    simplified = ana.simplify(expr)
    assert evaluate(simplified, env) == evaluate(expr, env)
    bound = ana.const_int_bound(expr)
    assert bound.min_value <= evaluate(expr, env) <= bound.max_value


@settings(max_examples=200, deadline=None)
@given(int_exprs, int_exprs, environments())
def test_comparisons_and_logic_preserve_value(a, b, env):
    ana = Analyzer()
    for var in VARS:
        lo, hi = BOUNDS[var.name_hint]
        ana.bind(var, Range(lo, hi + 1))
    for cond in (a < b, a == b, tir.Not(a >= b), And(a <= b, b != a), Or(a > b, a == b)):
        assert evaluate(ana.simplify(cond), env) == evaluate(cond, env)


@settings(max_examples=200, deadline=None)
@given(int_exprs, environments())
def test_simplify_is_idempotent(expr, env):
    ana = Analyzer()
    once = ana.simplify(expr)
    assert ana.simplify(once) is once
