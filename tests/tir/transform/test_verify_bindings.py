"""A block whose loop runs past its iter var's domain is refused before compiling."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import tir
from mlckit.errors import BuildError
from mlckit.script import tir as T


@T.prim_func
def too_long_loop(A: T.Buffer((128,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi]


@T.prim_func
def copy(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = A[vi]


def test_a_loop_longer_than_the_domain_is_a_build_error():
    with pytest.raises(
        BuildError,
        match=r"iter var vi = i takes values in \[0, 127\], outside its domain \[0, 64\)",
    ):
        mlckit.build(too_long_loop, "llvm")


def test_a_split_partial_tile_is_guarded_by_its_predicate():
    sch = tir.Schedule(copy)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])  # 3 x 4 = 12 iterations for 10 elements: T.where keeps 10
    lib = mlckit.build(sch.mod, "llvm")
    a, b = np.arange(10, dtype="float32"), np.zeros(10, "float32")
    lib["main"](a, b)
    np.testing.assert_array_equal(b, a)
