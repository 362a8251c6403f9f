"""Search spaces: the random programs a tuner chooses from, and their neighbours.

A *search space* is a schedule that samples: each run with another seed draws other tile
sizes, locations and choices, and ``sch.trace`` records every draw (its *decision*), so any
program of the space is rebuilt by replaying its trace on ``tir.Schedule(func)``.

* :class:`ScheduleFnSpace` is a space written by hand, a *stochastic schedule function* as in
  the MLC course::

      def stochastic_schedule_mm(sch: tir.Schedule):
          block_C = sch.get_block("C", "main")
          i, j, k = sch.get_loops(block=block_C)
          j_factors = sch.sample_perfect_tile(loop=j, n=2)
          j_0, j_1 = sch.split(loop=j, factors=j_factors)
          sch.reorder(i, j_0, k, j_1)
          sch.decompose_reduction(block_C, k)

      space = ScheduleFnSpace(stochastic_schedule_mm)
      sch = space.sample(func, seed=3)

* :func:`default_space` derives a space for any PrimFunc, in the spirit of TVM's
  MetaSchedule rules (multi-level tiling, random compute location, parallel/vectorize):

  - ``"llvm"``: each reduction block whose spatial loops come before its reduction loops (matmul,
    dense, convolution; extents known at compile time) gets *multi-level tiling*. The vector
    width of the last (contiguous) spatial loop is drawn by ``sample_categorical`` among 4..64
    (as part of a perfect tiling it would mostly be 1 or 2, and numba's speed depends on it
    most); the other spatial loops are split in 3 levels, the rest of the last one in 2 and every
    reduction loop in 2 by ``sample_perfect_tile``, and ordered (spatial level 0, spatial level
    1, reduction level 0, spatial level 2, reduction level 1, vector): the reduction runs
    outside the contiguous loop, which is vectorized. A local accumulator tile
    (``cache_write`` to "local" + ``reverse_compute_at``) goes at spatial level 0 or 1, or is
    left out; an elementwise epilogue (bias, activation) is folded into its write-back. The
    fused level-0 loops run in ``parallel``, or, for a nest of less than
    ``ALWAYS_PARALLEL_WORK`` iterations, may stay serial (starting threads costs as much as
    a small kernel's run). A dense block (``C[i, j] += A[i, k] * B[j, k]``,
    both inputs contiguous along k) may instead draw *dot products*: a tile of up to 8x8 dot
    products, unrolled inside k so that k runs innermost with one accumulator each, annotated
    "fastmath" so that LLVM vectorizes the sums (the default schedule's dense rule, with its
    tile drawn). A producer the block reads (padding, a transpose)
    goes where ``sample_compute_location`` draws (inline, a loop of the tiles, or its own nest).
    Other elementwise nests: the last loop split by a sampled perfect tiling and vectorized, the
    rest fused and parallel (or serial, drawn likewise). Other intermediate elementwise blocks
    are inlined.
  - ``"cuda"``: the reduction blocks' spatial loops tiled in 3 levels (grid, threads, per thread,
    up to ``MAX_PER_THREAD`` each), the grid levels fused and bound to ``blockIdx.x``, the thread
    levels to ``threadIdx.x`` (a draw of more than 1024 threads is drawn again), the reduction
    loops between the threads and the per-thread tile (the course's local blocking), the tile
    accumulated locally or not; every other nest fused and split by a thread count drawn by
    ``sample_categorical``.

  The default space also *hints* at the default schedule's program (``space.hints(func)``,
  a schedule without decisions): the searches measure it first, so tuning starts from what
  an untuned build runs. ``default_space(target, hint_default_schedule=False)`` leaves it out.

  Where the accumulator goes (CPU, GPU) and parallel or serial (CPU) are choices of
  structure, not trace decisions: like TVM's separate design spaces, a sample draws them, a
  mutation keeps them. There is no unroll choice: the code generator leaves unrolling to
  numba/LLVM (``sch.unroll`` only marks the loop), so it would not change the program.

A drawn decision that makes a primitive fail is drawn again from another seed (up to
``MAX_SAMPLE_TRIES`` times). Handles in the traces come from ``get_block``/``get_loops``, so a
trace stored as JSON replays.

:func:`mutate` gives a *neighbour* of a program: its trace with one decision drawn anew, replayed
(what the evolutionary search breeds programs with). A decision drawn anew can change the length
of a loop a later tiling divides (the vector width); the replay repairs that tiling.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, Protocol, cast

from mlckit.errors import MLCError, ScheduleError
from mlckit.ir import IRModule
from mlckit.target import Target
from mlckit.tir import PrimFunc, Schedule
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.schedule.default_gpu_schedule import _spatial_chain, schedule_for_gpu
from mlckit.tir.schedule.default_schedule import (
    _block_names,
    _contraction,
    _inline_epilogue,
    _is_spatial,
    _nest,
    _parallel,
    _reduce_vars,
    dot_product_tile,
    inline_elementwise,
    schedule_for_cpu,
)
from mlckit.tir.schedule.primitives.sampling import (
    _compute_locations,
    _count_tilings,
    _draw_tiling,
)
from mlckit.tir.schedule.schedule import BlockRV, LoopRV
from mlckit.tir.schedule.trace import SAMPLING_KINDS, Instruction, Trace
from mlckit.tir.stmt_functor import post_order_visit

from .measure import the_prim_func

# How many seeds a space tries before it gives up on a function (a drawn decision can make a
# primitive fail, e.g. too many GPU threads).
MAX_SAMPLE_TRIES = 16
# Tile size limits: the innermost contiguous loop (vector width), other spatial loops, reductions.
MAX_VECTOR = 64
VECTOR_WIDTHS = (1, 2, 4, 8, 16, 32, 64)
MAX_INNER_SPATIAL = 16
MAX_INNER_REDUCTION = 16
# The rows and columns of a block of dot products (each an accumulator in registers).
MAX_DOT_TILE = 8
# Where the local accumulator tile goes: at spatial level 0, level 1, or no accumulator.
ACCUMULATOR_LEVELS = (0, 1, -1)
# Work (iterations) from which a CPU nest always runs in parallel; below, serial is drawn too.
ALWAYS_PARALLEL_WORK = 1 << 22
# Below this, a nest stays serial even when parallel is drawn: the search measures parallel
# loops from a smaller size than the default schedule starts them at (its PARALLEL_MIN_WORK).
DRAWN_PARALLEL_MIN_WORK = 1 << 14
MAX_THREADS_PER_BLOCK = 1024
THREAD_COUNTS = (32, 64, 128, 256, 512)
MAX_PER_THREAD = 8


class SearchSpace(Protocol):
    """A set of programs of a PrimFunc, drawn at random. A space may also have a method
    ``hints(func) -> list[Schedule]``: programs the searches measure before any sample (the
    default space's is the default schedule's program)."""

    def sample(self, func: PrimFunc | IRModule, seed: int) -> Schedule:
        """A random program of the space: the same ``seed`` gives the same program."""
        ...


def _sample_with_retries(
    func_or_mod: PrimFunc | IRModule,
    seed: int,
    generate: Callable[[Schedule], Any],
    what: str,
) -> Schedule:
    """``generate`` run on a fresh schedule seeded with ``seed``; when a drawn decision makes a
    primitive fail, again with further seeds derived from ``seed`` (a bounded number of times)."""
    func = the_prim_func(func_or_mod)
    seeds = random.Random(seed)
    current = seed
    error: ScheduleError | None = None
    for _ in range(MAX_SAMPLE_TRIES):
        sch = Schedule(func, seed=current)
        try:
            result = generate(sch)
        except ScheduleError as err:
            error = err
            current = seeds.randrange(1 << 31)
            continue
        return result if isinstance(result, Schedule) else sch
    raise ScheduleError(
        f"{what}: no valid program in {MAX_SAMPLE_TRIES} draws from seed {seed}; the last "
        f"draw failed with: {error}"
    )


# A stochastic schedule function: it schedules ``sch`` in place (sampling with ``sch.sample_*``)
# and returns nothing or the schedule.
ScheduleFn = Callable[[Schedule], Schedule | None]


class ScheduleFnSpace:
    """The space of a stochastic schedule function: each sample runs it on a fresh schedule
    seeded with the sample's seed."""

    def __init__(self, fn: ScheduleFn):
        if not callable(fn):
            raise MLCError(
                f"ScheduleFnSpace takes a function of a tir.Schedule, not {type(fn).__name__}"
            )
        self.fn = fn

    def sample(self, func: PrimFunc | IRModule, seed: int) -> Schedule:
        name = getattr(self.fn, "__name__", "the schedule function")
        return _sample_with_retries(func, seed, self.fn, name)

    def __repr__(self) -> str:
        return f"ScheduleFnSpace({getattr(self.fn, '__name__', self.fn)!r})"


# ---------------------------------------------------------------------- the default space
class _Tiled:
    """A multi-level tiled reduction block: its loops by level."""

    def __init__(self, spatial: list[list[LoopRV]], reduction: list[list[LoopRV]]):
        self.spatial = spatial  # spatial[level][axis]
        self.reduction = reduction  # reduction[level][axis]


def _reduction_nest(sch: Schedule, block: BlockRV) -> tuple[list[LoopRV], list[LoopRV]] | None:
    """(spatial loops, reduction loops) of a reduction block whose spatial loops all come
    before its reduction loops, with extents known at compile time; None otherwise."""
    nest = _nest(sch, block)
    if nest is None or _is_spatial(nest.block) or nest.block.init is None:
        return None
    reduce = sorted(nest.loop_of[id(v)] for v in _reduce_vars(nest.block))
    spatial = [n for n in range(len(nest.loops)) if n not in reduce]
    if not spatial or not reduce or max(spatial) > min(reduce):
        return None
    if any(nest.extent(n) is None for n in range(len(nest.loops))):
        return None  # a symbolic extent cannot be tiled perfectly
    return [nest.loop_rvs[n] for n in spatial], [nest.loop_rvs[n] for n in reduce]


def _tile(
    sch: Schedule, loops: Sequence[LoopRV], levels: int, limits: Sequence[int]
) -> list[list[LoopRV]]:
    """Split each of ``loops`` into ``levels`` loops by sampled perfect tilings; the result is
    indexed [level][loop]."""
    by_level: list[list[LoopRV]] = [[] for _ in range(levels)]
    for loop, limit in zip(loops, limits):
        factors = sch.sample_perfect_tile(loop, n=levels, max_innermost_factor=limit)
        for level, part in enumerate(sch.split(loop, factors)):
            by_level[level].append(part)
    return by_level


def _branch(sch: Schedule, options: Sequence[Any]) -> Any:
    """A choice of structure, drawn from the schedule's seed but not a trace decision: the
    trace records only the primitives of the option taken, so a replay with changed decisions
    keeps the option (like TVM's separate design spaces, which mutation does not cross)."""
    return random.Random(sch.fork_seed()).choice(list(options))


def _parallel_or_serial(sch: Schedule, loops: Sequence[LoopRV], work: int) -> None:
    """Fuse ``loops`` and run them in parallel; below ``ALWAYS_PARALLEL_WORK`` iterations,
    leaving them serial is drawn too (a choice of structure): starting the threads of a
    parallel loop costs microseconds, as much as a small kernel's whole run."""
    if work >= ALWAYS_PARALLEL_WORK or _branch(sch, ("parallel", "serial")) == "parallel":
        _parallel(sch, loops, work, min_work=DRAWN_PARALLEL_MIN_WORK)


def _fuse(sch: Schedule, loops: Sequence[LoopRV]) -> LoopRV:
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _producers_to_place(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    """The spatial intermediate blocks ``block`` reads (padding, a transpose)."""
    outputs = {id(buf) for buf in sch.func.buffer_map.values()}
    found = []
    for producer in sch.get_producers(block):
        store = sch.block_realize(producer).block.body
        if _is_spatial(sch.get(producer)) and id(getattr(store, "buffer", None)) not in outputs:
            found.append(producer)
    return found


def _place(sch: Schedule, producers: Sequence[BlockRV]) -> None:
    """Put each producer where ``sample_compute_location`` draws: inline, under a loop of its
    consumer, or left at the root (``compute_at`` takes all three)."""
    for producer in producers:
        sch.compute_at(producer, sch.sample_compute_location(producer))


def _cpu_reduction(sch: Schedule, block: BlockRV) -> bool:
    """Multi-level tiling of a reduction block for the CPU, or blocks of dot products where
    both inputs are contiguous along the reduction (see the module docstring)."""
    nest = _reduction_nest(sch, block)
    if nest is None:
        return False
    producers = _producers_to_place(sch, block)
    spatial_loops, reduction_loops = nest
    work = math.prod(sch.loop(loop).extent.value for loop in (*spatial_loops, *reduction_loops))
    pattern = _contraction(sch.get(block))
    dense = pattern is not None and not pattern.b_contiguous_in_j and len(reduction_loops) == 1
    if dense and _branch(sch, ("dot products", "vector along j")) == "dot products":
        first_reduction = _dot_products(sch, block, spatial_loops, reduction_loops[0], work)
    else:
        first_reduction = _vector_tiles(sch, block, spatial_loops, reduction_loops, work)
    _place(sch, producers)
    sch.decompose_reduction(block, first_reduction)
    return True


def _vector_tiles(
    sch: Schedule,
    block: BlockRV,
    spatial_loops: list[LoopRV],
    reduction_loops: list[LoopRV],
    work: int,
) -> LoopRV:
    """Spatial loops in 3 levels, reductions in 2, the contiguous loop vectorized innermost;
    the outermost reduction loop."""
    *outer, last = spatial_loops
    # The vector width is a choice of its own: drawn as part of a perfect tiling, most draws
    # give the contiguous loop a width of 1 or 2, and numba's speed depends on it most.
    extent = sch.loop(last).extent.value
    widths = [w for w in VECTOR_WIDTHS if extent % w == 0]
    widths = [w for w in widths if w >= 4] or widths
    rest, vector = sch.split(last, [None, sch.sample_categorical(widths, [1.0] * len(widths))])
    spatial = _tile(sch, outer, 3, [MAX_INNER_SPATIAL] * len(outer))
    for level, part in enumerate(_tile(sch, [rest], 2, [MAX_INNER_SPATIAL])):
        spatial[level] += part
    reduction = _tile(sch, reduction_loops, 2, [MAX_INNER_REDUCTION] * len(reduction_loops))
    inner = spatial[2]
    sch.reorder(*spatial[0], *spatial[1], *reduction[0], *inner, *reduction[1], vector)
    level = _branch(sch, ACCUMULATOR_LEVELS)
    if level >= 0:
        writeback = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(writeback, spatial[level][-1])
        _inline_epilogue(sch, writeback)
    _parallel_or_serial(sch, spatial[0], work)
    sch.vectorize(vector)
    return reduction[0][0]


def _dot_products(
    sch: Schedule, block: BlockRV, spatial_loops: list[LoopRV], reduction: LoopRV, work: int
) -> LoopRV:
    """A tile of dot products (``C[i, j] += A[i, k] * B[j, k]``) per step of the outer loops:
    its rows and columns drawn up to ``MAX_DOT_TILE``, unrolled inside the reduction loop so
    that each dot product has its accumulator, the reduction innermost after unrolling (LLVM
    vectorizes it when the block is annotated "fastmath"), the column tiles outside the row
    tiles, the epilogue folded into the tile's write-back, the outer tiles parallel."""
    outer, inner = _tile(sch, spatial_loops, 2, [MAX_DOT_TILE] * len(spatial_loops))
    # Column tiles outside the rows: the weight rows of a column tile stay in cache while the
    # rows of A pass by.
    outer[-2:] = outer[-2:][::-1]
    dot_product_tile(sch, block, outer, reduction, inner)
    _parallel_or_serial(sch, outer, work)
    sch.annotate(block, "fastmath", True)
    return reduction


def _cpu_elementwise(sch: Schedule, block: BlockRV) -> bool:
    """Split the last loop by a sampled vector width and vectorize it; fuse the loops outside
    and run them in parallel when the work pays for threads."""
    nest = _nest(sch, block)
    if nest is None or not _is_spatial(nest.block) or nest.extent(len(nest.loops) - 1) is None:
        return False
    if _feeds_reduction(sch, block):
        return False  # placed by sample_compute_location when its consumer is tiled
    *outer, last = nest.loop_rvs
    last_outer, lanes = sch.split(
        last, sch.sample_perfect_tile(last, n=2, max_innermost_factor=MAX_VECTOR)
    )
    _parallel_or_serial(sch, [*outer, last_outer], nest.known_work())
    sch.vectorize(lanes)
    return True


def _gpu_reduction(sch: Schedule, block: BlockRV) -> bool:
    """Tile the spatial loops as (grid, threads, per thread), bind, and run the reduction
    outside the per-thread tile: each thread accumulates its tile (in registers when the
    accumulator is local, a drawn choice) and reuses every value of A and B it reads across a
    row or column of it."""
    nest = _reduction_nest(sch, block)
    if nest is None:
        return False
    spatial_loops, reduction_loops = nest
    grid, threads, per_thread = _tile(sch, spatial_loops, 3, [MAX_PER_THREAD] * len(spatial_loops))
    sch.reorder(*grid, *threads, *reduction_loops, *per_thread)
    block_x, thread_x = _fuse(sch, grid), _fuse(sch, threads)
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    if _branch(sch, (True, False)):
        writeback = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(writeback, thread_x)
        _inline_epilogue(sch, writeback)
    sch.decompose_reduction(block, reduction_loops[0])
    return True


def _gpu_bind(sch: Schedule, block: BlockRV) -> bool:
    """Fuse the outer spatial loops of a nest and split them by a sampled thread count."""
    loops = sch.get_loops(block)
    if not loops or any(sch.get(loop).thread_binding is not None for loop in loops):
        return False
    chain = loops[: len(_spatial_chain(sch.get(loops[0])))]
    if not chain:
        return False
    fused = _fuse(sch, chain)
    extent = sch.get(fused).extent
    counts = list(THREAD_COUNTS)
    if isinstance(extent, E.IntImm):
        counts = [c for c in THREAD_COUNTS if c < extent.value] or [extent.value]
    threads = sch.sample_categorical(counts, [1.0] * len(counts))
    block_x, thread_x = sch.split(fused, [None, threads])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    return True


def _inline_intermediates(sch: Schedule, keep: Callable[[BlockRV], bool]) -> None:
    """Inline every elementwise block writing an intermediate buffer, but those ``keep``
    names."""
    for name in _block_names(sch):
        if name not in _block_names(sch):
            continue  # inlined already
        # Handles from get_block: a replay maps them to the new schedule's (they follow renames).
        block = sch.get_block(name)
        if keep(block):
            continue
        # One that cannot be inlined (it reads what it writes, ...) stays a nest of its own.
        with contextlib.suppress(ScheduleError):
            inline_elementwise(sch, block)


def _feeds_reduction(sch: Schedule, block: BlockRV) -> bool:
    return any(not _is_spatial(sch.get(c)) for c in sch.get_consumers(block))


def _apply_rules(sch: Schedule, rules: Sequence[Callable[[Schedule, BlockRV], bool]]) -> None:
    """Each block (those still there) gets the first rule that applies to it."""
    for name in _block_names(sch):
        if name in _block_names(sch):
            block = sch.get_block(name)
            for rule in rules:
                if rule(sch, block):
                    break


def _check_threads(sch: Schedule) -> None:
    """Raise when a thread block of the program has more threads than CUDA allows (tile sizes
    drawn for the thread loops multiply up)."""
    threads = [
        loop
        for loop in _loops(sch.func.body)
        if loop.thread_binding is not None
        and loop.thread_binding.thread_tag.startswith("threadIdx")
    ]
    count = math.prod(loop.extent.value for loop in threads if isinstance(loop.extent, E.IntImm))
    if count > MAX_THREADS_PER_BLOCK:
        raise ScheduleError(
            f"{count} threads per block drawn; a CUDA block has at most {MAX_THREADS_PER_BLOCK}"
        )


def _loops(stmt: Any) -> list[S.For]:
    found: list[S.For] = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, S.For) else None)
    return found


class DefaultSpace:
    """The space :func:`default_space` returns for a target (see the module docstring)."""

    def __init__(self, target: Target, hint_default_schedule: bool = True):
        self.target = target
        self.hint_default_schedule = hint_default_schedule

    def hints(self, func: PrimFunc | IRModule) -> list[Schedule]:
        """The default schedule's program (what an untuned build runs), to measure first."""
        if not self.hint_default_schedule:
            return []
        func = the_prim_func(func)
        if self.target.is_gpu:
            return [schedule_for_gpu(func)]
        return [schedule_for_cpu(func)]

    def sample(self, func: PrimFunc | IRModule, seed: int) -> Schedule:
        generate = self._gpu if self.target.is_gpu else self._cpu
        return _sample_with_retries(
            func, seed, generate, f"default space for {self.target.kind.name}"
        )

    @staticmethod
    def _cpu(sch: Schedule) -> None:
        # Producers of a reduction wait for the tiling (sample_compute_location places them).
        _inline_intermediates(sch, keep=lambda block: _feeds_reduction(sch, block))
        _apply_rules(sch, [_cpu_reduction, _cpu_elementwise])

    @staticmethod
    def _gpu(sch: Schedule) -> None:
        _inline_intermediates(sch, keep=lambda block: False)
        _apply_rules(sch, [_gpu_reduction, _gpu_bind])
        for realize in sch.walk_blocks(sch.func.body):
            if not any(loop.thread_binding is not None for loop in sch.loops_above(realize)):
                raise ScheduleError(
                    f"default space for cuda: block {realize.block.name_hint!r} is not bound "
                    "to GPU threads"
                )
        _check_threads(sch)

    def __repr__(self) -> str:
        hint = "" if self.hint_default_schedule else ", hint_default_schedule=False"
        return f"default_space({self.target.kind.name!r}{hint})"


def default_space(target: Target | str, hint_default_schedule: bool = True) -> SearchSpace:
    """The default search space for ``target`` ("llvm" or "cuda"): multi-level tiling with
    sampled tile sizes, parallel/vectorize (llvm) or thread binding (cuda). With
    ``hint_default_schedule``, the searches measure the default schedule's program first (turn
    it off to see what the search finds on its own)."""
    target = Target(target) if not isinstance(target, Target) else target
    if target.default_schedule() is None:
        raise MLCError(
            f"default_space: no default search space for target {target.kind.name!r}, whose "
            "code runs as written; use 'llvm' or 'cuda', or write a ScheduleFnSpace"
        )
    return DefaultSpace(target, hint_default_schedule)


# ---------------------------------------------------------------------- mutation
def _other_tiling(inst: Instruction, rng: random.Random) -> list[int] | None:
    """Another perfect tiling with the step's ``n`` and ``max_innermost_factor``."""
    _, n, limit = inst.args
    old = list(inst.decision)
    extent = math.prod(old)
    choices = sum(
        _count_tilings(extent // d, n - 1) if n > 1 else 1
        for d in range(1, extent + 1)
        if extent % d == 0 and (limit == -1 or d <= limit)
    )
    if choices < 2:
        return None
    # _draw_tiling draws from a schedule's random generator; lend it ours.
    holder = cast(Schedule, SimpleNamespace(_rng=rng))
    while True:
        new = _draw_tiling(holder, extent, n, limit, "")
        if new != old:
            return new


def _other_category(inst: Instruction, rng: random.Random) -> int | None:
    _, probs = inst.args
    others = [i for i, p in enumerate(probs) if i != inst.decision and float(p) > 0]
    if not others:
        return None
    return rng.choices(others, weights=[float(probs[i]) for i in others])[0]


def _other_location(trace: Trace, index: int, func: PrimFunc, rng: random.Random) -> int | None:
    # The candidates depend on the program at that step: replay up to it.
    sch = Schedule(func)
    Trace(trace.instructions[: index + 1]).apply_to_schedule(sch)
    step = sch.trace.instructions[-1]
    others = [d for d in _compute_locations(sch, step.args[0]) if d != step.decision]
    return rng.choice(sorted(others)) if others else None


def mutate(
    sch_or_trace: Schedule | Trace | list[dict[str, Any]],
    func: PrimFunc | IRModule,
    rng: random.Random,
) -> Schedule | None:
    """A neighbour of a program: its trace (a Schedule's, a Trace, or ``Trace.as_json()``) with
    one sampling decision, chosen uniformly among those that have another value, drawn anew
    and replayed on a fresh ``tir.Schedule(func)``. None when no decision can change or the
    replay fails."""
    if isinstance(sch_or_trace, Schedule):
        trace = sch_or_trace.trace
    elif isinstance(sch_or_trace, Trace):
        trace = sch_or_trace
    else:
        trace = Trace.from_json(sch_or_trace)
    func = the_prim_func(func)
    steps = [n for n, inst in enumerate(trace.instructions) if inst.kind in SAMPLING_KINDS]
    rng.shuffle(steps)
    for index in steps:
        inst = trace.instructions[index]
        try:
            if inst.kind == "sample_perfect_tile":
                decision: Any = _other_tiling(inst, rng)
            elif inst.kind == "sample_categorical":
                decision = _other_category(inst, rng)
            else:
                decision = _other_location(trace, index, func, rng)
        except MLCError:
            return None
        if decision is None:
            continue
        neighbour = Schedule(func)
        try:
            trace.with_decision(inst, decision).apply_to_schedule(neighbour)
            _check_threads(neighbour)
        except MLCError:
            return None
        return neighbour
    return None


__all__ = [
    "DefaultSpace",
    "ScheduleFn",
    "ScheduleFnSpace",
    "SearchSpace",
    "default_space",
    "mutate",
]
