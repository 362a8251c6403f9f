"""Buffer compaction: a block-local buffer moves to the loop that uses it, at the size it uses."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit.ir import IRModule
from mlckit.script import tir as T
from mlckit.tir import stmt as S
from mlckit.tir.function import PrimFunc
from mlckit.tir.transform import CompactBufferAllocation, compact_buffer_allocation


@T.prim_func
def tiled_matmul(
    A: T.Buffer((64, 64), "float32"),
    B: T.Buffer((64, 64), "float32"),
    C: T.Buffer((64, 64), "float32"),
):
    # What cache_write(C, 0, "local") + reverse_compute_at + decompose_reduction leave behind.
    C_local = T.alloc_buffer((64, 64), "float32", scope="local")
    for i0 in T.parallel(4):
        for j0 in range(4):
            for i1, j1 in T.grid(16, 16):
                with T.block("C_init"):
                    vi = T.axis.spatial(64, i0 * 16 + i1)
                    vj = T.axis.spatial(64, j0 * 16 + j1)
                    C_local[vi, vj] = T.float32(0)
            for k0, i1, k1 in T.grid(16, 16, 4):
                for j1 in T.vectorized(16):
                    with T.block("C_update"):
                        vi = T.axis.spatial(64, i0 * 16 + i1)
                        vj = T.axis.spatial(64, j0 * 16 + j1)
                        vk = T.axis.reduce(64, k0 * 4 + k1)
                        C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
            for i1, j1 in T.grid(16, 16):
                with T.block("C_local"):
                    vi = T.axis.spatial(64, i0 * 16 + i1)
                    vj = T.axis.spatial(64, j0 * 16 + j1)
                    C[vi, vj] = C_local[vi, vj]


@T.prim_func
def row_sum_then_scale(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    # The accumulator is read after its reduction loop, under the same row loop.
    acc = T.alloc_buffer((8,), "float32")
    for i in range(8):
        for k in range(16):
            with T.block("acc"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    acc[vi] = T.float32(0)
                acc[vi] = acc[vi] + A[vi, vk]
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = acc[vi] * T.float32(2)


@T.prim_func
def reduction_outermost(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    # Every access to acc sits under loop k, but acc carries the sum across k's iterations.
    acc = T.alloc_buffer((8,), "float32")
    for k, i in T.grid(16, 8):
        with T.block("acc"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                acc[vi] = T.float32(0)
            acc[vi] = acc[vi] + A[vi, vk]
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = acc[vi]


@T.prim_func
def dynamic_rows(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 4), "float32")
    B = T.match_buffer(b, (n, 4), "float32")
    Y = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(n, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = Y[vi, vj] * T.float32(2)


def allocations(func: PrimFunc) -> list[tuple[list[str], str, tuple[int, ...]]]:
    """(enclosing loop names, buffer name, shape) of every allocation in ``func``."""
    found = []

    def walk(stmt: object, loops: list[str]) -> None:
        if isinstance(stmt, S.SeqStmt):
            for s in stmt.seq:
                walk(s, loops)
        elif isinstance(stmt, S.For):
            walk(stmt.body, [*loops, stmt.loop_var.name_hint])
        elif isinstance(stmt, S.BlockRealize):
            for buffer in stmt.block.alloc_buffers:
                shape = tuple(int(d.value) for d in buffer.shape)
                found.append((loops, buffer.name, shape))
            if stmt.block.init is not None:
                walk(stmt.block.init, loops)
            walk(stmt.block.body, loops)

    walk(func.body, [])
    return found


def run(func: PrimFunc, arrays: list[np.ndarray], target: str) -> list[np.ndarray]:
    copies = [a.copy() for a in arrays]
    lib = mlckit.build(func, target)
    (name,) = lib.function_names()
    lib[name](*copies)
    return copies


def random_arrays(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def test_cache_write_tile_moves_into_the_tile_loop() -> None:
    compact = compact_buffer_allocation(tiled_matmul)
    assert allocations(compact) == [(["i0", "j0"], "C_local", (16, 16))]
    text = compact.script()
    assert "C_local[i1, j1] = C_local[i1, j1] + A[vi, vk] * B[vk, vj]" in text


def test_the_backend_allocates_the_tile_inside_the_loop() -> None:
    lib = mlckit.build(tiled_matmul, "llvm")
    source = lib.get_source()
    lines = source.splitlines()
    j0 = next(n for n, line in enumerate(lines) if "for j0 in range(4):" in line)
    alloc = next(n for n, line in enumerate(lines) if "C_local = np.empty((16, 16)" in line)
    assert alloc == j0 + 1
    assert "for i0 in prange(4):" in source


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_tiled_matmul_numerics(target: str) -> None:
    a, b, c = random_arrays((64, 64), (64, 64), (64, 64))
    _, _, out = run(tiled_matmul, [a, b, c], target)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_accumulator_stays_above_its_reduction_loop() -> None:
    compact = compact_buffer_allocation(row_sum_then_scale)
    # One element per row, allocated in the row loop, outside the reduction loop k.
    assert allocations(compact) == [(["i"], "acc", (1,))]
    a, b = random_arrays((8, 16), (8,))
    _, out = run(row_sum_then_scale, [a, b], "python")
    np.testing.assert_allclose(out, a.sum(axis=1) * 2, rtol=1e-5)


def test_reduction_outermost_is_left_alone() -> None:
    assert compact_buffer_allocation(reduction_outermost) is reduction_outermost
    a, b = random_arrays((8, 16), (8,))
    _, out = run(reduction_outermost, [a, b], "python")
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


def test_buffer_used_by_two_loop_nests_is_left_alone() -> None:
    assert compact_buffer_allocation(dynamic_rows) is dynamic_rows


def test_module_pass() -> None:
    mod = IRModule({"main": tiled_matmul})
    after = CompactBufferAllocation()(mod)
    assert allocations(after["main"]) == [(["i0", "j0"], "C_local", (16, 16))]
    assert allocations(mod["main"]) == [([], "C_local", (64, 64))]
