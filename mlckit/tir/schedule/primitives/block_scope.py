"""Helpers the block primitives share: finding a block's scope, naming new blocks, relaxing
regions over loops, swapping buffers and splicing statements into sequences (the block-creating
cache_read/cache_write, rfactor, blockize, transform_layout), and a block's neighbours, taking
a block out of the program and editing the function in one pass (compute_at,
reverse_compute_at, compute_inline, decompose_reduction)."""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars, expr_deep_equal
from ...buffer import Buffer, BufferRegion
from ...stmt_functor import StmtExprMutator, substitute
from ..state import ScheduleState, _children, _path_to, _walk_until_block

STORAGE_SCOPES = ("global", "shared", "shared.dyn", "local", "warp")
# ``global.<tag>``: global memory under a tag (``global.A_reg``), which the code generator
# treats as global and tensorize matches against an intrinsic's buffers of that scope.
_TAGGED_GLOBAL = re.compile(r"global\.[A-Za-z_][A-Za-z0-9_]*")


def check_storage_scope(kind: str, scope: str) -> None:
    if scope not in STORAGE_SCOPES and not _TAGGED_GLOBAL.fullmatch(scope):
        raise ScheduleError(
            f"{kind}: unknown storage scope {scope!r}; use one of {', '.join(STORAGE_SCOPES)}, "
            "or global.<tag> (a tag of letters, digits and _, as in global.A_reg)"
        )


def path_to(sch: ScheduleState, stmt: S.Stmt) -> list[Any]:
    """The statements from the function body down to ``stmt`` (both included)."""
    path = _path_to(sch.func.body, stmt)
    if path is None:
        raise ScheduleError("internal: statement not found in the function")
    return path


def scope_block(sch: ScheduleState, stmt: S.Stmt) -> S.Block:
    """The nearest block strictly enclosing ``stmt`` (the root block for a top-level nest)."""
    for node in reversed(path_to(sch, stmt)[:-1]):
        if isinstance(node, S.Block):
            return node
    raise ScheduleError("internal: the statement is not inside the root block")


def child_blocks(stmt: Any) -> Iterator[S.BlockRealize]:
    """The BlockRealizes under ``stmt`` that are not inside another block."""
    for child in _children(stmt):
        if isinstance(child, S.BlockRealize):
            yield child
        else:
            yield from child_blocks(child)


def unique_block_name(sch: ScheduleState, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... when a block of that name exists already."""
    return unique_name(base, {r.block.name_hint for r in sch.walk_blocks(sch.func.body)})


def unique_name(base: str, taken: Container[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, ... whichever is first not in ``taken``."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def with_scope(buffer: Buffer, scope: str) -> Buffer:
    """A new buffer like ``buffer`` in storage ``scope``, named ``<name>_<scope>`` as in TVM."""
    name = f"{buffer.name}_{scope.replace('.', '_')}"
    return buffer.with_fields(data=E.Var(name, "handle"), name=name, scope=scope)


def loop_range(loop: S.For) -> E.Range:
    return E.Range.from_min_extent(loop.min, loop.extent)


def relax_region(
    region: BufferRegion,
    bindings: Mapping[E.Var, E.PrimExpr],
    dom: Mapping[E.Var, E.Range],
    analyzer: Analyzer,
) -> BufferRegion:
    """``region`` with the block's iter vars replaced by ``bindings`` and the variables of
    ``dom`` relaxed over their ranges, clipped to the buffer (an unbounded side covers the
    whole dimension, as TVM's ``CoverRange``). Bounds are clipped only where the analyzer
    proves them outside the buffer (a split that does not divide its loop) and the other
    side inside it."""
    # A loop of one iteration is its first value: substituted, not relaxed, it keeps an index
    # such as (f + f_1) % 13 a point where interval arithmetic would give all of [0, 13).
    single = {var: rng.min for var, rng in dom.items() if E.is_const_int(rng.extent, 1)}
    dom = {var: rng for var, rng in dom.items() if var not in single}
    ranges = []
    bound = substitute(substitute(region, dict(bindings)), single)
    for rng, dim in zip(bound.region, region.buffer.shape):
        lo_set = analyzer.int_set(rng.min, dom)
        hi_set = analyzer.int_set(rng.min + rng.extent - 1, dom)
        zero = E.make_const(0, dim.dtype)
        if lo_set.min_value is None or hi_set.max_value is None:
            ranges.append(E.Range.from_min_extent(zero, dim))
            continue
        lo, hi = lo_set.min_value, hi_set.max_value
        # A side is clipped only where that leaves the range non-empty: a tile wholly past
        # the end keeps its extent (its bindings are guarded) instead of a negative one.
        if analyzer.can_prove(lo < zero) and analyzer.can_prove(hi >= zero):
            lo = zero
        if analyzer.can_prove(hi > dim - 1) and analyzer.can_prove(lo <= dim - 1):
            hi = analyzer.simplify(dim - 1)
        if same_expr(lo, hi):
            ranges.append(E.Range.from_min_extent(lo, E.make_const(1, lo.dtype)))
        else:
            ranges.append(E.Range.from_min_extent(lo, analyzer.simplify(hi - lo + 1)))
    return BufferRegion(region.buffer, ranges)


def point_region(buffer: Buffer, indices: Sequence[E.PrimExpr]) -> BufferRegion:
    return BufferRegion(
        buffer, [E.Range.from_min_extent(i, E.make_const(1, i.dtype)) for i in indices]
    )


class BufferSwap(StmtExprMutator):
    """Replaces buffers (by identity) wherever they appear: loads, stores, regions, allocs."""

    def __init__(self, mapping: Mapping[int, Buffer]):
        self.mapping = mapping

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.mapping.get(id(buffer), buffer)


def insert_stmt(body: S.Stmt, pos: int, stmt: S.Stmt) -> S.Stmt:
    """``body`` (a sequence or a single statement) with ``stmt`` inserted at ``pos``."""
    items = list(body.seq) if isinstance(body, S.SeqStmt) else [body]
    items.insert(pos, stmt)
    return S.SeqStmt(items)


def replace_with_seq(sch: ScheduleState, old: S.Stmt, new: Sequence[S.Stmt]) -> None:
    """Replace ``old`` by several statements, spliced into its parent sequence if it has one
    (so the function never holds a sequence nested directly in a sequence)."""
    parent = sch.parent_of(old)
    if isinstance(parent, S.SeqStmt):
        items: list[S.Stmt] = []
        for item in parent.seq:
            items.extend(new if item is old else [item])
        sch.replace(parent, S.SeqStmt(items))
    else:
        sch.replace(old, S.SeqStmt.flatten(new))


def add_alloc(sch: ScheduleState, inside: S.Stmt, buffer: Buffer) -> None:
    """Allocate ``buffer`` in the scope block of ``inside`` (a statement of the function)."""
    scope = scope_block(sch, inside)
    sch.replace(scope, scope.with_fields(alloc_buffers=(*scope.alloc_buffers, buffer)))


def conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    """The conditions ``cond`` and-s together (none for True)."""
    if isinstance(cond, E.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [] if E.is_true(cond) else [cond]


def conjunction(conds: Sequence[E.PrimExpr]) -> E.PrimExpr:
    """``conds`` and-ed together, True for none."""
    result: E.PrimExpr = E.const(True, "bool")
    for cond in conds:
        if not E.is_true(cond):
            result = cond if E.is_true(result) else E.And(result, cond)
    return result


def within(
    analyzer: Analyzer, value: E.PrimExpr, start: E.PrimExpr, extent: E.PrimExpr
) -> list[E.PrimExpr]:
    """The conditions keeping ``value`` in ``[start, start + extent)`` that ``analyzer``
    cannot prove: the guard of a binding that may leave its range (past the end of a split
    that does not divide its loop, or past the edge of a padded window)."""
    end = analyzer.simplify(start + extent)
    return [c for c in (start <= value, value < end) if not analyzer.can_prove(c)]


def in_iter_vars(cond: E.PrimExpr, realize: S.BlockRealize) -> E.PrimExpr:
    """A condition on the loops around ``realize`` in terms of its block's iter vars where
    the bindings allow: a side of a comparison that is a binding's value becomes the iter
    var (``i_0 * 4 + i_1 < 7`` for ``vi = i_0 * 4 + i_1``: ``vi < 7``), and a loop bound
    directly to an iter var becomes it (``k_0 * 5 + k_1 < 13``: ``vk_0 * 5 + vk_1 < 13``)."""
    bindings = list(zip(realize.block.iter_vars, realize.iter_values))
    if isinstance(cond, E.CmpExpr):
        sides = [
            next((iv.var for iv, value in bindings if same_expr(side, value)), side)
            for side in (cond.a, cond.b)
        ]
        cond = type(cond)(*sides)
    return substitute(cond, {value: iv.var for iv, value in bindings if isinstance(value, E.Var)})


def restates_domains(cond: E.PrimExpr, block: S.Block) -> bool:
    """Whether ``cond`` (in terms of the block's iter vars) holds wherever they are in their
    domains: a split's ``vi < 7`` says no more than the iter var's declaration."""
    analyzer = Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    return analyzer.can_prove(cond)


def at_first_iteration(
    predicate: E.PrimExpr, loops: Sequence[S.For], first: Container[int]
) -> E.PrimExpr:
    """``predicate`` (of a block under ``loops``) with the loops whose variable ids are in
    ``first`` at their first value, simplified over the loops' ranges. That is where a
    reduction block's predicate is evaluated for its init, which runs on the first iteration
    of its reduction loops: the primitives that give the init a nest of its own
    (decompose_reduction, blockize, rfactor's write-back) guard it with this, so that it
    starts exactly the elements the block's own init started."""
    analyzer = Analyzer()
    for lp in loops:
        analyzer.bind(lp.loop_var, loop_range(lp))
    starts = {lp.loop_var: lp.min for lp in loops if id(lp.loop_var) in first}
    return analyzer.simplify(substitute(predicate, starts))


class NotEvaluable(Exception):
    """Raised by :func:`evaluate` for what it cannot compute; the message says what."""


# The integer and boolean operations evaluate() knows, as numpy functions.
_NUMPY_OPS: dict[type, Any] = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod,
    E.Min: np.minimum,
    E.Max: np.maximum,
    E.LT: np.less,
    E.LE: np.less_equal,
    E.GT: np.greater,
    E.GE: np.greater_equal,
    E.EQ: np.equal,
    E.NE: np.not_equal,
    E.And: np.logical_and,
    E.Or: np.logical_or,
}


def evaluate(expr: E.PrimExpr, env: Mapping[int, Any]) -> Any:
    """``expr`` on numpy arrays of integers (``env``: variable id -> array), with floor
    division; raises NotEvaluable for anything else (a load, a call, a division by zero)."""
    if isinstance(expr, E.Var):
        if id(expr) not in env:
            raise NotEvaluable(f"the variable {expr.name_hint!r}")
        return env[id(expr)]
    if isinstance(expr, E.IntImm):
        return np.int64(expr.value)
    if isinstance(expr, E.Not):
        return np.logical_not(evaluate(expr.a, env))
    op = _NUMPY_OPS.get(type(expr))
    if op is None:
        raise NotEvaluable(type(expr).__name__)
    a, b = evaluate(expr.a, env), evaluate(expr.b, env)
    if isinstance(expr, E.FloorDiv | E.FloorMod) and np.any(b == 0):
        raise NotEvaluable("a division by zero")
    return op(a, b)


# Most iterations check_reduced_once enumerates; beyond, it judges affine bindings only.
_MAX_ENUMERATED = 1 << 20


def check_reduced_once(kind: str, realize: S.BlockRealize, loops: Sequence[S.For]) -> None:
    """Raise unless each instance of the reduction block ``realize`` runs at most once per
    run of ``loops`` (the loops between where its init is going and the block).

    Under its own T.init() a block that runs an instance again starts that element over (the
    init runs on every first reduction iteration), so recomputing it under a consumer's
    loop is harmless. An init moved out of those loops runs once: an instance that runs
    again would add its term twice.
    """
    # The affine proof is cheap and covers the usual nests (a predicate only drops
    # iterations); running through up to a million iterations settles the rest.
    if not _affine_injective(realize.iter_values, loops) and not _enumerated_once(realize, loops):
        raise ScheduleError(
            f"{kind}: block {realize.block.name_hint!r} may compute an instance more than once "
            "under the loops its init would leave (it is recomputed there, e.g. under a "
            "consumer's loop after compute_at, or its bindings are not affine in them); "
            "with its init moved out, a repeated instance would add its term again"
        )


def _enumerated_once(realize: S.BlockRealize, loops: Sequence[S.For]) -> bool | None:
    """Whether the block's instances under ``loops`` are distinct, found by running through
    the iterations (those its predicate lets through); None when they are too many or not
    computable. Variables from outside the loops are fixed within them; their first values
    stand for all (exact for affine bindings, which shifting does not change)."""
    if not all(isinstance(lp.extent, E.IntImm) for lp in loops):
        return None
    extents = [lp.extent.value for lp in loops]
    if int(np.prod(extents, dtype=np.int64)) > _MAX_ENUMERATED:
        return None
    grid = np.indices(extents, dtype=np.int64).reshape(len(loops), -1)
    env: dict[int, Any] = {id(lp.loop_var): grid[i] for i, lp in enumerate(loops)}
    exprs = [realize.predicate, *realize.iter_values]
    for expr in exprs:
        env.update({id(v): np.int64(0) for v in collect_vars(expr) if id(v) not in env})
    try:
        runs, *points = (np.broadcast_to(evaluate(e, env), grid.shape[1:]) for e in exprs)
    except NotEvaluable:
        return None
    runs = runs.astype(bool)  # a constant predicate evaluates to the integer 1
    instances = np.stack(points)[:, runs] if points else np.zeros((0, int(runs.sum())))
    return np.unique(instances, axis=1).shape[1] == instances.shape[1]


def _affine_injective(values: Sequence[E.PrimExpr], loops: Sequence[S.For]) -> bool:
    """Whether ``values`` are affine in ``loops`` with constant steps, each loop of more than
    one iteration feeds exactly one value, and per value the loops nest like the digits of a
    mixed-radix number (each step past the span of the smaller ones, which needs their
    extents): then distinct iterations give distinct values."""
    analyzer = Analyzer()
    extent = {id(lp.loop_var): lp.extent for lp in loops if not E.is_const_int(lp.extent, 1)}
    fed: set[int] = set()
    for value in values:
        digits = []
        for var in collect_vars(value):
            if id(var) not in extent:
                continue
            if id(var) in fed:
                return False
            fed.add(id(var))
            step = analyzer.simplify(substitute(value, {var: var + 1}) - value)
            if not isinstance(step, E.IntImm) or step.value == 0:
                return False
            count = extent[id(var)]
            digits.append((abs(step.value), count.value if isinstance(count, E.IntImm) else None))
        span = 0
        digits.sort(key=lambda digit: digit[0])
        for i, (step, count) in enumerate(digits):
            if step <= span:
                return False
            if i + 1 < len(digits):  # the largest digit's count does not matter
                if count is None:
                    return False
                span += step * (count - 1)
    return fed == set(extent)


def used_vars(node: Any) -> set[int]:
    """The ids of the variables used in an expression or statement."""
    return {id(v) for v in collect_vars(node)}


def same_expr(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """Whether two expressions are the same tree (variables compared by identity)."""
    return a is b or expr_deep_equal(a, b)


# ---------------------------------------------------------------------- taking blocks out, editing
# An edit of the function: the statements that replace one (its children already rebuilt).
Edit = Callable[[S.Stmt], list[S.Stmt]]


def sibling_blocks(scope: S.Block) -> list[S.BlockRealize]:
    """The blocks directly in ``scope`` (nested blocks are represented by their parent)."""
    return list(_walk_until_block(scope.body))


def neighbours(
    realize: S.BlockRealize, scope: S.Block
) -> tuple[list[S.BlockRealize], list[S.BlockRealize]]:
    """The producers (writing what ``realize`` reads) and consumers (reading what it writes)
    of a block among the other blocks of its scope, in program order."""
    reads = {id(r.buffer) for r in realize.block.reads}
    writes = {id(r.buffer) for r in realize.block.writes}
    producers, consumers = [], []
    for other in sibling_blocks(scope):
        if other is realize:
            continue
        if any(id(r.buffer) in reads for r in other.block.writes):
            producers.append(other)
        if any(id(r.buffer) in writes for r in other.block.reads):
            consumers.append(other)
    return producers, consumers


def check_sole_writer(kind: str, realize: S.BlockRealize, scope: S.Block) -> None:
    """A block whose output another block also writes cannot be moved or inlined alone."""
    writes = {id(r.buffer): r.buffer for r in realize.block.writes}
    for other in sibling_blocks(scope):
        if other is realize:
            continue
        for region in other.block.writes:
            if id(region.buffer) in writes:
                raise ScheduleError(
                    f"{kind}: block {realize.block.name_hint!r} is not the only block writing "
                    f"{region.buffer.name} (block {other.block.name_hint!r} writes it too)"
                )


def removal_root(sch: ScheduleState, realize: S.BlockRealize, kind: str) -> S.Stmt:
    """The statement to delete to take a block out of the program: the block with the loops
    around it that hold nothing else."""
    path = _path_to(sch.func.body, realize)
    if path is None:
        raise ScheduleError(
            f"{kind}: block {realize.block.name_hint!r} is not in the function being scheduled"
        )
    node: S.Stmt = realize
    for parent in reversed(path[:-1]):
        if not isinstance(parent, S.For):
            if isinstance(parent, S.SeqStmt):
                return node
            break
        node = parent
    raise ScheduleError(
        f"{kind}: block {realize.block.name_hint!r} is the only statement of its scope, so it "
        "cannot be taken out of it"
    )


def edit_function(sch: ScheduleState, edits: dict[int, Edit], kind: str) -> None:
    """Rebuild the function, replacing each statement whose id is in ``edits`` by the list of
    statements its edit returns for it (its children already rebuilt); an empty list removes
    it from the sequence holding it."""
    sch.set_func(sch.func.with_body(_Edit(edits, kind).visit(sch.func.body)))


class _Edit(StmtExprMutator):
    def __init__(self, edits: dict[int, Edit], kind: str) -> None:
        self.edits = edits
        self.kind = kind

    def expand(self, stmt: S.Stmt) -> list[S.Stmt]:
        edit = self.edits.get(id(stmt))
        visited = super().visit(stmt)
        return [visited] if edit is None else edit(visited)

    def visit(self, value: Any) -> Any:
        if isinstance(value, S.Stmt) and id(value) in self.edits:
            stmts = self.expand(value)
            if not stmts:
                raise ScheduleError(f"{self.kind}: removing a statement would leave a body empty")
            return S.SeqStmt.flatten(stmts)
        if isinstance(value, (S.Stmt, tuple, list)):
            return super().visit(value)
        return value  # expressions never contain statements

    def visit_seq_stmt_(self, op: S.SeqStmt) -> S.Stmt:
        stmts = [new for child in op.seq for new in self.expand(child)]
        if not stmts:
            raise ScheduleError(f"{self.kind}: removing a statement would leave a body empty")
        return S.SeqStmt.flatten(stmts)


def block_names(blocks: Iterable[S.BlockRealize]) -> str:
    return ", ".join(repr(r.block.name_hint) for r in blocks)
