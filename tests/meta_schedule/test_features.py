"""Features of scheduled programs: a fixed-length vector that tells schedules apart and is the
same for the same program."""

from __future__ import annotations

import numpy as np

from mlckit import te, tir, topi
from mlckit.ir import IRModule
from mlckit.meta_schedule.features import FEATURE_NAMES, extract_features


def matmul(n: int = 128) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def tiled(func: tir.PrimFunc) -> tir.PrimFunc:
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return sch.mod["main"]


def feature(vector: np.ndarray, name: str) -> float:
    return float(vector[FEATURE_NAMES.index(name)])


def test_fixed_length_for_any_program():
    A = te.placeholder((4, 8), "float32", name="A")
    two_blocks = te.create_prim_func([A, topi.nn.relu(topi.exp(A))])
    for func in [matmul(), tiled(matmul()), two_blocks]:
        vector = extract_features(func)
        assert vector.shape == (len(FEATURE_NAMES),)
        assert np.isfinite(vector).all()
    assert feature(extract_features(two_blocks), "blocks") == 2


def test_the_same_program_gives_the_same_vector():
    first = extract_features(tiled(matmul()))
    np.testing.assert_array_equal(first, extract_features(tiled(matmul())))
    np.testing.assert_array_equal(first, extract_features(IRModule({"main": tiled(matmul())})))


def test_schedules_are_told_apart():
    plain, fast = extract_features(matmul()), extract_features(tiled(matmul()))
    assert not np.array_equal(plain, fast)
    assert feature(plain, "main.inner_is_serial") == 1
    assert feature(fast, "main.inner_is_vectorized") == 1
    assert feature(fast, "main.parallel_extent") > feature(plain, "main.parallel_extent")
    # 8x8 tiles keep a tile's rows of A and columns of B in the cache: less memory traffic.
    assert feature(fast, "main.traffic_l1") < feature(plain, "main.traffic_l1")
    assert feature(fast, "main.intensity_l1") > feature(plain, "main.intensity_l1")
    # The same work either way.
    assert feature(fast, "main.flops") == feature(plain, "main.flops")

    # Loop order alone: with k innermost, B is read a whole row apart at each step.
    sch = tir.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    ikj = extract_features(sch.mod["main"])
    assert feature(ikj, "main.stride_far") < feature(plain, "main.stride_far")


def linear(vector: np.ndarray, name: str) -> float:
    """A feature back on its linear scale."""
    return round(2 ** feature(vector, name) - 1, 6)


def test_the_register_tile_a_reduction_accumulates():
    # Plain: one output element accumulated over k, 2 flops per 8 bytes of A and B.
    plain = extract_features(matmul())
    assert linear(plain, "main.accumulator_bytes") == 4
    assert linear(plain, "main.accumulation_length") == 128
    assert linear(plain, "main.intensity_registers") == 0.25
    # k outside an 8x8 tile: 64 accumulators, each step reads 8 floats of A and 8 of B.
    fast = extract_features(tiled(matmul()))
    assert linear(fast, "main.accumulator_bytes") == 8 * 8 * 4
    assert linear(fast, "main.accumulation_length") == 128
    assert linear(fast, "main.intensity_registers") == 2 * 64 / (16 * 4)
    # The reduction split, its two loops adjacent: the tile accumulates over both.
    sch = tir.Schedule(matmul())
    *_, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [None, 4])
    split = extract_features(sch.mod["main"])
    assert linear(split, "main.accumulator_bytes") == 4
    assert linear(split, "main.accumulation_length") == 128


def test_an_elementwise_block_has_no_accumulation():
    A = te.placeholder((4, 8), "float32", name="A")
    vector = extract_features(te.create_prim_func([A, topi.nn.relu(A)]))
    assert linear(vector, "main.accumulation_length") == 1
    assert linear(vector, "main.accumulator_bytes") == 4
