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


@T.prim_func
def nested_under_predicate(A: T.Buffer((7,), "float32"), B: T.Buffer((7,), "float32")):
    for i_0, i_1 in T.grid(4, 2):
        with T.block("outer"):
            vi_o = T.axis.spatial(7, i_0 * 2 + i_1)
            T.where(i_0 * 2 + i_1 < 7)
            for ax0 in range(1):
                with T.block("inner"):
                    v0 = T.axis.spatial(7, vi_o + ax0)
                    B[v0] = A[v0] * T.float32(2)


@T.prim_func
def triangular(A: T.Buffer((9,), "float32"), B: T.Buffer((6, 9), "float32")):
    for yy in range(6):
        for ax1 in range(9 - yy):
            with T.block("B"):
                v_i = T.axis.spatial(6, yy)
                v_j = T.axis.spatial(9, yy + ax1)
                B[v_i, v_j] = A[v_j]


def test_bindings_kept_in_range_by_an_outer_predicate_or_an_inner_extent_build():
    # Both were refused: the outer block's T.where was ignored, and each loop was bounded on
    # its own (yy + ax1 "takes values in [0, 14]" although ax1 < 9 - yy).
    a = np.arange(9, dtype="float32")
    b = np.zeros(7, "float32")
    mlckit.build(nested_under_predicate, "python")["nested_under_predicate"](a[:7], b)
    np.testing.assert_array_equal(b, a[:7] * 2)
    c = np.zeros((6, 9), "float32")
    mlckit.build(triangular, "python")["triangular"](a, c)
    np.testing.assert_array_equal(c, np.where(np.arange(9) >= np.arange(6)[:, None], a, 0))
