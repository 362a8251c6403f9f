"""Helpers the block-creating primitives share (cache_read/cache_write, rfactor, blockize,
transform_layout): finding a block's scope, naming new blocks, relaxing regions over loops,
swapping buffers and splicing statements into sequences."""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...analysis import collect_vars, expr_deep_equal
from ...buffer import Buffer, BufferRegion
from ...stmt_functor import StmtExprMutator, substitute
from ..schedule import Schedule, _children, _path_to

STORAGE_SCOPES = ("global", "shared", "shared.dyn", "local", "warp")


def check_storage_scope(kind: str, scope: str) -> None:
    if scope not in STORAGE_SCOPES:
        raise ScheduleError(
            f"{kind}: unknown storage scope {scope!r}; use one of {', '.join(STORAGE_SCOPES)}"
        )


def path_to(sch: Schedule, stmt: S.Stmt) -> list[Any]:
    """The statements from the function body down to ``stmt`` (both included)."""
    path = _path_to(sch.func.body, stmt)
    if path is None:
        raise ScheduleError("internal: statement not found in the function")
    return path


def scope_block(sch: Schedule, stmt: S.Stmt) -> S.Block:
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


def unique_block_name(sch: Schedule, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... when a block of that name exists already."""
    taken = {realize.block.name_hint for realize in sch.walk_blocks(sch.func.body)}
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
    proves them outside the buffer (a split that does not divide its loop)."""
    ranges = []
    for rng, dim in zip(substitute(region, dict(bindings)).region, region.buffer.shape):
        lo_set = analyzer.int_set(rng.min, dom)
        hi_set = analyzer.int_set(rng.min + rng.extent - 1, dom)
        zero = E.make_const(0, dim.dtype)
        if lo_set.min_value is None or hi_set.max_value is None:
            ranges.append(E.Range.from_min_extent(zero, dim))
            continue
        lo, hi = lo_set.min_value, hi_set.max_value
        if analyzer.can_prove(lo < zero):
            lo = zero
        if analyzer.can_prove(hi > dim - 1):
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


def replace_with_seq(sch: Schedule, old: S.Stmt, new: Sequence[S.Stmt]) -> None:
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


def add_alloc(sch: Schedule, inside: S.Stmt, buffer: Buffer) -> None:
    """Allocate ``buffer`` in the scope block of ``inside`` (a statement of the function)."""
    scope = scope_block(sch, inside)
    sch.replace(scope, scope.with_fields(alloc_buffers=(*scope.alloc_buffers, buffer)))


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


def used_vars(node: Any) -> set[int]:
    """The ids of the variables used in an expression or statement."""
    return {id(v) for v in collect_vars(node)}


def same_expr(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """Whether two expressions are the same tree (variables compared by identity)."""
    return a is b or expr_deep_equal(a, b)
