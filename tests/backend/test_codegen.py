"""TensorIR -> Python: readable code, correct numerics on both CPU targets, clear errors."""

from __future__ import annotations

import builtins
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import te, tir
from mlckit.backend import generate_function
from mlckit.backend.codegen import comment, string_literal
from mlckit.errors import BuildError
from mlckit.script import tir as T
from mlckit.testing.fuzzing import CANARY, canary_payload


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
    # TVM's newer entry point compiles a module of PrimFuncs as build does.
    compiled = mlckit.compile(mlckit.IRModule({"mm_relu": mm_relu}), target=target)
    assert compiled.source("mm_relu") == lib.source("mm_relu")


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


def test_parallel_loops_read_and_write_0d_buffers():
    """numba's parallel loops cannot read a 0-d array: a parallel kernel views its 0-d
    parameters and allocations as one element."""

    @T.prim_func
    def shift(
        A: T.Buffer((4, 8), "float32"),
        s: T.Buffer((), "float32"),
        B: T.Buffer((4, 8), "float32"),
        total: T.Buffer((), "float32"),
    ):
        t = T.alloc_buffer((), "float32")
        with T.block("t"):
            t[()] = s[()] * T.float32(2)
        for i in T.parallel(4):
            for j in range(8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] + t[()] + s[()]
        with T.block("total"):
            total[()] = t[()] + s[()]

    source = generate_function(shift, "shift").source
    assert "s = s.reshape(1)" in source and "B[i, j] = A[i, j] + t[0] + s[0]" in source
    lib = mlckit.build(shift, "llvm")
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b, total = np.empty_like(a), np.zeros((), "float32")
    lib["shift"](a, np.array(1.5, "float32"), b, total)
    np.testing.assert_array_equal(b, a + 4.5)
    assert total == 4.5  # written through the one-element view

    @T.prim_func
    def serial(s: T.Buffer((), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = s[()]

    source = generate_function(serial, "serial").source  # no parallel loop: no view
    assert "B[i] = s[()]" in source and "reshape" not in source


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_float_division_by_zero_is_ieee(target):
    """inf and nan as numpy and TVM give them, not Python's ZeroDivisionError (whose check on
    every division would also keep LLVM from vectorizing the loop)."""

    @T.prim_func
    def div(
        A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")
    ):
        for i in range(4):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] / B[vi]

    assert "C[i] = np.divide(A[i], B[i])" in generate_function(div, "div").source
    lib = mlckit.build(div, target)
    a = np.array([1, -1, 0, 3], "float32")
    b = np.array([0, 0, 0, 2], "float32")
    c = np.empty(4, "float32")
    with np.errstate(divide="ignore", invalid="ignore"):
        lib["div"](a, b, c)
        np.testing.assert_array_equal(c, a / b)  # inf, -inf, nan, 1.5


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


# ---------------------------------------------------------------------- integer wrap-around
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _wrap(value: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    return (value - int(info.min)) % 2**info.bits + int(info.min)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# op -> (how to build it, its exact value); every result then wraps to the dtype, as in TVM.
_WRAPPING_OPS = {
    "+": (tir.Add, lambda a, b: a + b),
    "-": (tir.Sub, lambda a, b: a - b),
    "*": (tir.Mul, lambda a, b: a * b),
    "//": (tir.FloorDiv, lambda a, b: a // b),
    "%": (tir.FloorMod, lambda a, b: a % b),
    "truncdiv": (tir.Div, _c_div),
    "truncmod": (tir.Mod, lambda a, b: a - _c_div(a, b) * b),
    "min": (tir.op.min, min),
    "max": (tir.op.max, max),
}


def _random_int_expr(rng, dtype, load, depth):
    """A random integer expression of ``dtype`` over ``load(i)``, and its value as TVM defines it."""
    info = np.iinfo(dtype)
    kind = (
        rng.choice(["leaf", "leaf", "op", "op", "op", "cast", "select", "abs"]) if depth else "leaf"
    )
    if kind == "leaf":
        if rng.random() < 0.5:
            i = rng.randrange(3)
            return load(dtype, i), lambda env: env[dtype][i]
        value = rng.choice([int(info.min), int(info.max), 0, 1, -1, 2, 100, -100, 3])
        value = _wrap(value, dtype)
        return tir.IntImm(dtype, value), lambda env: value
    if kind == "cast":
        other = rng.choice(INT_DTYPES)
        inner, value = _random_int_expr(rng, other, load, depth - 1)
        return tir.Cast(dtype, inner), lambda env: _wrap(value(env), dtype)
    if kind == "abs":
        inner, value = _random_int_expr(rng, dtype, load, depth - 1)
        return tir.op.abs(inner), lambda env: _wrap(abs(value(env)), dtype)
    a, va = _random_int_expr(rng, dtype, load, depth - 1)
    b, vb = _random_int_expr(rng, dtype, load, depth - 1)
    if kind == "select":
        x, vx = _random_int_expr(rng, dtype, load, depth - 1)
        return tir.Select(tir.LT(a, b), x, a), lambda env: vx(env) if va(env) < vb(env) else va(env)
    op = rng.choice(list(_WRAPPING_OPS))
    build, exact = _WRAPPING_OPS[op]
    if op in ("//", "%", "truncdiv", "truncmod"):
        # A constant divisor: division by zero is undefined, and so is the one quotient that
        # overflows 64 bits (numba gives 0 for INT64_MIN // -1).
        divisor = rng.choice([2, 3, 7, -1, -3] if info.min < 0 and info.bits < 64 else [2, 3, 7])
        b, vb = tir.IntImm(dtype, divisor), lambda env: divisor
    return build(a, b), lambda env: _wrap(exact(va(env), vb(env)), dtype)


def _integer_program(seed: int, count: int):
    """``count`` random expressions over every integer dtype in one kernel: ``out_<dtype>[k]``
    stores the k-th of that dtype, reading ``in_<dtype>``. Returns the kernel and the reference."""
    rng = random.Random(seed)
    inputs = {d: tir.decl_buffer((3,), d, f"in_{d}") for d in INT_DTYPES}
    outputs = {d: tir.decl_buffer((count,), d, f"out_{d}") for d in INT_DTYPES}
    stores, expected = [], {}
    for dtype in INT_DTYPES:
        for k in range(count):
            expr, value = _random_int_expr(rng, dtype, lambda d, i: inputs[d][i], depth=3)
            stores.append(tir.BufferStore(outputs[dtype], expr, [k]))
            expected.setdefault(dtype, []).append(value)
    buffers = [*inputs.values(), *outputs.values()]
    func = tir.PrimFunc(
        [b.data for b in buffers], tir.SeqStmt(stores), buffer_map={b.data: b for b in buffers}
    )
    env = {}
    for dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        env[dtype] = [int(info.min), int(info.max), rng.randrange(int(info.min), int(info.max))]
    reference = {d: [f(env) for f in fs] for d, fs in expected.items()}
    return func, env, reference


# numba takes seconds to compile many expressions: fewer of them for "llvm".
@pytest.mark.parametrize("target, count", [("python", 24), ("llvm", 3)])
def test_integer_arithmetic_wraps_at_the_dtype_width_on_every_target(target, count):
    """TVM's semantics: intN/uintN arithmetic wraps (two's complement). CPython's integers
    never overflow and numba computes small integers in 64 bits; both must agree with TVM."""
    func, env, reference = _integer_program(seed=7, count=count)
    args = [np.array(env[d], dtype=d) for d in INT_DTYPES]
    args += [np.zeros(count, dtype=d) for d in INT_DTYPES]
    mlckit.build(func, target)["main"](*args)
    for dtype, out in zip(INT_DTYPES, args[len(INT_DTYPES) :]):
        assert out.tolist() == reference[dtype], dtype


def test_integer_semantics_of_the_issue():
    """int8 arithmetic wrapped on "python" and widened under numba; an int32 store that
    overflowed raised OverflowError on "python" and wrapped under numba."""

    @T.prim_func
    def doubled_over(A: T.Buffer((4,), "int8"), B: T.Buffer((4,), "int32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.Select(A[vi] + A[vi] > T.int8(100), 1, 0)

    @T.prim_func
    def tripled(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * 3

    for target in ("python", "llvm"):
        a, b = np.array([100, 50, 20, -100], "int8"), np.zeros(4, "int32")
        mlckit.build(doubled_over, target)["doubled_over"](a, b)
        assert b.tolist() == [0, 0, 0, 0]  # 100 + 100 wraps to -56 in int8
        a, b = np.array([2**30, -(2**30), 5, 2**31 - 1], "int32"), np.zeros(4, "int32")
        mlckit.build(tripled, target)["tripled"](a, b)
        assert b.tolist() == (a.astype("int64") * 3).astype("int32").tolist()


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_widened_value_computes_in_its_new_dtype(target):
    """numba's int() keeps an int8 an int8: abs of an int8 -128 widened to int16 gave -128."""
    a = te.placeholder((3,), "int8", name="A")
    b = te.compute((3,), lambda i: tir.op.abs(tir.Cast("int16", a[i])), name="B")
    out = np.zeros(3, "int16")
    mlckit.build(te.create_prim_func([a, b]), target)["main"](np.array([-128, 5, -7], "int8"), out)
    assert out.tolist() == [128, 5, 7]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_index_arithmetic_over_symbolic_shapes_stays_exact(dtype):
    """As in TVM, which assumes it never overflows: a wrap in ``B[i * m + j]`` made numba copy
    2.6x slower. Stored as data, it wraps."""
    n, m = te.var("n", dtype), te.var("m", dtype)
    a = te.placeholder((n, m), "float32", name="A")
    b = te.compute((n * m,), lambda k: a[k // m, k % m], name="B")
    c = te.compute((n, m), lambda i, j: i * m + j, name="C")
    source = generate_function(te.create_prim_func([a, b, c]), "flatten").source
    assert "B[k] = A[k // m, k % m]" in source
    assert f"C[i, j] = wrap_{dtype}(i * m + j)" in source


def test_uint64_values_above_int64_stay_uint64_under_numba():
    """numba computes a loop index in int64, and a select between it and a uint64 in float64
    (2**63 + 1 became 2**63): an index cast to uint64 must be a uint64."""
    a = te.placeholder((2,), "uint64", name="A")

    def select(i):
        index = tir.Cast("uint64", i)
        return tir.Select(a[i] > index, a[i], index)

    b = te.compute((2,), select)
    out = np.zeros(2, "uint64")
    big = np.array([2**63 + 1, 0], "uint64")
    mlckit.build(te.create_prim_func([a, b]), "llvm")["main"](big, out)
    assert out.tolist() == [2**63 + 1, 1]


def test_index_arithmetic_over_constant_extents_carries_no_wrap():
    """Wrapping costs nothing where loop ranges prove an expression fits its dtype."""

    @T.prim_func
    def shifted(A: T.Buffer((8, 16), "int32"), B: T.Buffer((8, 8), "int32")):
        for io, ii, j in T.grid(2, 4, 8):
            with T.block("B"):
                vi = T.axis.spatial(8, io * 4 + ii)
                vj = T.axis.spatial(8, j)
                B[vi, vj] = A[vi, vj * 2 + 1]

    source = generate_function(shifted, "shifted").source
    assert "vi = io * 4 + ii" in source and "B[vi, j] = A[vi, j * 2 + 1]" in source
    assert "wrap" not in source and "int(" not in source


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_infinite_and_nan_constants(target):
    """np.float32(inf) was a NameError on "python" and a typing error under numba."""

    @T.prim_func
    def row_max(A: T.Buffer((3, 4), "float32"), B: T.Buffer((3,), "float32")):
        for i, k in T.grid(3, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(-np.inf)
                B[vi] = T.max(B[vi], A[vi, vk])

    @T.prim_func
    def clip(A: T.Buffer((4,), "float64"), B: T.Buffer((4,), "float64")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.Select(A[vi] > T.float64(1), T.float64(np.inf), T.float64(np.nan))

    a = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    b = np.zeros(3, "float32")
    mlckit.build(row_max, target)["row_max"](a, b)
    np.testing.assert_array_equal(b, a.max(axis=1))
    assert "np.float32(-np.inf)" in mlckit.build(row_max, target).source("row_max")
    c = np.zeros(4)
    mlckit.build(clip, target)["clip"](np.array([0.0, 2.0, -1.0, 3.0]), c)
    np.testing.assert_array_equal(c, [np.nan, np.inf, np.nan, np.inf])


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_names_never_run_as_code(target):
    """A block name was pasted into a ``# block`` comment: a newline in it ran what followed
    at build time (or gave a raw IndentationError)."""
    payload = canary_payload()
    names = ["B\n        " + payload, "B\n", "\x00", "B\r" + payload, "B\u2028x", '"""\'']

    # A chain of computations, one block per name: B_k = B_(k-1) + 1.
    def add_one(t, name):
        return te.compute((4,), lambda i: t[i] + 1, name=name)

    tensors = [te.placeholder((4,), "float32", name="A")]
    for name in names:
        tensors.append(add_one(tensors[-1], name))
    lib = mlckit.build(te.create_prim_func([tensors[0], tensors[-1]]), target)
    assert not hasattr(builtins, CANARY)
    x, out = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    lib["main"](x, out)
    np.testing.assert_array_equal(out, x + len(names))
    # Each comment shows its name escaped, on one line.
    lines = lib.source("main").splitlines()
    for name in names:
        assert "        " + comment(f"block {name}") in lines


def test_names_a_module_cannot_hold_build_for_llvm():
    """numba names its cache files after the function: a 300-character name raised OSError
    (file name too long). A kernel named ``__class__`` was looked up as its module's class.
    LLVM cut two long parameter names to one ("redefinition of argument")."""
    a = te.placeholder((4,), "float32", name="y" * 5000)
    b = te.compute((4,), lambda i: a[i] + 1, name="y" * 5000 + "z")
    add_one = te.create_prim_func([a, b])
    names = ["x" * 300, "__class__", "__dict__"]
    lib = mlckit.build(mlckit.IRModule(dict.fromkeys(names, add_one)), "llvm")
    for name in names:
        x, out = np.arange(4, dtype="float32"), np.zeros(4, "float32")
        lib[name](x, out)
        np.testing.assert_array_equal(out, x + 1)


def test_text_reaches_the_source_as_one_line():
    assert comment("block Y") == "# block Y"
    assert comment("β\nx") == "# '\\u03b2\\nx'"
    assert string_literal("a\"'\n\u2028") == "'a\"\\'\\n\\u2028'"
    assert eval(string_literal("a\"'\n\u2028\x00")) == "a\"'\n\u2028\x00"
