"""Loop transformations: ``split`` (this module is the pattern the other primitives follow).

A primitive is ``impl(sch, ...)`` registered with ``@primitive("name")``. It reads the current
function through the schedule's handles (``sch.loop(rv)``, ``sch.block_realize(rv)``), builds
new statements, swaps them in with ``sch.replace(old, new)``, and raises ScheduleError with the
violated condition when it cannot apply (the schedule then rolls back by itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute
from ..schedule import LoopRV, Schedule, primitive


@primitive("split")
def split(
    sch: Schedule,
    loop: LoopRV,
    factors: Sequence[Any],
    preserve_unit_iters: bool = True,
    disable_predication: bool = False,
) -> list[LoopRV]:
    """Split ``loop`` into nested loops of extents ``factors`` (one may be None: inferred).

    ``for i in range(n)`` with factors ``[None, 4]`` becomes ``for i_0 in range(ceil(n/4))``,
    ``for i_1 in range(4)`` with ``i = i_0 * 4 + i_1``; when 4 does not divide ``n`` the blocks
    inside get the predicate ``i_0 * 4 + i_1 < n`` so no iteration runs past the end.
    """
    node = sch.loop(loop)
    dtype = node.loop_var.dtype
    analyzer = Analyzer()
    extent = node.extent
    if len(factors) < 2:
        raise ScheduleError(f"split: give at least two factors for loop {_name(node)}")
    unknown = [i for i, f in enumerate(factors) if f is None]
    if len(unknown) > 1:
        raise ScheduleError(f"split: at most one factor of loop {_name(node)} can be None")
    known = []
    for f in factors:
        if f is None:
            continue
        value = E.convert(int(f) if isinstance(f, int) else f, dtype)
        if isinstance(value, E.IntImm) and value.value <= 0:
            raise ScheduleError(
                f"split: factor {value.value} of loop {_name(node)} must be positive"
            )
        known.append(value)
    product = E.make_const(1, dtype)
    for value in known:
        product = product * value
    product = analyzer.simplify(product)
    extents: list[E.PrimExpr] = []
    for f in factors:
        if f is None:
            inferred = analyzer.simplify(E.FloorDiv(extent + product - 1, product))
            extents.append(inferred)
        else:
            extents.append(E.convert(int(f) if isinstance(f, int) else f, dtype))
    total = E.make_const(1, dtype)
    for value in extents:
        total = total * value
    total = analyzer.simplify(total)
    covers = analyzer.can_prove(total >= extent) if not _same(total, extent) else True
    if not covers:
        raise ScheduleError(
            f"split: the factors {_text(extents)} of loop {_name(node)} multiply to "
            f"{total}, less than its extent {extent}"
        )
    exact = _same(total, extent) or analyzer.can_prove_equal(total, extent)
    new_vars = [E.Var(f"{node.loop_var.name_hint}_{i}", dtype) for i in range(len(extents))]
    fused: E.PrimExpr = new_vars[0]
    for var, ext in zip(new_vars[1:], extents[1:]):
        fused = fused * ext + var
    fused = analyzer.simplify(fused)
    body = substitute(node.body, {node.loop_var: analyzer.simplify(node.min + fused)})
    if not exact and not disable_predication:
        body = add_predicate(body, fused < extent)
    for var, ext in reversed(list(zip(new_vars, extents))):
        body = S.For(var, E.make_const(0, dtype), ext, S.ForKind.SERIAL, body)
    sch.replace(node, body)
    return [LoopRV(v) for v in new_vars]


def add_predicate(stmt: S.Stmt, condition: E.PrimExpr) -> S.Stmt:
    """``stmt`` with ``condition`` and-ed into the predicate of each outermost block in it."""
    from mlckit.arith import simplify

    from ...stmt_functor import StmtExprMutator

    class AddPredicate(StmtExprMutator):
        def visit_block_realize_(self, op: S.BlockRealize) -> S.Stmt:
            predicate = condition if _is_true(op.predicate) else E.And(op.predicate, condition)
            return op.with_fields(predicate=simplify(predicate))

    return AddPredicate().visit(stmt)


def _is_true(expr: E.PrimExpr) -> bool:
    return isinstance(expr, E.IntImm) and expr.dtype == "bool" and expr.value == 1


def _same(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    from mlckit.ir import structural_equal

    return a is b or structural_equal(a, b)


def _name(loop: S.For) -> str:
    return repr(loop.loop_var.name_hint)


def _text(values: Sequence[E.PrimExpr]) -> str:
    return "[" + ", ".join(str(v.script()) for v in values) + "]"
