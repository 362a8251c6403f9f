"""``footprint``: how many bytes of each buffer a block touches inside one iteration of each of
its loops — the number that explains why a tiled loop nest is faster.

``mlckit.tir.analysis`` exports it with ``block_nests``, the loop nest above each block.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from mlckit import arith
from mlckit.errors import MLCError
from mlckit.ir.dtype import bits
from mlckit.ir.module import IRModule

from .. import stmt as S
from ..buffer import Buffer, BufferRegion
from ..expr import IntImm, Max, Min, Not, PrimExpr, Range, Var, is_true
from ..function import PrimFunc
from ..stmt_functor import substitute
from .analysis import get_block_read_write_region

_KIND = {
    S.ForKind.SERIAL: "",
    S.ForKind.PARALLEL: "parallel",
    S.ForKind.VECTORIZED: "vectorized",
    S.ForKind.UNROLLED: "unrolled",
    S.ForKind.THREAD_BINDING: "thread",
}


@dataclass(frozen=True)
class FootprintRow:
    """One loop of the nest and the bytes per buffer one iteration of it touches (None: the
    analysis found no bound, e.g. a region of a symbolic size)."""

    loop: Var
    extent: int | PrimExpr
    kind: S.ForKind
    bytes: dict[str, int | None]

    @property
    def total(self) -> int | None:
        values = list(self.bytes.values())
        return None if None in values else sum(v for v in values if v is not None)


class Footprint(list[FootprintRow]):
    """The rows of :func:`footprint`, outermost loop first; ``str()`` is a table."""

    def __init__(self, block: str, rows: list[FootprintRow]):
        super().__init__(rows)
        self.block = block

    def __str__(self) -> str:
        buffers = list(self[0].bytes) if self else []
        header = ["loop", "extent", "kind", *buffers, "total"]
        table = [header]
        for row in self:
            extent = str(row.extent) if isinstance(row.extent, int) else row.extent.script()
            cells = [_size(row.bytes[name]) for name in buffers]
            table.append([row.loop.name_hint, extent, _KIND[row.kind], *cells, _size(row.total)])
        widths = [max(len(line[c]) for line in table) for c in range(len(header))]
        lines = [
            f"footprint of block {self.block!r}: bytes touched in one iteration of each loop",
            *(
                "  ".join(
                    cell.ljust(w) if c < 3 else cell.rjust(w)
                    for c, (cell, w) in enumerate(zip(line, widths))
                ).rstrip()
                for line in table
            ),
        ]
        return "\n".join(lines)


def footprint(prim_func: PrimFunc | IRModule, block: str | None = None) -> Footprint:
    """Bytes of each buffer that block ``block`` touches inside one iteration of each loop
    around it (default: the block under the most loops).

    How to read it: the row of loop ``k`` is the *working set* of one iteration of ``k``,
    everything the loops below ``k`` touch while ``k`` stays fixed (the block's read and write
    regions relaxed over those loops, times the element size). Rows grow from the innermost
    loop outwards. When a row's total is under a cache's size (L1: 32-48 KiB per core; L2:
    256 KiB-2 MiB), that working set stays in the cache for the whole iteration, so whatever
    it reuses — the same ``B`` columns for every row of ``A`` — is read from the cache rather
    than from memory. Tiling (``split`` + ``reorder``) makes the inner rows small: for a
    128x128 float32 matmul, one iteration of the plain ``i`` loop touches all of ``B``
    (64 KiB, more than L1), while one iteration of an outer tile loop with 8x8 tiles touches
    4 KiB each of ``A`` and ``B``.

    The numbers are upper bounds: a block predicate (a partial tile) is not subtracted.
    """
    func = _the_func(prim_func)
    found = _find(func.body, block)
    if found is None:
        names = [n.realize.block.name_hint for n in block_nests(func)]
        raise MLCError(f"footprint: no block named {block!r}; blocks: {', '.join(names) or 'none'}")
    realize, loops, bindings, _ = found
    accesses = _accesses(realize.block, bindings)
    analyzer = arith.Analyzer()
    rows = []
    for level, loop in enumerate(loops):
        for outer in loops[: level + 1]:
            rng = Range.from_min_extent(outer.min, outer.extent)
            analyzer.bind(outer.loop_var, rng, allow_override=True)
        dom = {inner.loop_var: Range.from_min_extent(inner.min, inner.extent) for inner in loops}
        for outer in loops[: level + 1]:
            del dom[outer.loop_var]
        sizes = {
            buffer.name: _bytes(buffer, regions, dom, analyzer)
            for buffer, regions in accesses.items()
        }
        extent = loop.extent.value if isinstance(loop.extent, IntImm) else loop.extent
        rows.append(FootprintRow(loop.loop_var, extent, loop.kind, sizes))
    return Footprint(realize.block.name_hint, rows)


def _the_func(value: PrimFunc | IRModule) -> PrimFunc:
    if isinstance(value, PrimFunc):
        return value
    funcs = {gv.name_hint: f for gv, f in value.functions.items() if isinstance(f, PrimFunc)}
    if len(funcs) == 1:
        return next(iter(funcs.values()))
    if "main" in funcs:
        return funcs["main"]
    raise MLCError(
        f"footprint: the module has several PrimFuncs ({', '.join(funcs)}); pass one of them"
    )


class BlockNest(NamedTuple):
    """A block, the loops around it (outermost first), what the iter vars of it and of the
    blocks around it are in terms of those loops, and the conditions under which it runs
    (its own and enclosing blocks' predicates, enclosing ``if`` conditions), in those terms."""

    realize: S.BlockRealize
    loops: list[S.For]
    bindings: dict[Var, PrimExpr]
    guards: tuple[PrimExpr, ...] = ()


def block_nests(func_or_stmt: PrimFunc | S.Stmt) -> list[BlockNest]:
    """Every block of a function (the root left out), in program order, with its loop nest."""
    body = func_or_stmt.body if isinstance(func_or_stmt, PrimFunc) else func_or_stmt
    return list(_nests(body, [], {}, ()))


def _find(body: S.Stmt, name: str | None) -> BlockNest | None:
    nests = [n for n in block_nests(body) if name is None or n.realize.block.name_hint == name]
    if not nests:
        return None
    return max(nests, key=lambda n: len(n.loops)) if name is None else nests[0]


def _nests(
    stmt: Any, loops: list[S.For], bindings: dict[Var, PrimExpr], guards: tuple[PrimExpr, ...]
) -> Iterator[BlockNest]:
    if isinstance(stmt, S.For):
        yield from _nests(stmt.body, [*loops, stmt], bindings, guards)
    elif isinstance(stmt, S.SeqStmt):
        for child in stmt.seq:
            yield from _nests(child, loops, bindings, guards)
    elif isinstance(stmt, S.LetStmt):
        inner = {**bindings, stmt.var: substitute(stmt.value, bindings)}
        yield from _nests(stmt.body, loops, inner, guards)
    elif isinstance(stmt, S.IfThenElse):
        condition = substitute(stmt.condition, bindings)
        yield from _nests(stmt.then_case, loops, bindings, (*guards, condition))
        if stmt.else_case is not None:
            yield from _nests(stmt.else_case, loops, bindings, (*guards, Not(condition)))
    elif isinstance(stmt, (S.Allocate, S.AssertStmt)):
        yield from _nests(stmt.body, loops, bindings, guards)
    elif isinstance(stmt, S.BlockRealize):
        block = stmt.block
        inner = dict(bindings)
        for iv, value in zip(block.iter_vars, stmt.iter_values):
            inner[iv.var] = substitute(value, bindings)
        if not is_true(stmt.predicate):
            guards = (*guards, substitute(stmt.predicate, bindings))
        if block.name_hint != "root":
            yield BlockNest(stmt, loops, inner, guards)
        if block.init is not None:
            yield from _nests(block.init, loops, inner, guards)
        yield from _nests(block.body, loops, inner, guards)


def _accesses(block: S.Block, bindings: dict[Var, PrimExpr]) -> dict[Buffer, list[BufferRegion]]:
    """The block's regions per buffer (reads, then writes), in terms of the loop vars."""
    reads, writes = block.reads, block.writes
    if not reads and not writes:
        reads, writes = get_block_read_write_region(block)  # type: ignore[assignment]
    table: dict[Buffer, list[BufferRegion]] = {}
    for region in [*reads, *writes]:
        table.setdefault(region.buffer, []).append(substitute(region, bindings))
    return table


def _bytes(
    buffer: Buffer,
    regions: list[BufferRegion],
    dom: dict[Var, Range],
    analyzer: arith.Analyzer,
) -> int | None:
    elements = 1
    for dim, shape in enumerate(buffer.shape):
        lo: PrimExpr | None = None
        hi: PrimExpr | None = None
        for region in regions:
            rng = region.region[dim]
            low = analyzer.int_set(rng.min, dom).min_value
            high = analyzer.int_set(rng.min + rng.extent - 1, dom).max_value
            if low is None or high is None:
                lo = hi = None
                break
            lo = low if lo is None else analyzer.simplify(Min(lo, low))
            hi = high if hi is None else analyzer.simplify(Max(hi, high))
        # The worst case over the fixed outer loops, never more than the whole dimension.
        bound = (
            analyzer.const_int_bound(hi - lo + 1).max_value
            if lo is not None and hi is not None
            else arith.ConstIntBound.POS_INF
        )
        if isinstance(shape, IntImm):
            bound = min(bound, shape.value)
        if bound >= arith.ConstIntBound.POS_INF:
            return None
        elements *= bound
    return elements * ((bits(buffer.dtype) + 7) // 8)


def _size(value: int | None) -> str:
    if value is None:
        return "?"
    if value < 1024:
        return f"{value} B"
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value / (1024 * 1024):.1f} MiB"


__all__ = ["BlockNest", "Footprint", "FootprintRow", "block_nests", "footprint"]
