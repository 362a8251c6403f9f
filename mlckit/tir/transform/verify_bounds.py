"""Every buffer access stays inside its buffer: proved when building, checked when running.

numba does not check indices: a store past the end of a buffer overwrites whatever lies there,
silently. This pass looks at every load, store and ``match_buffer`` region of a PrimFunc in
terms of the loops around it (block iter vars replaced by their bindings, let variables by
their values), knowing what holds where the access sits: the loop ranges, ``if`` conditions,
block predicates (a split's ``T.where``), the branch of an ``if_then_else``/``Select`` (or the
right side of an ``and``) it is in, and that a reduction's ``T.init()`` runs at the start of
the reduction. For each side of each index (``0 <= index`` and ``index < dim``) it

* proves the bound with :mod:`mlckit.arith` (almost always): nothing to do;
* when everything is a constant, evaluates the index over the loops (every iteration when
  there are few, the corners of the loop nest otherwise): an iteration that goes out of bounds
  is an :class:`OutOfBoundsError` naming it, the loops, the buffer and the index;
* when a shape is symbolic, and the access is affine in its loops and unguarded, the index's
  extreme over the loops is a formula in the function's sizes: out of bounds for every size
  (a loop of extent ``n + 1`` over a buffer of ``n``) is an error, otherwise one ``assert``
  at the function's entry checks it once per call;
* otherwise (an index read from data, a guard the proof cannot use, a large loop nest it
  could not decide) an ``assert`` right before the statement checks that very access.

A failing ``assert`` raises :class:`mlckit.errors.VMError` naming the buffer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.arith import Analyzer, ConstIntBound
from mlckit.arith.canonical import KeyCache
from mlckit.errors import BuildError
from mlckit.ir.dtype import is_int

from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer, BufferRegion
from ..function import PrimFunc
from ..stmt_functor import StmtExprMutator, post_order_visit, substitute

# Iterations evaluated one by one when the proof fails on constant shapes; beyond this only
# the corners of the loop nest are.
MAX_ENUMERATED = 1 << 16
MAX_CORNER_LOOPS = 12


class OutOfBoundsError(BuildError):
    """An access that provably leaves its buffer: ``problem`` says where, ``hint`` which loop
    takes which buffer out of bounds (the message is both); ``buffer`` is the buffer's name."""

    def __init__(self, problem: str, *, buffer: str, hint: str):
        super().__init__(f"{problem}. {hint[0].upper()}{hint[1:]}")
        self.problem = problem
        self.buffer = buffer
        self.hint = hint


def verify_buffer_bounds(func: PrimFunc, name: str = "") -> PrimFunc:
    """``func`` with a run-time ``assert`` for each access only the run time can decide.

    Raises :class:`OutOfBoundsError` for an access outside its buffer at some iteration."""
    checker = _Checker(func, name or func.attrs.get("global_symbol", "main"))
    checker.visit(func.body)
    if not checker.entry and not checker.inline:
        return func
    body = _Inserter(checker.inline).visit(func.body)
    root = body.block if isinstance(body, S.BlockRealize) and not body.block.iter_vars else None
    checked = root.body if root is not None else body
    for condition, message in reversed(checker.entry):
        checked = S.AssertStmt(condition, message, checked)
    if root is not None:
        # Inside the root block, where the parser puts the statements of a function's body.
        checked = body.with_fields(block=root.with_fields(body=checked))
    return func.with_body(checked)


# ---------------------------------------------------------------------------- the walk
@dataclass
class _Goal:
    """One side of one index: ``value >= 0`` must hold (in terms of the loops: ``resolved``)."""

    axis: int
    index: E.PrimExpr  # the index (its low or high end), as written
    resolved_index: E.PrimExpr
    value: E.PrimExpr  # ``index`` (low side) or ``dim - 1 - index`` (high side), as written
    resolved: E.PrimExpr


class _Checker:
    """Walks a function once; at each access, the analyzer knows the loops around it and the
    conditions that hold there. Collects the checks to insert (at the entry, or before a
    statement) and raises for an access out of bounds."""

    def __init__(self, func: PrimFunc, label: str) -> None:
        self.label = label
        self.ana = Analyzer()
        self.keys = KeyCache()
        # What the generated function knows at its entry: its scalar parameters, and the sizes
        # it reads off its arguments' shapes (never negative).
        self.entry_vars: set[int] = {id(p) for p in func.params if p not in func.buffer_map}
        for buffer in func.buffer_map.values():
            for dim in buffer.shape:
                for var in _vars(dim):
                    self.entry_vars.add(id(var))
                    self.ana.update(var, ConstIntBound(0, ConstIntBound.POS_INF))
        self.loops: list[tuple[S.For, E.PrimExpr, E.PrimExpr]] = []  # loop, resolved min, extent
        self.facts: list[E.PrimExpr] = []
        self.bindings: dict[E.Var, E.PrimExpr] = {}
        self.block = ""
        self.stmt: S.Stmt | None = None
        self.entry: list[tuple[E.PrimExpr, str]] = []
        self.inline: dict[int, list[tuple[E.PrimExpr, str]]] = {}
        self._emitted: set[tuple] = set()

    def resolve(self, value: Any) -> Any:
        return substitute(value, self.bindings) if self.bindings else value

    @contextmanager
    def assuming(self, *conditions: E.PrimExpr) -> Iterator[None]:
        added = [c for c in conditions if not E.is_true(c)]
        with ExitStack() as stack:
            for condition in added:
                stack.enter_context(self.ana.constraint_scope(condition))
            self.facts.extend(added)
            try:
                yield
            finally:
                del self.facts[len(self.facts) - len(added) :]

    # ------------------------------------------------------------------ statements
    def visit(self, stmt: S.Stmt | None) -> None:
        if stmt is None:
            return
        if isinstance(stmt, S.SeqStmt):
            for child in stmt.seq:
                self.visit(child)
            return
        self.stmt = stmt
        if isinstance(stmt, S.For):
            self.exprs(stmt.min, stmt.extent)
            self.loop(stmt)
        elif isinstance(stmt, S.BlockRealize):
            self.exprs(*stmt.iter_values, stmt.predicate)
            self.block_realize(stmt)
        elif isinstance(stmt, S.BufferStore):
            self.exprs(stmt.value, *stmt.indices)
            self.check(stmt.buffer, [(i, i) for i in stmt.indices], "writes", ())
        elif isinstance(stmt, (S.IfThenElse, S.AssertStmt)):
            self.exprs(stmt.condition)
            condition = self.resolve(stmt.condition)
            then_case = stmt.then_case if isinstance(stmt, S.IfThenElse) else stmt.body
            with self.assuming(condition):
                self.visit(then_case)
            if isinstance(stmt, S.IfThenElse) and stmt.else_case is not None:
                with self.assuming(E.Not(condition)):
                    self.visit(stmt.else_case)
        elif isinstance(stmt, S.LetStmt):
            self.exprs(stmt.value)
            self.bindings[stmt.var] = self.resolve(stmt.value)
            self.visit(stmt.body)
            del self.bindings[stmt.var]
        elif isinstance(stmt, S.Evaluate):
            self.exprs(stmt.value)
        elif isinstance(stmt, S.Allocate):
            self.exprs(*stmt.extents)
            self.visit(stmt.body)

    def loop(self, loop: S.For) -> None:
        low, extent = self.resolve(loop.min), self.resolve(loop.extent)
        if self.ana.can_prove(extent <= 0):
            return  # never runs
        self.ana.bind(loop.loop_var, E.Range.from_min_extent(low, extent), allow_override=True)
        self.loops.append((loop, low, extent))
        self.visit(loop.body)
        self.loops.pop()

    def block_realize(self, realize: S.BlockRealize) -> None:
        block = realize.block
        saved = dict(self.bindings), self.block
        for iv, value in zip(block.iter_vars, realize.iter_values):
            self.bindings[iv.var] = self.resolve(value)
        self.block = block.name_hint
        with self.assuming(self.resolve(realize.predicate)):
            for match in block.match_buffers:
                self.stmt = realize
                self.check_region(match.source)
            if block.init is not None:
                # The init runs when every reduction iter var is at the start of its domain.
                start = [
                    self.resolve(E.EQ(iv.var, iv.dom.min))
                    for iv in block.iter_vars
                    if iv.iter_type == E.IterVarType.CommReduce
                ]
                with self.assuming(*start):
                    self.visit(block.init)
            self.visit(block.body)
        self.bindings, self.block = saved

    # ------------------------------------------------------------------ expressions
    def exprs(self, *values: E.PrimExpr) -> None:
        for value in values:
            self.expr(value, ())

    def expr(self, e: E.PrimExpr, guards: tuple[E.PrimExpr, ...]) -> None:
        if isinstance(e, E.BufferLoad):
            for index in e.indices:
                self.expr(index, guards)
            self.check(e.buffer, [(i, i) for i in e.indices], "reads", guards)
            return
        branches = _branches(e)
        if branches is not None:
            # Only the branch a condition picks is evaluated (the generated code is Python's
            # ``t if c else f``, ``a and b``): the condition guards it.
            condition, taken, other = branches
            self.expr(condition, guards)
            self.expr(taken, (*guards, condition))
            if other is not None:
                self.expr(other, (*guards, E.Not(condition)))
            return
        for child in _children(e):
            self.expr(child, guards)

    # ------------------------------------------------------------------ one access
    def check_region(self, source: BufferRegion) -> None:
        region = source.region
        dims = [(r.min, r.min + r.extent - 1) for r in region]
        ends = [f"{_text(r.min)}:{_text(self.ana.simplify(r.min + r.extent))}" for r in region]
        self.check(source.buffer, dims, "views", (), f"{source.buffer.name}[{', '.join(ends)}]")

    def check(
        self,
        buffer: Buffer,
        dims: Sequence[tuple[E.PrimExpr, E.PrimExpr]],
        kind: str,
        guards: tuple[E.PrimExpr, ...],
        text: str = "",
    ) -> None:
        if not buffer.shape:
            return
        text = text or f"{buffer.name}[{', '.join(_text(low) for low, _ in dims)}]"
        with self.assuming(*(self.resolve(g) for g in guards)):
            failed = []
            for axis, ((low, high), dim) in enumerate(zip(dims, buffer.shape)):
                for index, value in ((low, low), (high, dim - 1 - high)):
                    resolved = self.resolve(value)
                    if not self.proves_nonneg(resolved):
                        failed.append(_Goal(axis, index, self.resolve(index), value, resolved))
            if failed:
                access = _Access(buffer, text, kind, self.block, self.label)
                self.undecided(access, failed, guards)

    def proves_nonneg(self, value: E.PrimExpr) -> bool:
        value = self.ana.simplify(value)
        for goal in (value, *_stronger(value)):
            if self.ana.can_prove(goal >= 0):
                return True
            # A condition ``f >= 0`` that holds here (a predicate ``i0 * 4 + i1 < 10``, a
            # guard ``h < 29``) proves what differs from it by something non-negative.
            if any(self.ana.can_prove(goal - f >= 0) for f in _nonneg_forms(self.facts)):
                return True
        return False

    def undecided(
        self, access: _Access, goals: list[_Goal], guards: tuple[E.PrimExpr, ...]
    ) -> None:
        loop_ids = {id(loop.loop_var) for loop, _, _ in self.loops}
        data_dependent = any(_reads_data(g.resolved) for g in goals)
        free = {id(v) for g in goals for v in _vars(g.resolved)} | {
            id(v) for f in self.facts for v in _vars(f)
        }
        free |= {id(v) for _, low, ext in self.loops for v in (*_vars(low), *_vars(ext))}
        if not data_dependent and free <= loop_ids:
            verdict = self.evaluate_loops(goals)
            if verdict is not None:
                if verdict:
                    raise self.static_error(access, *verdict)
                return  # every iteration evaluated, none out of bounds
        elif not data_dependent and self.hoist(access, goals):
            return
        self.check_inline(access, goals, guards)

    # ------------------------------------------------------------------ constant shapes
    def evaluate_loops(self, goals: list[_Goal]) -> tuple[_Goal, dict[str, int], int] | bool | None:
        """Evaluate the goals over the loops: ``(goal, iteration, index)`` for an iteration out
        of bounds, False when every iteration was evaluated and none is, None when unsure."""
        needed = _loops_needed(self.loops, [g.resolved for g in goals] + self.facts)
        spans: list[tuple[int, int]] = []
        conditions = list(self.facts)
        for loop, low, extent in needed:
            lo = self.ana.const_int_bound(low).min_value
            hi = self.ana.const_int_bound(low + extent - 1).max_value
            if lo > hi:
                return False
            if abs(lo) >= ConstIntBound.POS_INF or abs(hi) >= ConstIntBound.POS_INF:
                return None
            spans.append((lo, hi))
            conditions += [loop.loop_var >= low, loop.loop_var < low + extent]
        complete = math.prod(hi - lo + 1 for lo, hi in spans) <= MAX_ENUMERATED
        if not complete and len(spans) > MAX_CORNER_LOOPS:
            return None
        # Every iteration, or (too many) the corners of the loop nest.
        axes = [
            np.arange(lo, hi + 1, dtype=np.int64) if complete else np.unique([lo, hi])
            for lo, hi in spans
        ]
        env: dict[int, np.ndarray] = {}
        grids = np.meshgrid(*axes, indexing="ij", sparse=True) if axes else []
        for (loop, _, _), grid in zip(needed, grids):
            env[id(loop.loop_var)] = grid
        try:
            valid = np.ones((1,) * len(axes), dtype=bool)
            for condition in conditions:
                valid = valid & _evaluate(condition, env).astype(bool)
            for goal in goals:
                bad = valid & (_evaluate(goal.resolved, env) < 0)
                if bad.any():
                    point = tuple(int(i) for i in np.argwhere(bad)[0])
                    iteration = {
                        loop.loop_var.name_hint: int(axis[i])
                        for (loop, _, _), axis, i in zip(needed, axes, point)
                    }
                    index = np.broadcast_to(_evaluate(goal.resolved_index, env), bad.shape)
                    return goal, iteration, int(index[point])
        except _Unknown:
            return None
        return False if complete else None

    def static_error(
        self, access: _Access, goal: _Goal, iteration: dict[str, int], value: int
    ) -> OutOfBoundsError:
        where = ", ".join(f"{name} = {v}" for name, v in iteration.items()) or "always"
        dim = access.buffer.shape[goal.axis]
        side = "below 0" if value < 0 else f"past its last index {_last(dim)}"
        message = (
            f"{access.where()} {access.text} outside {access.buffer.name}: when {where}, "
            f"axis {goal.axis} of {access.buffer.name} is indexed with {value}, {side}"
        )
        return self.error(access, goal, message, str(value))

    def error(self, access: _Access, goal: _Goal, message: str, reach: str) -> OutOfBoundsError:
        """The error for ``goal``, whose index reaches ``reach``, with a hint naming the loops
        that take it there."""
        used = {id(v) for v in _vars(goal.resolved_index)}
        culprits = [
            f"{loop.loop_var.name_hint} in {_range_text(low, ext)}"
            for loop, low, ext in self.loops
            if id(loop.loop_var) in used
        ]
        loops = f"loop {' and '.join(culprits)}" if culprits else "the index"
        hint = (
            f"{loops} takes {access.text} to {reach} on axis {goal.axis}, but "
            f"{access.buffer.name} has shape {_shape(access.buffer)}: make the loop extents "
            "match the buffer's shape, or guard the access"
        )
        return OutOfBoundsError(message, buffer=access.buffer.name, hint=hint)

    # ------------------------------------------------------------------ symbolic shapes
    def hoist(self, access: _Access, goals: list[_Goal]) -> bool:
        """Prove the access out of bounds for every size, or check it once at the entry.

        Sound only where the extreme of the index over the loops is reached: an unguarded
        access, affine in loops whose ranges do not depend on each other."""
        loop_vars = {id(loop.loop_var) for loop, _, _ in self.loops}
        if any(_vars_in(f, loop_vars) for f in self.facts):
            return False
        if any(_vars_in(e, loop_vars) for _, low, ext in self.loops for e in (low, ext)):
            return False
        dom = {loop.loop_var: E.Range.from_min_extent(low, ext) for loop, low, ext in self.loops}
        lows = []
        for goal in goals:
            if not _affine_in(self.ana.simplify(goal.resolved), loop_vars):
                return False
            low = self.ana.int_set(goal.resolved, dom).min_value
            if low is None or not all(id(v) in self.entry_vars for v in _vars(low)):
                return False
            lows.append(low)
        runs = [ext >= 1 for _, _, ext in self.loops if not self.ana.can_prove(ext >= 1)]
        with self.assuming(*runs):
            for goal, low in zip(goals, lows):
                if self.ana.can_prove(low < 0):
                    raise self.symbolic_error(access, goal, dom)
        premises = [*self.facts, *runs]
        holds = _all([low >= 0 for low in lows])
        condition = holds if not premises else E.Or(E.Not(_all(premises)), holds)
        self.emit(self.entry, condition, access.runtime_message())
        return True

    def symbolic_error(self, access: _Access, goal: _Goal, dom: dict) -> OutOfBoundsError:
        reach = self.ana.int_set(goal.resolved_index, dom)
        past = goal.value is not goal.index
        extreme = _text(reach.max_value if past else reach.min_value)
        message = (
            f"{access.where()} {access.text} outside {access.buffer.name} for every size: "
            f"whenever the loops run, its index on axis {goal.axis} "
            f"{'reaches' if past else 'goes down to'} {extreme}, and {access.buffer.name} has "
            f"shape {_shape(access.buffer)}"
        )
        return self.error(access, goal, message, extreme)

    # ------------------------------------------------------------------ run-time checks
    def check_inline(
        self, access: _Access, goals: list[_Goal], guards: tuple[E.PrimExpr, ...]
    ) -> None:
        holds = _all([goal.value >= 0 for goal in goals])
        condition = holds if not guards else E.Or(E.Not(_all(list(guards))), holds)
        assert self.stmt is not None
        self.emit(self.inline.setdefault(id(self.stmt), []), condition, access.runtime_message())

    def emit(self, into: list, condition: E.PrimExpr, message: str) -> None:
        condition = self.ana.simplify(condition)
        key = (id(into), self.keys.key(condition), message)
        if key not in self._emitted:
            self._emitted.add(key)
            into.append((condition, message))


@dataclass
class _Access:
    buffer: Buffer
    text: str  # ``A[vi, vj + 1]``, ``A[vi * 4:vi * 4 + 4]``
    kind: str  # "reads", "writes" or "views"
    block: str
    func: str

    def where(self) -> str:
        block = f"block {self.block!r}" if self.block and self.block != "root" else "the body"
        return f"{self.func}: {block} {self.kind}"

    def runtime_message(self) -> str:
        return (
            f"{self.where()} {self.text} outside {self.buffer.name} (shape "
            f"{_shape(self.buffer)}): an index is out of bounds for the arrays passed"
        )


class _Inserter(StmtExprMutator):
    """Puts each statement's run-time checks right before it."""

    def __init__(self, checks: dict[int, list[tuple[E.PrimExpr, str]]]) -> None:
        self.checks = checks

    def visit(self, value: Any) -> Any:
        new = super().visit(value)
        for condition, message in reversed(self.checks.get(id(value), [])):
            new = S.AssertStmt(condition, message, new)
        return new


# ---------------------------------------------------------------------------- helpers
class _Unknown(Exception):
    """An expression the evaluator cannot compute from loop values alone."""


def _branches(e: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr, E.PrimExpr | None] | None:
    if isinstance(e, E.Select):
        return e.condition, e.true_value, e.false_value
    if isinstance(e, E.Call) and e.op.name == "tir.if_then_else":
        return e.args[0], e.args[1], e.args[2]
    if isinstance(e, E.And):
        return e.a, e.b, None
    if isinstance(e, E.Or):
        return E.Not(e.a), e.b, None
    return None


def _children(e: E.PrimExpr) -> list[E.PrimExpr]:
    out: list[E.PrimExpr] = []
    for _, value in e.structural_fields():
        if isinstance(value, E.PrimExpr):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, E.PrimExpr))
    return out


def _vars(e: Any) -> list[E.Var]:
    found: dict[int, E.Var] = {}

    def visit(node: Any) -> None:
        if isinstance(node, E.Var):
            found.setdefault(id(node), node)

    post_order_visit(e, visit)
    return list(found.values())


def _vars_in(e: E.PrimExpr, ids: set[int]) -> bool:
    return any(id(v) in ids for v in _vars(e))


def _reads_data(e: E.PrimExpr) -> bool:
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        found = found or isinstance(node, (E.BufferLoad, E.Call))

    post_order_visit(e, visit)
    return found


def _all(conditions: list[E.PrimExpr]) -> E.PrimExpr:
    result = conditions[0]
    for condition in conditions[1:]:
        result = E.And(result, condition)
    return result


_FLIP = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}


def _nonneg_forms(facts: list[E.PrimExpr]) -> Iterator[E.PrimExpr]:
    """Each integer comparison the facts imply, as an expression known to be ``>= 0``."""
    for fact in facts:
        yield from _forms(fact)


def _forms(c: E.PrimExpr) -> Iterator[E.PrimExpr]:
    if isinstance(c, E.And):
        yield from _forms(c.a)
        yield from _forms(c.b)
        return
    if isinstance(c, E.Not) and type(c.a) in _FLIP:
        c = _FLIP[type(c.a)](c.a.a, c.a.b)
    if not isinstance(c, E.CmpExpr) or not (is_int(c.a.dtype) and is_int(c.b.dtype)):
        return
    a, b = c.a, c.b
    if isinstance(c, E.LT):
        yield b - a - 1
    elif isinstance(c, E.LE):
        yield b - a
    elif isinstance(c, E.GT):
        yield a - b - 1
    elif isinstance(c, E.GE):
        yield a - b
    elif isinstance(c, E.EQ):
        yield a - b
        yield b - a


def _signed_terms(e: E.PrimExpr, sign: int = 1) -> Iterator[tuple[int, E.PrimExpr]]:
    """The terms of a sum, each with its sign: ``a - (b + c)`` is +a, -b, -c."""
    if isinstance(e, (E.Add, E.Sub)):
        yield from _signed_terms(e.a, sign)
        yield from _signed_terms(e.b, sign if isinstance(e, E.Add) else -sign)
    else:
        yield sign, e


def _stronger(g: E.PrimExpr) -> Iterator[E.PrimExpr]:
    """Goals whose ``>= 0`` implies ``g >= 0``, in terms the proof handles better:

    * without the one ``x // c`` term of ``g`` (c > 0), so that facts about ``x`` apply:
      ``a - x // c >= 0`` is ``c * a + c - 1 - x >= 0``, ``a + x // c >= 0`` is ``x + c * a >= 0``;
    * with an added ``max(a, b)`` (a subtracted ``min(a, b)``) replaced by either operand."""
    terms = list(_signed_terms(g))
    divisions = [
        (sign, t)
        for sign, t in terms
        if isinstance(t, E.FloorDiv) and isinstance(t.b, E.IntImm) and t.b.value > 0
    ]
    if len(divisions) == 1:
        sign, division = divisions[0]
        c = division.b.value
        if sign < 0:
            yield (g + division) * c + (c - 1) - division.a
        else:
            yield division.a + (g - division) * c
    for sign, t in terms:
        if (sign > 0 and isinstance(t, E.Max)) or (sign < 0 and isinstance(t, E.Min)):
            yield g - t * sign + t.a * sign
            yield g - t * sign + t.b * sign


def _affine_in(e: E.PrimExpr, loop_vars: set[int]) -> bool:
    """Whether ``e`` is a sum of terms that are free of the loops, or a constant times one
    loop variable, each loop variable in one term only: its extremes are then reached."""
    seen: set[int] = set()
    for _, term in _signed_terms(e):
        if not _vars_in(term, loop_vars):
            continue
        if isinstance(term, E.Mul) and isinstance(term.b, E.IntImm):
            term = term.a
        if not isinstance(term, E.Var) or id(term) not in loop_vars or id(term) in seen:
            return False
        seen.add(id(term))
    return True


def _loops_needed(
    loops: list[tuple[S.For, E.PrimExpr, E.PrimExpr]], exprs: list[E.PrimExpr]
) -> list[tuple[S.For, E.PrimExpr, E.PrimExpr]]:
    """The loops whose variables the expressions use, and those their ranges use, in order."""
    used = {id(v) for e in exprs for v in _vars(e)}
    for loop, low, ext in reversed(loops):
        if id(loop.loop_var) in used:
            used |= {id(v) for v in (*_vars(low), *_vars(ext))}
    return [entry for entry in loops if id(entry[0].loop_var) in used]


_NUMPY_BINARY = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.Min: np.minimum,
    E.Max: np.maximum,
    E.EQ: np.equal,
    E.NE: np.not_equal,
    E.LT: np.less,
    E.LE: np.less_equal,
    E.GT: np.greater,
    E.GE: np.greater_equal,
    E.And: np.logical_and,
    E.Or: np.logical_or,
}


def _evaluate(e: E.PrimExpr, env: dict[int, np.ndarray]) -> np.ndarray:
    """The value of an integer expression at every point of the loop grid ``env``."""
    if isinstance(e, E.IntImm):
        return np.asarray(e.value, dtype=bool if e.dtype == "bool" else np.int64)
    if isinstance(e, E.Var):
        if id(e) not in env:
            raise _Unknown
        return env[id(e)]
    op = _NUMPY_BINARY.get(type(e))
    if op is not None:
        return op(_evaluate(e.a, env), _evaluate(e.b, env))
    if isinstance(e, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)) and is_int(e.dtype):
        a, b = _evaluate(e.a, env), _evaluate(e.b, env)
        if (b == 0).any():
            raise _Unknown
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return np.floor_divide(a, b) if isinstance(e, E.FloorDiv) else np.mod(a, b)
        quotient = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
        return quotient if isinstance(e, E.Div) else a - quotient * b
    if isinstance(e, E.Not):
        return np.logical_not(_evaluate(e.a, env))
    branches = _branches(e)
    if isinstance(e, (E.Select, E.Call)) and branches is not None and branches[2] is not None:
        condition, t, f = branches
        return np.where(_evaluate(condition, env), _evaluate(t, env), _evaluate(f, env))
    if isinstance(e, E.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return _evaluate(e.value, env)
    raise _Unknown


def _text(e: Any) -> str:
    if isinstance(e, E.IntImm):
        return str(e.value)
    return e.script() if isinstance(e, E.PrimExpr) else str(e)


def _last(dim: E.PrimExpr) -> str:
    return str(dim.value - 1) if isinstance(dim, E.IntImm) else f"{_text(dim)} - 1"


def _shape(buffer: Buffer) -> str:
    dims = [_text(d) for d in buffer.shape]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def _range_text(low: E.PrimExpr, extent: E.PrimExpr) -> str:
    if E.is_const_int(low, 0):
        return f"range({_text(extent)})"
    if isinstance(low, E.IntImm) and isinstance(extent, E.IntImm):
        return f"range({low.value}, {low.value + extent.value})"
    return f"range({_text(low)}, {_text(low)} + {_text(extent)})"


__all__ = ["OutOfBoundsError", "verify_buffer_bounds"]
