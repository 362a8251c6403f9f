"""Symbolic integer sets: the range ``[min_value, max_value]`` an expression covers.

``int_set(i * 4 + j, {i: Range(0, n), j: Range(0, 4)})`` is ``[0, n * 4 - 1]``: the bounds
are expressions, simplified, and may mention variables that were not relaxed. A bound that
cannot be expressed is ``None`` (unbounded on that side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlckit.tir.expr import (
    Add,
    BufferLoad,
    Call,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Range,
    Select,
    Sub,
    Var,
)

from .const_int_bound import dtype_interval
from .errors import ArithError

if TYPE_CHECKING:
    from .simplify import Analyzer


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """The integers ``min_value <= x <= max_value`` (inclusive); ``None`` means unbounded."""

    min_value: PrimExpr | None
    max_value: PrimExpr | None

    @staticmethod
    def single_point(value: PrimExpr) -> IntervalSet:
        return IntervalSet(value, value)

    @staticmethod
    def everything() -> IntervalSet:
        return IntervalSet(None, None)

    @staticmethod
    def from_range(rng: Range, analyzer: Analyzer) -> IntervalSet:
        if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
            return IntervalSet.single_point(rng.min)
        return IntervalSet(rng.min, analyzer.simplify(rng.min + rng.extent - 1))

    def has_lower_bound(self) -> bool:
        return self.min_value is not None

    def has_upper_bound(self) -> bool:
        return self.max_value is not None

    def is_everything(self) -> bool:
        return self.min_value is None and self.max_value is None

    def is_single_point(self) -> bool:
        return self.min_value is not None and self.min_value is self.max_value

    def __repr__(self) -> str:
        def show(e: PrimExpr | None, inf: str) -> str:
            if e is None:
                return inf
            try:
                return e.script()
            except Exception:
                return object.__repr__(e)

        return f"IntervalSet[{show(self.min_value, '-inf')}, {show(self.max_value, '+inf')}]"


def normalize_dom_map(
    dom_map: Mapping[Var, Any] | None, analyzer: Analyzer
) -> dict[int, tuple[Var, IntervalSet]]:
    out: dict[int, tuple[Var, IntervalSet]] = {}
    for var, dom in (dom_map or {}).items():
        if isinstance(dom, Range):
            dom = IntervalSet.from_range(dom, analyzer)
        elif not isinstance(dom, IntervalSet):
            raise ArithError(
                f"the domain of {var.name_hint} must be a Range or an IntervalSet, "
                f"got {type(dom).__name__}"
            )
        out[id(var)] = (var, dom)
    return out


class IntSetEvaluator:
    """Evaluate the set an expression covers when some variables range over sets.

    Each operation combines its operands' sets the way it is monotone in them; where that is
    not known (a product of two ranges that may be negative, a load whose index varies) the
    result falls back to constant bounds or to "everything".
    """

    def __init__(self, analyzer: Analyzer, dom: dict[int, tuple[Var, IntervalSet]]) -> None:
        self.analyzer = analyzer
        self.dom = dom

    def __call__(self, expr: PrimExpr) -> IntervalSet:
        expr = self.analyzer.simplify(expr)
        if self.depends(expr) and self.analyzer.wraps_over(expr, self._const_dom()):
            # Somewhere in the relaxed ranges the value wraps around: it can be anything.
            return IntervalSet.everything()
        return self._eval(expr)

    # bound helpers: None is -inf for a lower bound and +inf for an upper one
    def _s(self, expr: PrimExpr) -> PrimExpr:
        return self.analyzer.simplify(expr)

    def _add(self, x: PrimExpr | None, y: PrimExpr | None) -> PrimExpr | None:
        return None if x is None or y is None else self._s(Add(x, y))

    def _sub(self, x: PrimExpr | None, y: PrimExpr | None) -> PrimExpr | None:
        return None if x is None or y is None else self._s(Sub(x, y))

    def _nonneg(self, x: PrimExpr | None) -> bool:
        return x is not None and self.analyzer.const_int_bound(x).min_value >= 0

    def _eval(self, e: PrimExpr) -> IntervalSet:
        if not self.depends(e):
            return IntervalSet.single_point(e)
        if isinstance(e, Var):
            return self.dom[id(e)][1]
        if isinstance(e, Add):
            a, b = self._eval(e.a), self._eval(e.b)
            return IntervalSet(
                self._add(a.min_value, b.min_value), self._add(a.max_value, b.max_value)
            )
        if isinstance(e, Sub):
            a, b = self._eval(e.a), self._eval(e.b)
            return IntervalSet(
                self._sub(a.min_value, b.max_value), self._sub(a.max_value, b.min_value)
            )
        if isinstance(e, Mul):
            return self._mul(e)
        if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
            a = self._eval(e.a)
            return IntervalSet(
                None if a.min_value is None else self._s(FloorDiv(a.min_value, e.b)),
                None if a.max_value is None else self._s(FloorDiv(a.max_value, e.b)),
            )
        if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
            a = self._eval(e.a)
            upper = IntImm(e.dtype, e.b.value - 1)
            if (
                self._nonneg(a.min_value)
                and a.max_value is not None
                and self.analyzer.can_prove(a.max_value <= upper)
            ):
                return a
            return IntervalSet(IntImm(e.dtype, 0), upper)
        if isinstance(e, (Min, Max)):
            a, b = self._eval(e.a), self._eval(e.b)
            return IntervalSet(
                self._minmax(type(e), a.min_value, b.min_value, lower=True),
                self._minmax(type(e), a.max_value, b.max_value, lower=False),
            )
        if isinstance(e, Select):
            a, b = self._eval(e.true_value), self._eval(e.false_value)
            return IntervalSet(
                self._minmax(Min, a.min_value, b.min_value, lower=True),
                self._minmax(Max, a.max_value, b.max_value, lower=False),
            )
        if isinstance(e, Cast) and e.dtype.startswith("int") and e.value.dtype.startswith("int"):
            a = self._eval(e.value)
            return IntervalSet(
                None if a.min_value is None else self._s(Cast(e.dtype, a.min_value)),
                None if a.max_value is None else self._s(Cast(e.dtype, a.max_value)),
            )
        return self._const_fallback(e)

    def _mul(self, e: Mul) -> IntervalSet:
        a, b = self._eval(e.a), self._eval(e.b)
        for x, y in ((a, b), (b, a)):
            if x.is_single_point() and isinstance(x.min_value, IntImm):
                c = x.min_value
                lo = None if y.min_value is None else self._s(Mul(y.min_value, c))
                hi = None if y.max_value is None else self._s(Mul(y.max_value, c))
                return IntervalSet(lo, hi) if c.value >= 0 else IntervalSet(hi, lo)
        if self._nonneg(a.min_value) and self._nonneg(b.min_value):
            hi = None
            if a.max_value is not None and b.max_value is not None:
                hi = self._s(Mul(a.max_value, b.max_value))
            return IntervalSet(self._s(Mul(a.min_value, b.min_value)), hi)
        return self._const_fallback(e)

    def _minmax(
        self, op: type, x: PrimExpr | None, y: PrimExpr | None, *, lower: bool
    ) -> PrimExpr | None:
        # A missing bound is -inf on the lower side and +inf on the upper side; min(-inf, y)
        # is -inf, min(+inf, y) is y, and the other way round for max.
        if x is None or y is None:
            absorbing = (op is Min) == lower
            return None if absorbing else (y if x is None else x)
        return self._s(op(x, y))

    def _const_fallback(self, e: PrimExpr) -> IntervalSet:
        """Constant bounds of ``e`` with every relaxed variable over its constant bounds."""
        lo, hi = self.analyzer.bound_over(e, self._const_dom())
        # The dtype's own limits carry no information: report them as unbounded.
        dtype_lo, dtype_hi = dtype_interval(e.dtype)
        return IntervalSet(
            None if lo <= dtype_lo else IntImm(e.dtype, int(lo)),
            None if hi >= dtype_hi else IntImm(e.dtype, int(hi)),
        )

    def _const_dom(self) -> dict[int, tuple[float, float]]:
        out: dict[int, tuple[float, float]] = {}
        for key, (_, dom) in self.dom.items():
            lo = (
                -float("inf")
                if dom.min_value is None
                else self.analyzer.exact_bound(dom.min_value)[0]
            )
            hi = (
                float("inf")
                if dom.max_value is None
                else self.analyzer.exact_bound(dom.max_value)[1]
            )
            out[key] = (lo, hi)
        return out

    def depends(self, e: PrimExpr) -> bool:
        """Whether ``e`` mentions a relaxed variable."""
        if isinstance(e, Var):
            return id(e) in self.dom
        if isinstance(e, BufferLoad):
            return any(self.depends(i) for i in e.indices)
        if isinstance(e, Call):
            return any(self.depends(a) for a in e.args)
        return any(isinstance(v, PrimExpr) and self.depends(v) for _, v in e.structural_fields())
