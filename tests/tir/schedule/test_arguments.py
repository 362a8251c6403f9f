"""Every primitive checks the kinds of its arguments before touching the function: a wrong kind
is a ScheduleError naming the primitive, the argument and what it expected, and the schedule
is left as it was."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from mlckit import te, tir, topi
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.tir import expr as E


def _schedule() -> tuple[tir.Schedule, tir.schedule.BlockRV, list[tir.schedule.LoopRV]]:
    A = te.placeholder((8, 12), "float32", name="A")
    B = te.placeholder((12, 16), "float32", name="B")
    sch = tir.Schedule(te.create_prim_func([A, B, topi.matmul(A, B)]))
    block = sch.get_block("T_matmul")
    return sch, block, sch.get_loops(block)


Call = Callable[[tir.Schedule, tir.schedule.BlockRV, list], object]

# (the call, words the message must contain)
WRONG_KINDS: list[tuple[Call, tuple[str, ...]]] = [
    (lambda s, b, ls: s.vectorize(b), ("vectorize", "'loop'", "loop handle", "BlockRV")),
    (lambda s, b, ls: s.reverse_compute_at(ls[0], b), ("reverse_compute_at", "'block'")),
    (lambda s, b, ls: s.split(ls[0], factors=4), ("split", "'factors'", "a list")),
    (lambda s, b, ls: s.split(ls[0], ["4", None]), ("split", "element 0 is '4'")),
    (lambda s, b, ls: s.split(ls[0], [1.5, 6]), ("split", "element 0 is 1.5")),
    (lambda s, b, ls: s.split(ls[0], [True, None]), ("split", "element 0 is True")),
    (lambda s, b, ls: s.fuse(ls[0], b), ("fuse", "argument 2", "loop handle")),
    (lambda s, b, ls: s.reorder(ls[1], "i"), ("reorder", "argument 2")),
    (lambda s, b, ls: s.get_loops(ls[0]), ("get_loops", "'block'")),
    (lambda s, b, ls: s.get_block(3), ("get_block", "'name'", "a string")),
    (lambda s, b, ls: s.cache_read(b, "0", "local"), ("cache_read", "read_buffer_index")),
    (lambda s, b, ls: s.rfactor(ls[2], 0.0), ("rfactor", "'factor_axis'", "an integer")),
    (lambda s, b, ls: s.compute_at(b, b), ("compute_at", "'loop'")),
    (lambda s, b, ls: s.transform_layout(b, ("read", 0), 3), ("transform_layout", "function")),
    (lambda s, b, ls: s.sample_perfect_tile(b, n=2), ("sample_perfect_tile", "'loop'")),
    (lambda s, b, ls: s.sample_categorical([1.5], [1.0]), ("sample_categorical", "element 0")),
    (lambda s, b, ls: s.split(ls[0], fators=[2, None]), ("split", "it takes: loop, factors")),
    (lambda s, b, ls: s.get("x"), ("get", "handle")),
]


@pytest.mark.parametrize(("call", "words"), WRONG_KINDS)
def test_a_wrong_kind_of_argument_is_named_and_changes_nothing(call: Call, words: tuple) -> None:
    sch, block, loops = _schedule()
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError) as info:
        call(sch, block, loops)
    for word in words:
        assert word in str(info.value)
    assert len(sch.trace) == steps
    assert_structural_equal(sch.mod, before)


@pytest.mark.parametrize(
    "factor",
    [E.Var("n", "float32"), 0, -2],
    ids=["float expression", "zero", "negative"],
)
def test_split_factors_are_positive_integers(factor: object) -> None:
    sch, _, loops = _schedule()
    with pytest.raises(ScheduleError, match="split: factor .* of loop 'i0'"):
        sch.split(loops[0], [factor, None])


def test_numpy_and_sampled_integers_are_integers() -> None:
    sch, _, loops = _schedule()
    i0, _ = sch.split(loops[0], [np.int64(2), None])
    (factor,) = [sch.sample_categorical([2, 3], [1.0, 0.0])]
    j0, _ = sch.split(loops[1], [None, factor])
    assert sch.get(i0).extent.value == 2 and sch.get(j0).extent.value == 8
