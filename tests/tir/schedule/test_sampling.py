"""Sampling primitives: valid and uniform draws, recorded decisions, exact replay, seeds,
changed decisions, and bad input."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import te, tir, topi
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal


def _tile_loop(extent: int):
    """A one-loop PrimFunc (B = A + 1 over ``extent`` elements) and a schedule of it."""
    A = te.placeholder((extent,), "float32", name="A")
    func = te.create_prim_func([A, topi.add(A, 1.0)])
    sch = tir.Schedule(func)
    (block,) = [b for b in sch.walk_blocks(func.body)]
    (loop,) = sch.get_loops(sch.get_block(block.block.name_hint))
    return sch, loop


def _draws(extent: int, n: int, max_innermost_factor: int, count: int) -> Counter:
    sch, loop = _tile_loop(extent)
    sch.seed(2024)
    seen: Counter = Counter()
    for _ in range(count):
        sizes = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=max_innermost_factor)
        seen[tuple(int(s) for s in sizes)] += 1
    return seen


def test_perfect_tiles_multiply_to_the_extent_and_respect_the_innermost_limit():
    for extent in (1, 7, 12, 128, 360):
        seen = _draws(extent, n=3, max_innermost_factor=8, count=60)
        for sizes in seen:
            assert math.prod(sizes) == extent and sizes[-1] <= 8 and len(sizes) == 3


def test_perfect_tiles_are_uniform_over_all_valid_tilings():
    # 12 = 2^2 * 3 splits into 2 sizes in 6 ways; 8 = 2^3 into 3 sizes in C(5, 2) = 10 ways.
    for extent, n, limit, ways in ((12, 2, -1, 6), (8, 3, 16, 10), (16, 2, 4, 3)):
        seen = _draws(extent, n, limit, count=300 * ways)
        assert len(seen) == ways
        for count in seen.values():
            assert 0.8 * 300 < count < 1.2 * 300, seen
    assert set(_draws(16, 2, 4, count=50)) == {(16, 1), (8, 2), (4, 4)}


def test_the_trace_records_decisions_and_a_replay_rebuilds_the_same_program():
    sch = tir.Schedule(mm_relu, seed=7)
    i, j, _ = sch.get_loops(sch.get_block("Y"))
    sizes = sch.sample_perfect_tile(i, n=2, max_innermost_factor=16)
    assert all(isinstance(s, tir.schedule.ExprRV) for s in sizes)
    sch.split(i, sizes)
    factor = sch.sample_categorical([2, 4, 8], [0.2, 0.3, 0.5])
    sch.split(j, [None, factor])
    decisions = [int(s) for s in sizes]
    text = str(sch.trace)
    assert (
        f"v4, v5 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=16, "
        f"decision={decisions})"
    ) in text
    assert "l6, l7 = sch.split(loop=l1, factors=[v4, v5])" in text
    index = [2, 4, 8].index(int(factor))
    assert "v8 = sch.sample_categorical(candidates=[2, 4, 8], probs=[0.2, 0.3, 0.5], " in text
    assert f"decision={index})" in text
    assert "sch.split(loop=l2, factors=[None, v8])" in text

    fresh = tir.Schedule(mm_relu, seed=12345)  # another seed: decisions, not draws, decide
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)
    assert str(fresh.trace) == text


def test_a_seed_makes_draws_reproducible():
    def draw(sch: tir.Schedule) -> list:
        (loop, *_) = sch.get_loops(sch.get_block("Y"))
        tiles = [[int(v) for v in sch.sample_perfect_tile(loop, n=4)] for _ in range(5)]
        picks = [int(sch.sample_categorical([1, 2, 3], [1, 1, 1])) for _ in range(5)]
        return tiles + picks

    first = draw(tir.Schedule(mm_relu, seed=42))
    assert draw(tir.Schedule(mm_relu, seed=42)) == first
    reseeded = tir.Schedule(mm_relu, seed=0)
    reseeded.seed(42)
    assert draw(reseeded) == first
    assert any(draw(tir.Schedule(mm_relu, seed=s)) != first for s in range(3))


def test_with_decision_explores_another_program():
    sch = tir.Schedule(mm_relu, seed=1)
    i, _, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(i, sch.sample_perfect_tile(i, n=2))
    step = next(s for s in sch.trace if s.kind == "sample_perfect_tile")
    changed = sch.trace.with_decision(step, [4, 32])
    other = tir.Schedule(mm_relu)
    changed.apply_to_schedule(other)
    loops = other.get_loops(other.get_block("Y"))
    extents = [other.get(loop).extent.value for loop in loops]
    assert extents == [4, 32, 128, 128]
    assert "decision=[4, 32]" in str(other.trace)
    with pytest.raises(ScheduleError, match="not a sampling step"):
        sch.trace.with_decision(sch.trace.instructions[0], 0)


def test_a_decision_that_no_longer_tiles_is_repaired_as_tvm_does():
    sch, loop = _tile_loop(128)
    assert [int(v) for v in sch.sample_perfect_tile(loop, n=3, decision=[2, 16, 4])] == [2, 16, 4]
    # From the innermost size outwards, a size that does not divide what is left takes it all.
    assert [int(v) for v in sch.sample_perfect_tile(loop, n=2, decision=[5, 7])] == [1, 128]
    assert [int(v) for v in sch.sample_perfect_tile(loop, n=3, decision=[1, 3, 8])] == [1, 16, 8]
    assert sch.trace.instructions[-1].decision == [1, 16, 8]


def test_sample_categorical_follows_the_probabilities():
    sch = tir.Schedule(mm_relu, seed=3)
    seen = Counter(int(sch.sample_categorical([10, 20, 30], [0.0, 1.0, 3.0])) for _ in range(800))
    assert seen[10] == 0
    assert 0.2 * 800 < seen[20] < 0.3 * 800 and 0.7 * 800 < seen[30] < 0.8 * 800
    assert int(sch.sample_categorical([10, 20, 30], [1, 1, 1], decision=2)) == 30


def test_sample_compute_location_offers_the_consumer_loops_root_and_inline():
    # The matmul (a reduction) cannot be inlined; it can go under relu's loops i0 and i1.
    A = te.placeholder((16, 16), "float32", name="A")
    B = te.placeholder((16, 16), "float32", name="B")
    func = te.create_prim_func([A, B, topi.nn.relu(topi.matmul(A, B))])
    sch = tir.Schedule(func)
    block = sch.get_block("T_matmul")
    picks = {sch.sample_compute_location(block, decision=d) for d in (-2, -1, 0, 1)}
    assert "root" in picks and "inline" not in picks and len(picks) == 3
    outer = sch.sample_compute_location(block, decision=0)
    assert sch.get(outer).loop_var.name_hint == "i0"
    assert sch.trace.instructions[-1].decision == 0
    assert "l5 = sch.sample_compute_location(block=b0, decision=0)" in str(sch.trace)
    sch.compute_at(block, outer)
    assert_same_numerics(func, sch.mod, [(16, 16)] * 3)

    # An elementwise producer can also be inlined (decision -2).
    A = te.placeholder((8, 8), "float32", name="A")
    func = te.create_prim_func([A, topi.nn.relu(topi.add(A, 1.0))])
    sch = tir.Schedule(func, seed=0)
    producer = sch.get_producers(sch.get_block("compute"))[0]
    assert sch.sample_compute_location(producer, decision=-2) == "inline"
    drawn = {sch.sample_compute_location(producer) for _ in range(30)}
    assert {"inline", "root"} <= {d for d in drawn if isinstance(d, str)}
    assert any(isinstance(d, tir.schedule.LoopRV) for d in drawn)


def test_a_stale_location_decision_falls_back_to_an_outer_candidate():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    # There is no position 5 (C has two loops): the nearest candidate outside it is j.
    loc = sch.sample_compute_location(block, decision=5)
    assert sch.get(loc).loop_var.name_hint == "j"
    assert sch.trace.instructions[-1].decision == 1


def test_bad_sampling_raises_and_leaves_the_schedule_as_it_was():
    sch, loop = _tile_loop(128)
    state = sch._rng.getstate()
    steps = len(sch.trace)
    cases = [
        (lambda: sch.sample_perfect_tile(loop, n=0), "at least one tile size"),
        (lambda: sch.sample_perfect_tile(loop, n=2, max_innermost_factor=0), "must be positive"),
        (lambda: sch.sample_perfect_tile(loop, n=2, decision=[128]), "must be 2 positive"),
        (lambda: sch.sample_perfect_tile(loop, n=1, max_innermost_factor=4), "whole extent"),
        (lambda: sch.sample_categorical([1, 2], [1.0]), "one probability per candidate"),
        (lambda: sch.sample_categorical([1, 2], [-1, 0]), "non-negative"),
        (lambda: sch.sample_categorical([1, 2], [1, 1], decision=2), "not an index"),
        (lambda: sch.sample_perfect_tile(loop, 2, 16, None, 1), "too many"),
    ]
    for call, message in cases:
        with pytest.raises(ScheduleError, match=message):
            call()
    assert len(sch.trace) == steps and sch._rng.getstate() == state

    n = te.var("n")
    A = te.placeholder((n,), "float32", name="A")
    symbolic = tir.Schedule(te.create_prim_func([A, topi.add(A, 1.0)]))
    (loop,) = symbolic.get_loops(symbolic.get_block("T_add"))
    with pytest.raises(ScheduleError, match="sample_perfect_tile: loop .* symbolic extent n"):
        symbolic.sample_perfect_tile(loop, n=2)


def test_a_trace_stored_as_json_replays_to_the_same_program():
    import json

    A = te.placeholder((16, 16), "float32", name="A")
    B = te.placeholder((16, 16), "float32", name="B")
    func = te.create_prim_func([A, B, topi.nn.relu(topi.matmul(A, B))])
    sch = tir.Schedule(func, seed=5)
    block = sch.get_block("T_matmul")
    i, j, _ = sch.get_loops(block)
    sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.split(i, [None, sch.sample_categorical([2, 4], [1, 1])])
    sch.compute_at(block, sch.sample_compute_location(block, decision=0))
    stored = json.loads(json.dumps(sch.trace.as_json()))
    assert stored[0]["outputs"] == {"rv": 0} and "decision" in stored[2]

    replayed = tir.Schedule(func, seed=99)
    tir.schedule.Trace.from_json(stored).apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, sch.mod)
    assert str(replayed.trace) == str(sch.trace)

    with_lambda = tir.Schedule(func)
    with_lambda.transform_layout(
        with_lambda.get_block("T_matmul"), ("write", 0), lambda a, b: [b, a]
    )
    with pytest.raises(ScheduleError, match="cannot be stored as JSON"):
        with_lambda.trace.as_json()
