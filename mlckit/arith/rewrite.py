"""The simplifier: integer arithmetic through the canonical form, everything else by rules.

Integer ``+ - *`` and division by positive constants go through the polynomial form of
:mod:`.canonical`; comparisons, ``min``/``max`` and ``select`` are decided with constant
bounds where possible; float arithmetic is folded only when both operands are constants
(reassociating float math would change results).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from mlckit.errors import IRError
from mlckit.ir.dtype import bits, is_bool, is_float, is_int
from mlckit.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOpExpr,
    BufferLoad,
    Call,
    Cast,
    CmpExpr,
    Div,
    FloatImm,
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
    Sub,
    Var,
)

from . import canonical as cn
from .canonical import AtomTable, KeyCache, Poly
from .const_int_bound import BoundEvaluator, Interval, fits
from .const_int_bound import mul as _mul_interval

if TYPE_CHECKING:
    from .simplify import Analyzer

_POLY_KINDS = (IntImm, Var, Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod)
_NEGATE = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}
_FLOAT_FOLD = {
    Add: np.add,
    Sub: np.subtract,
    Mul: np.multiply,
    Div: np.divide,
    FloorDiv: np.floor_divide,
    FloorMod: np.mod,
    Min: np.minimum,
    Max: np.maximum,
}
_CMP_FOLD = {
    LT: lambda x, y: x < y,
    LE: lambda x, y: x <= y,
    GT: lambda x, y: x > y,
    GE: lambda x, y: x >= y,
    EQ: lambda x, y: x == y,
    NE: lambda x, y: x != y,
}


def _true(value: bool) -> IntImm:
    return IntImm("bool", int(bool(value)))


def _is_const(e: PrimExpr, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)


def _wrap_int(value: int, dtype: str) -> int:
    """``value`` converted to ``dtype`` with two's-complement wrap-around, as a C cast does."""
    n = bits(dtype)
    value %= 1 << n
    if not dtype.startswith("u") and value >= 1 << (n - 1):
        value -= 1 << n
    return value


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def rebuild(e: PrimExpr, children: list[PrimExpr]) -> PrimExpr:
    """``e`` with new operands (in field order), or ``e`` itself when none changed."""
    old = [v for _, v in e.structural_fields() if isinstance(v, PrimExpr)]
    if isinstance(e, Call):
        old = list(e.args)
    elif isinstance(e, BufferLoad):
        old = list(e.indices)
    if all(x is y for x, y in zip(old, children)):
        return e
    if isinstance(e, BinaryOpExpr):
        return type(e)(*children, span=e.span)
    if isinstance(e, Cast):
        return Cast(e.dtype, children[0], span=e.span)
    if isinstance(e, Not):
        return Not(children[0], span=e.span)
    if isinstance(e, Select):
        return Select(*children, span=e.span)
    if isinstance(e, Let):
        # structural_fields order is var, value, body; the var is a definition, kept as is
        return Let(e.var, children[1], children[2], span=e.span)
    if isinstance(e, Call):
        return Call(e.dtype, e.op, children, span=e.span)
    if isinstance(e, BufferLoad):
        return BufferLoad(e.buffer, children, span=e.span)
    return e


class Rewriter:
    """One simplification session: shares atoms and memoized results across sub-expressions."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer
        self.keys = KeyCache()
        self.atoms = AtomTable(self.keys)
        self.bound = BoundEvaluator(analyzer.var_interval)
        self._memo: dict[int, tuple[PrimExpr, PrimExpr]] = {}
        self._poly_memo: dict[int, tuple[PrimExpr, Poly]] = {}

    # ------------------------------------------------------------------ entry points
    def visit(self, e: PrimExpr) -> PrimExpr:
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        result = self._visit(e)
        if result is not e and self.keys.key(result) == self.keys.key(e):
            result = e  # nothing changed: hand back the very same object
        self._memo[id(e)] = (e, result)
        self._memo[id(result)] = (result, result)
        return result

    def poly(self, e: PrimExpr) -> Poly:
        """The canonical polynomial of an integer expression."""
        hit = self._poly_memo.get(id(e))
        if hit is not None:
            return hit[1]
        result = self._poly(e)
        self._poly_memo[id(e)] = (e, result)
        return result

    def to_expr(self, p: Poly, dtype: str) -> PrimExpr:
        return cn.to_expr(p, dtype, self.atoms)

    # ------------------------------------------------------------------ dispatch
    def _visit(self, e: PrimExpr) -> PrimExpr:
        if is_int(e.dtype) and isinstance(e, _POLY_KINDS):
            try:
                return self.to_expr(self.poly(e), e.dtype)
            except IRError:
                # A coefficient does not fit the dtype (a negative constant in a uint
                # expression, an overflow); simplify the operands only.
                return rebuild(e, [self.visit(c) for c in self._operands(e)])
        if isinstance(e, Var):
            bound = self.analyzer.substitution(e)
            return e if bound is None else bound
        if isinstance(e, CmpExpr):
            return self._compare(e)
        if isinstance(e, (Min, Max)):
            return self._minmax(e)
        if isinstance(e, BinaryOpExpr) and type(e) in _FLOAT_FOLD:
            return self._float_binary(e)
        if isinstance(e, (And, Or)):
            return self._logic(e)
        if isinstance(e, Not):
            return self._not(e)
        if isinstance(e, Select):
            return self._select(e.condition, e.true_value, e.false_value, e)
        if isinstance(e, Call) and e.op.name == "tir.if_then_else":
            return self._select(*e.args, e)
        if isinstance(e, Cast):
            return self._cast(e)
        return rebuild(e, [self.visit(c) for c in self._operands(e)])

    @staticmethod
    def _operands(e: PrimExpr) -> list[PrimExpr]:
        if isinstance(e, Call):
            return list(e.args)
        if isinstance(e, BufferLoad):
            return list(e.indices)
        if isinstance(e, Let):
            return [e.var, e.value, e.body]
        return [v for _, v in e.structural_fields() if isinstance(v, PrimExpr)]

    # ------------------------------------------------------------------ integer arithmetic
    def _poly(self, e: PrimExpr) -> Poly:
        dtype = e.dtype
        if isinstance(e, IntImm):
            return cn.const_poly(e.value)
        if isinstance(e, Var):
            bound = self.analyzer.substitution(e)
            return self._atom(e) if bound is None else self.poly(bound)
        if isinstance(e, (Add, Sub)):
            p = cn.add(self.poly(e.a), self.poly(e.b), 1 if isinstance(e, Add) else -1)
            return self._merge_divmod(p, dtype)
        if isinstance(e, Mul):
            pa, pb = self.poly(e.a), self.poly(e.b)
            ca, cb = cn.constant(pa), cn.constant(pb)
            if ca is not None:
                return cn.scale(pb, ca)
            if cb is not None:
                return cn.scale(pa, cb)
            if len(pa) * len(pb) <= cn.MAX_EXPANDED_TERMS:
                return cn.mul(pa, pb)
            return self._atom(Mul(self.to_expr(pa, dtype), self.to_expr(pb, dtype)))
        if isinstance(e, (FloorDiv, FloorMod, Div, Mod)):
            return self._division(e)
        result = self.visit(e)
        if isinstance(result, _POLY_KINDS) and result is not e:
            return self.poly(result)
        return self._atom(result)

    def _atom(self, e: PrimExpr) -> Poly:
        return cn.atom_poly(self.atoms.atom(e))

    def _division(self, e: BinaryOpExpr) -> Poly:
        dtype = e.dtype
        pa, b = self.poly(e.a), self.visit(e.b)
        ca = cn.constant(pa)
        floor = isinstance(e, (FloorDiv, FloorMod))
        is_div = isinstance(e, (FloorDiv, Div))
        if isinstance(b, IntImm) and b.value != 0:
            c = b.value
            if ca is not None:
                if floor:
                    return cn.const_poly(ca // c if is_div else ca % c)
                q = _truncdiv(ca, c)
                return cn.const_poly(q if is_div else ca - q * c)
            # Truncating division agrees with floor division for a non-negative dividend.
            if c > 0 and (floor or self._exact_bound(pa, dtype)[0] >= 0):
                return self._floordiv(pa, c, dtype) if is_div else self._floormod(pa, c, dtype)
        op = type(e)
        return self._atom(op(self.to_expr(pa, dtype), b))

    def _split(self, p: Poly, c: int) -> tuple[Poly, Poly]:
        """``p == c * q + r`` with the terms divisible by c (and most of the constant) in q."""
        q: Poly = {}
        r: Poly = {}
        for mono, coeff in p.items():
            if not mono:
                quot, rem = divmod(coeff, c)
                if quot:
                    q[mono] = quot
                if rem:
                    r[mono] = rem
            elif coeff % c == 0:
                q[mono] = coeff // c
            else:
                r[mono] = coeff
        return q, r

    def _floordiv(self, p: Poly, c: int, dtype: str) -> Poly:
        # floordiv(c*q + r, c) == q + floordiv(r, c), exactly, for integer q
        q, r = self._split(p, c)
        if not r or c == 1:
            return cn.add(q, r)
        lo, hi = self._exact_bound(r, dtype)
        if not math.isinf(lo) and not math.isinf(hi) and lo // c == hi // c:
            return cn.add(q, cn.const_poly(int(lo) // c))
        g = math.gcd(c, *r.values())
        if g > 1:
            # floordiv(g*x, g*c') == floordiv(x, c')
            return cn.add(q, self._floordiv({m: v // g for m, v in r.items()}, c // g, dtype))
        inner = self._single_divmod_atom(r, "div")
        if inner is not None:
            # floordiv(floordiv(x, c1), c) == floordiv(x, c1 * c) for positive c1, c
            return cn.add(q, self._floordiv(inner[0], inner[1] * c, dtype))
        return cn.add(q, self._divmod_atom("div", r, c, dtype))

    def _floormod(self, p: Poly, c: int, dtype: str) -> Poly:
        _, r = self._split(p, c)
        if not r or c == 1:
            return {}
        lo, hi = self._exact_bound(r, dtype)
        if not math.isinf(lo) and not math.isinf(hi) and lo // c == hi // c:
            return cn.add(r, cn.const_poly(-c * (int(lo) // c)))
        g = math.gcd(c, *r.values())
        if g > 1:
            # floormod(g*x, g*c') == g * floormod(x, c')
            return cn.scale(self._floormod({m: v // g for m, v in r.items()}, c // g, dtype), g)
        inner = self._single_divmod_atom(r, "mod")
        if inner is not None and inner[1] % c == 0:
            # floormod(floormod(x, k*c), c) == floormod(x, c)
            return self._floormod(inner[0], c, dtype)
        return self._divmod_atom("mod", r, c, dtype)

    def _single_divmod_atom(self, r: Poly, kind: str) -> tuple[Poly, int] | None:
        if len(r) != 1:
            return None
        ((mono, coeff),) = r.items()
        if coeff != 1 or len(mono) != 1:
            return None
        info = self.atoms.divmod_info.get(mono[0])
        if info is None or info[0] != kind:
            return None
        return info[1], info[2]

    def _divmod_expr(self, kind: str, numerator: Poly, c: int, dtype: str) -> PrimExpr:
        op = FloorDiv if kind == "div" else FloorMod
        return op(self.to_expr(numerator, dtype), IntImm(dtype, c))

    def _divmod_atom(self, kind: str, numerator: Poly, c: int, dtype: str) -> Poly:
        expr = self._divmod_expr(kind, numerator, c, dtype)
        index = self.atoms.divmod_atom(kind, expr, numerator, c)
        self._memo[id(expr)] = (expr, expr)
        return cn.atom_poly(index)

    def _merge_divmod(self, p: Poly, dtype: str) -> Poly:
        """``(x // c) * c * k + (x % c) * k -> x * k`` and ``x - (x // c) * c -> x % c``."""
        for mono, coeff in list(p.items()):
            if len(mono) != 1 or mono not in p:
                continue
            info = self.atoms.divmod_info.get(mono[0])
            if info is None:
                continue
            kind, num, c = info
            if kind == "mod":
                div = self.atoms.find(self._divmod_expr("div", num, c, dtype))
                if div is not None and p.get((div,)) == coeff * c:
                    p = cn.add(p, {mono: coeff, (div,): coeff * c}, -1)
                    p = cn.add(p, num, coeff)
            elif coeff % c == 0:
                k = -coeff // c
                if all(p.get(m) == k * v for m, v in num.items() if m):
                    p = cn.add(p, num, -k)
                    p = cn.add(p, {mono: coeff}, -1)
                    p = cn.add(p, self._floormod(num, c, dtype), k)
        return p

    def _poly_bound(self, p: Poly) -> Interval:
        lo: float = 0
        hi: float = 0
        for mono, coeff in p.items():
            t: Interval = (coeff, coeff)
            for index in mono:
                t = _mul_interval(t, self.bound.exact(self.atoms.exprs[index]))
            lo, hi = lo + t[0], hi + t[1]
        return lo, hi

    def _exact_bound(self, p: Poly, dtype: str) -> Interval:
        """Bounds of the value of ``p`` computed in ``dtype``: its exact bounds when they fit
        the dtype (the wrapping arithmetic then computes the exact value), else unbounded."""
        bound = self._poly_bound(p)
        return bound if fits(bound, dtype) else (-math.inf, math.inf)

    # ------------------------------------------------------------------ comparisons
    def _compare(self, e: CmpExpr) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        op = type(e)
        if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
            return _true(_CMP_FOLD[op](a.value, b.value))
        if not is_int(a.dtype):
            if (
                op in (EQ, LE, GE)
                and self.keys.key(a) == self.keys.key(b)
                and not is_float(a.dtype)
            ):
                return _true(True)
            return rebuild(e, [a, b])
        try:
            pa, pb = self.poly(a), self.poly(b)
            diff = cn.add(pa, pb, -1)
            decided = self.decide(op, pa, pb, a.dtype)
            if decided is not None:
                return _true(decided)
            if not (fits(self._poly_bound(pa), a.dtype) and fits(self._poly_bound(pb), b.dtype)):
                # Moving terms across a side that may wrap around changes what it means.
                return rebuild(e, [a, b])
            return self._normalized_compare(op, diff, a.dtype, e, a, b)
        except IRError:
            return rebuild(e, [a, b])

    def difference_bound(self, a: PrimExpr, b: PrimExpr) -> Interval | None:
        """Bounds of the integer ``a - b`` (exact, not wrapped), or None when ``a`` or ``b``
        may wrap around in their dtype (their values are then not what their formulas say)."""
        pa, pb = self.poly(a), self.poly(b)
        if not (fits(self._poly_bound(pa), a.dtype) and fits(self._poly_bound(pb), b.dtype)):
            return None
        return self._poly_bound(self.poly(self.analyzer.simplify(a - b)))

    def decide(self, op: type, a: Poly, b: Poly, dtype: str) -> bool | None:
        """Whether ``a <op> b`` always holds (True), never holds (False), or is unknown.

        The bounds of ``a - b`` decide it when neither side may wrap around in ``dtype``; when
        one may, only equality of the two polynomials (equal values, wrapped or not) decides."""
        diff = cn.add(a, b, -1)
        if not (fits(self._poly_bound(a), dtype) and fits(self._poly_bound(b), dtype)):
            return None if diff else op in (EQ, LE, GE)
        lo, hi = self._poly_bound(diff)
        if (lo, hi) != (0, 0) and self.analyzer.has_symbolic_ranges():
            sym = self.analyzer.symbolic_interval(self.to_expr(diff, dtype))
            if sym is not None:
                lo, hi = max(lo, sym[0]), min(hi, sym[1])
        if op is LT:
            return True if hi < 0 else False if lo >= 0 else None
        if op is LE:
            return True if hi <= 0 else False if lo > 0 else None
        if op is GT:
            return True if lo > 0 else False if hi <= 0 else None
        if op is GE:
            return True if lo >= 0 else False if hi < 0 else None
        equal = True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
        if op is EQ or equal is None:
            return equal
        return not equal

    def _normalized_compare(
        self, op: type, diff: Poly, dtype: str, e: CmpExpr, a: PrimExpr, b: PrimExpr
    ) -> PrimExpr:
        # Cancel what both sides share: added terms on the left, subtracted ones on the
        # right, the constant on whichever side keeps it positive (``x + 1 < 5`` -> ``x < 4``).
        lhs = {m: c for m, c in diff.items() if m and c > 0}
        rhs = {m: -c for m, c in diff.items() if m and c < 0}
        const = diff.get((), 0)
        if const > 0:
            lhs[()] = const
        elif const < 0:
            rhs[()] = -const
        new_a, new_b = self.to_expr(lhs, dtype), self.to_expr(rhs, dtype)
        if self.keys.key(new_a) == self.keys.key(a) and self.keys.key(new_b) == self.keys.key(b):
            return rebuild(e, [a, b])
        return op(new_a, new_b)

    def _minmax(self, e: BinaryOpExpr) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        is_min = isinstance(e, Min)
        if isinstance(a, FloatImm) and isinstance(b, FloatImm):
            return self._fold_float(type(e), a, b)
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(e.dtype, min(a.value, b.value) if is_min else max(a.value, b.value))
        if self.keys.key(a) == self.keys.key(b):
            return a
        if is_int(e.dtype):
            try:
                le = self.decide(LE, self.poly(a), self.poly(b), e.dtype)
            except IRError:
                le = None
            if le is not None:
                return (a if le else b) if is_min else (b if le else a)
        return rebuild(e, [a, b])

    # ------------------------------------------------------------------ floats, logic, ...
    def _fold_float(self, op: type, a: FloatImm, b: FloatImm) -> PrimExpr:
        t = np.dtype(a.dtype).type
        with np.errstate(all="ignore"):
            value = _FLOAT_FOLD[op](t(a.value), t(b.value))
        return FloatImm(a.dtype, float(value))

    def _float_binary(self, e: BinaryOpExpr) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if isinstance(a, FloatImm) and isinstance(b, FloatImm):
            return self._fold_float(type(e), a, b)
        return rebuild(e, [a, b])

    def _logic(self, e: BinaryOpExpr) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        absorbing = 0 if isinstance(e, And) else 1  # False absorbs `and`, True absorbs `or`
        for x, y in ((a, b), (b, a)):
            if _is_const(x):
                return x if x.value == absorbing else y
        if self.keys.key(a) == self.keys.key(b):
            return a
        return rebuild(e, [a, b])

    def _not(self, e: Not) -> PrimExpr:
        a = e.a
        if isinstance(a, Not):
            return self.visit(a.a)
        if isinstance(a, CmpExpr):
            return self.visit(_NEGATE[type(a)](a.a, a.b))
        a = self.visit(a)
        if _is_const(a):
            return _true(not a.value)
        if isinstance(a, (Not, CmpExpr)):
            return self._not(Not(a))
        return rebuild(e, [a])

    def _select(self, cond: PrimExpr, t: PrimExpr, f: PrimExpr, e: PrimExpr) -> PrimExpr:
        cond = self.visit(cond)
        if _is_const(cond):
            return self.visit(t if cond.value else f)
        t, f = self.visit(t), self.visit(f)
        if self.keys.key(t) == self.keys.key(f):
            return t
        return rebuild(e, [cond, t, f])

    def _cast(self, e: Cast) -> PrimExpr:
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, (IntImm, FloatImm)):
            if is_float(e.dtype):
                return FloatImm(e.dtype, float(np.dtype(e.dtype).type(v.value)))
            if is_bool(e.dtype):
                return _true(v.value != 0)
            if isinstance(v, IntImm) or math.isfinite(v.value):
                return IntImm(e.dtype, _wrap_int(int(v.value), e.dtype))
        return rebuild(e, [v])
