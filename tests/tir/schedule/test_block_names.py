"""Every primitive that takes a block takes its name too (``sch.get_loops("matmul")``): the name
becomes the handle of ``get_block(name)``, recorded as a step of its own, so the trace replays."""

from __future__ import annotations

import typing
from collections.abc import Callable

import pytest

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T
from mlckit.tir.schedule import BlockRV, Schedule
from mlckit.tir.schedule.trace import PRIMITIVE_SIGNATURES


@T.prim_func
def two_stage(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


@T.prim_func
def matmul(
    A: T.Buffer((16, 16), "float32"),
    B: T.Buffer((16, 16), "float32"),
    C: T.Buffer((16, 16), "float32"),
):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def _loop(sch: Schedule, block: str, index: int) -> tir.schedule.LoopRV:
    return sch.get_loops(sch.get_block(block))[index]


# primitive -> (function, block named, call with the block given as `b`)
Call = Callable[[Schedule, object], object]
CASES: dict[str, tuple[object, str, Call]] = {
    "get_loops": (two_stage, "B", lambda s, b: s.get_loops(b)),
    "get_child_blocks": (two_stage, "B", lambda s, b: s.get_child_blocks(b)),
    "get_producers": (two_stage, "C", lambda s, b: s.get_producers(b)),
    "get_consumers": (two_stage, "B", lambda s, b: s.get_consumers(b)),
    "add_unit_loop": (two_stage, "B", lambda s, b: s.add_unit_loop(b)),
    "compute_at": (two_stage, "B", lambda s, b: s.compute_at(b, _loop(s, "C", 0))),
    "reverse_compute_at": (
        two_stage,
        "C",
        lambda s, b: s.reverse_compute_at(b, _loop(s, "B", 0)),
    ),
    "compute_inline": (two_stage, "B", lambda s, b: s.compute_inline(b)),
    "reverse_compute_inline": (two_stage, "C", lambda s, b: s.reverse_compute_inline(b)),
    "cache_read": (two_stage, "C", lambda s, b: s.cache_read(b, 0, "shared")),
    "cache_write": (two_stage, "B", lambda s, b: s.cache_write(b, 0, "local")),
    "set_scope": (two_stage, "B", lambda s, b: s.set_scope(b, 0, "shared")),
    "decompose_reduction": (
        matmul,
        "matmul",
        lambda s, b: s.decompose_reduction(b, _loop(s, "matmul", 2)),
    ),
    "transform_layout": (
        two_stage,
        "B",
        lambda s, b: s.transform_layout(b, ("write", 0), lambda i, j: [j, i]),
    ),
    "annotate": (two_stage, "B", lambda s, b: s.annotate(b, "note", 1)),
    "unannotate": (two_stage, "B", lambda s, b: s.unannotate(b, "note")),
    "sample_compute_location": (
        two_stage,
        "B",
        lambda s, b: s.sample_compute_location(b, decision=-1),
    ),
}
# Tested with their own subject: tensorize in test_tensorize.py.
ELSEWHERE = {"tensorize"}


def _takes_a_block(kind: str) -> bool:
    hints = typing.get_type_hints(getattr(Schedule, kind))
    hints.pop("return", None)
    return any(BlockRV in (typing.get_args(h) or (h,)) for h in hints.values())


def test_every_primitive_that_takes_a_block_is_covered():
    takes_blocks = {kind for kind in PRIMITIVE_SIGNATURES if _takes_a_block(kind)}
    assert takes_blocks - ELSEWHERE == set(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_block_name_does_what_its_handle_does_and_the_trace_replays(kind: str) -> None:
    func, name, call = CASES[kind]
    by_handle, by_name = tir.Schedule(func), tir.Schedule(func)
    if kind == "unannotate":
        for sch in (by_handle, by_name):
            sch.annotate(sch.get_block(name), "note", 1)
    call(by_handle, by_handle.get_block(name))
    call(by_name, name)
    assert_structural_equal(by_name.mod, by_handle.mod)

    steps = list(by_name.trace)
    assert steps[-1].kind == kind
    assert steps[-2].kind == "get_block" and steps[-2].args == (name,)
    given = (*steps[-1].args, *steps[-1].kwargs.values())
    assert any(value is steps[-2].outputs for value in given)  # the step records the handle
    assert f"sch.get_block(name={name!r})" in str(by_name.trace)

    replayed = tir.Schedule(func)
    by_name.trace.apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, by_name.mod)


def test_an_unknown_block_name_is_get_blocks_error_and_changes_nothing():
    sch = tir.Schedule(matmul)
    before = sch.mod
    with pytest.raises(ScheduleError, match=r"no block named 'matmull'.*did you mean 'matmul'"):
        sch.get_loops("matmull")
    assert len(sch.trace) == 0
    assert_structural_equal(sch.mod, before)


def test_a_string_that_is_not_a_block_keeps_its_meaning():
    # compute_at's loop takes "root" (stay where it is): not the name of a block.
    sch = tir.Schedule(two_stage)
    sch.compute_at("B", "root")
    assert_structural_equal(sch.mod, tir.Schedule(two_stage).mod)
    # A loop is never looked up as a block.
    with pytest.raises(ScheduleError, match="vectorize: argument 'loop' must be a loop handle"):
        sch.vectorize("B")
