"""The default CPU schedule: each rule keeps the numerics and produces the loop kinds it promises."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import relax, te, topi
from mlckit.backend.kernel import wants_fastmath
from mlckit.datasets import mlp_params
from mlckit.demo import mlp_script
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.script import from_source
from mlckit.tir import stmt as S
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import Schedule
from mlckit.tir.schedule.default_schedule import (
    DefaultSchedule,
    default_schedule,
    schedule_for_cpu,
)


def matmul(n: Any, m: Any, k: Any, transposed_b: bool) -> PrimFunc:
    a = te.placeholder((n, k), "float32", name="A")
    b = te.placeholder((m, k) if transposed_b else (k, m), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    if transposed_b:
        c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="C")
    else:
        c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def add(n: int, m: int) -> PrimFunc:
    a = te.placeholder((n, m), "float32", name="A")
    b = te.placeholder((n, m), "float32", name="B")
    c = te.compute((n, m), lambda i, j: a[i, j] + b[i, j], name="C")
    return te.create_prim_func([a, b, c])


def row_sum(n: int, m: int) -> PrimFunc:
    a = te.placeholder((n, m), "float32", name="A")
    r = te.reduce_axis((0, m), name="k")
    c = te.compute((n,), lambda i: te.sum(a[i, r], axis=r), name="C")
    return te.create_prim_func([a, c])


def call(func: PrimFunc, *shapes: tuple[int, ...], target: str = "python") -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    lib = mlckit.build(func, target)
    (name,) = lib.function_names()
    lib[name](*arrays)
    return arrays


def loop_kinds(func: PrimFunc) -> set[S.ForKind]:
    kinds: set[S.ForKind] = set()
    mlckit.tir.stmt_functor.post_order_visit(
        func.body, lambda n: kinds.add(n.kind) if isinstance(n, S.For) else None
    )
    return kinds


def source(func: PrimFunc) -> str:
    return mlckit.build(func, "llvm").get_source()


def test_matmul_rule() -> None:
    func = default_schedule(matmul(64, 128, 64, transposed_b=False))
    assert loop_kinds(func) >= {S.ForKind.PARALLEL, S.ForKind.VECTORIZED}
    a, b, c = call(func, (64, 64), (64, 128), (64, 128))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    text = source(func)
    assert "prange(" in text and "# vectorized" in text
    # The accumulator tile (cache_write + buffer compaction): 16 rows by 64 columns.
    assert "C_local = np.empty((16, 64), dtype=np.float32)" in text
    # The sum keeps its order: no "fastmath" annotation, only fused multiply-adds.
    assert not wants_fastmath(func) and "reassoc" not in text


def test_matmul_rule_tiles_a_dynamic_row_count() -> None:
    n = te.var("n", "int64")
    func = default_schedule(matmul(n, 256, 512, transposed_b=False))
    text = source(func)
    # Row tiles of 16 in parallel; LoopPartition runs the full tiles without the guard and
    # the last, partial tile with it.
    assert "prange(n // 16)" in text and "range(n // 16, (n + 15) // 16)" in text
    assert text.count("< n:") == 3  # init, update and write-back of the partial tile only
    assert "C_local = np.empty((16, 64), dtype=np.float32)" in text
    for rows in (1, 16, 37):
        a, b, c = call(func, (rows, 512), (512, 256), (rows, 256), target="llvm")
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def conv2d_bias_relu(
    channels: int, width: int, kernel: int, padding: int, stride: int = 1
) -> PrimFunc:
    x = te.placeholder((2, 3, width, width), "float32", name="x")
    w = te.placeholder((channels, 3, kernel, kernel), "float32", name="w")
    b = te.placeholder((channels,), "float32", name="b")
    y = topi.nn.conv2d_nchw(x, w, stride, padding, 1)
    z = te.compute(y.shape, lambda n, f, i, j: te.max(y[n, f, i, j] + b[f], 0.0), name="Z")
    return te.create_prim_func([x, w, b, z])


@pytest.mark.parametrize(
    ("channels", "width", "kernel", "padding"), [(8, 12, 3, 1), (6, 9, 3, 0), (5, 70, 1, 0)]
)
def test_sliding_window_rule(channels: int, width: int, kernel: int, padding: int) -> None:
    func = default_schedule(conv2d_bias_relu(channels, width, kernel, padding))
    blocks = [r.block.name_hint for r in Schedule.walk_blocks(func.body)]
    # The padding stays its own nest; bias and relu are computed in the tile's write-back.
    assert ("pad_temp" in blocks) == (padding > 0) and "Z" not in blocks
    assert loop_kinds(func) >= {S.ForKind.VECTORIZED}
    text = source(func)
    out = width + 2 * padding - kernel + 1
    # 4 channels, else 2, else one at a time; a row of more than 64 columns is split by the
    # first of 32, 16, 8 that divides it, or kept whole.
    tile = 4 if channels % 4 == 0 else (2 if channels % 2 == 0 else 1)
    row = out
    assert f"conv2d_nchw_local = np.empty((1, {tile}, 1, {row})" in text
    x, w, b, z = call(
        func,
        (2, 3, width, width),
        (channels, 3, kernel, kernel),
        (channels,),
        (2, channels, out, out),
        target="llvm",
    )
    padded = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kernel, kernel), axis=(2, 3))
    expected = np.einsum("ncyxij,fcij->nfyx", windows, w)
    expected = np.maximum(expected + b[None, :, None, None], 0)
    np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-4)


def test_a_reduction_over_a_dynamic_batch_also_gets_the_program_of_a_batch_of_one() -> None:
    func = default_schedule(dense_bias_relu())
    text = source(func)
    # One kernel, two programs: a batch of one runs without row tiles or guards.
    one, general = text.split("\n    if n == 1:\n")[1].split("\n    else:\n")
    assert "< n:" not in one and "< n:" in general  # the partial row tile's guard
    for batch in (1, 2, 5):
        x, w, b, out = call(func, (batch, 784), (128, 784), (128,), (batch, 128), target="llvm")
        np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)
    # It prints and parses back as it is; elementwise kernels over a batch are not doubled.
    assert_structural_equal(from_source(func.script()), func)
    n = te.var("n", "int64")
    assert "if n == 1" not in source(default_schedule(add_dynamic(n)))


def add_dynamic(n: Any) -> PrimFunc:
    a = te.placeholder((n, 256), "float32", name="A")
    c = te.compute((n, 256), lambda i, j: a[i, j] * 2.0, name="C")
    return te.create_prim_func([a, c])


@settings(max_examples=12, deadline=None)
@given(
    channels=st.integers(1, 9),
    width=st.integers(3, 20),
    kernel=st.integers(1, 3),
    padding=st.integers(0, 1),
    stride=st.integers(1, 2),
)
def test_sliding_window_rule_keeps_the_numerics_of_random_convolutions(
    channels: int, width: int, kernel: int, padding: int, stride: int
) -> None:
    func = default_schedule(conv2d_bias_relu(channels, width, kernel, padding, stride))
    out = (width + 2 * padding - kernel) // stride + 1
    x, w, b, z = call(
        func,
        (2, 3, width, width),
        (channels, 3, kernel, kernel),
        (channels,),
        (2, channels, out, out),
        target="python",
    )
    padded = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kernel, kernel), axis=(2, 3))
    expected = np.einsum("ncyxij,fcij->nfyx", windows[:, :, ::stride, ::stride], w)
    np.testing.assert_allclose(z, np.maximum(expected + b[None, :, None, None], 0), atol=1e-4)


def test_dense_rule_uses_fastmath_dot_products() -> None:
    func = default_schedule(matmul(16, 64, 256, transposed_b=True))
    assert wants_fastmath(func)
    assert S.ForKind.PARALLEL in loop_kinds(func) and S.ForKind.UNROLLED in loop_kinds(func)
    a, b, c = call(func, (16, 256), (64, 256), (16, 64))
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
    assert "C_local = np.empty((2, 8), dtype=np.float32)" in source(func)


# Odd row counts, column counts that 8 does not divide (tiles of 4, 2 or none), a kernel too
# small for threads (no tile).
@pytest.mark.parametrize(("n", "m", "k"), [(3, 12, 512), (5, 10, 400), (6, 7, 400), (1, 2, 7)])
def test_dense_rule_keeps_the_numerics_of_awkward_shapes(n: int, m: int, k: int) -> None:
    func = default_schedule(matmul(n, m, k, transposed_b=True))
    assert wants_fastmath(func)
    a, b, c = call(func, (n, k), (m, k), (n, m), target="llvm")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def dense_bias_relu() -> PrimFunc:
    """A first MLP layer with a dynamic batch, as legalization and fusion produce it."""
    n = te.var("n", "int64")
    x = te.placeholder((n, 784), "float32", name="x")
    w = te.placeholder((128, 784), "float32", name="w")
    b = te.placeholder((128,), "float32", name="b")
    r = te.reduce_axis((0, 784), name="k")
    y = te.compute((n, 128), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="Y")
    z = te.compute((n, 128), lambda i, j: y[i, j] + b[j], name="Z")
    out = te.compute((n, 128), lambda i, j: te.max(z[i, j], te.const(0, "float32")), name="R")
    return te.create_prim_func([x, w, b, out])


def test_dense_rule_with_a_dynamic_batch_folds_the_epilogue() -> None:
    func = schedule_for_cpu(dense_bias_relu()).func  # the program for any batch
    # Bias and relu are computed in the write-back of the accumulator tile: no other block and
    # no intermediate (n, 128) buffer is left.
    assert sorted(r.block.name_hint for r in Schedule.walk_blocks(func.body)) == [
        "Y_init",
        "Y_local",
        "Y_update",
    ]
    text = source(func)
    assert "np.empty((n, 128)" not in text
    assert "Y_local = np.empty((2, 8), dtype=np.float32)" in text
    # Parallel over the 16 column tiles only; the dynamic batch runs inside in tiles of 2
    # rows, the partial last one (LoopPartition) with the guard.
    assert "prange(16)" in text and "% n" not in text
    assert "range(n // 2)" in text and "range(n // 2, (n + 1) // 2)" in text


@pytest.mark.parametrize("shape", ["nmk", (4, 16, 64)])
def test_serial_dense_sums_in_place(shape: Any) -> None:
    # No extent known, or too little work for threads: a serial loop would allocate an
    # accumulator array per tile, so the dot products are summed in place, one at a time.
    n, m, k = (te.var(s, "int64") if isinstance(s, str) else s for s in shape)
    func = default_schedule(matmul(n, m, k, transposed_b=True))
    assert wants_fastmath(func)
    assert S.ForKind.PARALLEL not in loop_kinds(func)
    assert "C_local" not in source(func)
    a, b, c = call(func, (4, 64), (16, 64), (4, 16), target="llvm")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


# Batch 3 is odd: a 2-row tile would leave a partial one.
@pytest.mark.parametrize(
    ("target", "batch"), [("python", 1), ("python", 3), ("llvm", 1), ("llvm", 3), ("llvm", 64)]
)
def test_dense_rule_with_a_dynamic_batch_keeps_the_numerics(target: str, batch: int) -> None:
    func = default_schedule(dense_bias_relu())
    x, w, b, out = call(func, (batch, 784), (128, 784), (128,), (batch, 128), target=target)
    np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_elementwise_rule() -> None:
    func = default_schedule(add(1024, 256))
    assert loop_kinds(func) == {S.ForKind.PARALLEL, S.ForKind.VECTORIZED}
    a, b, c = call(func, (1024, 256), (1024, 256), (1024, 256))
    np.testing.assert_allclose(c, a + b)


def test_small_elementwise_kernel_stays_serial() -> None:
    # Starting threads would cost more than 8x16 additions.
    func = default_schedule(add(8, 16))
    assert S.ForKind.PARALLEL not in loop_kinds(func)
    assert S.ForKind.VECTORIZED in loop_kinds(func)


def test_row_reduction_rule() -> None:
    func = default_schedule(row_sum(2048, 128))
    assert S.ForKind.PARALLEL in loop_kinds(func)
    a, c = call(func, (2048, 128), (2048,))
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert "prange(" in source(func)


def test_scheduled_functions_are_left_alone() -> None:
    func = add(128, 256).with_attr("tir.is_scheduled", True)
    mod = DefaultSchedule()(IRModule({"main": func}))
    assert mod["main"] is func


def test_pass_marks_functions_scheduled() -> None:
    mod = DefaultSchedule()(IRModule({"main": add(128, 256)}))
    assert mod["main"].attrs["tir.is_scheduled"] is True


@pytest.mark.parametrize(
    ("target", "batch"), [("python", 3), ("llvm", 1), ("llvm", 3), ("llvm", 64)]
)
def test_course_mlp_through_the_default_pipeline(target: str, batch: int) -> None:
    mod = relax.get_pipeline("default")(from_source(mlp_script()))
    mod = DefaultSchedule()(mod)
    params = mlp_params()
    w0, b0, w1, b1 = (params[k] for k in ("w0", "b0", "w1", "b1"))
    x = np.random.default_rng(0).random((batch, 784), dtype=np.float32)
    vm = relax.VirtualMachine(relax.build(mod, target), mlckit.cpu())
    out = vm["main"](x, w0, b0, w1, b1)
    out = out.numpy() if hasattr(out, "numpy") else out
    expected = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
