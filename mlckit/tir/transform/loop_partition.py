"""Loop partitioning: a loop whose last iterations need a guard runs as two loops.

Splitting a loop of dynamic extent by a constant factor (a batch of ``n`` rows in tiles of
16) leaves a predicate on the block, because the last tile may run past the end::

    for i0 in prange((n + 15) // 16):
        for k in range(784):
            for i1 in range(16):
                if i0 * 16 + i1 < n:               # tested on every multiply-add
                    C[i0 * 16 + i1, ...] += ...

The test costs little by itself, but inside the hot loop it keeps LLVM from keeping the tile
in registers and vectorizing it (measured 1.5x slower than the same nest without it). For
every iteration but the last, the predicate is known to hold, so this pass (the idea of TVM's
``LoopPartition``) runs the loop as two loops: the full tiles without the test, then the rest
with it, on one thread (it is one tile)::

    for i0 in prange(n // 16):                  # i0 * 16 + 15 < n: no test
        ... C[i0 * 16 + i1, ...] += ...
    for i0 in range(n // 16, (n + 15) // 16):   # the partial tile keeps its test
        ... if i0 * 16 + i1 < n: ...

**Where the bound comes from.** A conjunct ``a < b`` of a block predicate under the loop
``v`` holds for every iteration of the loops between ``v`` and the block exactly when the
largest value of ``a - b`` over those loops is negative. When that largest value is linear in
``v``, ``c * v + h`` with a constant ``c > 0`` (``h`` free of ``v``), it holds for
``v < L = floordiv(c - h - 1, c)``. Above: ``a - b = 16 * i0 + i1 - n`` is at most
``16 * i0 + 15 - n``, so ``L = floordiv(n, 16)``. ``L`` is clamped to the loop's range
unless the analyzer proves it lies inside (shape variables are never negative).

Only loops with a non-constant extent are partitioned: a constant split that leaves a
partial tile is the schedule's explicit choice (and a constant bound would be folded away by
LLVM anyway).
"""

from __future__ import annotations

from mlckit.arith import Analyzer, ConstIntBound
from mlckit.ir.dtype import is_int
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.analysis import collect_vars
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule.primitives.block_scope import conjunction, conjuncts
from mlckit.tir.stmt_functor import StmtExprMutator, substitute


def loop_partition(func: PrimFunc) -> PrimFunc:
    """``func`` with each guarded loop of dynamic extent split into its full and partial
    iterations (see the module docstring)."""
    analyzer = Analyzer()
    for var in collect_vars([buffer.shape for buffer in func.buffer_map.values()]):
        analyzer.update(var, ConstIntBound(0, ConstIntBound.POS_INF))
    body = _Partitioner(analyzer).visit_stmt(func.body)
    return func if body is func.body else func.with_body(body)


def _serial(kind: S.ForKind) -> S.ForKind:
    return S.ForKind.SERIAL if kind == S.ForKind.PARALLEL else kind


def _uses(expr: E.PrimExpr, var: E.Var) -> bool:
    return any(v is var for v in collect_vars(expr))


class _Partitioner(StmtExprMutator):
    """Partitions loops outside in; the loops inside each part are partitioned in turn."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    def visit_for_(self, loop: S.For) -> S.Stmt:
        if isinstance(loop.extent, E.IntImm) or loop.kind == S.ForKind.THREAD_BINDING:
            return self.generic_visit(loop)
        split = self._full_iterations(loop)
        if split is None:
            return self.generic_visit(loop)
        bound, guards = split
        end = self.analyzer.simplify(loop.min + loop.extent)
        full = loop.with_fields(
            extent=E.Sub(bound, loop.min) if not E.is_const_int(loop.min, 0) else bound,
            body=_drop_guards(loop.body, guards),
        )
        # The rest is the partial tile: too little work to wake threads for.
        rest = loop.with_fields(
            min=bound, extent=self.analyzer.simplify(end - bound), kind=_serial(loop.kind)
        )
        return S.SeqStmt([self.generic_visit(full), self.generic_visit(rest)])

    def _full_iterations(self, loop: S.For) -> tuple[E.PrimExpr, set[int]] | None:
        """The first iteration from which some guard may fail, and the ids of the guards
        (conjuncts of block predicates) that hold below it; None when no guard qualifies."""
        bounds: list[E.PrimExpr] = []
        guards: set[int] = set()
        for realize, inner in _guarded_blocks(loop.body):
            for cond in conjuncts(realize.predicate):
                bound = self._holds_below(cond, loop.loop_var, inner)
                if bound is None:
                    continue
                guards.add(id(cond))
                if not any(self.analyzer.can_prove_equal(bound, b) for b in bounds):
                    bounds.append(bound)
        if not bounds:
            return None
        first = bounds[0]
        for other in bounds[1:]:
            first = E.Min(first, other)
        end = self.analyzer.simplify(loop.min + loop.extent)
        if not self._proves_le(first, end):
            first = E.Min(first, end)
        if not self._proves_le(loop.min, first):
            first = E.Max(first, loop.min)
        return self.analyzer.simplify(first), guards

    def _proves_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """``a <= b``, also for quotients by one positive constant (``n // 16 <= (n + 15) //
        16`` because ``n <= n + 15``), which the analyzer does not bound."""
        if (
            isinstance(a, E.FloorDiv)
            and isinstance(b, E.FloorDiv)
            and isinstance(a.b, E.IntImm)
            and isinstance(b.b, E.IntImm)
            and a.b.value == b.b.value > 0
        ):
            return self._proves_le(a.a, b.a)
        return self.analyzer.can_prove(a <= b)

    def _holds_below(self, cond: E.PrimExpr, var: E.Var, inner: list[S.For]) -> E.PrimExpr | None:
        """``L`` such that ``cond`` holds for every ``var < L`` and every iteration of the
        ``inner`` loops, when ``cond`` is ``a < b`` with ``a - b`` linear in ``var``."""
        if isinstance(cond, E.LE):
            cond = E.LT(cond.a, cond.b + 1)
        if not isinstance(cond, E.LT) or not is_int(cond.a.dtype):
            return None
        dom = {v.loop_var: E.Range.from_min_extent(v.min, v.extent) for v in inner}
        if any(_uses(v.min, var) or _uses(v.extent, var) for v in inner):
            return None
        worst = self.analyzer.simplify(self.analyzer.int_set(cond.a - cond.b, dom).max_value)
        at_zero = self.analyzer.simplify(substitute(worst, {var: 0}))
        slope = self.analyzer.simplify(substitute(worst, {var: 1}) - at_zero)
        if not isinstance(slope, E.IntImm) or slope.value <= 0:
            return None
        if not self.analyzer.can_prove_equal(worst, slope * var + at_zero):
            return None  # not linear in var
        return self.analyzer.simplify(E.FloorDiv(slope - at_zero - 1, slope))


def _guarded_blocks(body: S.Stmt) -> list[tuple[S.BlockRealize, list[S.For]]]:
    """Each block under ``body`` with a predicate, and the loops between ``body`` and it."""
    found: list[tuple[S.BlockRealize, list[S.For]]] = []

    def walk(node: S.Stmt, loops: list[S.For]) -> None:
        if isinstance(node, S.For):
            walk(node.body, [*loops, node])
        elif isinstance(node, S.SeqStmt):
            for stmt in node.seq:
                walk(stmt, loops)
        elif isinstance(node, S.BlockRealize):
            if not E.is_true(node.predicate):
                found.append((node, loops))
            walk(node.block.body, loops)
            if node.block.init is not None:
                walk(node.block.init, loops)
        elif isinstance(node, S.IfThenElse):
            walk(node.then_case, loops)
            if node.else_case is not None:
                walk(node.else_case, loops)
        elif isinstance(node, (S.LetStmt, S.Allocate)):
            walk(node.body, loops)

    walk(body, [])
    return found


def _drop_guards(body: S.Stmt, guards: set[int]) -> S.Stmt:
    """``body`` with the given conjuncts of its block predicates replaced by true."""

    class Drop(StmtExprMutator):
        def visit_block_realize_(self, realize: S.BlockRealize) -> S.Stmt:
            kept = [c for c in conjuncts(realize.predicate) if id(c) not in guards]
            return self.generic_visit(realize.with_fields(predicate=conjunction(kept)))

    return Drop().visit_stmt(body)
