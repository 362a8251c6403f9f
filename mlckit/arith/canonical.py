"""The canonical form of integer expressions: a sum of integer-weighted products of atoms.

An *atom* is what the form does not look inside: a variable, or a sub-expression that stays
opaque (a division that cannot be simplified, a buffer load, a min/max, a cast, ...). A
*monomial* is a sorted tuple of atom ids (repeats allowed: ``i*i`` is ``(0, 0)``); a
polynomial maps monomials to non-zero integer coefficients, the empty monomial ``()`` holding
the constant. Expressions with equal polynomials are equal for every value of their atoms,
which is how ``n*256 - 256*n`` becomes 0 and ``(x + 2) * 3`` becomes ``x * 3 + 6``.
"""

from __future__ import annotations

from typing import Any

from mlckit.tir.expr import (
    Add,
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    IntImm,
    Let,
    Mul,
    PrimExpr,
    StringImm,
    Sub,
    Var,
)

Poly = dict[tuple[int, ...], int]

# Products that would expand to more terms than this stay one opaque atom, so that a deep
# product of sums cannot blow up.
MAX_EXPANDED_TERMS = 64


class KeyCache:
    """Deep keys of expressions: equal keys mean the same tree, with variables by identity.

    Structural equality maps free variables onto each other, which is wrong here (``x // 8``
    and ``y // 8`` are different atoms), hence these keys.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[PrimExpr, tuple]] = {}

    def key(self, expr: PrimExpr) -> tuple:
        hit = self._cache.get(id(expr))
        if hit is not None:
            return hit[1]
        key = self._compute(expr)
        self._cache[id(expr)] = (expr, key)
        return key

    def _compute(self, e: PrimExpr) -> tuple:
        if isinstance(e, Var):
            return ("var", id(e))
        if isinstance(e, (IntImm, FloatImm)):
            return (type(e).__name__, e.dtype, e.value)
        if isinstance(e, StringImm):
            return ("str", e.value)
        if isinstance(e, BufferLoad):
            return ("load", id(e.buffer), tuple(self.key(i) for i in e.indices))
        if isinstance(e, Call):
            return ("call", e.dtype, e.op.name, tuple(self.key(a) for a in e.args))
        if isinstance(e, Cast):
            return ("cast", e.dtype, self.key(e.value))
        if isinstance(e, Let):
            return ("let", id(e.var), self.key(e.value), self.key(e.body))
        children: list[Any] = []
        for _, value in e.structural_fields():
            children.append(self.key(value) if isinstance(value, PrimExpr) else value)
        return (type(e).__name__, e.dtype, tuple(children))


class AtomTable:
    """The atoms met during one simplification, numbered in order of first appearance.

    The numbering makes the output deterministic: terms and factors print in that order.
    Division atoms also remember their numerator polynomial and divisor, so that
    ``(x // c) * c + x % c`` can be merged back into ``x``.
    """

    def __init__(self, keys: KeyCache) -> None:
        self.keys = keys
        self.exprs: list[PrimExpr] = []
        self._index: dict[tuple, int] = {}
        # atom id -> ("div" | "mod", numerator polynomial, divisor)
        self.divmod_info: dict[int, tuple[str, Poly, int]] = {}

    def atom(self, expr: PrimExpr) -> int:
        key = self.keys.key(expr)
        index = self._index.get(key)
        if index is None:
            index = len(self.exprs)
            self.exprs.append(expr)
            self._index[key] = index
        return index

    def divmod_atom(self, kind: str, expr: PrimExpr, numerator: Poly, divisor: int) -> int:
        index = self.atom(expr)
        self.divmod_info.setdefault(index, (kind, dict(numerator), divisor))
        return index

    def find(self, expr: PrimExpr) -> int | None:
        return self._index.get(self.keys.key(expr))


# ---------------------------------------------------------------------------- polynomials
def const_poly(value: int) -> Poly:
    return {(): value} if value else {}


def atom_poly(index: int) -> Poly:
    return {(index,): 1}


def add(p: Poly, q: Poly, scale: int = 1) -> Poly:
    """``p + scale * q``."""
    out = dict(p)
    for mono, coeff in q.items():
        value = out.get(mono, 0) + scale * coeff
        if value:
            out[mono] = value
        else:
            out.pop(mono, None)
    return out


def scale(p: Poly, factor: int) -> Poly:
    if factor == 0:
        return {}
    return {mono: coeff * factor for mono, coeff in p.items()}


def mul(p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in p.items():
        for mb, cb in q.items():
            mono = tuple(sorted(ma + mb))
            value = out.get(mono, 0) + ca * cb
            if value:
                out[mono] = value
            else:
                out.pop(mono, None)
    return out


def constant(p: Poly) -> int | None:
    """The value of a constant polynomial, None when it has variable terms."""
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return None


# ---------------------------------------------------------------------------- printing back
def _order(item: tuple[tuple[int, ...], int]) -> tuple:
    # Positive terms first (so the sum reads ``a + b - c``), higher degree first, larger
    # coefficient first (``i * 4 + j``), then order of first appearance.
    mono, coeff = item
    return (coeff < 0, -len(mono), -abs(coeff), mono)


def to_expr(p: Poly, dtype: str, atoms: AtomTable) -> PrimExpr:
    """Build the expression of a polynomial: ``i * 4 + j - n * 2 + 3``."""
    terms = sorted(((m, c) for m, c in p.items() if m), key=_order)
    const = p.get((), 0)
    if not terms:
        return IntImm(dtype, const)

    def monomial(mono: tuple[int, ...]) -> PrimExpr:
        expr = atoms.exprs[mono[0]]
        for index in mono[1:]:
            expr = Mul(expr, atoms.exprs[index])
        return expr

    def term(mono: tuple[int, ...], coeff: int) -> PrimExpr:
        expr = monomial(mono)
        return expr if coeff == 1 else Mul(expr, IntImm(dtype, coeff))

    if terms[0][1] < 0 and const >= 0:
        # Only subtracted terms: ``4 - i`` and ``0 - i`` (how ``-i`` is written) read
        # better than ``i * -1 + 4``.
        acc, const = IntImm(dtype, const), 0
    else:
        acc, terms = term(*terms[0]), terms[1:]
    for mono, coeff in terms:
        acc = Add(acc, term(mono, coeff)) if coeff > 0 else Sub(acc, term(mono, -coeff))
    if const > 0:
        acc = Add(acc, IntImm(dtype, const))
    elif const < 0:
        acc = Sub(acc, IntImm(dtype, -const))
    return acc
