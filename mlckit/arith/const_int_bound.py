"""Constant integer bounds: the interval ``[min_value, max_value]`` an expression lies in.

Internally bounds are pairs of Python ints, with ``math.inf`` standing for "unbounded"; the
public :class:`ConstIntBound` turns those into TVM's sentinels ``POS_INF``/``NEG_INF``.

Bounds follow the expression's dtype: integer arithmetic wraps around at the dtype's width
(as the generated code does), so an int32 ``i * j`` with ``i, j < 65536``, whose exact value
may pass 2**31 - 1, can be any int32 value, not "at most 2**31 - 1". A variable nothing is
known about is unbounded, and taken not to wrap (``x < x + 1``), as in TVM: only bounds that
are known, and pass the dtype's limits, make a value wrap.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlckit.ir.dtype import is_bool, is_int
from mlckit.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    SizeVar,
    Sub,
    Var,
)

Bound = int | float  # an int, or +/- math.inf
Interval = tuple[Bound, Bound]
INF = math.inf
EVERYTHING: Interval = (-INF, INF)


@dataclass(frozen=True)
class ConstIntBound:
    """``min_value <= expr <= max_value``; ``POS_INF``/``NEG_INF`` mean "no bound"."""

    min_value: int
    max_value: int

    POS_INF = (1 << 63) - 1
    NEG_INF = -POS_INF

    @staticmethod
    def from_interval(interval: Interval) -> ConstIntBound:
        lo, hi = interval
        return ConstIntBound(
            ConstIntBound.NEG_INF if lo <= ConstIntBound.NEG_INF else int(lo),
            ConstIntBound.POS_INF if hi >= ConstIntBound.POS_INF else int(hi),
        )

    def to_interval(self) -> Interval:
        lo = -INF if self.min_value <= self.NEG_INF else self.min_value
        hi = INF if self.max_value >= self.POS_INF else self.max_value
        return lo, hi

    def is_const(self) -> bool:
        return self.min_value == self.max_value


@functools.cache
def dtype_interval(dtype: str) -> Interval:
    """All values of an integer dtype; the 64-bit range counts as unbounded."""
    if is_bool(dtype):
        return 0, 1
    if not is_int(dtype):
        return EVERYTHING
    info = np.iinfo(dtype)
    lo = -INF if info.min <= ConstIntBound.NEG_INF else int(info.min)
    hi = INF if info.max >= ConstIntBound.POS_INF else int(info.max)
    return lo, hi


@functools.cache  # np.iinfo costs microseconds, asked for every constant simplified
def representable(dtype: str) -> Interval:
    """The exact range of values an integer dtype holds (every value for other dtypes)."""
    if is_bool(dtype):
        return 0, 1
    if not is_int(dtype):
        return EVERYTHING
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def fits(interval: Interval, dtype: str) -> bool:
    """Whether every finite bound of ``interval`` is a value of ``dtype``: a value computed
    exactly within it is what the wrapping arithmetic of that dtype computes too."""
    lo, hi = representable(dtype)
    low, high = interval
    return (math.isinf(low) or low >= lo) and (math.isinf(high) or high <= hi)


# ---------------------------------------------------------------------------- arithmetic
def _mul(x: Bound, y: Bound) -> Bound:
    # 0 * inf is 0 for bounds (an empty factor range is not a concern here).
    if x == 0 or y == 0:
        return 0
    return x * y


def _floordiv(x: Bound, y: Bound) -> Bound:
    """floor(x / y) with y != 0, allowing infinities."""
    if math.isinf(x):
        return x if y > 0 else -x
    if math.isinf(y):
        return 0 if (x >= 0) == (y > 0) or x == 0 else -1
    return int(x) // int(y)


def add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def sub(a: Interval, b: Interval) -> Interval:
    return a[0] - b[1], a[1] - b[0]


def mul(a: Interval, b: Interval) -> Interval:
    corners = [_mul(x, y) for x in a for y in b]
    return min(corners), max(corners)


def floordiv(a: Interval, b: Interval) -> Interval:
    if b[0] > 0 or b[1] < 0:
        corners = [_floordiv(x, y) for x in a for y in b]
        return min(corners), max(corners)
    return EVERYTHING


def floormod(a: Interval, b: Interval) -> Interval:
    if b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        if b[0] == b[1] and not math.isinf(a[0]) and not math.isinf(a[1]):
            c = int(b[0])
            if a[0] // c == a[1] // c:
                return a[0] % c, a[1] % c
        return 0, b[1] - 1
    if b[1] < 0:
        return b[0] + 1, 0
    return EVERYTHING


def truncdiv(a: Interval, b: Interval) -> Interval:
    if a[0] >= 0 and b[0] > 0:
        return floordiv(a, b)
    if b[0] > 0 or b[1] < 0:
        # |a / b| <= |a|, and the sign follows a's sign times b's.
        m = max(abs(a[0]), abs(a[1]))
        return -m, m
    return EVERYTHING


def truncmod(a: Interval, b: Interval) -> Interval:
    if b[0] > 0 or b[1] < 0:
        m = max(abs(b[0]), abs(b[1])) - 1
        lo = 0 if a[0] >= 0 else max(-m, a[0])
        hi = 0 if a[1] <= 0 else min(m, a[1])
        return lo, hi
    return EVERYTHING


def union(a: Interval, b: Interval) -> Interval:
    return min(a[0], b[0]), max(a[1], b[1])


def intersect(a: Interval, b: Interval) -> Interval:
    return max(a[0], b[0]), min(a[1], b[1])


# ---------------------------------------------------------------------------- evaluation
class BoundEvaluator:
    """Interval arithmetic over an expression tree, given the bounds of its variables.

    Run it on simplified expressions: the canonical form has already cancelled ``x - x``,
    which interval arithmetic alone cannot see.
    """

    def __init__(self, var_bound: Callable[[Var], Interval]) -> None:
        self.var_bound = var_bound
        self._memo: dict[int, tuple[PrimExpr, Interval]] = {}
        self._let: dict[int, Interval] = {}
        # Set when some sub-expression's known bounds passed its dtype's limits.
        self.wrapped = False

    def __call__(self, expr: PrimExpr) -> Interval:
        """The bounds of ``expr`` within its dtype's range."""
        return intersect(self.exact(expr), dtype_interval(expr.dtype))

    def exact(self, expr: PrimExpr) -> Interval:
        """The bounds of ``expr`` as an integer, infinite where nothing is known; the whole
        dtype where known bounds pass its limits (the value wraps around)."""
        hit = self._memo.get(id(expr))
        if hit is not None:
            return hit[1]
        result = self._eval(expr)
        if not fits(result, expr.dtype):
            self.wrapped = True
            result = dtype_interval(expr.dtype)
        self._memo[id(expr)] = (expr, result)
        return result

    def _eval(self, e: PrimExpr) -> Interval:
        if isinstance(e, IntImm):
            return e.value, e.value
        if isinstance(e, Var):
            if id(e) in self._let:
                return self._let[id(e)]
            lo, hi = self.var_bound(e)
            if isinstance(e, SizeVar):
                lo = max(lo, 0)
            return lo, hi
        if isinstance(e, Add):
            return add(self.exact(e.a), self.exact(e.b))
        if isinstance(e, Sub):
            return sub(self.exact(e.a), self.exact(e.b))
        if isinstance(e, Mul):
            return mul(self.exact(e.a), self.exact(e.b))
        if isinstance(e, FloorDiv):
            return floordiv(self.exact(e.a), self.exact(e.b))
        if isinstance(e, FloorMod):
            return floormod(self.exact(e.a), self.exact(e.b))
        if isinstance(e, Div) and is_int(e.dtype):
            return truncdiv(self.exact(e.a), self.exact(e.b))
        if isinstance(e, Mod) and is_int(e.dtype):
            return truncmod(self.exact(e.a), self.exact(e.b))
        if isinstance(e, Min):
            a, b = self.exact(e.a), self.exact(e.b)
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, Max):
            a, b = self.exact(e.a), self.exact(e.b)
            return max(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, Select):
            return union(self.exact(e.true_value), self.exact(e.false_value))
        if isinstance(e, Cast):
            inner = self.exact(e.value) if is_int(e.value.dtype) or is_bool(e.value.dtype) else None
            target = dtype_interval(e.dtype)
            if inner is not None and target[0] <= inner[0] and inner[1] <= target[1]:
                return inner
            return target
        if isinstance(e, Let):
            self._let[id(e.var)] = self.exact(e.value)
            return self.exact(e.body)
        if isinstance(e, (EQ, NE, LT, LE, GT, GE, And, Or, Not)):
            return 0, 1
        return dtype_interval(e.dtype)
