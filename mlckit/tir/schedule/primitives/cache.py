"""Caching: ``cache_read``, ``cache_write`` and ``set_scope``.

``cache_read(block, i, "shared")`` copies the i-th buffer ``block`` reads into a new buffer
``A_shared`` of that storage scope and makes every reader of the buffer read the copy;
``cache_write(block, i, "local")`` makes ``block`` write a new buffer ``Y_local`` and adds a
block that copies it back. The copy is a new block (named like the buffer it caches, plus the
scope) in its own loop nest over the region to copy, placed as TVM places it: after the
buffer's producer and before its first consumer, at the level of their lowest common loop
(the top of the function for an input, the end for an output nobody reads). ``compute_at`` /
``reverse_compute_at`` then move it next to the computation, where a small buffer in fast
memory pays off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...buffer import Buffer, BufferRegion
from ...stmt_functor import StmtExprMutator, post_order_visit
from ..state import BlockRV, ScheduleState, _children, _walk
from .block_scope import (
    BufferSwap,
    check_storage_scope,
    child_blocks,
    conjunction,
    insert_stmt,
    loop_range,
    path_to,
    point_region,
    relax_region,
    scope_block,
    unique_block_name,
    with_scope,
    within,
)


def cache_read(
    sch: ScheduleState, block: BlockRV, read_buffer_index: int, storage_scope: str
) -> BlockRV:
    check_storage_scope("cache_read", storage_scope)
    realize = sch.block_realize(block)
    buffer = _nth_buffer("cache_read", realize.block, read_buffer_index, "read")
    scope = scope_block(sch, realize)
    cache = with_scope(buffer, storage_scope)
    writer = _sole_writer("cache_read", scope, buffer)
    if writer is None:
        # An input of the scope: copy what the scope reads of it (all of it at the root,
        # which records no reads), first thing.
        loc: S.Stmt = scope
        pos = 0
        region = next(
            (r for r in scope.reads if r.buffer is buffer), BufferRegion.full_region(buffer)
        )
    else:
        loc, pos = _CacheLocation.find(scope, writer.block, buffer)
        region = _produced_region(sch, writer, buffer, loc)
    name = unique_block_name(sch, cache.name)
    stage = _copy_stage(region, buffer, cache, name, _analyzer_at(sch, loc))

    def reads_cache(blk: S.Block) -> bool:
        # Every reader switches to the copy; the producer keeps writing the original.
        return all(r.buffer is not buffer for r in blk.writes)

    _rewrite_scope(sch, scope, {id(buffer): cache}, reads_cache, loc, pos, stage, cache)
    return BlockRV(name)


def cache_write(
    sch: ScheduleState, block: BlockRV, write_buffer_index: int, storage_scope: str
) -> BlockRV:
    check_storage_scope("cache_write", storage_scope)
    realize = sch.block_realize(block)
    buffer = _nth_buffer("cache_write", realize.block, write_buffer_index, "write")
    scope = scope_block(sch, realize)
    _sole_writer("cache_write", scope, buffer)  # the block itself, or it raises
    _check_cache_starts("cache_write", realize.block, scope, buffer)
    cache = with_scope(buffer, storage_scope)
    loc, pos = _CacheLocation.find(scope, realize.block, buffer)
    region = _produced_region(sch, realize, buffer, loc)
    name = unique_block_name(sch, cache.name)
    stage = _copy_stage(region, cache, buffer, name, _analyzer_at(sch, loc))

    def is_writer(blk: S.Block) -> bool:
        return blk is realize.block

    _rewrite_scope(sch, scope, {id(buffer): cache}, is_writer, loc, pos, stage, cache)
    return BlockRV(name)


def set_scope(sch: ScheduleState, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
    check_storage_scope("set_scope", storage_scope)
    blk = sch.block_realize(block).block
    buffer = _nth_buffer("set_scope", blk, buffer_index, "write")
    func = sch.func
    if any(b is buffer for b in func.buffer_map.values()):
        raise ScheduleError(
            f"set_scope: buffer {buffer.name!r} written by block {blk.name_hint!r} is a "
            "parameter of the function; only a buffer allocated in it can change scope"
        )
    allocated = any(
        isinstance(node, S.Block) and any(b is buffer for b in node.alloc_buffers)
        for node in _walk(func.body)
    )
    if not allocated:
        raise ScheduleError(
            f"set_scope: buffer {buffer.name!r} written by block {blk.name_hint!r} is not "
            "allocated by any block (it is a match_buffer view)"
        )
    if buffer.scope == storage_scope:
        return
    body = BufferSwap({id(buffer): with_scope(buffer, storage_scope)}).visit(func.body)
    sch.set_func(func.with_body(body))


# ---------------------------------------------------------------------------- checks
def _nth_buffer(kind: str, block: S.Block, index: int, access: str) -> Buffer:
    regions = block.reads if access == "read" else block.writes
    if not isinstance(index, int) or not 0 <= index < len(regions):
        names = ", ".join(r.buffer.name for r in regions) or "none"
        param = "buffer_index" if kind == "set_scope" else f"{access}_buffer_index"
        raise ScheduleError(
            f"{kind}: {param} {index} is out of range: block {block.name_hint!r} "
            f"{access}s {len(regions)} buffer(s) ({names})"
        )
    return regions[index].buffer


def _sole_writer(kind: str, scope: S.Block, buffer: Buffer) -> S.BlockRealize | None:
    """The one block of the scope that writes ``buffer`` (None for an input of the scope)."""
    writers = [
        r for r in child_blocks(scope.body) if any(w.buffer is buffer for w in r.block.writes)
    ]
    if len(writers) > 1:
        names = ", ".join(repr(r.block.name_hint) for r in writers)
        raise ScheduleError(
            f"{kind}: buffer {buffer.name!r} is written by {len(writers)} blocks ({names}); "
            "caching needs a single writer"
        )
    return writers[0] if writers else None


def _check_cache_starts(kind: str, block: S.Block, scope: S.Block, buffer: Buffer) -> None:
    """The new cache starts empty: refuse a block that reads the values it updates unless its
    own T.init() starts them (an update block after decompose_reduction or blockize reads
    what another block's init wrote into the original buffer)."""
    name = repr(block.name_hint)
    if scope.init is not None and any(
        isinstance(node, S.BufferStore) and node.buffer is buffer for node in _walk(scope.init)
    ):
        raise ScheduleError(
            f"{kind}: buffer {buffer.name!r} of block {name} is also written by the T.init() "
            f"of the enclosing block {scope.name_hint!r}, which would go on writing the "
            f"original; decompose_reduction of block {scope.name_hint!r} first"
        )
    loads: list[E.BufferLoad] = []
    post_order_visit(block.body, lambda n: loads.append(n) if isinstance(n, E.BufferLoad) else None)
    if block.init is None and any(load.buffer is buffer for load in loads):
        raise ScheduleError(
            f"{kind}: block {name} reads buffer {buffer.name!r}, which it updates, and has no "
            "T.init() to start the values in a new cache; the values it reads are written "
            "elsewhere (cache the block that starts them, or cache before decompose_reduction)"
        )


# ---------------------------------------------------------------------------- placement
class _CacheLocation:
    """Where TVM puts the copy stage: in the lowest sequence holding both the producer and a
    consumer, right before the first child that contains a consumer. The sequence is the
    body of the loop (or of the scope block) returned with the position."""

    def __init__(self, writer: S.Block, consumers: set[int]):
        self.writer, self.consumers = writer, consumers
        self.node: S.Stmt | None = None
        self.pos = -1

    @staticmethod
    def find(scope: S.Block, writer: S.Block, buffer: Buffer) -> tuple[S.Stmt, int]:
        consumers = {
            id(r.block)
            for r in child_blocks(scope.body)
            if r.block is not writer and any(rd.buffer is buffer for rd in r.block.reads)
        }
        if not consumers:
            # Nobody reads the result inside the scope: copy it out at the very end.
            size = len(scope.body.seq) if isinstance(scope.body, S.SeqStmt) else 1
            return scope, size
        finder = _CacheLocation(writer, consumers)
        finder.visit(scope.body)
        if finder.node is None:
            return scope, finder.pos if finder.pos != -1 else 1
        return finder.node, finder.pos

    def visit(self, node: Any) -> tuple[bool, bool]:
        """Whether the subtree holds (the writer, a consumer)."""
        if isinstance(node, S.BlockRealize):
            return node.block is self.writer, id(node.block) in self.consumers
        seen_writer = seen_consumer = False
        pos = -1
        for i, child in enumerate(_children(node)):
            if self.pos != -1:
                break
            writer, consumer = self.visit(child)
            seen_writer, seen_consumer = seen_writer or writer, seen_consumer or consumer
            if seen_writer and seen_consumer and pos == -1:
                pos = i
        both = seen_writer and seen_consumer
        if isinstance(node, S.SeqStmt) and both and self.pos == -1:
            self.pos = pos
        if isinstance(node, S.For) and both and self.node is None and self.pos != -1:
            self.node = node
        return seen_writer, seen_consumer


def _produced_region(
    sch: ScheduleState, writer: S.BlockRealize, buffer: Buffer, loc: S.Stmt
) -> BufferRegion:
    """What ``writer`` writes of ``buffer`` over all iterations of the loops below ``loc``."""
    region = next(w for w in writer.block.writes if w.buffer is buffer)
    path = path_to(sch, writer)
    below = path[path.index(loc) + 1 :]
    dom = {n.loop_var: loop_range(n) for n in below if isinstance(n, S.For)}
    bindings = {iv.var: v for iv, v in zip(writer.block.iter_vars, writer.iter_values)}
    return relax_region(region, bindings, dom, Analyzer())


def _analyzer_at(sch: ScheduleState, loc: S.Stmt) -> Analyzer:
    """An analyzer knowing the ranges of the loops and block iter vars around (and at)
    ``loc``, where the copy stage goes."""
    analyzer = Analyzer()
    for node in path_to(sch, loc):
        if isinstance(node, S.For):
            analyzer.bind(node.loop_var, loop_range(node))
        elif isinstance(node, S.Block):
            for iv in node.iter_vars:
                analyzer.bind(iv.var, iv.dom)
    return analyzer


def _copy_stage(
    region: BufferRegion, src: Buffer, dst: Buffer, name: str, analyzer: Analyzer
) -> S.Stmt:
    """``for ax0, ax1, ...: dst[v0, v1, ...] = src[v0, v1, ...]`` over ``region``, guarded
    where the region may stick out of the buffer (a tile past the end of a split that does
    not divide its loop, a padded window past the edge)."""
    loop_vars = [E.Var(f"ax{i}", r.extent.dtype) for i, r in enumerate(region.region)]
    iter_vars = [
        E.IterVar(
            E.Range.from_min_extent(E.make_const(0, dim.dtype), dim),
            E.Var(f"v{i}", dim.dtype),
            E.IterVarType.DataPar,
        )
        for i, dim in enumerate(region.buffer.shape)
    ]
    indices = [iv.var for iv in iter_vars]
    block = S.Block(
        iter_vars,
        [point_region(src, indices)],
        [point_region(dst, indices)],
        name,
        S.BufferStore(dst, E.BufferLoad(src, indices), indices),
    )
    values = [analyzer.simplify(r.min + v) for r, v in zip(region.region, loop_vars)]
    for var, rng in zip(loop_vars, region.region):
        analyzer.bind(var, E.Range.from_min_extent(E.make_const(0, var.dtype), rng.extent))
    guards = [
        guard
        for value, dim in zip(values, region.buffer.shape)
        for guard in within(analyzer, value, E.make_const(0, dim.dtype), dim)
    ]
    stmt: S.Stmt = S.BlockRealize(values, conjunction(guards), block)
    for var, rng in reversed(list(zip(loop_vars, region.region))):
        stmt = S.For(var, E.make_const(0, var.dtype), rng.extent, S.ForKind.SERIAL, stmt)
    return stmt


def _rewrite_scope(
    sch: ScheduleState,
    scope: S.Block,
    swap: dict[int, Buffer],
    should_swap: Callable[[S.Block], bool],
    loc: S.Stmt,
    pos: int,
    stage: S.Stmt,
    cache: Buffer,
) -> None:
    """Swap the buffers of the chosen blocks, insert the stage at ``loc``/``pos`` and allocate
    the cache buffer in the scope block."""
    rewriter = _ScopeRewriter(BufferSwap(swap), should_swap, loc, pos, stage)
    body = rewriter.visit(scope.body)
    if loc is scope:
        body = insert_stmt(body, pos, stage)
    sch.replace(scope, scope.with_fields(body=body, alloc_buffers=(*scope.alloc_buffers, cache)))


class _ScopeRewriter(StmtExprMutator):
    def __init__(
        self,
        swap: BufferSwap,
        should_swap: Callable[[S.Block], bool],
        loc: S.Stmt,
        pos: int,
        stage: S.Stmt,
    ):
        self.swap, self.should_swap = swap, should_swap
        self.loc, self.pos, self.stage = loc, pos, stage

    def visit_block_realize_(self, op: S.BlockRealize) -> S.Stmt:
        # The stage never lands inside a child block, so a block is rewritten whole or not at all.
        return self.swap.visit(op) if self.should_swap(op.block) else op

    def visit_for_(self, op: S.For) -> S.Stmt:
        new = self.generic_visit(op)
        if op is self.loc:
            new = new.with_fields(body=insert_stmt(new.body, self.pos, self.stage))
        return new
