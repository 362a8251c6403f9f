"""Rewriting calls that match a pattern: ``rewrite_call`` and ``PatternMatchingRewriter``.

    x, y = wildcard(), wildcard()
    pattern = is_op("relax.add")(is_op("relax.multiply")(x, y), y)

    def rewriter(expr, matches):
        return relax.op.ewise_fma(matches[x], matches[y], matches[y])

    func = rewrite_call(pattern, rewriter, func)

Every call of the function is tried, innermost first, seeing the program rewritten so far
(a variable stands for the value it is bound to). The rewriter returns the replacement, or
the matched expression itself to leave it alone. Replacements are normalized (nested calls
become new bindings), a matched value that is already bound to a variable is referred to by
that variable instead of being computed again, and bindings left unused are removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule

from ..analysis import remove_all_unused
from ..expr import Call, Expr, Function, Tuple, TupleGetItem, Var
from ..expr_functor import ExprMutator
from .pattern import DFPattern, _Matcher

RewriterFunc = Callable[[Expr, dict[DFPattern, Expr]], Expr]
Rule = tuple[DFPattern, RewriterFunc]


def _reuse_bound_values(expr: Any, bound_var: dict[int, Var]) -> Any:
    """``expr`` with each value the program already binds replaced by its variable.

    New nodes are left without struct info so that normalizing the binding afterwards
    binds nested calls to variables of their own (A-normal form)."""
    var = bound_var.get(id(expr))
    if var is not None:
        return var
    if isinstance(expr, Call):
        args = [_reuse_bound_values(a, bound_var) for a in expr.args]
        if all(a is b for a, b in zip(args, expr.args)):
            return expr
        return Call(expr.op, args, expr.attrs, expr.sinfo_args)
    if isinstance(expr, Tuple):
        fields = [_reuse_bound_values(f, bound_var) for f in expr.fields]
        if all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return Tuple(fields)
    if isinstance(expr, TupleGetItem):
        value = _reuse_bound_values(expr.tuple_value, bound_var)
        return expr if value is expr.tuple_value else TupleGetItem(value, expr.index)
    return expr


class _CallRewriter(ExprMutator):
    def __init__(self, rules: Sequence[Rule], mod: IRModule | None = None):
        super().__init__(mod)
        self.rules = rules

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        for pattern, rewriter in self.rules:
            matcher = _Matcher(self.lookup_binding)
            if not matcher.match(pattern, call):
                continue
            new = rewriter(call, dict(matcher.memo))
            if not isinstance(new, Expr):
                raise MLCError(
                    f"the rewriter for pattern {pattern!r} returned "
                    f"{type(new).__name__}, not a relax expression (return the matched "
                    "expression to leave it unchanged)"
                )
            if new is call:
                continue
            return _reuse_bound_values(new, matcher.bound_var)
        return call


def _rewrite_function(func: Function, rules: Sequence[Rule], mod: IRModule | None) -> Function:
    new = _CallRewriter(rules, mod).visit_expr(func)
    return new if new is func else remove_all_unused(new)


def rewrite_call(pattern: DFPattern, rewriter: RewriterFunc, func: Function) -> Function:
    """``func`` with every call matching ``pattern`` replaced by ``rewriter(call, matches)``."""
    if not isinstance(func, Function):
        raise MLCError(f"rewrite_call rewrites a relax.Function, got {type(func).__name__}")
    return _rewrite_function(func, [(pattern, rewriter)], None)


class PatternMatchingRewriter(transform.Pass):
    """Pattern rewrites usable as a pass (``rewriter(mod)``) or on one function
    (``rewriter(func)``). ``r1 | r2`` tries ``r1``'s rules first, then ``r2``'s."""

    def __init__(self, rules: Sequence[Rule], name: str = "PatternMatchingRewriter"):
        for rule in rules:
            if not (isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[0], DFPattern)):
                raise MLCError(
                    "PatternMatchingRewriter takes (pattern, rewriter) pairs; build one with "
                    "PatternMatchingRewriter.from_pattern(pattern, rewriter)"
                )
        self.rules = list(rules)
        self.info = transform.PassInfo(0, name)

    @staticmethod
    def from_pattern(pattern: DFPattern, func: RewriterFunc) -> PatternMatchingRewriter:
        """The rewriter replacing each call matching ``pattern`` by ``func(call, matches)``."""
        if not isinstance(pattern, DFPattern):
            raise MLCError(f"from_pattern expects a DFPattern, got {type(pattern).__name__}")
        return PatternMatchingRewriter([(pattern, func)])

    def __or__(self, other: PatternMatchingRewriter) -> PatternMatchingRewriter:
        return PatternMatchingRewriter([*self.rules, *other.rules], self.info.name)

    def __call__(self, obj: Any) -> Any:  # type: ignore[override]
        if isinstance(obj, Function):
            return _rewrite_function(obj, self.rules, None)
        return super().__call__(obj)

    def transform(self, mod: IRModule, ctx: transform.PassContext) -> IRModule:
        result = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                result.update_func(gv, _rewrite_function(func, self.rules, mod))
        return result


__all__ = ["PatternMatchingRewriter", "rewrite_call"]
