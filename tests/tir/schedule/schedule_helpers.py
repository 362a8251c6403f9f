"""Functions the schedule tests share, and a check that scheduling kept the numerics."""

from __future__ import annotations

import numpy as np

import mlckit
from mlckit.script import tir as T


@T.prim_func
def mm_relu(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


# A row sum whose extents (7 and 13) no split factor divides.
@T.prim_func
def row_sum_13(A: T.Buffer((7, 13), "float32"), B: T.Buffer((7,), "float32")):
    for i, k in T.grid(7, 13):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_normalize(A: T.Buffer((6, 10), "float32"), C: T.Buffer((6, 10), "float32")):
    B = T.alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 10):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i, j in T.grid(6, 10):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] / B[vi]


def recomputed_row_sum():
    """row_normalize with the row sum B computed at C's loop j: B runs once per element of
    C, each time starting over under its own init."""
    from mlckit import tir

    sch = tir.Schedule(row_normalize)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    return sch


def run(mod, *arrays, target: str = "python"):
    """Run the module's only PrimFunc on copies of ``arrays``; return them (outputs filled)."""
    lib = mlckit.build(mod, target)
    (name,) = lib.function_names()
    copies = [np.array(a, copy=True) for a in arrays]
    lib[name](*copies)
    return copies


def assert_same_numerics(before, after, shapes, target: str = "python", seed: int = 0):
    """Run both modules on the same random inputs; every buffer must end up equal."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    expected = run(before, *arrays)
    actual = run(after, *arrays, target=target)
    for e, a in zip(expected, actual):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
