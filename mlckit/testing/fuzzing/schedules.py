"""The "schedules" campaign: random schedule sequences must never change what a function computes.

Each trial schedules one small operator (matmul, matmul + relu, conv2d, softmax, a row sum, a
row max), whose extents are primes or other numbers that the drawn split factors rarely
divide, with a random sequence of steps: split (non-dividing factors, factors wider than the
loop), sampled perfect tiles, reorder, fuse, parallel, vectorize, unroll, add_unit_loop,
compute_at (at a drawn loop or a sampled location), reverse_compute_at, compute_inline,
reverse_compute_inline, decompose_reduction, cache_read/cache_write, set_scope, rfactor,
blockize and transform_layout. Each step draws its block, loops and arguments from the
current program; a step the primitive refuses with a ScheduleError is skipped (the schedule
must be unchanged, which the replay below checks).

Whatever the schedule accepted must then hold up: replaying its trace on a fresh schedule
gives the same program, the program builds, and running it leaves exactly what the
unscheduled function leaves in its arguments. Most trials run on the "python" target; one in
ten compiles with numba ("llvm"). A BuildError (or any error) after an accepted sequence is a
failure, and so is a wrong number.

The case printed with a trial is the accepted trace as Python, which rebuilds the program;
``trial_for_seed(seed)`` repeats the whole trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit import te, topi
from mlckit.driver import build
from mlckit.errors import MLCError, ScheduleError
from mlckit.ir import structural_equal
from mlckit.tir.expr import IntImm
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import BlockRV, LoopRV, Schedule

from . import Trial, WrongResult, judge

__all__ = ["CAMPAIGN", "OPERATORS", "STEPS", "trial_for_seed"]

NAME = "schedules"
LLVM_SHARE = 0.1
MAX_STEPS = 10
TOLERANCE = 1e-4


# ---------------------------------------------------------------------- the operators
def _matmul(relu: bool) -> PrimFunc:
    A = te.placeholder((7, 10), "float32", name="A")
    B = te.placeholder((10, 13), "float32", name="B")
    C = topi.matmul(A, B)
    return te.create_prim_func([A, B, topi.nn.relu(C) if relu else C])


def _conv2d() -> PrimFunc:
    X = te.placeholder((1, 2, 7, 5), "float32", name="X")
    W = te.placeholder((3, 2, 3, 3), "float32", name="W")
    return te.create_prim_func([X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)])


def _softmax() -> PrimFunc:
    A = te.placeholder((5, 7), "float32", name="A")
    return te.create_prim_func([A, topi.nn.softmax(A)])


def _row_reduction(reduce: Callable[..., te.Tensor]) -> PrimFunc:
    A = te.placeholder((7, 13), "float32", name="A")
    return te.create_prim_func([A, reduce(A, axis=1)])


OPERATORS: dict[str, Callable[[], PrimFunc]] = {
    "matmul": functools.partial(_matmul, False),
    "matmul_relu": functools.partial(_matmul, True),
    "conv2d": _conv2d,
    "softmax": _softmax,
    "sum": functools.partial(_row_reduction, topi.sum),
    "max": functools.partial(_row_reduction, topi.max),
}


@functools.cache
def reference(name: str) -> tuple[PrimFunc, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The operator, fixed random arguments, and what the unscheduled function leaves in them."""
    func = OPERATORS[name]()
    rng = np.random.default_rng(0)
    shapes = [[int(d) for d in func.buffer_map[p].shape] for p in func.params]
    arrays = tuple(rng.standard_normal(shape).astype("float32") for shape in shapes)
    return func, arrays, tuple(run(func, arrays, "python"))


def run(mod: Any, arrays: tuple[np.ndarray, ...], target: str) -> list[np.ndarray]:
    """Build ``mod`` (one PrimFunc) for ``target`` and run it on copies of ``arrays``."""
    lib = build(mod, target)
    (name,) = lib.function_names()
    copies = [np.array(a, copy=True) for a in arrays]
    lib[name](*copies)
    return copies


# ---------------------------------------------------------------------- drawing operands
def _blocks(sch: Schedule) -> list[str]:
    return [r.block.name_hint for r in sch.walk_blocks(sch.func.body)]


def _block(sch: Schedule, rng: random.Random) -> BlockRV:
    return sch.get_block(rng.choice(_blocks(sch)))


def _loops(sch: Schedule, rng: random.Random) -> tuple[BlockRV, list[LoopRV]]:
    block = _block(sch, rng)
    return block, sch.get_loops(block)


def _loop(sch: Schedule, rng: random.Random) -> LoopRV | None:
    _, loops = _loops(sch, rng)
    return rng.choice(loops) if loops else None


def _factors(rng: random.Random) -> list[int | None]:
    """Two or three factors, one of them inferred; often not dividing, sometimes wider than
    the loop."""
    sizes = [rng.choice([2, 3, 4, 5, 7, 16]) for _ in range(rng.choice([1, 1, 2]))]
    sizes.insert(rng.randrange(len(sizes) + 1), None)
    return sizes


# ---------------------------------------------------------------------- the steps
def _split(sch: Schedule, rng: random.Random) -> None:
    loop = _loop(sch, rng)
    if loop is not None:
        sch.split(loop, _factors(rng))


def _tile(sch: Schedule, rng: random.Random) -> None:
    loop = _loop(sch, rng)
    if loop is not None and isinstance(sch.get(loop).extent, IntImm):
        n = rng.choice([2, 3])
        limit = rng.choice([2, 4, 16])
        sch.split(loop, sch.sample_perfect_tile(loop, n=n, max_innermost_factor=limit))


def _reorder(sch: Schedule, rng: random.Random) -> None:
    _, loops = _loops(sch, rng)
    if len(loops) >= 2:
        sch.reorder(*rng.sample(loops, rng.randint(2, len(loops))))


def _fuse(sch: Schedule, rng: random.Random) -> None:
    _, loops = _loops(sch, rng)
    if len(loops) >= 2:
        first = rng.randrange(len(loops) - 1)
        sch.fuse(*loops[first : first + rng.randint(2, min(3, len(loops) - first))])


def _loop_kind(kind: str) -> Callable[[Schedule, random.Random], None]:
    def step(sch: Schedule, rng: random.Random) -> None:
        loop = _loop(sch, rng)
        if loop is not None:
            getattr(sch, kind)(loop)

    return step


def _add_unit_loop(sch: Schedule, rng: random.Random) -> None:
    loop = _loop(sch, rng)
    sch.add_unit_loop(_block(sch, rng) if loop is None or rng.random() < 0.5 else loop)


def _compute_at(kind: str) -> Callable[[Schedule, random.Random], None]:
    """``kind`` (compute_at / reverse_compute_at) of a block at a loop of a block it feeds
    (is fed by), or anywhere at all one time in four."""

    def step(sch: Schedule, rng: random.Random) -> None:
        block = _block(sch, rng)
        others = sch.get_consumers(block) if kind == "compute_at" else sch.get_producers(block)
        if rng.random() < 0.25 or not others:
            loop = _loop(sch, rng)
        else:
            loops = sch.get_loops(rng.choice(others))
            loop = rng.choice(loops) if loops else None
        if loop is not None:
            getattr(sch, kind)(block, loop, preserve_unit_loops=rng.random() < 0.3)

    return step


def _sampled_location(sch: Schedule, rng: random.Random) -> None:
    block = _block(sch, rng)
    sch.compute_at(block, sch.sample_compute_location(block))


def _on_block(kind: str) -> Callable[[Schedule, random.Random], None]:
    def step(sch: Schedule, rng: random.Random) -> None:
        getattr(sch, kind)(_block(sch, rng))

    return step


def _decompose_reduction(sch: Schedule, rng: random.Random) -> None:
    block, loops = _loops(sch, rng)
    if loops:
        sch.decompose_reduction(block, rng.choice(loops))


def _cache(kind: str) -> Callable[[Schedule, random.Random], None]:
    def step(sch: Schedule, rng: random.Random) -> None:
        block = _block(sch, rng)
        regions = sch.get(block).reads if kind == "cache_read" else sch.get(block).writes
        if regions:
            scope = rng.choice(["global", "local", "shared"])
            getattr(sch, kind)(block, rng.randrange(len(regions)), scope)

    return step


def _set_scope(sch: Schedule, rng: random.Random) -> None:
    block = _block(sch, rng)
    writes = sch.get(block).writes
    if writes:
        sch.set_scope(block, rng.randrange(len(writes)), rng.choice(["global", "local"]))


def _rfactor(sch: Schedule, rng: random.Random) -> None:
    block, loops = _loops(sch, rng)
    writes = sch.get(block).writes
    if loops and writes:
        ndim = len(writes[0].buffer.shape)
        sch.rfactor(rng.choice(loops), rng.randint(-ndim - 1, ndim))


def _blockize(sch: Schedule, rng: random.Random) -> None:
    loop = _loop(sch, rng)
    if loop is not None:
        sch.blockize(loop)


def _transform_layout(sch: Schedule, rng: random.Random) -> None:
    """A bijection on an intermediate buffer the block accesses (a parameter's new layout would
    change the signature): its axes reversed, or one axis split by a factor (a bijection only
    when it divides the extent; the primitive must refuse the rest)."""
    block = _block(sch, rng)
    params = {id(b) for b in sch.func.buffer_map.values()}
    accesses = [
        (access, index, region.buffer)
        for access, regions in (("read", sch.get(block).reads), ("write", sch.get(block).writes))
        for index, region in enumerate(regions)
        if id(region.buffer) not in params
    ]
    if not accesses:
        return
    access, index, buffer = rng.choice(accesses)
    ndim = len(buffer.shape)
    axis, factor = rng.randrange(ndim), rng.choice([2, 3, 5, 7])

    def reverse(*indices: Any) -> list[Any]:
        return list(reversed(indices))

    def split(*indices: Any) -> list[Any]:
        i = indices[axis]
        return [*indices[:axis], i // factor, i % factor, *indices[axis + 1 :]]

    index_map = rng.choice([reverse, split])
    # One named parameter per dimension, as a lambda written for this buffer would have.
    index_map.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"i{d}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for d in range(ndim)]
    )
    sch.transform_layout(block, (access, index), index_map)


# Each step with its weight in the draw.
STEPS: dict[str, tuple[Callable[[Schedule, random.Random], None], int]] = {
    "split": (_split, 4),
    "tile": (_tile, 2),
    "reorder": (_reorder, 2),
    "fuse": (_fuse, 2),
    "parallel": (_loop_kind("parallel"), 1),
    "vectorize": (_loop_kind("vectorize"), 1),
    "unroll": (_loop_kind("unroll"), 1),
    "add_unit_loop": (_add_unit_loop, 1),
    "compute_at": (_compute_at("compute_at"), 2),
    "sampled_location": (_sampled_location, 1),
    "reverse_compute_at": (_compute_at("reverse_compute_at"), 2),
    "compute_inline": (_on_block("compute_inline"), 1),
    "reverse_compute_inline": (_on_block("reverse_compute_inline"), 1),
    "decompose_reduction": (_decompose_reduction, 2),
    "cache_read": (_cache("cache_read"), 2),
    "cache_write": (_cache("cache_write"), 2),
    "set_scope": (_set_scope, 1),
    "rfactor": (_rfactor, 3),
    "blockize": (_blockize, 2),
    "transform_layout": (_transform_layout, 1),
}


# ---------------------------------------------------------------------- one trial
@dataclasses.dataclass
class Case:
    """What a trial drew and did, kept up to date while it runs so that a failure can say."""

    seed: int
    operator: str
    target: str
    sch: Schedule | None = None
    step: str = ""

    def __str__(self) -> str:
        lines = [
            f"# {self.operator} on {self.target!r}; schedules.trial_for_seed({self.seed}) "
            "repeats the trial, and this trace rebuilds its program:",
            f"sch = tir.Schedule(schedules.OPERATORS[{self.operator!r}]())",
        ]
        if self.sch is not None:
            lines += self.sch.trace.as_python()
        if self.step:
            lines.append(f"# the error came in: {self.step}")
        return "\n".join(lines)


def schedule(case: Case, rng: random.Random) -> Schedule:
    """Apply a random sequence of steps; steps the Schedule refuses are skipped."""
    func, _, _ = reference(case.operator)
    case.sch = sch = Schedule(func, seed=case.seed)
    names = list(STEPS)
    weights = [STEPS[name][1] for name in names]
    for name in rng.choices(names, weights, k=rng.randint(1, MAX_STEPS)):
        case.step = f"step {name!r}"
        with contextlib.suppress(ScheduleError):  # refused: the schedule is as it was
            STEPS[name][0](sch, rng)
    return sch


def check(case: Case, rng: random.Random) -> None:
    """Schedule, replay, build and run; raise WrongResult when the program changed."""
    func, arrays, expected = reference(case.operator)
    sch = schedule(case, rng)
    case.step = "replaying the trace"
    replayed = Schedule(func)
    sch.trace.apply_to_schedule(replayed)
    if not structural_equal(replayed.mod, sch.mod):
        raise WrongResult("replaying the trace on a fresh schedule built a different program")
    case.step = f"building and running for {case.target!r}"
    actual = run(sch.mod, arrays, case.target)
    for param, want, got in zip(func.params, expected, actual):
        if not np.allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True):
            error = float(np.nanmax(np.abs(got.astype("float64") - want)))
            raise WrongResult(
                f"argument {param.name_hint!r} differs from the unscheduled function's by up "
                f"to {error:.3g} on {case.target!r}:\n{sch.mod.script()}"
            )
    case.step = ""


def _after_accepted(err: MLCError) -> str:
    # A step's ScheduleError is caught in schedule(); an error that gets here came after the
    # sequence was accepted (replay, build, run), where nothing may fail.
    return "an accepted schedule failed to replay, build or run"


def trial_for_seed(seed: int) -> Trial:
    """The trial drawn from ``seed``: its operator, target, steps and their operands."""
    rng = random.Random(seed)
    case = Case(
        seed, rng.choice(list(OPERATORS)), "llvm" if rng.random() < LLVM_SHARE else "python"
    )
    trial = judge(NAME, "", lambda: check(case, rng), check_error=_after_accepted)
    return dataclasses.replace(trial, case=str(case))


class _Campaign:
    name = NAME

    def trial(self, rng: random.Random) -> Trial:
        return trial_for_seed(rng.randrange(1 << 31))


CAMPAIGN = _Campaign()
