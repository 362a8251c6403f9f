"""tensorize: the course's 16x16x16 matmul intrinsic (ch08 "GPU and Specialized Hardware" part
2), the intrinsic registry, each kind of mismatch as a readable error, and trace replay."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import tir
from mlckit.errors import IRError, MLCError, ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T
from mlckit.testing.examples import tmm16_impl, tmm16_micro_kernel
from mlckit.tir import stmt as S
from mlckit.tir.schedule import Trace

REG_SCOPES = ("global.A_reg", "global.B_reg", "global.accumulator")
GLOBAL_SCOPES = ("global", "global", "global")


def tmm_desc(scopes: tuple[str, str, str] = REG_SCOPES, n: int = 16):
    """The course's description of its accelerator's matrix unit: C += A @ B.T on n x n tiles."""
    sa, sb, sc = scopes

    @T.prim_func
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (n, n), "float32", scope=sa)
        B = T.match_buffer(b, (n, n), "float32", scope=sb)
        C = T.match_buffer(c, (n, n), "float32", scope=sc)
        with T.block("root"):
            T.reads(C[0:n, 0:n], A[0:n, 0:n], B[0:n, 0:n])
            T.writes(C[0:n, 0:n])
            for i, j, k in T.grid(n, n, n):
                with T.block(""):
                    vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                    C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]

    return desc


def tmm_impl(scopes: tuple[str, str, str] = REG_SCOPES, n: int = 16):
    """An implementation as a loop nest (the course calls an extern micro-kernel instead)."""
    sa, sb, sc = scopes

    @T.prim_func
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (n, n), "float32", scope=sa)
        B = T.match_buffer(b, (n, n), "float32", scope=sb)
        C = T.match_buffer(c, (n, n), "float32", scope=sc)
        with T.block("root"):
            T.reads(C[0:n, 0:n], A[0:n, 0:n], B[0:n, 0:n])
            T.writes(C[0:n, 0:n])
            for i, j in T.grid(n, n):
                for k in range(n):
                    with T.block("tmm"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

    return impl


@T.prim_func
def desc_subtracts(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", scope="global.accumulator")
    for i, j, k in T.grid(16, 16, 16):
        with T.block(""):
            vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
            C[vii, vjj] = C[vii, vjj] - A[vii, vkk] * B[vjj, vkk]


@T.prim_func
def desc_b_not_transposed(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", scope="global.accumulator")
    for i, j, k in T.grid(16, 16, 16):
        with T.block(""):
            vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
            C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]


@T.prim_func
def desc_tall_a(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (32, 16), "float32", scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", scope="global.accumulator")
    for i, j, k in T.grid(16, 16, 16):
        with T.block(""):
            vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
            C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


INTRINSICS = {
    "test.tmm16": (tmm_desc(), tmm_impl()),
    "test.tmm16_global": (tmm_desc(GLOBAL_SCOPES), tmm_impl(GLOBAL_SCOPES)),
    "test.tmm8": (tmm_desc(n=8), tmm_impl(n=8)),
    "test.tmm16_sub": (desc_subtracts, tmm_impl()),
    "test.tmm16_b_kj": (desc_b_not_transposed, tmm_impl()),
    "test.tmm16_tall_a": (desc_tall_a, desc_tall_a),
}
for _name, (_desc, _impl) in INTRINSICS.items():
    tir.TensorIntrin.register(_name, _desc, _impl, override=True)


def make_matmul(n: int):
    @T.prim_func
    def matmul(
        A: T.Buffer((n, n), "float32"),
        B: T.Buffer((n, n), "float32"),
        C: T.Buffer((n, n), "float32"),
    ):
        for i, j, k in T.grid(n, n, n):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

    return matmul


MATMUL = make_matmul(64)


@T.prim_func
def two_matmuls(
    A: T.Buffer((32, 32), "float32"),
    B: T.Buffer((32, 32), "float32"),
    C: T.Buffer((32, 32), "float32"),
    D: T.Buffer((32, 32), "float32"),
):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j, k in T.grid(32, 32, 32):
        with T.block("matmul2"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = T.float32(0)
            D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]


def tiled(func=MATMUL, block: str = "matmul", sch=None):
    """The course's schedule (ch08 cell 10): 16x16x16 tiles, the tile loops innermost."""
    sch = sch or tir.Schedule(func)
    i, j, k = sch.get_loops(block)
    i, ii = sch.split(i, factors=[None, 16])
    j, ji = sch.split(j, factors=[None, 16])
    k, ki = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    return sch, (i, j, k, ii)


def course_schedule(scopes: tuple[str, str, str] = REG_SCOPES, decompose: bool = True):
    """ch08 cells 10-14: tiles, a block per tile, its operands in the unit's memories, the
    accumulator's start in a block of its own. Returns the schedule and the tile block."""
    sch, (_, j, k, ii) = tiled()
    block_mm = sch.blockize(ii)
    a_reg = sch.cache_read(block_mm, 0, storage_scope=scopes[0])
    b_reg = sch.cache_read(block_mm, 1, storage_scope=scopes[1])
    sch.compute_at(a_reg, k)
    sch.compute_at(b_reg, k)
    write_back = sch.cache_write(block_mm, 0, storage_scope=scopes[2])
    sch.reverse_compute_at(write_back, j)
    if decompose:
        sch.decompose_reduction(block_mm, k)
    return sch, block_mm


def assert_computes_matmul(mod, n: int = 64) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype="float32") for _ in range(2))
    c = mlckit.nd.empty((n, n), "float32")
    mlckit.build(mod, target="llvm")["main"](mlckit.nd.array(a), mlckit.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b.T, rtol=1e-5)


def blocks_named(mod) -> list[S.Block]:
    found = []
    mlckit.tir.stmt_functor.post_order_visit(
        mod["main"].body, lambda n: found.append(n) if isinstance(n, S.Block) else None
    )
    return found


# ---------------------------------------------------------------------------- the course's matmul
def test_the_course_matmul_tensorized_equals_numpy():
    sch, block_mm = course_schedule()
    sch.tensorize(block_mm, "test.tmm16")
    (tile,) = [b for b in blocks_named(sch.mod) if b.name_hint == "matmul_o_update"]
    # The impl's buffers view the tiles the description's stood for, in their scopes.
    views = {m.buffer.scope: m.source for m in tile.match_buffers}
    assert set(views) == set(REG_SCOPES)
    assert views["global.A_reg"].buffer.name == "A_global_A_reg"
    assert [r.extent.value for r in views["global.accumulator"].region] == [16, 16]
    # The body is the impl's loop nest, named apart from the blocks already there.
    assert isinstance(tile.body, S.For)
    assert any(b.name_hint == "tmm" for b in blocks_named(sch.mod))
    assert_computes_matmul(sch.mod)


def test_the_courses_impl_calls_its_micro_kernel_on_the_matched_tiles():
    tir.op.register_extern("tmm16", tmm16_micro_kernel, override=True)
    tir.TensorIntrin.register("test.tmm16_extern", tmm_desc(), tmm16_impl, override=True)
    sch, block_mm = course_schedule()
    sch.tensorize(block_mm, "test.tmm16_extern")
    (tile,) = [b for b in blocks_named(sch.mod) if b.name_hint == "matmul_o_update"]
    # Each view keeps the impl's strides ([sa, 1]): the build reads sa from the tile it views.
    assert [m.buffer.strides[1].value for m in tile.match_buffers] == [1, 1, 1]
    assert isinstance(tile.body, S.Evaluate)
    assert_computes_matmul(sch.mod)


def test_tensorize_a_loop_blockizes_it_first():
    sch, (_, _, k, ii) = tiled()
    sch.decompose_reduction("matmul", k)
    sch.tensorize(ii, "test.tmm16_global")
    assert any(b.name_hint == "matmul_update_o" for b in blocks_named(sch.mod))
    assert_computes_matmul(sch.mod)


def test_one_intrinsic_tensorizes_several_blocks_sharing_nothing():
    sch = tir.Schedule(two_matmuls)
    for block in ("matmul", "matmul2"):
        _, (_, _, k, ii) = tiled(block=block, sch=sch)
        sch.decompose_reduction(block, k)
        sch.tensorize(ii, "test.tmm16_global")
    names = [b.name_hint for b in blocks_named(sch.mod)]
    assert "tmm" in names and "tmm_1" in names and len(names) == len(set(names))
    rng = np.random.default_rng(0)
    a, b = (rng.random((32, 32), dtype="float32") for _ in range(2))
    c, d = mlckit.nd.empty((32, 32), "float32"), mlckit.nd.empty((32, 32), "float32")
    mlckit.build(sch.mod, target="llvm")["main"](mlckit.nd.array(a), mlckit.nd.array(b), c, d)
    for out in (c, d):
        np.testing.assert_allclose(out.numpy(), a @ b.T, rtol=1e-5)


def test_the_trace_replays_tensorize():
    sch, block_mm = course_schedule()
    sch.tensorize(block_mm, "test.tmm16")
    assert "sch.tensorize(block_or_loop=b" in str(sch.trace)
    assert "tensor_intrin='test.tmm16')" in str(sch.trace)
    for trace in (sch.trace, Trace.from_json(sch.trace.as_json())):
        replayed = tir.Schedule(MATMUL)
        trace.apply_to_schedule(replayed)
        assert_structural_equal(replayed.mod, sch.mod)


# ---------------------------------------------------------------------------- mismatches
def _refused(sch, block, intrin: str) -> str:
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError) as info:
        sch.tensorize(block, intrin)
    assert_structural_equal(sch.mod, before)  # nothing changed
    assert len(sch.trace) == steps
    return str(info.value)


def test_a_different_operation_shows_both_sides_in_the_descriptions_names():
    message = _refused(*course_schedule(), "test.tmm16_sub")
    assert message.startswith(
        "tensorize: block 'matmul_o_update' does not match intrinsic 'test.tmm16_sub' at "
        "for i_1 > for j_1 > for k_1 > block 'matmul':"
    )
    assert "the block computes:       C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]" in message
    assert "the description computes: C[vii, vjj] - A[vii, vkk] * B[vjj, vkk]" in message
    assert len(message.splitlines()) == 4  # no dump of either function


def test_a_different_index_order_names_the_access():
    message = _refused(*course_schedule(), "test.tmm16_b_kj")
    assert "the description computes: C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]" in message
    assert "first difference: B[vjj, vkk] in the block, B[vkk, vjj] in the description" in message


def test_a_different_extent_shows_the_loops():
    message = _refused(*course_schedule(), "test.tmm8")
    assert "the block has:       for i_1 in range(16)" in message
    assert "the description has: for i in range(8)" in message


def test_a_region_of_another_shape_shows_the_region():
    message = _refused(*course_schedule(), "test.tmm16_tall_a")
    assert (
        "the block's region A_global_A_reg[vi_o * 16:vi_o * 16 + 16, vk_o * 16:vk_o * 16 + 16]"
        " does not have the shape (32, 16) of the description's A"
    ) in message


def test_a_different_storage_scope_says_how_to_get_the_right_one():
    scopes = ("global.B_reg", "global.B_reg", "global.accumulator")
    message = _refused(*course_schedule(scopes), "test.tmm16")
    assert "A_global_B_reg and the description's A are in different storage scopes" in message
    assert "global.B_reg and global.A_reg" in message
    assert "storage_scope='global.A_reg'" in message


def test_a_block_that_still_starts_its_reduction_is_sent_to_decompose_reduction():
    message = _refused(*course_schedule(decompose=False), "test.tmm16")
    assert "the block has a T.init() and the description does not" in message
    assert "decompose_reduction" in message


def test_an_unknown_intrinsic_lists_the_registered_ones():
    message = _refused(*course_schedule(), "tmm32")
    assert "no tensor intrinsic named 'tmm32'; registered: " in message
    assert "test.tmm16" in message


# ---------------------------------------------------------------------------- the registry
def test_the_registry_keeps_intrinsics_by_name():
    desc, impl = INTRINSICS["test.tmm16"]
    tir.TensorIntrin.register("test.registry", desc, impl, override=True)
    intrin = tir.TensorIntrin.get("test.registry")
    assert intrin.desc is desc and intrin.impl is impl
    with pytest.raises(MLCError, match="'test.registry' is registered already.*override=True"):
        tir.TensorIntrin.register("test.registry", desc, impl)
    tir.TensorIntrin.register("test.registry", impl, impl, override=True)
    assert tir.TensorIntrin.get("test.registry").desc is impl
    assert tir.TensorIntrin.get("test.nothing", allow_missing=True) is None
    with pytest.raises(MLCError, match="no tensor intrinsic named 'test.nothing'"):
        tir.TensorIntrin.get("test.nothing")


def test_a_malformed_intrinsic_is_refused_when_registered():
    desc, _ = INTRINSICS["test.tmm16"]
    with pytest.raises(IRError, match="impl must be a PrimFunc"):
        tir.TensorIntrin.register("test.bad", desc, "impl")
    with pytest.raises(IRError, match=r"desc's buffer A \(16, 16\) float32 and impl's buffer A"):
        tir.TensorIntrin.register("test.bad", desc, INTRINSICS["test.tmm8"][1])
    assert tir.TensorIntrin.get("test.bad", allow_missing=True) is None


# ---------------------------------------------------------------------------- storage scopes
def test_a_tagged_global_scope_is_global_memory_that_keeps_its_tag():
    sch, _ = tiled()
    cached = sch.cache_read("matmul", 0, storage_scope="global.A_reg")
    (copy,) = [b for b in blocks_named(sch.mod) if b.name_hint == cached.name]
    assert cached.name == "A_global_A_reg"
    assert copy.writes[0].buffer.scope == "global.A_reg"
    assert_computes_matmul(sch.mod)


@pytest.mark.parametrize("scope", ["global.", "global.A-reg", "globalA", "texture", "local.x"])
def test_a_malformed_scope_lists_the_valid_forms(scope: str):
    sch, _ = tiled()
    with pytest.raises(ScheduleError, match=r"unknown storage scope .*global\.<tag>"):
        sch.cache_write("matmul", 0, storage_scope=scope)


@T.prim_func
def scale_twice(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((64,), "float32")
    for i in range(64):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(64):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] * T.float32(3)


def test_the_gpu_allocates_a_tagged_global_buffer_as_global_memory():
    sch = tir.Schedule(scale_twice)
    sch.set_scope("B", 0, "global.stage")
    for block in ("B", "C"):
        bx, tx = sch.split(sch.get_loops(block)[0], [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    lib = mlckit.build(sch.mod, "cuda")
    a = np.arange(64, dtype="float32")
    dev = mlckit.cuda()
    c = mlckit.nd.empty((64,), "float32", device=dev)
    lib["main"](mlckit.nd.array(a, device=dev), c)
    np.testing.assert_allclose(c.numpy(), a * 6)
