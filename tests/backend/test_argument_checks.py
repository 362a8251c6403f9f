"""A compiled kernel refuses arguments its loops would misread, with an MLCError."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit.errors import VMError
from mlckit.script import tir as T


@T.prim_func
def add_one(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func
def add_rows(a: T.handle, b: T.handle, c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 4), "float32")
    B = T.match_buffer(b, (n, 4), "float32")
    C = T.match_buffer(c, (n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_wrong_static_shape_is_refused(target):
    lib = mlckit.build(add_one, target)
    out = np.zeros((4, 4), "float32")
    with pytest.raises(VMError, match=r"add_one: A must have shape \(4, 4\)"):
        lib["add_one"](np.zeros((3, 4), "float32"), out)
    assert not out.any()  # nothing was written
    lib["add_one"](np.ones((4, 4), "float32"), out)
    np.testing.assert_array_equal(out, 2)


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_symbolic_dims_must_agree_across_arguments(target):
    lib = mlckit.build(add_rows, target)
    a, b = np.ones((3, 4), "float32"), np.ones((3, 4), "float32")
    with pytest.raises(VMError, match=r"add_rows: C must have shape \(n, 4\)"):
        lib["add_rows"](a, b, np.zeros((2, 4), "float32"))
    c = np.zeros((3, 4), "float32")
    lib["add_rows"](a, b, c)
    np.testing.assert_array_equal(c, 2)
    assert "if B.shape != (n, 4):" in lib.source("add_rows")


def test_a_wrong_dtype_or_rank_names_the_compiled_signature():
    lib = mlckit.build(add_one, "llvm")
    with pytest.raises(VMError, match=r"add_one: argument type\(s\) array\(float64.*compiled for"):
        lib["add_one"](np.zeros((4, 4), "float64"), np.zeros((4, 4), "float32"))
    with pytest.raises(VMError, match="number of dimensions"):
        lib["add_one"](np.zeros(16, "float32"), np.zeros((4, 4), "float32"))


@T.prim_func
def pick_row(
    A: T.Buffer((3, 4), "float32"), index: T.Buffer((), "int64"), B: T.Buffer((4,), "float32")
):
    for j in range(4):
        with T.block("B"):
            vj = T.axis.spatial(4, j)
            B[vj] = A[index[()], vj]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_zero_dimensional_buffer_is_an_argument(target):
    lib = mlckit.build(pick_row, target)
    a, out = np.arange(12, dtype="float32").reshape(3, 4), np.zeros(4, "float32")
    lib["pick_row"](a, np.array(2, "int64"), out)
    np.testing.assert_array_equal(out, a[2])


@T.prim_func
def matmul_4(
    A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")
):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_an_output_that_overlaps_another_argument_is_refused(target):
    """Kernels assume tir.noalias: in place, C = A @ C would read what it has overwritten."""
    lib = mlckit.build(matmul_4, target)
    a = np.arange(16, dtype="float32").reshape(4, 4)
    with pytest.raises(
        VMError, match="argument 2 receives a result but shares memory with argument 0"
    ):
        lib["matmul_4"](a, np.eye(4, dtype="float32"), a)
    np.testing.assert_array_equal(a, np.arange(16).reshape(4, 4))  # nothing was written
    # The same array as two inputs is fine: neither is written.
    out = np.empty((4, 4), "float32")
    lib["matmul_4"](a, a, out)
    np.testing.assert_allclose(out, a @ a)


def test_a_strided_output_is_refused_instead_of_written_to_a_copy():
    lib = mlckit.build(add_one, "llvm")
    wide = np.zeros((4, 8), "float32")
    with pytest.raises(VMError, match="argument 1 receives a result but is not C-contiguous"):
        lib["add_one"](np.ones((4, 4), "float32"), wide[:, ::2])
    # A strided input is copied, as before.
    out = np.empty((4, 4), "float32")
    lib["add_one"](wide[:, ::2], out)
    np.testing.assert_array_equal(out, 1)
