"""The default CPU schedule: a few readable rules that make unscheduled kernels fast.

In the spirit of TVM's dlight, each rule looks at one block's structure and, when it
recognizes it, applies a fixed recipe of schedule primitives:

* **inline**: an elementwise block writing an intermediate buffer is inlined into its
  consumers (``Z = Y + b; R = max(Z, 0)`` becomes ``R = max(Y + b, 0)``): one pass, no buffer.
  Padding read by a convolution stays a block of its own (its bounds test would otherwise
  run for every multiply-add), and so does a block computing ``exp`` (or another costly
  call) read by more than one consumer (a softmax's exponentials, summed and divided).
* **matmul** (``C[.., i, j] += A[.., i, k] * B[.., k, j]``, B contiguous along j): tiles of
  (16, 64, 4), the reduction loop outside the contiguous loop j (i-k-j order in a tile), an
  accumulator tile (``cache_write`` to "local", which buffer compaction allocates inside the
  tile loop) whose write-back also computes the elementwise epilogue, ``parallel`` on the
  fused outer tile loops, ``vectorize`` on j. A dynamic row count (a batch) is split by 16
  too: the split's guard on the last tile is removed from the full tiles by LoopPartition
  at build time.
* **dense** (``C[i, j] += A[i, k] * B[j, k]``, both inputs contiguous along k, a linear
  layer's ``NT_matmul``): a 2x8 block of dot products (one at a time when nothing can be
  tiled or the work is too small for threads) accumulated in a local tile while k runs
  innermost;
  the column tiles outermost (B's rows of a tile stay in cache while all rows of A pass); the
  elementwise epilogue (bias, activation) folded into the tile's write-back. Vectorizing a
  float sum reorders its additions, so this rule annotates the block "fastmath" (recorded in
  the trace like any annotation), which compiles its kernel with numba's fastmath.
* **sliding window** (a convolution, ``Out[n, f, y, x] += D[n, c, y + ry, x + rx] *
  W[f, c, ry, rx]``: the output's contiguous axis x indexes the data and not the weights,
  an axis f the weights and not the data): a register tile of 4 output channels by a row of
  x (up to 64 columns, else a factor of it) accumulated over every reduction loop, the row
  vectorized (D is contiguous along x), the channels unrolled (W's value a broadcast
  scalar), the epilogue (bias, batch norm, relu, residual add) folded into the tile's
  write-back, parallel over the outer loops. For a 32-channel 3x3 convolution at 28x28 this
  runs about 50x faster than the plain loop nest, on a par with torch's.
* **elementwise**: the last (contiguous) loop split by a vector width and ``vectorize``d, the
  loops outside it fused and run in ``parallel``.
* **row reduction** (the reduction loops innermost, a layer norm's or a softmax's rows): each
  output element accumulates in a local variable over the innermost loop instead of in its
  array (the block annotation ``accumulate_locally``, which the code generator honours), and
  "fastmath" lets LLVM vectorize the sum: 35x faster for a 64x128 layer norm's statistics;
  ``parallel`` on the fused spatial loops.

Blocks no rule recognizes are left as they are. Loop extents known at compile time decide the
tile sizes (always literal, dividing the extent, so no partial tile needs a guard). A dynamic
row count (a batch size ``n``) is tiled like a static one: the last, partial tile keeps the
split's guard, and LoopPartition (``mlckit.tir.transform``) runs the full tiles without it.
A kernel whose reduction tiles a dynamic batch also gets the program scheduled for a batch
of one, chosen at run time (``with_batch_of_one``). ``parallel`` is only used where the known
work is large enough to pay for waking the threads (about 5 us, see
``mlckit.backend.threads``).

``default_schedule(func_or_mod)`` applies the rules; ``DefaultSchedule()`` is the module pass
that applies them to every PrimFunc without the attribute ``tir.is_scheduled`` and sets it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from mlckit.errors import ScheduleError
from mlckit.ir import transform
from mlckit.ir.module import BaseFunc, IRModule

from .. import expr as E
from .. import stmt as S
from ..analysis import collect_vars
from ..buffer import Buffer
from ..function import PrimFunc
from ..stmt_functor import RenewDefs, post_order_visit, substitute
from .schedule import BlockRV, LoopRV, Schedule

# Work (iterations known at compile time) below which threads cost more than they save:
# waking the sleeping threads (mlckit.backend.threads) costs about 5 us, and when other
# threads hold the cores (torch's or OpenBLAS's, spinning after their own calls) the parallel
# loop waits for one. The course MLP's first layer at batch 1 (2 * 10^5 multiply-adds): 6 us
# in parallel on a quiet machine, 50 us when run in turns with torch, 8.5 us on one thread
# either way.
PARALLEL_MIN_WORK = 1 << 18
# What a dynamic extent (a batch size) counts for in that work: a small batch. Loops over a
# batch that only pay for threads at large batches stay serial (a max-pool at batch 1 took
# 15 us in parallel and 1.3 us serial), those that pay at batch 4 run in parallel.
DYNAMIC_EXTENT = 4
# Vector widths to try for an innermost loop, widest first (float32: 16 is one AVX-512 register).
VECTOR_LANES = (64, 32, 16, 8, 4)
MATMUL_TILES = {"i": (16, 8, 4, 2), "j": (64, 32, 16, 8, 4), "k": (4, 2)}
# Rows x columns of dot products computed together (the first choice that divides the
# extent), one vector accumulator each: 2x8 ran the 64x128x784 dense 1.3x faster than 2x4
# here (AVX-512: 32 vector registers); 1x16 ran 2x slower than 1x8.
DENSE_TILES = {"i": (2,), "j": (8, 4, 2)}
# Output channels x output columns of a convolution's register tile: a row of up to 64
# columns (four AVX-512 vectors) kept whole, or split by the first factor that divides it;
# 4 channels ran a 32-channel 3x3 convolution at 28x28 as fast as 8 and 2x faster than 16.
WINDOW_TILES = {"f": (4, 2), "x": (64, 32, 16, 8)}

# Calls that cost tens of cycles each (no vector form in numba): a block computing one is
# not inlined into several consumers, which would each compute it again.
EXPENSIVE_CALLS = frozenset(
    f"tir.{name}" for name in ("exp", "exp2", "log", "log2", "log10", "erf", "tanh", "pow")
)

Rule = Callable[[Schedule, BlockRV], bool]


# ---------------------------------------------------------------------- block structure
@dataclass
class _Nest:
    """A block alone under its loops, each loop bound to exactly one iter var."""

    sch: Schedule
    block_rv: BlockRV
    block: S.Block
    loops: list[S.For]
    # For each iter var (by id of its Var), the index of its loop in ``loops``.
    loop_of: dict[int, int]

    @cached_property
    def loop_rvs(self) -> list[LoopRV]:
        """Handles of the loops, from get_loops (recorded, so that the schedule's trace can be
        stored as JSON), asked for only by a rule that schedules the nest."""
        return self.sch.get_loops(self.block_rv)

    def extent(self, i: int) -> int | None:
        ext = self.loops[i].extent
        return ext.value if isinstance(ext, E.IntImm) else None

    def known_work(self) -> int:
        """The product of the loop extents, a dynamic one counted as ``DYNAMIC_EXTENT``."""
        work = 1
        for i in range(len(self.loops)):
            work *= self.extent(i) or DYNAMIC_EXTENT
        return work


def _nest(sch: Schedule, block: BlockRV) -> _Nest | None:
    """``block``'s loop nest when it is simple enough for the rules, else None."""
    realize = sch.block_realize(block)
    loops = sch.loops_above(realize)
    if not loops or not _only_block_under(loops[0], realize):
        return None
    position = {id(loop.loop_var): n for n, loop in enumerate(loops)}
    loop_of: dict[int, int] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if not isinstance(value, E.Var) or id(value) not in position:
            return None
        loop_of[id(iv.var)] = position[id(value)]
    if len(set(loop_of.values())) != len(loops) or not E.is_true(realize.predicate):
        return None
    if any(loop.kind != S.ForKind.SERIAL for loop in loops):
        return None  # somebody scheduled it already
    return _Nest(sch, block, realize.block, loops, loop_of)


def _only_block_under(loop: S.For, realize: S.BlockRealize) -> bool:
    node: S.Stmt = loop
    while isinstance(node, S.For):
        node = node.body
    return node is realize


def _is_spatial(block: S.Block) -> bool:
    return all(iv.iter_type == E.IterVarType.DataPar for iv in block.iter_vars)


def _reduce_vars(block: S.Block) -> list[E.Var]:
    return [iv.var for iv in block.iter_vars if iv.iter_type == E.IterVarType.CommReduce]


def _var_indices(load: E.BufferLoad | S.BufferStore) -> list[int] | None:
    """The ids of the index variables, when every index is a plain variable."""
    if not all(isinstance(i, E.Var) for i in load.indices):
        return None
    return [id(i) for i in load.indices]


def _loads(expr: E.PrimExpr) -> list[E.BufferLoad]:
    found: list[E.BufferLoad] = []
    post_order_visit(expr, lambda n: found.append(n) if isinstance(n, E.BufferLoad) else None)
    return found


@dataclass
class _Contraction:
    """``C[..., i, j] += A[..., i, k] * B[..., k, j]`` (or ``B[..., j, k]``), by iter var ids."""

    i: int
    j: int
    k: int
    b_contiguous_in_j: bool


def _contraction(block: S.Block) -> _Contraction | None:
    """The matmul pattern of a reduction block, read off its store's indices."""
    store = block.body
    reduce = _reduce_vars(block)
    if not isinstance(store, S.BufferStore) or len(reduce) != 1 or block.init is None:
        return None
    out = _var_indices(store)
    if out is None or len(out) < 2:
        return None
    inputs = [load for load in _loads(store.value) if load.buffer is not store.buffer]
    if len(inputs) != 2:
        return None
    i, j, k = out[-2], out[-1], id(reduce[0])
    for a, b in (inputs, inputs[::-1]):
        a_idx, b_idx = _var_indices(a), _var_indices(b)
        if a_idx is None or b_idx is None or len(a_idx) < 2 or len(b_idx) < 2:
            continue
        if a_idx[-2:] != [i, k]:
            continue
        if b_idx[-2:] == [k, j]:
            return _Contraction(i, j, k, b_contiguous_in_j=True)
        if b_idx[-2:] == [j, k]:
            return _Contraction(i, j, k, b_contiguous_in_j=False)
    return None


def _factor(extent: int | None, choices: Sequence[int]) -> int | None:
    """The first of ``choices`` that divides ``extent`` (and is smaller), or None."""
    if extent is None:
        return None
    return next((c for c in choices if extent % c == 0 and c < extent), None)


def _columns(extent: int | None, choices: Sequence[int]) -> int | None:
    """The split factor of a vectorized row: none when the whole row fits the widest tile
    (a row of 32 columns computed as one tile, not two of 16), else the first choice that
    divides it."""
    if extent is not None and extent <= choices[0]:
        return None
    return _factor(extent, choices)


def _split(sch: Schedule, loop: LoopRV, factor: int | None) -> tuple[LoopRV | None, LoopRV]:
    """(outer, inner) of ``loop`` split by ``factor``; no outer loop when there is no factor."""
    if factor is None:
        return None, loop
    outer, inner = sch.split(loop, [None, factor])
    return outer, inner


# ---------------------------------------------------------------------- the rules
def inline_elementwise(sch: Schedule, block: BlockRV) -> bool:
    """Inline a spatial block that writes an intermediate buffer into its consumers."""
    return _inline_elementwise(sch, block, keep_padding=False)


def inline_elementwise_but_padding(sch: Schedule, block: BlockRV) -> bool:
    """``inline_elementwise``, except a block with a condition (padding) read by a reduction:
    inlined into a convolution, its bounds test would run for every multiply-add and keep
    the inner loop from vectorizing, so it stays a loop nest of its own. (On a GPU, one
    kernel launch saved is worth more: its schedule inlines padding too.)"""
    return _inline_elementwise(sch, block, keep_padding=True)


def _inline_elementwise(sch: Schedule, block: BlockRV, keep_padding: bool) -> bool:
    realize = sch.block_realize(block)
    store = realize.block.body
    if not _is_spatial(realize.block) or not isinstance(store, S.BufferStore):
        return False
    if any(store.buffer is buf for buf in sch.func.buffer_map.values()):
        return False  # a function output stays
    consumers = sch.get_consumers(block)
    if not consumers:
        return False
    if len(consumers) > 1 and _calls_any(store.value, EXPENSIVE_CALLS):
        return False  # each consumer would compute the exp (a softmax's) again
    if (
        keep_padding
        and _has_condition(store.value)
        and any(not _is_spatial(sch.block_realize(c).block) for c in consumers)
    ):
        return False
    sch.compute_inline(block)
    return True


def _contains(node: object, test: Callable[[object], bool]) -> bool:
    """Whether some statement or expression under ``node`` passes ``test``."""
    found: list[object] = []
    post_order_visit(node, lambda n: found.append(n) if test(n) else None)
    return bool(found)


def _calls_any(value: E.PrimExpr, names: frozenset[str]) -> bool:
    return _contains(
        value, lambda n: isinstance(n, E.Call) and getattr(n.op, "name", None) in names
    )


def _has_condition(value: E.PrimExpr) -> bool:
    return _contains(value, lambda n: isinstance(n, E.Select)) or _calls_any(
        value, frozenset({"tir.if_then_else"})
    )


def schedule_matmul(sch: Schedule, block: BlockRV) -> bool:
    """Tile for cache, i-k-j order, local accumulator tile, parallel outer, vectorized j."""
    nest = _nest(sch, block)
    if nest is None:
        return False
    pattern = _contraction(nest.block)
    if pattern is None or not pattern.b_contiguous_in_j:
        return False
    i, j, k = (nest.loop_of[v] for v in (pattern.i, pattern.j, pattern.k))
    if k != len(nest.loops) - 1 or (i, j) != (k - 2, k - 1):
        return False
    outer = nest.loop_rvs[:i]
    # A dynamic row count (a batch size) is tiled like a static one: the last tile's rows
    # past the end are skipped by the split's predicate, a test once per row outside the
    # vectorized j loop.
    rows = MATMUL_TILES["i"][0] if nest.extent(i) is None else None
    i0, i1 = _split(sch, nest.loop_rvs[i], rows or _factor(nest.extent(i), MATMUL_TILES["i"]))
    j0, j1 = _split(sch, nest.loop_rvs[j], _columns(nest.extent(j), MATMUL_TILES["j"]))
    k0, k1 = _split(sch, nest.loop_rvs[k], _factor(nest.extent(k), MATMUL_TILES["k"]))
    tiles = [rv for rv in (*outer, i0, j0) if rv is not None]
    order = [*tiles, *(rv for rv in (k0, i1, k1) if rv is not None), j1]
    sch.reorder(*order)
    if tiles:
        accumulator = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(accumulator, tiles[-1])
        _inline_epilogue(sch, accumulator)
    # The row tiles of a dynamic row count run in parallel on their own: fused with other
    # loops, the tile's guard would not be linear in the parallel loop, and LoopPartition
    # could not run the full tiles without it.
    _parallel(sch, (outer or [i0]) if rows else tiles, nest.known_work())
    sch.vectorize(j1)
    sch.decompose_reduction(block, k0 if k0 is not None else k1)
    return True


def schedule_dense(sch: Schedule, block: BlockRV) -> bool:
    """A 2x8 block of dot products in a local tile with k innermost, column tiles outside row
    tiles, the elementwise epilogue folded into the write-back, parallel outer, fastmath."""
    nest = _nest(sch, block)
    if nest is None:
        return False
    pattern = _contraction(nest.block)
    if pattern is None or pattern.b_contiguous_in_j:
        return False
    i, j, k = (nest.loop_of[v] for v in (pattern.i, pattern.j, pattern.k))
    if k != len(nest.loops) - 1 or (i, j) != (k - 2, k - 1):
        return False
    # A dynamic row count (a batch size) is split like a static one: the partial last tile's
    # predicate, which would guard every multiply-add inside the k loop (LLVM then neither
    # vectorizes the dot products nor keeps the accumulators in registers: 12x slower),
    # stays on that tile only (LoopPartition).
    rows = _factor(nest.extent(i), DENSE_TILES["i"])
    if nest.extent(i) is None:
        rows = DENSE_TILES["i"][0]
    cols = _factor(nest.extent(j), DENSE_TILES["j"])
    if (rows is None and cols is None) or not _is_parallel_work(nest):
        # One dot product at a time, summed in place: no accumulator tile. Outside a parallel
        # loop, a tile's local array is allocated anew for every tile and LLVM keeps its
        # elements in memory (measured 3.5x slower for 64x10x128, 3x for 8x16x96).
        tiles = [*nest.loop_rvs[:k]]
    else:
        i0, i1 = _split(sch, nest.loop_rvs[i], rows)
        j0, j1 = _split(sch, nest.loop_rvs[j], cols)
        # Column tiles outside the rows: the 8 rows of B (the weights) that a column tile reads
        # stay in L1 while every row of A passes by, instead of all of B streaming through the
        # cache again for each row of A (2x faster at 64 rows of a 128x784 layer).
        tiles = [*nest.loop_rvs[:i], j0 or j1, i0 or i1]
        dot_product_tile(
            sch, block, tiles, nest.loop_rvs[k], [rv for rv in (i1, j1) if rv not in tiles]
        )
    _parallel(sch, _static_below_first(sch, tiles), nest.known_work())
    # The dot products vectorize only when LLVM may reorder the float additions.
    sch.annotate(block, "fastmath", True)
    sch.decompose_reduction(block, nest.loop_rvs[k])
    return True


def schedule_sliding_window(sch: Schedule, block: BlockRV) -> bool:
    """A register tile of (F output channels) x (a row of X outputs) accumulated over all
    reduction loops, the row vectorized, the channel tile unrolled, parallel outer."""
    nest = _nest(sch, block)
    if nest is None:
        return False
    window = _sliding_window(nest)
    if window is None:
        return False
    f, x = window
    x_extent = nest.extent(x)
    if x_extent is None:
        return False
    f0, f1 = _split(sch, nest.loop_rvs[f], _factor(nest.extent(f), WINDOW_TILES["f"]))
    x0, x1 = _split(sch, nest.loop_rvs[x], _columns(x_extent, WINDOW_TILES["x"]))
    reductions = [nest.loop_rvs[n] for n in _reduction_loops(nest)]
    # Without a channel factor the channel loop stays outside, whole; the row is always the
    # innermost loop, split when it is long.
    outer_of = {f: f0 if f0 is not None else f1, x: x0}
    spatial = nest.loop_rvs[: len(nest.loops) - len(reductions)]
    tiles = [outer_of.get(n, rv) for n, rv in enumerate(spatial)]
    tiles = [rv for rv in tiles if rv is not None]
    inner = [f1, x1] if f0 is not None else [x1]
    sch.reorder(*tiles, *reductions, *inner)
    accumulator = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(accumulator, tiles[-1])
    _inline_epilogue(sch, accumulator)
    _parallel(sch, _static_below_first(sch, tiles), nest.known_work())
    if f0 is not None:
        sch.unroll(f1)
    sch.vectorize(x1)
    sch.decompose_reduction(block, reductions[0])
    return True


def _reduction_loops(nest: _Nest) -> list[int]:
    return sorted(nest.loop_of[id(v)] for v in _reduce_vars(nest.block))


def _sliding_window(nest: _Nest) -> tuple[int, int] | None:
    """(f, x) loop positions of a convolution-like reduction ``Out[.., f, .., x] += D[..] *
    W[..]``: the spatial loops in the output's index order, then the reductions; ``x``, the
    output's contiguous axis, indexes the data ``D`` and not the weights ``W``; ``f`` indexes
    the weights and not the data (a convolution's output channel, a matmul's row)."""
    block = nest.block
    store = block.body
    if not isinstance(store, S.BufferStore) or block.init is None or not _reduce_vars(block):
        return None
    out = _var_indices(store)
    reductions = _reduction_loops(nest)
    if out is None or len(out) < 2 or len(out) + len(reductions) != len(nest.loops):
        return None
    if [nest.loop_of[v] for v in out] != list(range(len(out))) or reductions[0] != len(out):
        return None
    inputs = [load for load in _loads(store.value) if load.buffer is not store.buffer]
    if len(inputs) != 2:
        return None
    x = out[-1]
    for data, weights in (inputs, inputs[::-1]):
        data_vars, weight_vars = _index_vars(data), _index_vars(weights)
        if x not in data_vars or x in weight_vars:
            continue
        channels = [v for v in out[:-1] if v in weight_vars and v not in data_vars]
        if channels:
            return nest.loop_of[channels[-1]], nest.loop_of[x]
    return None


def _index_vars(load: E.BufferLoad) -> set[int]:
    found: set[int] = set()
    for index in load.indices:
        post_order_visit(index, lambda n: found.add(id(n)) if isinstance(n, E.Var) else None)
    return found


def dot_product_tile(
    sch: Schedule,
    block: BlockRV,
    tiles: Sequence[LoopRV],
    reduction: LoopRV,
    inner: Sequence[LoopRV],
) -> None:
    """Order the loops (tiles, reduction, inner) and give each step of the ``tiles`` a local
    tile of ``inner`` dot products: the inner loops are unrolled, so each product has its own
    accumulator and the reduction runs innermost; the tile's write-back also computes the
    elementwise epilogue. (The dense rule, and the default search space with drawn tiles.)"""
    sch.reorder(*tiles, reduction, *inner)
    accumulator = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(accumulator, tiles[-1])
    _inline_epilogue(sch, accumulator)
    for rv in inner:
        sch.unroll(rv)


def _inline_epilogue(sch: Schedule, writeback: BlockRV) -> None:
    """Fold the elementwise consumers of a tile's result (bias, activation) into the block
    that writes the tile back, so the result is stored once, finished."""
    while len(consumers := sch.get_consumers(writeback)) == 1:
        try:
            sch.reverse_compute_inline(consumers[0])
        except ScheduleError:
            return  # not a pointwise consumer: it stays a loop nest of its own


def _static_below_first(sch: Schedule, loops: Sequence[LoopRV]) -> list[LoopRV]:
    """The leading ``loops`` that fuse without dividing by a run-time extent: the first, then
    each next one while its extent is known. (Fusing the column tiles with a dynamic row loop
    recovers the row as ``fused % n``, a run-time division in the loop body; that dense kernel
    measured 1.3x slower.)"""
    fusable = list(loops[:1])
    for rv in loops[1:]:
        if not isinstance(sch.loop(rv).extent, E.IntImm):
            break
        fusable.append(rv)
    return fusable


def schedule_elementwise(sch: Schedule, block: BlockRV) -> bool:
    """Vectorize the last loop (split by a vector width), fuse the others and run them in
    parallel."""
    nest = _nest(sch, block)
    if nest is None or not _is_spatial(nest.block):
        return False
    *outer, last = nest.loop_rvs
    extent = nest.extent(len(nest.loops) - 1)
    if extent is None:
        # The contiguous loop's length is only known at run time: no literal vector width.
        _parallel(sch, nest.loop_rvs, nest.known_work())
        return True
    lanes = _factor(extent, VECTOR_LANES)
    if lanes is not None:
        last_outer, last = sch.split(last, [None, lanes])
        outer.append(last_outer)
    _parallel(sch, outer, nest.known_work())
    sch.vectorize(last)
    return True


def schedule_row_reduction(sch: Schedule, block: BlockRV) -> bool:
    """Reduction loops innermost: each row accumulates in local variables (fastmath, so
    LLVM vectorizes the sum), the spatial loops (fused) run in parallel."""
    nest = _nest(sch, block)
    if nest is None or _is_spatial(nest.block):
        return False
    reduce = {nest.loop_of[id(v)] for v in _reduce_vars(nest.block)}
    spatial = [rv for n, rv in enumerate(nest.loop_rvs) if n not in reduce]
    if not spatial or max(n for n in range(len(nest.loops)) if n not in reduce) > min(reduce):
        return False
    sch.annotate(block, "accumulate_locally", True)
    sch.annotate(block, "fastmath", True)
    _parallel(sch, spatial, nest.known_work())
    return True


def _is_parallel_work(nest: _Nest) -> bool:
    """Whether the nest's known work is enough for ``parallel`` (see ``_parallel``)."""
    return nest.known_work() >= PARALLEL_MIN_WORK


def _parallel(
    sch: Schedule, loops: Sequence[LoopRV], work: int, min_work: int = PARALLEL_MIN_WORK
) -> None:
    if not loops or work < min_work:
        return
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    sch.parallel(fused)


INLINE_RULES: list[Rule] = [inline_elementwise_but_padding]
LOOP_RULES: list[Rule] = [
    schedule_matmul,
    schedule_dense,
    schedule_sliding_window,
    schedule_row_reduction,
    schedule_elementwise,
]


# ---------------------------------------------------------------------- driver
def _try(sch: Schedule, rule: Rule, name: str) -> Schedule:
    """``sch`` after ``rule`` on the block ``name``; unchanged when the rule does not apply or
    fails. (The handle comes from ``get_block``, recorded, so the trace can be stored.)"""
    attempt = sch.copy()
    try:
        return attempt if rule(attempt, attempt.get_block(name)) else sch
    except ScheduleError:
        return sch


def _block_names(sch: Schedule) -> list[str]:
    return [realize.block.name_hint for realize in sch.walk_blocks(sch.func.body)]


def schedule_for_cpu(func: PrimFunc) -> Schedule:
    """The default CPU schedule of ``func`` as a Schedule (``sch.trace.show()`` prints its
    steps; its trace can be stored and replayed like a tuned one)."""
    sch = Schedule(func)
    for rules in (INLINE_RULES, LOOP_RULES):
        for name in _block_names(sch):
            if name not in _block_names(sch):
                continue  # inlined by an earlier step
            for rule in rules:
                after = _try(sch, rule, name)
                if after is not sch:
                    sch = after
                    break
    return sch


def schedule_prim_func(func: PrimFunc) -> PrimFunc:
    """``func`` with the default rules applied to each of its blocks; a reduction over a
    dynamic batch whose rows are tiled (a partial tile guarded) also gets the program of a
    batch of one (see ``with_batch_of_one``)."""
    scheduled = schedule_for_cpu(func).func
    batch = _dynamic_batch(func)
    if batch is not None and _guards_on(scheduled, batch):
        scheduled = with_batch_of_one(
            scheduled, schedule_for_cpu(specialize(func, batch, 1)).func, batch
        )
    return scheduled.with_attr("tir.is_scheduled", True)


class _BatchOfOne(RenewDefs):
    """The batch-of-one program on the general program's parameter buffers, with variables
    of its own (the two programs would share their iter vars and loop variables otherwise)."""

    def __init__(self, to_general: dict[int, Buffer]):
        super().__init__()
        self.to_general = to_general

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.to_general.get(id(buffer), buffer)


def _guards_on(func: PrimFunc, var: E.Var) -> bool:
    """Whether a block of ``func`` has a predicate on ``var`` (a partial tile of rows)."""
    return _contains(
        func.body,
        lambda n: (
            isinstance(n, S.BlockRealize) and any(v is var for v in collect_vars(n.predicate))
        ),
    )


def _dynamic_batch(func: PrimFunc) -> E.Var | None:
    """The one symbolic dim of ``func``'s buffers, when it has one and a reduction block."""
    dims = collect_vars([buffer.shape for buffer in func.buffer_map.values()])
    if len(dims) != 1:
        return None
    has_reduction = _contains(func.body, lambda n: isinstance(n, S.Block) and _reduce_vars(n))
    return dims[0] if has_reduction else None


def specialize(func: PrimFunc, var: E.Var, value: int) -> PrimFunc:
    """``func`` with the symbolic dim ``var`` fixed to ``value``: in its buffers' shapes,
    loop extents and indices (as TVM's ``PrimFunc.specialize`` fixes a shape variable)."""
    buffers = [func.buffer_map[p] for p in func.params if p in func.buffer_map]
    body, *new_buffers = substitute((func.body, *buffers), {var: value})
    params_with_buffers = [p for p in func.params if p in func.buffer_map]
    buffer_map = dict(zip(params_with_buffers, new_buffers))
    return func.with_fields(body=body, buffer_map=buffer_map)


def with_batch_of_one(general: PrimFunc, one: PrimFunc, batch: E.Var) -> PrimFunc:
    """``general`` running ``one`` (its specialization to ``batch == 1``, scheduled) when the
    arguments have a batch of one::

        if n == 1:
            <the loops scheduled for a batch of 1: no partial tile, no guard>
        else:
            <the loops scheduled for any n>

    A batch of one is the common case a dynamic batch serves (one request), and the general
    program would run it as the partial last tile of its row tiles, under a guard that costs
    10x in the dense rule's dot products. Both programs sit in one kernel: one compilation,
    and the choice is a single comparison."""
    to_general = {
        id(one.buffer_map[p]): general.buffer_map[p]
        for p in general.params
        if p in general.buffer_map
    }

    root, special_root = general.body, _BatchOfOne(to_general).visit_stmt(one.body)
    assert isinstance(root, S.BlockRealize) and isinstance(special_root, S.BlockRealize)
    body = S.IfThenElse(
        E.EQ(batch, E.IntImm(batch.dtype, 1)), special_root.block.body, root.block.body
    )
    block = root.block.with_fields(
        body=body, alloc_buffers=(*special_root.block.alloc_buffers, *root.block.alloc_buffers)
    )
    return general.with_body(root.with_fields(block=block))


def default_schedule(func_or_mod: PrimFunc | IRModule) -> PrimFunc | IRModule:
    """Apply the default CPU schedule to a PrimFunc, or to every unscheduled PrimFunc of a
    module (those without the attribute ``tir.is_scheduled``)."""
    if isinstance(func_or_mod, PrimFunc):
        return schedule_prim_func(func_or_mod)
    return DefaultSchedule()(func_or_mod)


def _needs_schedule(func: BaseFunc) -> bool:
    return isinstance(func, PrimFunc) and not func.attrs.get("tir.is_scheduled")


@transform.function_pass_for(_needs_schedule)(opt_level=0, name="tir.DefaultSchedule")
class DefaultSchedule:
    """Module pass: the default CPU schedule for every PrimFunc nobody scheduled."""

    def transform_function(
        self, func: PrimFunc, mod: IRModule, ctx: transform.PassContext
    ) -> PrimFunc:
        return schedule_prim_func(func)


__all__ = [
    "DefaultSchedule",
    "default_schedule",
    "dot_product_tile",
    "inline_elementwise",
    "inline_elementwise_but_padding",
    "schedule_dense",
    "schedule_elementwise",
    "schedule_for_cpu",
    "schedule_matmul",
    "schedule_prim_func",
    "schedule_row_reduction",
    "schedule_sliding_window",
]
