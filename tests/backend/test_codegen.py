"""TensorIR -> Python: readable code, correct numerics on both CPU targets, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import tir
from mlckit.backend import generate_function
from mlckit.errors import BuildError
from mlckit.script import tir as T


@T.prim_func
def mm_relu(
    A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((8, 4), "float32")
):
    Y = T.alloc_buffer((8, 4), "float32")
    for i, j, k in T.grid(8, 4, 16):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(8, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def test_generated_source_is_low_level_numpy():
    source = generate_function(mm_relu, "mm_relu").source
    assert source.splitlines()[0] == "def mm_relu(A, B, C):"
    assert "Y = np.empty((8, 4), dtype=np.float32)" in source
    assert "for i in range(8):" in source
    assert "if k == 0:" in source
    assert "Y[i, j] = Y[i, j] + A[i, k] * B[k, j]" in source
    assert "C[i, j] = max(Y[i, j], np.float32(0.0))" in source
    # Sibling loop nests reuse their loop names.
    assert "i_1" not in source


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_build_prim_func_module_and_call_with_destination_passing(target):
    lib = mlckit.build(mlckit.IRModule({"mm_relu": mm_relu}), target=target)
    a = np.random.default_rng(1).standard_normal((8, 16)).astype("float32")
    b = np.random.default_rng(2).standard_normal((16, 4)).astype("float32")
    c = mlckit.nd.empty((8, 4), "float32")
    lib["mm_relu"](mlckit.nd.array(a), mlckit.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    assert "def mm_relu(A, B, C):" in lib.source("mm_relu")
    timing = lib.time_evaluator("mm_relu", mlckit.cpu(), number=2)(a, b, c.numpy())
    assert timing.mean > 0
    assert mlckit.compile is mlckit.build


def test_parallel_loop_becomes_prange_only_outermost():
    @T.prim_func
    def scale(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        for i in T.parallel(4):
            for j in T.parallel(8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

    source = generate_function(scale, "scale").source
    assert "for i in prange(4):" in source and "for j in range(8):" in source
    lib = mlckit.build(scale, "llvm")
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.empty_like(a)
    lib["scale"](a, b)  # a standalone prim_func is exported under its name
    np.testing.assert_array_equal(b, a * 2)


def test_symbolic_shapes_and_predicates():
    @T.prim_func
    def pad_copy(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for io, ii in T.grid((n + 3) // 4, 4):
            with T.block("B"):
                vi = T.axis.spatial(n, io * 4 + ii)
                T.where(io * 4 + ii < n)
                B[vi] = A[vi] + T.float32(1)

    source = generate_function(pad_copy, "pad_copy").source
    assert "n, = A.shape" in source
    assert "if io * 4 + ii < n:" in source
    lib = mlckit.build(pad_copy, "python")
    a = np.arange(7, dtype="float32")
    b = np.zeros(7, "float32")
    lib["pad_copy"](a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_identifiers_are_sanitized():
    x = tir.decl_buffer((4,), "float32", "in-put")
    y = tir.decl_buffer((4,), "float32", "lambda")
    i = tir.Var("np", "int32")
    body = tir.For(i, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(y, x[i], [i]))
    func = tir.PrimFunc([x.data, y.data], body, buffer_map={x.data: x, y.data: y})
    source = generate_function(func, "copy").source
    assert source.splitlines()[0] == "def copy(in_put, lambda_1):"
    assert "for np_1 in range(4):" in source
    a = np.arange(4, dtype="float32")
    out = np.zeros(4, "float32")
    mlckit.build(func, "python")["main"](a, out)
    np.testing.assert_array_equal(out, a)


def test_thread_binding_needs_the_cuda_target():
    @T.prim_func
    def bound(A: T.Buffer((32,), "float32")):
        for i in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(0)

    with pytest.raises(BuildError, match="threadIdx.x.*cuda"):
        mlckit.build(bound, "llvm")


def _int_expr():
    leaves = st.sampled_from(["x", "y"]) | st.integers(-20, 20)
    ops = st.sampled_from(["+", "-", "*", "//", "%", "truncdiv", "truncmod", "min", "max"])
    return st.recursive(leaves, lambda inner: st.tuples(ops, inner, inner), max_leaves=8)


def _build(tree, env):
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, int):
        return tir.IntImm("int32", tree)
    op, a, b = tree
    a, b = _build(a, env), _build(b, env)
    return {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "//": lambda: tir.FloorDiv(a, b),
        "%": lambda: tir.FloorMod(a, b),
        "truncdiv": lambda: tir.Div(a, b),
        "truncmod": lambda: tir.Mod(a, b),
        "min": lambda: tir.op.min(a, b),
        "max": lambda: tir.op.max(a, b),
    }[op]()


def _evaluate(tree, env):
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, int):
        return tree
    op, a, b = tree
    a, b = _evaluate(a, env), _evaluate(b, env)
    if op in ("//", "%", "truncdiv", "truncmod") and b == 0:
        raise ZeroDivisionError
    return {
        "+": a + b,
        "-": a - b,
        "*": a * b,
        "//": a // b if b else 0,
        "%": a % b if b else 0,
        "truncdiv": int(a / b) if b else 0,
        "truncmod": a - int(a / b) * b if b else 0,
        "min": min(a, b),
        "max": max(a, b),
    }[op]


@settings(max_examples=60, deadline=None)
@given(_int_expr(), st.integers(-50, 50), st.integers(-50, 50))
def test_integer_semantics_match_tvm(tree, x_value, y_value):
    try:
        expected = _evaluate(tree, {"x": x_value, "y": y_value})
    except ZeroDivisionError:
        return
    x, y = tir.Var("x"), tir.Var("y")
    out = tir.decl_buffer((1,), "int64", "out")
    value = tir.Cast("int64", _build(tree, {"x": x, "y": y}))
    func = tir.PrimFunc(
        [x, y, out.data], tir.BufferStore(out, value, [0]), buffer_map={out.data: out}
    )
    result = np.zeros(1, "int64")
    mlckit.build(func, "python")["main"](x_value, y_value, result)
    assert result[0] == expected


def test_a_noalias_function_is_compiled_with_noalias_buffers():
    """tir.noalias becomes numba's noalias flag (mlckit.backend.noalias), which lets LLVM keep
    loop invariants in registers and vectorize loops outside prange."""
    lib = mlckit.build(mm_relu.with_attr("tir.noalias", True), "llvm")
    assert "pipeline_class=NoAliasCompiler" in lib.source("mm_relu")
    assert "pipeline_class" not in mlckit.build(mm_relu, "llvm").source("mm_relu")
    a = np.random.default_rng(1).standard_normal((8, 16)).astype("float32")
    b = np.random.default_rng(2).standard_normal((16, 4)).astype("float32")
    c = np.empty((8, 4), "float32")
    lib["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
