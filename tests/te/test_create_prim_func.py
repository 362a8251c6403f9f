"""te.compute / reductions lowered by te.create_prim_func: printed form, round trip, numerics."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import te, tir
from mlckit.errors import IRError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import tir as T


def run(func: tir.PrimFunc, *inputs: np.ndarray, target: str = "python") -> list[np.ndarray]:
    """Check the print/parse round trip, then build and run ``func`` on ``inputs``."""
    assert_structural_equal(from_source(func.script()), func)
    sizes = {}
    for param, array in zip(func.params, inputs):
        for dim, size in zip(func.buffer_map[param].shape, array.shape):
            sizes[id(dim)] = size
    outs = []
    for param in func.params[len(inputs) :]:
        buffer = func.buffer_map[param]
        shape = [d.value if isinstance(d, tir.IntImm) else sizes[id(d)] for d in buffer.shape]
        outs.append(np.zeros(shape, buffer.dtype))
    mlckit.build(func, target)["main"](*inputs, *outs)
    return outs


def test_matmul_prints_as_tvm_does():
    A = te.placeholder((4, 3), name="A")
    B = te.placeholder((3, 5), name="B")
    k = te.reduce_axis((0, 3), name="k")
    C = te.compute((4, 5), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

    @T.prim_func(private=True)
    def expected(
        A: T.Buffer((4, 3), "float32"),
        B: T.Buffer((3, 5), "float32"),
        C: T.Buffer((4, 5), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(4, 5, 3):
            with T.block("C"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[v_i, v_j] = T.float32(0.0)
                C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]

    func = te.create_prim_func([A, B, C])
    assert_structural_equal(func, expected)
    a, b = np.random.rand(4, 3).astype("float32"), np.random.rand(3, 5).astype("float32")
    (c,) = run(func, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_symbolic_shapes_and_an_intermediate_tensor():
    n = tir.Var("n", "int64")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, 4), lambda i, j: te.max(B[i, j], 0.0), name="C")

    @T.prim_func(private=True)
    def expected(var_A: T.handle, var_C: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(var_A, (n, T.int64(4)), "float32")
        C = T.match_buffer(var_C, (n, T.int64(4)), "float32")
        B = T.alloc_buffer((n, T.int64(4)), "float32")
        for i, j in T.grid(n, T.int64(4)):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
        for i, j in T.grid(n, T.int64(4)):
            with T.block("C"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                C[v_i, v_j] = T.max(B[v_i, v_j], T.float32(0.0))

    func = te.create_prim_func([A, C])
    assert_structural_equal(func, expected)
    a = np.random.randn(3, 4).astype("float32")
    (c,) = run(func, a)
    np.testing.assert_allclose(c, np.maximum(a * 2, 0))


def test_index_dtype_override_makes_every_index_int64():
    A = te.placeholder((2, 3), name="A")
    k = te.reduce_axis((0, 3), name="k")
    B = te.compute((2,), lambda i: te.sum(A[i, k], axis=k), name="B")

    @T.prim_func(private=True)
    def expected(
        A: T.Buffer((T.int64(2), T.int64(3)), "float32"), B: T.Buffer((T.int64(2),), "float32")
    ):
        T.func_attr({"tir.noalias": True})
        for i, k in T.grid(T.int64(2), T.int64(3)):
            with T.block("B"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                with T.init():
                    B[v_i] = T.float32(0.0)
                B[v_i] = B[v_i] + A[v_i, v_k]

    assert_structural_equal(te.create_prim_func([A, B], index_dtype_override="int64"), expected)


def test_several_reduce_axes_and_a_condition():
    A = te.placeholder((3, 4, 5), name="A")
    j = te.reduce_axis((0, 4), name="j")
    k = te.reduce_axis((0, 5), name="k")
    total = te.compute((3,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="total")
    odd = te.compute(
        (3,), lambda i: te.sum(A[i, j, k], axis=[j, k], where=k.var % 2 == 1), name="odd"
    )
    a = np.random.rand(3, 4, 5).astype("float32")
    t, o = run(te.create_prim_func([A, total, odd]), a)
    np.testing.assert_allclose(t, a.sum((1, 2)), rtol=1e-5)
    np.testing.assert_allclose(o, a[:, :, 1::2].sum((1, 2)), rtol=1e-5)


def test_tuple_reducer_writes_two_outputs_in_one_block():
    # (sum, sum of squares) in one pass, as layer_norm does.
    pair = te.comm_reducer(
        lambda x, y: (x[0] + y[0], x[1] + y[1]),
        lambda t0, t1: (te.const(0, t0), te.const(0, t1)),
        name="pair",
    )
    A = te.placeholder((2, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    s, sq = te.compute((2,), lambda i: pair((A[i, k], A[i, k] * A[i, k]), axis=k), name="S")
    func = te.create_prim_func([A, s, sq])
    assert [b.name for b in func.buffer_map.values()] == ["A", "S_v0", "S_v1"]
    a = np.random.rand(2, 6).astype("float32")
    got_s, got_sq = run(func, a)
    np.testing.assert_allclose(got_s, a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(got_sq, (a * a).sum(1), rtol=1e-5)


def test_min_reduction_and_elementwise_max():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    lo = te.compute((4,), lambda i: te.min(A[i, k], axis=k), name="lo")
    hi = te.compute((4, 5), lambda i, j: te.max(A[i, j], lo[i] + 0.5), name="hi")
    a = np.random.rand(4, 5).astype("float32")
    (h,) = run(te.create_prim_func([A, hi]), a)
    np.testing.assert_allclose(h, np.maximum(a, a.min(1, keepdims=True) + 0.5))


def test_scalar_parameter_and_llvm_target():
    n = tir.Var("n", "int64")
    A = te.placeholder((8,), name="A")
    B = te.compute((4,), lambda i: A[i + n], name="B")
    func = te.create_prim_func([A, B, n])
    a = np.arange(8, dtype="float32")
    b = np.zeros(4, "float32")
    mlckit.build(func, "llvm")["main"](a, b, 3)
    np.testing.assert_array_equal(b, a[3:7])


def test_var_args_names_and_fcompute_names():
    A = te.placeholder((2, 3), name="A")
    B = te.compute(A.shape, lambda *i: A(*i) + 1.0)
    C = te.compute(A.shape, lambda x, *rest: B[x, rest[0]], name="C", varargs_names=["y"])
    assert B.op.name == "compute" and B.shape[0].value == 2 and B.dtype == "float32"
    func = te.create_prim_func([A, C])
    assert "for i0, i1 in T.grid(2, 3)" in func.script()
    assert "for x, y in T.grid(2, 3)" in func.script()


def test_errors_are_clear():
    A = te.placeholder((2, 3), name="A")
    k = te.reduce_axis((0, 3), name="k")
    with pytest.raises(IRError, match="indexed with 1 indices"):
        te.compute((2,), lambda i: A[i])
    with pytest.raises(IRError, match="whole body"):
        te.compute((2,), lambda i: te.sum(A[i, k], axis=k) + 1.0)
    B = te.compute((2, 3), lambda i, j: A[i, j] + 1.0)
    with pytest.raises(IRError, match="not in the argument list"):
        te.create_prim_func([B])
    with pytest.raises(IRError, match="2 indices but the shape has 1"):
        te.compute((2,), lambda i, j: A[i, j])
    with pytest.raises(IRError, match="reduce_axis"):
        te.sum(A[0, 0], axis=[tir.Var("k", "int32")])
