"""Loop partitioning: the full tiles of a guarded dynamic loop run without the guard."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit.script import tir as T
from mlckit.tir import stmt as S
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt_functor import post_order_visit
from mlckit.tir.transform import loop_partition


@T.prim_func
def row_tiles(a: T.handle, b: T.handle):
    # A dynamic row count split by 4: the last tile's rows past n are skipped.
    n = T.int64()
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, (n, 8), "float32")
    for i0 in T.parallel((n + 3) // 4):
        for i1, j in T.grid(4, 8):
            with T.block("B"):
                vi = T.axis.spatial(n, i0 * 4 + i1)
                vj = T.axis.spatial(8, j)
                T.where(i0 * 4 + i1 < n)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func
def two_guards(a: T.handle, b: T.handle):
    # Two conditions: the rows (linear in i0) and a column condition that is not.
    n = T.int64()
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, (n, 8), "float32")
    for i0 in range((n + 3) // 4):
        for i1, j in T.grid(4, 8):
            with T.block("B"):
                vi = T.axis.spatial(n, i0 * 4 + i1)
                vj = T.axis.spatial(8, j)
                T.where(i0 * 4 + i1 < n and j % 2 == 0)
                B[vi, vj] = A[vi, vj] + T.float32(1)


def loops_and_predicates(func: PrimFunc) -> tuple[list[S.For], list[str]]:
    loops: list[S.For] = []
    predicates: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, S.For):
            loops.append(node)
        if isinstance(node, S.BlockRealize) and node.block.name_hint != "root":
            predicates.append(str(node.predicate))

    post_order_visit(func.body, visit)
    return loops, predicates


def test_the_full_tiles_lose_the_guard() -> None:
    after = loop_partition(row_tiles)
    outer = after.body.block.body if isinstance(after.body, S.BlockRealize) else after.body
    assert isinstance(outer, S.SeqStmt) and len(outer.seq) == 2
    full, rest = outer.seq
    assert str(full.extent) == "n // T.int64(4)"
    assert str(rest.min) == "n // T.int64(4)"
    # The partial tile runs on one thread.
    assert (full.kind, rest.kind) == (S.ForKind.PARALLEL, S.ForKind.SERIAL)
    assert loops_and_predicates(PrimFunc([], full))[1] == ["True"]
    (guard,) = loops_and_predicates(PrimFunc([], rest))[1]
    assert guard.startswith("i0 * T.int64(4) + ") and guard.endswith(" < n")


def test_a_guard_that_is_not_linear_stays() -> None:
    predicates = loops_and_predicates(loop_partition(two_guards))[1]
    assert len(predicates) == 2
    assert predicates[0] == "j % 2 == 0"
    assert predicates[1].startswith("i0 * T.int64(4) + ") and " < n" in predicates[1]


def test_static_loops_and_unguarded_loops_are_left_alone() -> None:
    @T.prim_func
    def static(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
        for i0, i1 in T.grid(3, 4):
            with T.block("B"):
                vi = T.axis.spatial(10, i0 * 4 + i1)
                T.where(i0 * 4 + i1 < 10)
                B[vi] = A[vi]

    assert loop_partition(static) is static


@pytest.mark.parametrize("func", [row_tiles, two_guards])
@pytest.mark.parametrize("target", ["python", "llvm"])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 8, 13])
def test_partitioned_kernels_compute_every_row_once(func: PrimFunc, target: str, n: int) -> None:
    lib = mlckit.build(func, target)
    a = np.random.default_rng(n).random((n, 8), dtype=np.float32)
    b = mlckit.nd.array(np.full((n, 8), -1, "float32"))
    lib(mlckit.nd.array(a), b)
    if func is row_tiles:
        expected = a * 2
    else:
        expected = np.where(np.arange(8) % 2 == 0, a + 1, -1).astype("float32")
    np.testing.assert_allclose(b.numpy(), expected)
