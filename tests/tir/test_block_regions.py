"""Inference of block read/write regions (what T.reads / T.writes default to)."""

from __future__ import annotations

from mlckit import tir
from mlckit.ir import structural_equal
from mlckit.tir import (
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IterVar,
    LetStmt,
    MatchBufferRegion,
    Range,
    SeqStmt,
    Var,
    decl_buffer,
)
from mlckit.tir.analysis import (
    collect_vars,
    expr_deep_equal,
    get_block_read_write_region,
    infer_block_regions,
)


def spatial(var, extent):
    return IterVar(Range(0, extent), var, IterVar.DataPar)


def reduce(var, extent):
    return IterVar(Range(0, extent), var, IterVar.CommReduce)


def describe(regions):
    """[(buffer, [(min, extent), ...]), ...] with the expressions as-is."""
    return [(r.buffer, [(rng.min, rng.extent) for rng in r.region]) for r in regions]


def assert_regions(regions, expected):
    got = describe(regions)
    assert [b for b, _ in got] == [b for b, _ in expected], "buffers or their order differ"
    for (_, ranges), (buf, want) in zip(got, expected):
        assert len(ranges) == len(want)
        for (mn, ext), (wmn, wext) in zip(ranges, want):
            assert expr_deep_equal(mn, tir.convert(wmn, mn.dtype)), f"{buf.name}: min differs"
            assert expr_deep_equal(ext, tir.convert(wext, ext.dtype)), f"{buf.name}: extent"


X = decl_buffer((128, 64), "float32", "X")
W = decl_buffer((64, 32), "float32", "W")
Y = decl_buffer((128, 32), "float32", "Y")
vi, vj, vk = Var("vi"), Var("vj"), Var("vk")


def matmul_block():
    init = BufferStore(Y, FloatImm("float32", 0.0), [vi, vj])
    body = BufferStore(Y, Y[vi, vj] + X[vi, vk] * W[vk, vj], [vi, vj])
    return Block([spatial(vi, 128), spatial(vj, 32), reduce(vk, 64)], [], [], "Y", body, init)


def test_matmul_reduction_reads_inputs_writes_output():
    reads, writes = get_block_read_write_region(matmul_block())
    assert_regions(reads, [(X, [(vi, 1), (vk, 1)]), (W, [(vk, 1), (vj, 1)])])
    assert_regions(writes, [(Y, [(vi, 1), (vj, 1)])])
    # points are single elements with an extent of the index dtype
    assert all(
        isinstance(r.extent, IntImm) and r.extent.dtype == "int32"
        for region in reads + writes
        for r in region.region
    )


def test_explicit_regions_equal_inferred_ones():
    block = infer_block_regions(matmul_block())
    explicit = matmul_block().with_fields(
        reads=(BufferRegion.from_indices(X, [vi, vk]), BufferRegion.from_indices(W, [vk, vj])),
        writes=(BufferRegion.from_indices(Y, [vi, vj]),),
    )
    assert structural_equal(block, explicit)


def test_elementwise():
    A = decl_buffer((16, 16), "float32", "A")
    B = decl_buffer((16, 16), "float32", "B")
    body = BufferStore(B, A[vi, vj] * 2.0, [vi, vj])
    reads, writes = get_block_read_write_region(
        Block([spatial(vi, 16), spatial(vj, 16)], [], [], "B", body)
    )
    assert_regions(reads, [(A, [(vi, 1), (vj, 1)])])
    assert_regions(writes, [(B, [(vi, 1), (vj, 1)])])


def test_inner_loop_is_relaxed():
    A = decl_buffer((16, 4), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    k = Var("k")
    body = For(k, 0, 4, ForKind.SERIAL, BufferStore(B, B[vi] + A[vi, k], [vi]))
    reads, writes = get_block_read_write_region(Block([spatial(vi, 16)], [], [], "B", body))
    # Without an init, the value B[vi] accumulates into is read too (as in TVM).
    assert_regions(reads, [(B, [(vi, 1)]), (A, [(vi, 1), (0, 4)])])
    assert_regions(writes, [(B, [(vi, 1)])])
    with_init = Block([spatial(vi, 16)], [], [], "B", body, init=BufferStore(B, 0.0, [vi]))
    reads, _ = get_block_read_write_region(with_init)
    assert_regions(reads, [(A, [(vi, 1), (0, 4)])])


def test_tiled_access_and_union_of_accesses():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    k = Var("k")
    # reads A[vi*4 + k] and A[vi*4 + k + 1] for k in [0, 4): the union is A[vi*4 : vi*4 + 5]
    body = For(k, 0, 4, ForKind.SERIAL, BufferStore(B, A[vi * 4 + k] + A[vi * 4 + k + 1], [vi]))
    reads, _ = get_block_read_write_region(Block([spatial(vi, 16)], [], [], "B", body))
    assert_regions(reads, [(A, [(vi * 4, 5)])])


def test_symbolic_loop_extent():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    S = decl_buffer((1,), "float32", "S")
    k = Var("k")
    body = For(k, 0, n, ForKind.SERIAL, BufferStore(S, S[0] + A[k], [0]))
    reads, writes = get_block_read_write_region(Block([], [], [], "sum", body))
    assert_regions(reads, [(S, [(0, 1)]), (A, [(0, n)])])
    assert_regions(writes, [(S, [(0, 1)])])


def test_alloc_buffer_is_excluded():
    A = decl_buffer((16,), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    T = decl_buffer((16,), "float32", "T_local", scope="local")
    body = SeqStmt([BufferStore(T, A[vi], [vi]), BufferStore(B, T[vi] + 1.0, [vi])])
    block = Block([spatial(vi, 16)], [], [], "B", body, alloc_buffers=[T])
    reads, writes = get_block_read_write_region(block)
    assert_regions(reads, [(A, [(vi, 1)])])
    assert_regions(writes, [(B, [(vi, 1)])])


def test_match_buffer_access_maps_to_source_region():
    A = decl_buffer((16, 16), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    sub = decl_buffer((16,), "float32", "A_row")
    k = Var("k")
    source = BufferRegion(A, [Range.from_min_extent(vi, 1), Range(0, 16)])
    body = For(k, 0, 16, ForKind.SERIAL, BufferStore(B, B[vi] + sub[k], [vi]))
    block = Block(
        [spatial(vi, 16)], [], [], "B", body, match_buffers=[MatchBufferRegion(sub, source)]
    )
    reads, writes = get_block_read_write_region(block)
    assert_regions(reads, [(B, [(vi, 1)]), (A, [(vi, 1), (0, 16)])])
    assert_regions(writes, [(B, [(vi, 1)])])


def test_nested_block_uses_its_regions_through_bindings():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    i_inner, wi = Var("i_inner"), Var("wi")
    inner = Block(
        [spatial(wi, 64)],
        [BufferRegion.from_indices(A, [wi])],
        [BufferRegion.from_indices(B, [wi])],
        "inner",
        BufferStore(B, A[wi] + 1.0, [wi]),
    )
    realize = BlockRealize([vi * 4 + i_inner], True, inner)
    outer = Block([spatial(vi, 16)], [], [], "outer", For(i_inner, 0, 4, ForKind.SERIAL, realize))
    reads, writes = get_block_read_write_region(outer)
    assert_regions(reads, [(A, [(vi * 4, 4)])])
    assert_regions(writes, [(B, [(vi * 4, 4)])])


def test_nested_block_without_regions_is_inferred():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    wi = Var("wi")
    inner = Block([spatial(wi, 64)], [], [], "inner", BufferStore(B, A[wi], [wi]))
    outer = Block([], [], [], "outer", BlockRealize([IntImm("int32", 5)], True, inner))
    reads, writes = get_block_read_write_region(outer)
    assert_regions(reads, [(A, [(5, 1)])])
    assert_regions(writes, [(B, [(5, 1)])])


def test_let_bound_index_is_resolved():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((16,), "float32", "B")
    t = Var("t")
    body = LetStmt(t, vi * 4, BufferStore(B, A[t + 1], [vi]))
    reads, _ = get_block_read_write_region(Block([spatial(vi, 16)], [], [], "B", body))
    assert_regions(reads, [(A, [(vi * 4 + 1, 1)])])


def test_buffers_in_order_of_first_access():
    A, B, C, D = (decl_buffer((4,), "float32", name) for name in "ABCD")
    body = SeqStmt([BufferStore(D, C[vi] + A[vi], [vi]), BufferStore(D, B[vi] + A[vi], [vi])])
    reads, _ = get_block_read_write_region(Block([spatial(vi, 4)], [], [], "D", body))
    assert [r.buffer for r in reads] == [C, A, B]


def test_collect_vars():
    k = Var("k")
    stmt = For(k, 0, 4, ForKind.SERIAL, BufferStore(Y, X[vi, k] + 1.0, [vi, vj]))
    assert collect_vars(stmt) == [vi, k, vj]  # uses only: the loop's own `k` is a definition
    assert collect_vars(vi * 4 + vj + vi) == [vi, vj]
