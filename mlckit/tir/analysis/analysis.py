"""Analyses of TensorIR: which buffer regions a block reads and writes, which vars are used.

``get_block_read_write_region`` is what fills ``T.reads``/``T.writes`` when a TVMScript block
omits them, and what the printer compares against to decide whether to print them.
"""

from __future__ import annotations

from typing import Any

from mlckit import arith
from mlckit.arith.canonical import KeyCache

from ..buffer import Buffer, BufferRegion
from ..expr import BufferLoad, IntImm, Max, Min, PrimExpr, Range, Var
from ..stmt import Block, BlockRealize, BufferStore, For, LetStmt
from ..stmt_functor import StmtExprVisitor, post_order_visit, substitute


def collect_vars(node: Any) -> list[Var]:
    """The variables *used* in an expression or statement, in order of first appearance.

    Definitions (loop variables at their ``for``, block iter vars at their declaration) are
    not uses; buffers' shapes are not looked into.
    """
    seen: dict[int, Var] = {}

    def fvisit(n: Any) -> None:
        if isinstance(n, Var) and id(n) not in seen:
            seen[id(n)] = n

    post_order_visit(node, fvisit)
    return list(seen.values())


def expr_deep_equal(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two expressions are the same tree, comparing variables by identity.

    Unlike ``structural_equal`` (which maps free variables onto each other), ``x + 1`` and
    ``y + 1`` are different here.
    """
    keys = KeyCache()
    return keys.key(a) == keys.key(b)


# ---------------------------------------------------------------------------- block regions
class _Access:
    """One buffer's accessed region, per dimension ``[min, max]`` (None: unbounded)."""

    def __init__(self, buffer: Buffer, bounds: list[tuple[PrimExpr | None, PrimExpr | None]]):
        self.buffer = buffer
        self.bounds = bounds


class _RegionCollector(StmtExprVisitor):
    def __init__(self, block: Block) -> None:
        self.analyzer = arith.Analyzer()
        self.excluded = {id(b) for b in block.alloc_buffers}
        self.matched = {id(m.buffer): m.source for m in block.match_buffers}
        self.excluded.update(self.matched)
        # loop variables of loops inside the block -> the set they range over
        self.dom: dict[Var, arith.IntervalSet] = {}
        self.lets: dict[Var, PrimExpr] = {}
        self.reads: dict[int, _Access] = {}
        self.writes: dict[int, _Access] = {}

    # -- relaxation
    def _resolve(self, expr: PrimExpr) -> PrimExpr:
        return substitute(expr, self.lets) if self.lets else expr

    def _relax(self, expr: PrimExpr) -> arith.IntervalSet:
        return self.analyzer.int_set(self._resolve(expr), self.dom)

    def _record(
        self,
        table: dict[int, _Access],
        buffer: Buffer,
        bounds: list[tuple[PrimExpr | None, PrimExpr | None]],
    ) -> None:
        old = table.get(id(buffer))
        if old is None:
            table[id(buffer)] = _Access(buffer, bounds)
            return
        merged = []
        for (lo_a, hi_a), (lo_b, hi_b) in zip(old.bounds, bounds):
            lo = None if lo_a is None or lo_b is None else self.analyzer.simplify(Min(lo_a, lo_b))
            hi = None if hi_a is None or hi_b is None else self.analyzer.simplify(Max(hi_a, hi_b))
            merged.append((lo, hi))
        old.bounds = merged

    def _access_point(
        self, table: dict[int, _Access], buffer: Buffer, indices: tuple[PrimExpr, ...]
    ) -> None:
        if id(buffer) in self.matched:
            self._access_region(table, self.matched[id(buffer)])
            return
        if id(buffer) in self.excluded:
            return
        bounds = []
        for index in indices:
            s = self._relax(index)
            bounds.append((s.min_value, s.max_value))
        self._record(table, buffer, bounds)

    def _access_region(self, table: dict[int, _Access], region: BufferRegion) -> None:
        if id(region.buffer) in self.excluded:
            return
        bounds = []
        for rng in region.region:
            lo = self._relax(rng.min).min_value
            hi = self._relax(rng.min + rng.extent - 1).max_value
            bounds.append((lo, hi))
        self._record(table, region.buffer, bounds)

    # -- visitor
    def visit_buffer_load_(self, op: BufferLoad) -> None:
        self._access_point(self.reads, op.buffer, op.indices)
        super().visit_buffer_load_(op)

    def visit_buffer_store_(self, op: BufferStore) -> None:
        self._access_point(self.writes, op.buffer, op.indices)
        super().visit_buffer_store_(op)

    def visit_for_(self, op: For) -> None:
        self.visit(op.min)
        self.visit(op.extent)
        lo = self._relax(op.min).min_value
        hi = self._relax(op.min + op.extent - 1).max_value
        self.dom[op.loop_var] = arith.IntervalSet(lo, hi)
        self.visit(op.body)
        del self.dom[op.loop_var]

    def visit_let_stmt_(self, op: LetStmt) -> None:
        self.visit(op.value)
        self.lets[op.var] = self._resolve(op.value)
        self.visit(op.body)
        del self.lets[op.var]

    def visit_block_realize_(self, op: BlockRealize) -> None:
        # A nested block is summarized by its own regions, seen through its bindings.
        self.visit(op.iter_values)
        self.visit(op.predicate)
        inner = op.block
        reads, writes = inner.reads, inner.writes
        if not reads and not writes:
            reads, writes = get_block_read_write_region(inner)
        bindings = {iv.var: value for iv, value in zip(inner.iter_vars, op.iter_values)}
        for table, regions in ((self.reads, reads), (self.writes, writes)):
            for region in regions:
                self._access_region(table, substitute(region, bindings))

    def visit_block_(self, op: Block) -> None:
        # Only reached for the analyzed block itself (nested ones stop at their realize).
        if op.init is not None:
            self.visit(op.init)
        self.visit(op.body)

    # -- result
    def regions(self, table: dict[int, _Access], skip: dict[int, _Access]) -> list[BufferRegion]:
        out = []
        for key, access in table.items():
            if key in skip:
                continue
            ranges = []
            for dim, (lo, hi) in zip(access.buffer.shape, access.bounds):
                if lo is None or hi is None:
                    # Unknown extent: the whole dimension, as TVM's completion does.
                    ranges.append(Range.from_min_extent(IntImm(dim.dtype, 0), dim))
                elif lo is hi:
                    ranges.append(Range.from_min_extent(lo, IntImm(lo.dtype, 1)))
                else:
                    ranges.append(Range.from_min_extent(lo, self.analyzer.simplify(hi - lo + 1)))
            out.append(BufferRegion(access.buffer, ranges))
        return out


def get_block_read_write_region(block: Block) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """The regions of buffers a block reads and writes, inferred from its body and init.

    Loads and stores contribute their index points; loops inside the block are relaxed over
    their ranges (``for k in range(4): A[vi, k]`` reads ``A[vi, 0:4]``); the block's own iter
    vars stay symbolic. A nested block contributes its own reads/writes with its iter vars
    replaced by their bindings. Buffers the block allocates (or views with match_buffer) are
    left out; a block with an init (a reduction) does not list the buffers it writes among its
    reads. Buffers appear in order of first access.
    """
    collector = _RegionCollector(block)
    collector.visit(block)
    writes = collector.regions(collector.writes, {})
    # As in TVM, only a reduction with an init leaves what it writes out of its reads: its
    # T.init() says where the value it accumulates comes from.
    reads = collector.regions(collector.reads, collector.writes if block.init is not None else {})
    return reads, writes


def infer_block_regions(block: Block) -> Block:
    """``block`` with ``reads``/``writes`` set to the inferred regions."""
    reads, writes = get_block_read_write_region(block)
    return block.with_fields(reads=tuple(reads), writes=tuple(writes))


__all__ = [
    "collect_vars",
    "expr_deep_equal",
    "get_block_read_write_region",
    "infer_block_regions",
]
