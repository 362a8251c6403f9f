"""Every access stays inside its buffer: a BuildError when provably not, a run-time check when
only the sizes passed can tell, nothing when arith proves it (and no valid program rejected)."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import BuildError, VMError
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.tir import stmt as S
from mlckit.tir.stmt_functor import post_order_visit
from mlckit.tir.transform import OutOfBoundsError, lower_prim_func, verify_buffer_bounds


def asserts(func) -> list[S.AssertStmt]:
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, S.AssertStmt) else 0)
    return found


def run(func, target, *arrays):
    lib = mlckit.build(func, target=target)
    nds = [mlckit.nd.array(a) for a in arrays]
    lib[next(iter(lib.function_names()))](*nds)
    return [x.numpy() for x in nds]


# ---------------------------------------------------------------------------- the case
@T.prim_func
def bias_relu_17(
    A: T.Buffer((4, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i, j in T.grid(4, 17):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_loop_one_past_the_buffer_is_a_build_error(target):
    # Before: "llvm" wrote past the end of C silently, "python" raised numpy's IndexError.
    with pytest.raises(OutOfBoundsError) as info:
        mlckit.build(bias_relu_17, target=target)
    err = info.value
    assert isinstance(err, BuildError) and err.buffer == "A"
    assert "when j = 16" in str(err) and "indexed with 16, past its last index 15" in str(err)
    assert "loop j in range(17)" in err.hint and "(4, 16)" in err.hint


def test_relax_build_checks_its_kernels_too():
    @I.ir_module
    class Module:
        @T.prim_func
        def shift(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.block("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi + 1]

        @R.function
        def main(x: R.Tensor((8,), "float32")):
            y = R.call_tir(Module.shift, (x,), out_sinfo=R.Tensor((8,), "float32"))
            return y

    with pytest.raises(OutOfBoundsError, match=r"reads A\[vi \+ 1\] outside A: when i = 7"):
        relax.build(Module, target="python")


# ---------------------------------------------------------------------------- constant shapes
def _shifted(extent: int, index, size: int = 8):
    @T.prim_func
    def f(A: T.Buffer((size,), "float32"), B: T.Buffer((extent,), "float32")):
        for i in range(extent):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[index(vi)]

    return f


@pytest.mark.parametrize(
    "extent, index, message",
    [
        (8, lambda v: v + 1, "when i = 7, axis 0 of A is indexed with 8"),
        (8, lambda v: v - 1, "when i = 0, axis 0 of A is indexed with -1, below 0"),
        (8, lambda v: v * 2, "when i = 4, axis 0 of A is indexed with 8"),
        (9, lambda v: v, "when i = 8"),
    ],
)
def test_offsets_past_either_end_are_build_errors(extent, index, message):
    with pytest.raises(OutOfBoundsError, match=message):
        verify_buffer_bounds(_shifted(extent, index))


@pytest.mark.parametrize(
    "extent, index", [(7, lambda v: v + 1), (8, lambda v: v), (4, lambda v: v * 2)]
)
def test_accesses_inside_need_no_check(extent, index):
    func = _shifted(extent, index)
    assert verify_buffer_bounds(func) is func


@T.prim_func
def padded(A: T.Buffer((16,), "float32"), B: T.Buffer((18,), "float32")):
    # TVM's padding pattern: the guard keeps the read inside A.
    for i in range(18):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.if_then_else(vi >= 1 and vi < 17, A[vi - 1], T.float32(0))


def test_guarded_reads_are_not_false_positives():
    assert verify_buffer_bounds(padded) is padded
    a = np.arange(16, dtype="float32")
    (_, b) = run(padded, "python", a, np.zeros(18, "float32"))
    np.testing.assert_array_equal(b, np.pad(a, 1))


def test_split_with_predicate_is_in_bounds_and_a_wrong_predicate_is_not():
    def split(bound: int):
        @T.prim_func
        def f(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
            for i0, i1 in T.grid(3, 4):
                with T.block("B"):
                    vi = T.axis.spatial(10, i0 * 4 + i1)
                    T.where(i0 * 4 + i1 < bound)
                    B[vi] = A[vi]

        return f

    good = split(10)
    assert verify_buffer_bounds(good) is good
    with pytest.raises(OutOfBoundsError, match=r"when i0 = 2, i1 = 2, axis 0 of A is indexed"):
        verify_buffer_bounds(split(11))


def test_scheduled_programs_keep_building():
    # A non-dividing split, then a cache read computed at the inner loop ("local" scope).
    @T.prim_func
    def matmul(A: T.Buffer((10, 12), "float32"), B: T.Buffer((12, 7), "float32"),
               C: T.Buffer((10, 7), "float32")):  # fmt: skip
        for i, j, k in T.grid(10, 7, 12):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    sch = mlckit.tir.Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    k0, k1 = sch.split(k, [None, 5])
    sch.reorder(i0, j, k0, i1, k1)
    cache = sch.cache_read(sch.get_block("C"), 0, "local")
    sch.compute_at(cache, k0)
    lowered = lower_prim_func(sch.mod["main"])
    assert not asserts(lowered)
    rng = np.random.default_rng(0)
    a, b = rng.random((10, 12), "float32"), rng.random((12, 7), "float32")
    (_, _, c) = run(sch.mod["main"], "python", a, b, np.zeros((10, 7), "float32"))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_an_out_of_bounds_read_in_init_and_a_match_buffer_region():
    @T.prim_func
    def init_reads(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = A[vi, vk + 4]  # vk is 0 here: reads A[vi, 4]
                B[vi] = B[vi] + A[vi, vk]

    with pytest.raises(OutOfBoundsError, match=r"A\[vi, vk \+ 4\].*indexed with 4"):
        verify_buffer_bounds(init_reads)

    @T.prim_func
    def tiles(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                tile = T.match_buffer(A[vi * 4 + 1 : vi * 4 + 5], (4,))
                B[vi] = tile[0]

    with pytest.raises(OutOfBoundsError, match=r"views A\[vi \* 4 \+ 1:vi \* 4 \+ 5\]"):
        verify_buffer_bounds(tiles)


# ---------------------------------------------------------------------------- symbolic shapes
def _symbolic(extent):
    @T.prim_func
    def f(a: T.handle, b: T.handle):
        n, m = T.int64(), T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (m,), "float32")
        for i in range(extent(n, m)):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(1)

    return f


def test_symbolic_extent_n_over_n_is_proved():
    @T.prim_func
    def f(a: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        for i in range(n):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = A[vi] * T.float32(2)

    assert verify_buffer_bounds(f) is f


def test_symbolic_extent_n_plus_one_is_out_of_bounds_for_every_n():
    @T.prim_func
    def f(a: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        for i in range(n + 1):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(0)

    with pytest.raises(OutOfBoundsError, match="for every size: whenever the loops run"):
        mlckit.build(f, target="python")


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_extent_m_over_n_is_checked_once_at_the_entry(target):
    func = _symbolic(lambda n, m: m)
    lowered = lower_prim_func(func)
    (check,) = asserts(lowered)
    # At the entry: no loop around it.
    assert not any(isinstance(s, S.For) for s in _ancestors(lowered.body, check))
    assert "reads A[vi] outside A (shape (n,))" in check.message
    a = np.arange(6, dtype="float32")
    (_, b) = run(func, target, a, np.zeros(4, "float32"))
    np.testing.assert_array_equal(b, a[:4] + 1)
    with pytest.raises(VMError, match=r"reads A\[vi\] outside A"):
        run(func, target, a, np.zeros(7, "float32"))


def _ancestors(root, target) -> list:
    path: list = []

    def walk(node, trail) -> bool:
        if node is target:
            path.extend(trail)
            return True
        children = [getattr(node, f, None) for f in ("body", "block", "then_case", "else_case")]
        children += list(getattr(node, "seq", ()))
        return any(walk(c, [*trail, node]) for c in children if isinstance(c, S.Stmt))

    walk(root, [])
    return path


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_an_index_read_from_data_is_checked_where_it_is_used(target):
    @T.prim_func
    def gather(A: T.Buffer((5,), "float32"), Idx: T.Buffer((3,), "int32"),
               B: T.Buffer((3,), "float32")):  # fmt: skip
        for i in range(3):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[Idx[vi]]

    a = np.arange(5, dtype="float32")
    (_, _, b) = run(gather, target, a, np.array([4, 0, 2], "int32"), np.zeros(3, "float32"))
    np.testing.assert_array_equal(b, [4, 0, 2])
    for bad in (5, -1):
        with pytest.raises(VMError, match=r"reads A\[Idx\[vi\]\] outside A \(shape \(5,\)\)"):
            run(gather, target, a, np.array([0, bad, 1], "int32"), np.zeros(3, "float32"))


def test_the_lowered_function_prints_its_checks_and_parses_back():
    lowered = lower_prim_func(_symbolic(lambda n, m: m))
    text = lowered.script()
    assert "assert m < T.int64(1) or n >= m, \"f: block 'B' reads A[vi]" in text
    mlckit.ir.assert_structural_equal(from_source(text), lowered)


def test_symbolic_proofs_see_through_a_fused_predicate_and_a_max():
    # What the default GPU schedule makes of an (n, 8) loop nest: fused, split by 1024, with
    # the predicate on the fused index; the rows are that index // 8.
    @T.prim_func
    def fused(a: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 8), "float32")
        for i0, i1 in T.grid((n * 8 + 1023) // 1024, 1024):
            with T.block("A"):
                vi = T.axis.spatial(n, (i0 * 1024 + i1) // 8)
                vj = T.axis.spatial(8, (i0 * 1024 + i1) % 8)
                T.where(i0 * 1024 + i1 < n * 8)
                A[vi, vj] = T.float32(0)

    assert verify_buffer_bounds(fused) is fused

    # A pooling window over its padded input (ceil mode): h % 2 + max(1 - h % 2, 0) >= 1.
    @T.prim_func
    def pool(a: T.handle, b: T.handle):
        h = T.int64()
        A = T.match_buffer(a, (h,), "float32")
        B = T.match_buffer(b, (h + T.max(1 - h % 2, 0) + 2,), "float32")
        for i, r in T.grid(h // 2 + 1, 3):
            with T.block("B"):
                vi, vr = T.axis.remap("SR", [i, r])
                B[vi * 2 + vr] = T.float32(0)

    assert verify_buffer_bounds(pool) is pool


def test_a_large_loop_nest_the_proof_cannot_decide_checks_each_access():
    # Past MAX_ENUMERATED iterations only the corners are evaluated; neither is out of bounds
    # here, but vi = 24 is (vi * 7 % 13 is 12 and vi % 2 is 0: A[1012]).
    @T.prim_func
    def f(A: T.Buffer((1012,), "float32"), B: T.Buffer((1 << 17,), "float32")):
        for i in range(1 << 17):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi * 7 % 13 + 1000 - vi % 2]

    (check,) = asserts(verify_buffer_bounds(f))
    assert isinstance(check.body, S.BufferStore)  # right before the access, inside the loop
