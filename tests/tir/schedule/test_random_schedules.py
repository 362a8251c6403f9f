"""Property: random sequences of schedule primitives never change what a function computes.

Each example schedules one of four small operators (matmul, matmul + relu, conv2d, softmax)
with a random sequence of steps — sampled perfect tiles + split, uneven split, reorder, fuse,
parallel, vectorize, unroll, a sampled compute location, reverse_compute_at, inlining,
decompose_reduction, cache_read/cache_write, rfactor — drawing each step's block and loops
from the current program. A step the primitive rejects with ScheduleError is simply skipped;
any other error, or a changed number, fails. Only primitives that the Schedule has are used.

Two further properties ride along: replaying the trace on a fresh schedule rebuilds the same
program (decisions included), and the result runs the same on the "python" target (many
examples) and on "llvm" (a few: numba compiles each in ~0.3 s).

Hypothesis is derandomized with no example database, so every run draws the same examples.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_helpers import run

from mlckit import te, tir, topi
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.tir.analysis import collect_vars
from mlckit.tir.expr import IntImm, IterVar
from mlckit.tir.function import PrimFunc


# ---------------------------------------------------------------------- the operators
def _matmul(relu: bool) -> PrimFunc:
    A = te.placeholder((8, 12), "float32", name="A")
    B = te.placeholder((12, 16), "float32", name="B")
    C = topi.matmul(A, B)
    return te.create_prim_func([A, B, topi.nn.relu(C) if relu else C])


def _conv2d() -> PrimFunc:
    X = te.placeholder((1, 2, 6, 6), "float32", name="X")
    W = te.placeholder((4, 2, 3, 3), "float32", name="W")
    return te.create_prim_func([X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)])


def _softmax() -> PrimFunc:
    A = te.placeholder((4, 8), "float32", name="A")
    return te.create_prim_func([A, topi.nn.softmax(A)])


OPERATORS: dict[str, Callable[[], PrimFunc]] = {
    "matmul": functools.partial(_matmul, False),
    "matmul_relu": functools.partial(_matmul, True),
    "conv2d": _conv2d,
    "softmax": _softmax,
}


@functools.cache
def _reference(name: str) -> tuple[PrimFunc, list[np.ndarray], list[np.ndarray]]:
    """The operator, fixed random arguments, and what the unscheduled function leaves in them."""
    func = OPERATORS[name]()
    rng = np.random.default_rng(0)
    shapes = [[int(d) for d in func.buffer_map[p].shape] for p in func.params]
    arrays = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    return func, arrays, run(func, *arrays)


# ---------------------------------------------------------------------- choosing operands
def _block(sch: tir.Schedule, data: st.DataObject) -> tir.schedule.BlockRV:
    names = [r.block.name_hint for r in sch.walk_blocks(sch.func.body)]
    return sch.get_block(data.draw(st.sampled_from(names), label="block"))


def _loops(sch: tir.Schedule, data: st.DataObject) -> tuple[tir.schedule.BlockRV, list]:
    block = _block(sch, data)
    return block, sch.get_loops(block)


def _spatial_for_one_block(sch: tir.Schedule, loop: tir.schedule.LoopRV) -> bool:
    """Whether ``loop`` holds exactly one block and drives only its spatial iter vars: then its
    iterations write disjoint elements, and running them in parallel cannot race."""
    node = sch.get(loop)
    realizes = list(sch.walk_blocks(node.body))
    if len(realizes) != 1:
        return False
    realize = realizes[0]
    used = False
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if any(v is node.loop_var for v in collect_vars(value)):
            used = True
            if iv.iter_type != IterVar.DataPar:
                return False
    return used


# ---------------------------------------------------------------------- the steps
def _tile(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if not loops:
        return
    loop = data.draw(st.sampled_from(loops), label="loop")
    if not isinstance(sch.get(loop).extent, IntImm):
        return
    n = data.draw(st.integers(2, 3), label="n")
    limit = data.draw(st.sampled_from([2, 4, 16]), label="max_innermost_factor")
    sch.split(loop, sch.sample_perfect_tile(loop, n=n, max_innermost_factor=limit))


def _split_uneven(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if loops:
        factor = sch.sample_categorical([2, 3, 5], [1.0, 1.0, 1.0])
        sch.split(data.draw(st.sampled_from(loops), label="loop"), [None, factor])


def _reorder(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if len(loops) >= 2:
        chosen = data.draw(st.lists(st.sampled_from(loops), min_size=2, unique_by=id))
        sch.reorder(*chosen)


def _fuse(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if len(loops) >= 2:
        first = data.draw(st.integers(0, len(loops) - 2), label="first")
        sch.fuse(loops[first], loops[first + 1])


def _parallel(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    candidates = [loop for loop in loops if _spatial_for_one_block(sch, loop)]
    if candidates:
        sch.parallel(data.draw(st.sampled_from(candidates), label="loop"))


def _vectorize(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if loops and _spatial_for_one_block(sch, loops[-1]):
        sch.vectorize(loops[-1])


def _unroll(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if loops:
        sch.unroll(data.draw(st.sampled_from(loops), label="loop"))


def _compute_location(sch: tir.Schedule, data: st.DataObject) -> None:
    block = _block(sch, data)
    location = sch.sample_compute_location(block)
    if location == "inline":
        sch.compute_inline(block)
    elif location != "root":
        sch.compute_at(block, location)


def _reverse_compute_at(sch: tir.Schedule, data: st.DataObject) -> None:
    block = _block(sch, data)
    producers = sch.get_producers(block)
    if producers:
        loops = sch.get_loops(data.draw(st.sampled_from(producers), label="producer"))
        if loops:
            sch.reverse_compute_at(block, data.draw(st.sampled_from(loops), label="loop"))


def _compute_inline(sch: tir.Schedule, data: st.DataObject) -> None:
    sch.compute_inline(_block(sch, data))


def _reverse_compute_inline(sch: tir.Schedule, data: st.DataObject) -> None:
    sch.reverse_compute_inline(_block(sch, data))


def _decompose_reduction(sch: tir.Schedule, data: st.DataObject) -> None:
    block, loops = _loops(sch, data)
    if loops:
        sch.decompose_reduction(block, data.draw(st.sampled_from(loops), label="loop"))


def _cache(kind: str) -> Callable[[tir.Schedule, st.DataObject], None]:
    def step(sch: tir.Schedule, data: st.DataObject) -> None:
        block = _block(sch, data)
        regions = sch.get(block).reads if kind == "cache_read" else sch.get(block).writes
        if regions:
            index = data.draw(st.integers(0, len(regions) - 1), label="buffer index")
            scope = data.draw(st.sampled_from(["global", "local"]), label="scope")
            getattr(sch, kind)(block, index, scope)

    return step


def _rfactor(sch: tir.Schedule, data: st.DataObject) -> None:
    _, loops = _loops(sch, data)
    if loops:
        sch.rfactor(data.draw(st.sampled_from(loops), label="loop"), 0)


# Each step with the primitives it needs.
STEPS: dict[str, tuple[Callable[[tir.Schedule, st.DataObject], None], tuple[str, ...]]] = {
    "tile": (_tile, ("split", "sample_perfect_tile")),
    "split_uneven": (_split_uneven, ("split", "sample_categorical")),
    "reorder": (_reorder, ("reorder",)),
    "fuse": (_fuse, ("fuse",)),
    "parallel": (_parallel, ("parallel",)),
    "vectorize": (_vectorize, ("vectorize",)),
    "unroll": (_unroll, ("unroll",)),
    "compute_location": (_compute_location, ("sample_compute_location", "compute_at")),
    "reverse_compute_at": (_reverse_compute_at, ("reverse_compute_at",)),
    "compute_inline": (_compute_inline, ("compute_inline",)),
    "reverse_compute_inline": (_reverse_compute_inline, ("reverse_compute_inline",)),
    "decompose_reduction": (_decompose_reduction, ("decompose_reduction",)),
    "cache_read": (_cache("cache_read"), ("cache_read",)),
    "cache_write": (_cache("cache_write"), ("cache_write",)),
    "rfactor": (_rfactor, ("rfactor",)),
}
AVAILABLE = sorted(
    name
    for name, (_, needs) in STEPS.items()
    if all(hasattr(tir.Schedule, primitive) for primitive in needs)
)


def _random_schedule(name: str, data: st.DataObject) -> tuple[PrimFunc, tir.Schedule]:
    func, _, _ = _reference(name)
    sch = tir.Schedule(func, seed=data.draw(st.integers(0, 2**16), label="seed"))
    steps = data.draw(st.lists(st.sampled_from(AVAILABLE), min_size=1, max_size=8))
    for step in steps:
        # An illegal draw raises ScheduleError and the schedule rolls back: go on.
        with contextlib.suppress(ScheduleError):
            STEPS[step][0](sch, data)
    return func, sch


def _check(name: str, data: st.DataObject, target: str) -> None:
    func, arrays, expected = _reference(name)
    _, sch = _random_schedule(name, data)
    replayed = tir.Schedule(func)
    sch.trace.apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, sch.mod)
    actual = run(sch.mod, *arrays, target=target)
    for want, got in zip(expected, actual):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.mark.parametrize("name", list(OPERATORS))
@_settings(100)
@given(data=st.data())
def test_random_schedules_keep_numerics_on_python(name: str, data: st.DataObject) -> None:
    _check(name, data, "python")


@pytest.mark.parametrize("name", list(OPERATORS))
@_settings(3)
@given(data=st.data())
def test_random_schedules_keep_numerics_on_llvm(name: str, data: st.DataObject) -> None:
    _check(name, data, "llvm")
