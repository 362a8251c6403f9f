"""The Analyzer: what is known about variables, and the questions it can answer.

Mirrors TVM's ``tvm.arith.Analyzer``::

    ana = Analyzer()
    ana.bind(j, Range(0, 4))             # 0 <= j < 4
    ana.simplify((i * 4 + j) // 4)       # i
    ana.can_prove(j < 4)                 # True
    ana.const_int_bound(j * 2 + 1)       # ConstIntBound(min_value=1, max_value=7)
    ana.int_set(i * 4 + j, {i: Range(0, n), j: Range(0, 4)})   # [0, n * 4 - 1]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mlckit.errors import IRError
from mlckit.ir.dtype import is_bool, is_int
from mlckit.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    And,
    Cast,
    IntImm,
    PrimExpr,
    Range,
    Var,
    convert,
)

from .canonical import KeyCache
from .const_int_bound import (
    EVERYTHING,
    BoundEvaluator,
    ConstIntBound,
    Interval,
    dtype_interval,
    intersect,
)
from .errors import ArithError
from .int_set import IntervalSet, IntSetEvaluator, normalize_dom_map
from .rewrite import Rewriter

_MAX_ROUNDS = 4
# How many simplified expressions an analyzer remembers before it starts over.
_MEMO_LIMIT = 8192


class Analyzer:
    """Simplifies integer expressions and proves facts about them, given variable bounds.

    Facts come from :meth:`bind` (a variable equals an expression, or ranges over a Range),
    :meth:`update` (constant bounds) and :meth:`constraint_scope` (a condition known to hold
    inside a ``with`` block).

    While the facts stay the same, simplifying an expression object again returns what the
    first call did: the analyses that lower and schedule a kernel ask about the same loop
    extents and indices many times (``int_set`` simplifies each range it relaxes over, and
    then every bound it builds). A new fact forgets those answers; leaving a
    ``constraint_scope`` brings back the ones from before it.
    """

    def __init__(self) -> None:
        self._const: dict[int, tuple[Var, Interval]] = {}
        self._ranges: dict[int, tuple[Var, IntervalSet]] = {}
        self._subst: dict[int, tuple[Var, PrimExpr]] = {}
        self._proving = False
        # simplify's answers by id of the question (kept alive with it): one table for
        # questions asked while proving (symbolic ranges are not used then), one otherwise.
        self._simplified: tuple[dict[int, tuple[PrimExpr, PrimExpr]], ...] = ({}, {})
        # Counts the changes to the substitutions, which a constraint_scope does not undo.
        self._substitutions = 0

    def _facts_changed(self) -> None:
        self._simplified = ({}, {})

    # ------------------------------------------------------------------ facts
    def bind(self, var: Var, value: Any, allow_override: bool = False) -> None:
        """Bind ``var`` to an expression (it *is* that value) or to a Range (it lies in it).

        Binding a bound variable again to something different needs ``allow_override``.
        """
        if (
            isinstance(value, Range)
            and isinstance(value.extent, IntImm)
            and value.extent.value == 1
        ):
            value = value.min
        if isinstance(value, Range):
            dom = IntervalSet.from_range(value, self)
            lo = self.exact_bound(dom.min_value)[0]
            hi = self.exact_bound(dom.max_value)[1]
            self._check_rebind(var, (dom.min_value, dom.max_value), allow_override)
            self._const[id(var)] = (var, (lo, hi))
            self._ranges[id(var)] = (var, dom)
            self._facts_changed()
            return
        expr = self.simplify(convert(value, var.dtype))
        if expr.dtype != var.dtype:
            expr = Cast(var.dtype, expr)
        self._check_rebind(var, (expr,), allow_override)
        self._subst[id(var)] = (var, expr)
        self._substitutions += 1
        self._facts_changed()

    def _check_rebind(self, var: Var, new: tuple[PrimExpr, ...], allow_override: bool) -> None:
        if id(var) in self._subst:
            old: tuple[PrimExpr, ...] | None = (self._subst[id(var)][1],)
        elif id(var) in self._ranges:
            dom = self._ranges[id(var)][1]
            old = (dom.min_value, dom.max_value)
        else:
            old = None
        if old is not None and not allow_override:
            keys = KeyCache()
            if len(old) != len(new) or any(keys.key(a) != keys.key(b) for a, b in zip(old, new)):
                raise ArithError(
                    f"variable {var.name_hint} is already bound to something else; pass "
                    "allow_override=True to rebind it"
                )
        if self._subst.pop(id(var), None) is not None:
            self._substitutions += 1
        self._ranges.pop(id(var), None)
        self._const.pop(id(var), None)

    def update(self, var: Var, info: ConstIntBound, override: bool = False) -> None:
        """Record ``info.min_value <= var <= info.max_value`` (intersected unless override)."""
        new = info.to_interval()
        if not override and id(var) in self._const:
            new = intersect(self._const[id(var)][1], new)
        self._const[id(var)] = (var, new)
        self._facts_changed()

    @contextmanager
    def constraint_scope(self, constraint: PrimExpr) -> Iterator[None]:
        """Within the ``with`` block, assume ``constraint`` (e.g. ``i < n``) holds."""
        saved = dict(self._const), dict(self._ranges)
        answers, substitutions = self._simplified, self._substitutions
        for cond in _conjuncts(self.simplify(constraint)):
            self._assume(cond)
        try:
            yield
        finally:
            self._const, self._ranges = saved
            # The answers from before hold again, unless a substitution bound inside stays.
            if self._substitutions == substitutions:
                self._simplified = answers
            else:
                self._facts_changed()

    def _assume(self, cond: PrimExpr) -> None:
        if not isinstance(cond, (LT, LE, GT, GE, EQ)):
            return
        a, b, op = cond.a, cond.b, type(cond)
        if not isinstance(a, Var):
            if not isinstance(b, Var):
                return
            a, b, op = b, a, {LT: GT, LE: GE, GT: LT, GE: LE, EQ: EQ}[op]
        if not is_int(a.dtype):
            return
        upper = {LT: b - 1, LE: b, EQ: b}.get(op)
        lower = {GT: b + 1, GE: b, EQ: b}.get(op)
        lo, hi = self.var_interval(a)
        _, dom = self._ranges.get(id(a), (a, IntervalSet.everything()))
        if upper is not None:
            upper = self.simplify(upper)
            hi = min(hi, self.exact_bound(upper)[1])
            dom = IntervalSet(dom.min_value, upper)
        if lower is not None:
            lower = self.simplify(lower)
            lo = max(lo, self.exact_bound(lower)[0])
            dom = IntervalSet(lower, dom.max_value)
        self._const[id(a)] = (a, (lo, hi))
        self._ranges[id(a)] = (a, dom)
        self._facts_changed()

    # ------------------------------------------------------------------ what rewriters ask
    def var_interval(self, var: Var) -> Interval:
        """The constant bounds known for ``var`` (unbounded when nothing is known)."""
        known = self._const.get(id(var))
        if known is not None:
            return known[1]
        return dtype_interval(var.dtype) if is_bool(var.dtype) else EVERYTHING

    def substitution(self, var: Var) -> PrimExpr | None:
        known = self._subst.get(id(var))
        return None if known is None else known[1]

    def has_symbolic_ranges(self) -> bool:
        return not self._proving and bool(self._symbolic_ranges())

    def _symbolic_ranges(self) -> dict[int, tuple[Var, IntervalSet]]:
        # A range with constant ends says no more than the constant bounds already do.
        return {
            key: (var, dom)
            for key, (var, dom) in self._ranges.items()
            if not (isinstance(dom.min_value, IntImm) and isinstance(dom.max_value, IntImm))
        }

    def symbolic_interval(self, expr: PrimExpr) -> Interval | None:
        """Constant bounds of ``expr`` after relaxing the variables with symbolic ranges.

        ``i - n`` with ``i`` in ``[0, n)`` relaxes to ``[-n, -1]``, whose upper bound is a
        constant although neither ``i`` nor ``n`` has one.
        """
        if self._proving:
            return None
        self._proving = True
        try:
            ranges = self._symbolic_ranges()
            everything = IntSetEvaluator(self, ranges)
            if not everything.depends(expr):
                return None
            # Relaxing all variables at once loses their correlation (``x < n`` given
            # ``n > x``), relaxing one at a time keeps it; every answer is sound, so keep
            # the tightest.
            evaluators = [everything] + [
                IntSetEvaluator(self, {key: entry}) for key, entry in ranges.items()
            ]
            lo, hi = -float("inf"), float("inf")
            for evaluator in evaluators:
                if not evaluator.depends(expr):
                    continue
                s = evaluator(expr)
                if s.min_value is not None:
                    lo = max(lo, self.exact_bound(s.min_value)[0])
                if s.max_value is not None:
                    hi = min(hi, self.exact_bound(s.max_value)[1])
            return lo, hi
        finally:
            self._proving = False

    def bound_over(self, expr: PrimExpr, overrides: Mapping[int, Interval]) -> Interval:
        """Constant bounds of ``expr`` when the variables keyed by id in overrides range there."""

        def var_bound(var: Var) -> Interval:
            return overrides[id(var)] if id(var) in overrides else self.var_interval(var)

        return BoundEvaluator(var_bound)(self.simplify(expr))

    def wraps_over(self, expr: PrimExpr, overrides: Mapping[int, Interval]) -> bool:
        """Whether ``expr`` may wrap around its dtype (or a sub-expression its own) when the
        variables keyed by id in overrides range there."""

        def var_bound(var: Var) -> Interval:
            return overrides[id(var)] if id(var) in overrides else self.var_interval(var)

        evaluator = BoundEvaluator(var_bound)
        evaluator.exact(self.simplify(expr))
        return evaluator.wrapped

    # ------------------------------------------------------------------ questions
    def simplify(self, expr: Any, steps: int = 2) -> PrimExpr:
        """The canonical simplified form of ``expr`` (the same object when nothing changes).

        ``steps`` is accepted for TVM compatibility: simplification always runs to its fixed
        point, so that simplifying a result again returns that very result.
        """
        question = convert(expr)
        answers = self._simplified[self._proving]
        known = answers.get(id(question))
        if known is not None:
            return known[1]
        # Terms are ordered by first appearance, and the output's appearance order can differ
        # from the input's (``(x + y) * z`` -> ``x * z + y * z`` meets z before y); another
        # round settles it.
        expr = question
        for _ in range(_MAX_ROUNDS):
            result = Rewriter(self).visit(expr)
            if result is expr:
                break
            expr = result
        if len(answers) >= _MEMO_LIMIT:
            answers.clear()
        answers[id(question)] = (question, expr)
        answers[id(expr)] = (expr, expr)
        return expr

    canonical_simplify = simplify
    rewrite_simplify = simplify

    def const_int_bound(self, expr: Any) -> ConstIntBound:
        """Constant lower and upper bounds of an integer expression."""
        expr = self.simplify(expr)
        return ConstIntBound.from_interval(BoundEvaluator(self.var_interval)(expr))

    def exact_bound(self, expr: Any) -> Interval:
        """The bounds of an integer expression's value, infinite where nothing is known (see
        :meth:`BoundEvaluator.exact`); what the analyzer reasons with internally."""
        return BoundEvaluator(self.var_interval).exact(self.simplify(expr))

    def int_set(self, expr: Any, dom_map: Mapping[Var, Any] | None = None) -> IntervalSet:
        """The (symbolic) interval ``expr`` covers when the vars of dom_map range over it.

        dom_map values are Ranges or IntervalSets; variables not in it stay symbolic.
        """
        return IntSetEvaluator(self, normalize_dom_map(dom_map, self))(convert(expr))

    def can_prove(self, cond: Any) -> bool:
        """Whether ``cond`` holds for every value the known facts allow."""
        result = self.simplify(cond)
        if isinstance(result, IntImm):
            return bool(result.value)
        if isinstance(result, And):
            return all(self.can_prove(part) for part in _conjuncts(result))
        return self._prove_by_bounds(result)

    def _prove_by_bounds(self, cond: PrimExpr) -> bool:
        """An integer comparison holds when the bounds of ``a - b`` decide it: the rewriter
        leaves ``(n + 1) // 2 * 2 >= n`` alone, but ``1 - (n + 1) % 2`` is bounded by [0, 1]."""
        tests = {
            GE: lambda lo, hi: lo >= 0,
            GT: lambda lo, hi: lo > 0,
            LE: lambda lo, hi: hi <= 0,
            LT: lambda lo, hi: hi < 0,
            EQ: lambda lo, hi: lo == hi == 0,
            NE: lambda lo, hi: lo > 0 or hi < 0,
        }
        test = tests.get(type(cond))
        if test is None or not (is_int(cond.a.dtype) and is_int(cond.b.dtype)):
            return False
        try:
            bound = Rewriter(self).difference_bound(cond.a, cond.b)
        except IRError:
            return False  # a coefficient does not fit the dtype
        return bound is not None and test(*bound)

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        a, b = convert(a), convert(b)
        if a is b:
            return True
        if is_int(a.dtype) and is_int(b.dtype):
            diff = self.simplify(a - b)
            return isinstance(diff, IntImm) and diff.value == 0
        rewriter = Rewriter(self)
        return rewriter.keys.key(rewriter.visit(a)) == rewriter.keys.key(rewriter.visit(b))


def _conjuncts(cond: PrimExpr) -> list[PrimExpr]:
    if isinstance(cond, And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def simplify(expr: Any) -> PrimExpr:
    """Simplify ``expr`` knowing nothing about its variables (see :class:`Analyzer`)."""
    return Analyzer().simplify(expr)
