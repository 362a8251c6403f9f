"""Sampling: the random choices of a schedule (``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``).

A schedule that samples is a *search space*: each run with a different seed is a different
program, and the trace records what each sampling step drew (its *decision*) so the very same
program can be rebuilt::

    sch = tir.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    print(sch.trace)   # ... v4, v5 = sch.sample_perfect_tile(loop=l1, n=2, ..., decision=[16, 8])

    again = tir.Schedule(func)
    sch.trace.apply_to_schedule(again)   # decisions are reused: the same program

To explore, change one decision and replay (this is what a tuner's mutator does)::

    step = next(s for s in sch.trace if s.kind == "sample_perfect_tile")
    other = tir.Schedule(func)
    sch.trace.with_decision(step, [32, 4]).apply_to_schedule(other)

``sch.seed(n)`` (or ``Schedule(func, seed=n)``) makes fresh draws reproducible. Every sampling
primitive also takes ``decision=`` itself, to force a draw by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mlckit.errors import MLCError, ScheduleError

from ... import expr as E
from ..state import BlockRV, ExprRV, LoopRV, ScheduleState
from .compute_inline import compute_inline
from .compute_location import compute_at
from .queries import get_consumers

# Decisions of sample_compute_location that are not loop positions, as in TVM.
INLINE_DECISION = -2
ROOT_DECISION = -1


class LocationMark(str):
    """The compute location ``"root"`` or ``"inline"``: a str, so ``loc == "root"`` reads
    naturally, and a new object per draw, so that the trace names each draw apart."""


# ---------------------------------------------------------------------- sample_perfect_tile
def sample_perfect_tile(
    sch: ScheduleState,
    loop: LoopRV,
    n: int,
    max_innermost_factor: int = 16,
    decision: Sequence[int] | None = None,
) -> tuple[list[ExprRV], list[int]]:
    node = sch.loop(loop)
    name = repr(node.loop_var.name_hint)
    if not isinstance(node.extent, E.IntImm):
        raise ScheduleError(
            f"sample_perfect_tile: loop {name} has the symbolic extent {node.extent.script()}; "
            "only a constant extent can be tiled perfectly"
        )
    extent = node.extent.value
    n = int(n)
    limit = int(max_innermost_factor)
    if n < 1:
        raise ScheduleError(f"sample_perfect_tile: n={n}; ask for at least one tile size")
    if limit == 0 or limit < -1:
        raise ScheduleError(
            f"sample_perfect_tile: max_innermost_factor={limit} must be positive (or -1: no limit)"
        )
    if decision is not None:
        sizes = _repair_tiling([int(s) for s in decision], extent, n, name)
    else:
        sizes = _draw_tiling(sch, extent, n, limit, name)
    return [ExprRV(s) for s in sizes], sizes


def _repair_tiling(sizes: list[int], extent: int, n: int, name: str) -> list[int]:
    if len(sizes) != n or any(s < 1 for s in sizes):
        raise ScheduleError(
            f"sample_perfect_tile: the decision {sizes} for loop {name} must be {n} positive "
            "tile sizes"
        )
    left = extent
    for i in range(n - 1, 0, -1):
        if left % sizes[i] != 0:
            sizes[i] = left
        left //= sizes[i]
    sizes[0] = left
    return sizes


def _draw_tiling(sch: ScheduleState, extent: int, n: int, limit: int, name: str) -> list[int]:
    """A tiling drawn uniformly from all perfect tilings with innermost size <= ``limit``.

    The innermost size ``d`` is drawn first, weighted by how many tilings of ``extent // d``
    into ``n - 1`` sizes exist, then those are drawn uniformly: together, uniform.
    """
    if n == 1:
        if limit != -1 and extent > limit:
            raise ScheduleError(
                f"sample_perfect_tile: one tile of loop {name} is its whole extent {extent}, "
                f"more than max_innermost_factor={limit}"
            )
        return [extent]
    inner = [d for d in range(1, extent + 1) if extent % d == 0 and (limit == -1 or d <= limit)]
    weights = [_count_tilings(extent // d, n - 1) for d in inner]
    innermost = sch._rng.choices(inner, weights=weights)[0]
    return [*_draw_unlimited(sch, extent // innermost, n - 1), innermost]


def _draw_unlimited(sch: ScheduleState, extent: int, n: int) -> list[int]:
    # A tiling is a way to share out each prime's exponent among the n sizes, independently
    # per prime; sharing e items into n parts uniformly is "stars and bars": choose where the
    # n - 1 bars go among e + n - 1 places.
    sizes = [1] * n
    for prime, exponent in _factorize(extent).items():
        bars = sorted(sch._rng.sample(range(exponent + n - 1), n - 1))
        previous = -1
        for i, bar in enumerate([*bars, exponent + n - 1]):
            sizes[i] *= prime ** (bar - previous - 1)
            previous = bar
    return sizes


def _count_tilings(extent: int, n: int) -> int:
    return math.prod(math.comb(e + n - 1, n - 1) for e in _factorize(extent).values())


def _factorize(value: int) -> dict[int, int]:
    factors: dict[int, int] = {}
    p = 2
    while p * p <= value:
        while value % p == 0:
            factors[p] = factors.get(p, 0) + 1
            value //= p
        p += 1
    if value > 1:
        factors[value] = factors.get(value, 0) + 1
    return factors


# ---------------------------------------------------------------------- sample_categorical
def sample_categorical(
    sch: ScheduleState,
    candidates: Sequence[int],
    probs: Sequence[float],
    decision: int | None = None,
) -> tuple[ExprRV, int]:
    if len(candidates) != len(probs) or not candidates:
        raise ScheduleError(
            f"sample_categorical: {len(candidates)} candidates and {len(probs)} probabilities; "
            "give one probability per candidate, and at least one candidate"
        )
    weights = [float(p) for p in probs]
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ScheduleError(
            f"sample_categorical: the probabilities {weights} must be non-negative and not all 0"
        )
    if decision is None:
        index = sch._rng.choices(range(len(candidates)), weights=weights)[0]
    else:
        index = int(decision)
        if not 0 <= index < len(candidates):
            raise ScheduleError(
                f"sample_categorical: the decision {index} is not an index into the "
                f"{len(candidates)} candidates"
            )
    return ExprRV(int(candidates[index])), index


# ---------------------------------------------------------------------- sample_compute_location
def sample_compute_location(
    sch: ScheduleState, block: BlockRV, decision: int | None = None
) -> tuple[LoopRV | str, int]:
    candidates = _compute_locations(sch, block)
    positions = sorted(candidates)
    if decision is None:
        chosen = sch._rng.choice(positions)
    else:
        below = [p for p in positions if p <= int(decision)]
        chosen = below[-1] if below else ROOT_DECISION
    return candidates[chosen], chosen


def _compute_locations(sch: ScheduleState, block: BlockRV) -> dict[int, LoopRV | str]:
    """The legal locations of ``block``, keyed by their decision."""
    sch.block_realize(block)  # a clear error when there is no such block
    locations: dict[int, LoopRV | str] = {ROOT_DECISION: LocationMark("root")}
    if _legal(sch, compute_inline, block):
        locations[INLINE_DECISION] = LocationMark("inline")
    consumers = [sch.block_realize(c) for c in get_consumers(sch, block)]
    if not consumers:
        return locations
    # Only loops enclosing every consumer can hold the block for all of them.
    shared = sch.loops_above(consumers[0])
    for other in consumers[1:]:
        theirs = sch.loops_above(other)
        common = 0
        while common < min(len(shared), len(theirs)) and shared[common] is theirs[common]:
            common += 1
        shared = shared[:common]
    for position, loop in enumerate(shared):
        rv = LoopRV(loop.loop_var)
        if _legal(sch, compute_at, block, rv):
            locations[position] = rv
    return locations


def _legal(sch: ScheduleState, apply: Callable[..., Any], *args: Any) -> bool:
    """Whether the primitive implementation ``apply`` applies (tried on a copy)."""
    trial = sch.copy()
    try:
        apply(trial, *args)
    except MLCError:
        return False
    return True


__all__ = [
    "INLINE_DECISION",
    "ROOT_DECISION",
    "LocationMark",
    "sample_categorical",
    "sample_compute_location",
    "sample_perfect_tile",
]
