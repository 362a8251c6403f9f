"""fuse, reorder, parallel, vectorize, unroll, bind, annotate and unannotate: the loop nest each
one produces, numerics, the printed script and trace, replay, and the applications they refuse."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu, row_sum_13

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import tir as T

MM_SHAPES = [(128, 128)] * 3


@T.prim_func
def two_stage(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i in range(16):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)


@T.prim_func
def prefix_sum(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    # Each element reads the one before: declared spatial, but iteration i needs i - 1.
    for i in range(1, 64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = B[vi - 1] + A[vi]


@T.prim_func
def triangle(A: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(1)


def check_script_round_trips(sch: tir.Schedule) -> None:
    text = sch.mod.script()
    assert_structural_equal(from_source(text), sch.mod)


def check_replays(sch: tir.Schedule, func) -> None:
    fresh = tir.Schedule(func)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


# ---------------------------------------------------------------------- fuse
def test_fuse_two_loops_matches_the_expected_loop_nest():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    fused = sch.fuse(i, j)
    assert sch.get(fused).loop_var.name_hint == "i_j_fused"
    assert sch.get(k).extent.value == 128  # the inner loop's handle survives

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i_j_fused, k in T.grid(16384, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i_j_fused // 128)
                vj = T.axis.spatial(128, i_j_fused % 128)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert "for i_j_fused, k in T.grid(16384, 128):" in sch.mod.script()
    assert str(sch.trace).splitlines()[-1] == "l4 = sch.fuse(l1, l2)"
    check_script_round_trips(sch)
    check_replays(sch, mm_relu)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


def test_fuse_three_loops_divides_the_fused_index():
    sch = tir.Schedule(mm_relu)
    loops = sch.get_loops(sch.get_block("Y"))
    sch.fuse(loops, preserve_unit_iters=False)  # a list is accepted as well

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i_j_k_fused in range(2097152):
            with T.block("Y"):
                vi = T.axis.spatial(128, i_j_k_fused // 16384)
                vj = T.axis.spatial(128, i_j_k_fused // 128 % 128)
                vk = T.axis.reduce(128, i_j_k_fused % 128)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert "sch.fuse([l1, l2, l3], preserve_unit_iters=False)" in str(sch.trace)
    check_replays(sch, mm_relu)


def test_fuse_undoes_a_split():
    sch = tir.Schedule(mm_relu)
    _, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.fuse(j0, j1)
    # j_0 * 4 + j_1 with j_0 = f // 4 and j_1 = f % 4 simplifies back to f.
    assert 'vi, vj = T.axis.remap("SS", [i, j_0_j_1_fused])' in sch.mod.script()
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


# ---------------------------------------------------------------------- reorder
def test_reorder_permutes_the_given_loops_and_keeps_the_others():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(k, i)

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for k, j, i in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert str(sch.trace).splitlines()[-1] == "sch.reorder(l3, l1)"
    # Reorder keeps the loops themselves, so every handle still names its loop.
    loop_vars = [rv.loop_var for rv in sch.get_loops(sch.get_block("Y"))]
    assert all(a is b.loop_var for a, b in zip(loop_vars, [k, j, i]))
    check_replays(sch, mm_relu)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


def test_reorder_after_split_tiles_the_loop_nest():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    names = [sch.get(rv).loop_var.name_hint for rv in sch.get_loops(sch.get_block("Y"))]
    assert names == ["i_0", "j_0", "k", "i_1", "j_1"]
    check_script_round_trips(sch)
    check_replays(sch, mm_relu)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


# ---------------------------------------------------------------------- loop kinds
def test_parallel_vectorize_unroll_set_the_loop_kinds():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(k, j)
    sch.parallel(i)
    sch.unroll(k)
    sch.vectorize(j)
    ci, cj = sch.get_loops(sch.get_block("C"))
    sch.parallel(ci)
    sch.vectorize(cj)

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i in T.parallel(128):
            for k in T.unroll(128):
                for j in T.vectorized(128):
                    with T.block("Y"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            Y[vi, vj] = T.float32(0)
                        Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i in T.parallel(128):
            for j in T.vectorized(128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert str(sch.trace).splitlines()[-2:] == ["sch.parallel(loop=l5)", "sch.vectorize(loop=l6)"]
    check_script_round_trips(sch)
    check_replays(sch, mm_relu)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


def test_parallel_and_vectorize_keep_numerics_on_llvm():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    ci, cj = sch.get_loops(sch.get_block("C"))
    sch.parallel(ci)
    sch.vectorize(cj)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES, target="llvm")


def test_bind_makes_thread_binding_loops_that_round_trip():
    sch = tir.Schedule(mm_relu)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i in T.thread_binding(128, thread="blockIdx.x"):
            for j in T.thread_binding(128, thread="threadIdx.x"):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert sch.get(i).thread_binding.thread_tag == "blockIdx.x"
    assert 'sch.bind(loop=l2, thread_axis="threadIdx.x")' in str(sch.trace).replace("'", '"')
    check_script_round_trips(sch)
    check_replays(sch, mm_relu)


# ---------------------------------------------------------------------- annotations
def test_annotate_and_unannotate_loops_and_blocks():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("C")
    i, _ = sch.get_loops(block)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(block, "meta_schedule.tiling", "SSR")
    sch.annotate(block, "scratch", [1, 2.5])
    sch.unannotate(block, "scratch")

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i in T.serial(128, annotations={"pragma_auto_unroll_max_step": 16}):
            for j in range(128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.block_attr({"meta_schedule.tiling": "SSR"})
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    text = str(sch.trace).replace("'", '"')
    assert 'sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling", ann_val="SSR")' in text
    assert 'sch.unannotate(block_or_loop=b0, ann_key="scratch")' in text
    check_script_round_trips(sch)
    check_replays(sch, mm_relu)
    assert_same_numerics(mm_relu, sch.mod, MM_SHAPES)


# ---------------------------------------------------------------------- refusals
@T.prim_func
def scan(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.scan(8, j)
            B[vi, vj] = A[vi, vj]


def _loops(sch, block="Y"):
    return sch.get_loops(sch.get_block(block))


# (function, the illegal call given the schedule, its loops per block and its blocks by name,
# the message it must give)
REFUSALS = [
    (mm_relu, lambda s, L, B: s.fuse(L["Y"][0], L["Y"][2]), "fuse: loop 'k' is not directly inside loop 'i'"),
    (mm_relu, lambda s, L, B: s.fuse(L["Y"][1], L["Y"][0]), "fuse: loop 'i' is not directly inside loop 'j'"),
    (two_stage, lambda s, L, B: s.fuse(*L["B"]), "fuse: loop 'i' has other statements besides loop 'j'"),
    (prefix_sum, lambda s, L, B: s.fuse(*L["B"]), "fuse: loop 'i' starts at 1, not at 0"),
    (triangle, lambda s, L, B: s.fuse(*L["A"]), "fuse: the range of loop 'j' depends on loop 'i'"),
    (mm_relu, lambda s, L, B: s.reorder(L["Y"][0], L["C"][1]), "reorder: loops 'i' and 'j' are not in one chain"),
    (mm_relu, lambda s, L, B: s.reorder(L["Y"][2], L["Y"][2]), "reorder: loop 'k' appears more than once"),
    (two_stage, lambda s, L, B: s.reorder(L["B"][1], L["B"][0]), "reorder: loop 'i' has other statements besides loop 'j'"),
    (triangle, lambda s, L, B: s.reorder(*reversed(L["A"])), "reorder: the range of loop 'j' depends on loop 'i'"),
    (scan, lambda s, L, B: s.reorder(*reversed(L["B"])), "reorder: block 'B' under loop 'j' has the scan iter var 'vj'"),
    (mm_relu, lambda s, L, B: s.parallel(L["Y"][2]), "parallel: loop 'k' is a reduction loop of block 'Y'.*needs rfactor"),
    (mm_relu, lambda s, L, B: s.vectorize(L["Y"][2]), "vectorize: loop 'k' is a reduction loop of block 'Y'.*needs rfactor"),
    (prefix_sum, lambda s, L, B: s.vectorize(L["B"][0]), "vectorize: block 'B' under loop 'i' reads B\\[vi - 1\\] of buffer 'B', which it also writes"),
    (prefix_sum, lambda s, L, B: s.parallel(L["B"][0]), "parallel: block 'B' under loop 'i' reads B.vi - 1. of buffer 'B'"),
    (scan, lambda s, L, B: s.parallel(L["B"][0]), "parallel: block 'B' under loop 'i' has the scan iter var 'vj'"),
    (mm_relu, lambda s, L, B: s.bind(L["C"][0], "threadIdx.w"), "bind: 'threadIdx.w' is not a thread axis"),
    (mm_relu, lambda s, L, B: s.bind(L["Y"][2], "threadIdx.x"), "bind: loop 'k' is a reduction loop"),
    (mm_relu, lambda s, L, B: s.unannotate(B["C"], "nope"), "unannotate: block 'C' has no annotation 'nope'"),
    (mm_relu, lambda s, L, B: s.annotate(L["C"][0], "key", object()), "annotate: the value .* is a object"),
    (mm_relu, lambda s, L, B: s.annotate(B["C"], "", 1), "annotate: the annotation key '' of block 'C' must be a non-empty string"),
]  # fmt: skip


def assert_refused(sch: tir.Schedule, illegal, message: str) -> None:
    """``illegal()`` raises a ScheduleError matching ``message`` and changes nothing."""
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        illegal()
    assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == steps


@pytest.mark.parametrize("func, call, message", REFUSALS)
def test_illegal_applications_raise_and_leave_the_schedule_unchanged(func, call, message):
    sch = tir.Schedule(func)
    names = [realize.block.name_hint for realize in sch.walk_blocks(sch.func.body)]
    blocks = {name: sch.get_block(name) for name in names}
    loops = {name: sch.get_loops(rv) for name, rv in blocks.items()}
    assert_refused(sch, lambda: call(sch, loops, blocks), message)


@pytest.mark.parametrize("kind", ["parallel", "vectorize"])
def test_a_loop_over_both_halves_of_a_decomposed_reduction_is_refused_with_the_order_to_use(
    kind,
):
    # Y_init and Y_update both write Y under i: neither is the loop's only writer (TVM's
    # "local dominant" condition), while block Y before decompose_reduction was.
    sch = tir.Schedule(mm_relu)
    i, _, k = _loops(sch)
    sch.decompose_reduction(sch.get_block("Y"), k)
    assert_refused(
        sch,
        lambda: getattr(sch, kind)(i),
        f"{kind}: block 'Y_init' under loop 'i' is not the only block writing buffer 'Y', "
        "so the loop's iterations may depend on each other; blocks 'Y_init' and 'Y_update' "
        f"are the init and update of one reduction split by decompose_reduction: call {kind} "
        "on loop 'i' before decompose_reduction",
    )
    before = tir.Schedule(mm_relu)
    getattr(before, kind)(_loops(before)[0])  # the order the message gives is accepted
    before.decompose_reduction(before.get_block("Y"), _loops(before)[2])


def test_handles_of_fused_loops_go_stale():
    sch = tir.Schedule(mm_relu)
    i, j, _ = _loops(sch)
    fused = sch.fuse(i, j)
    assert_refused(sch, lambda: sch.parallel(i), "parallel: the loop 'i' no longer exists")
    assert_refused(sch, lambda: sch.reorder(fused, j), "reorder: the loop 'j' no longer exists")
    sch.parallel(fused)  # the handle fuse returned is the live one
    assert sch.get(fused).kind == tir.ForKind.PARALLEL


def test_fuse_refuses_annotated_and_thread_bound_loops():
    sch = tir.Schedule(mm_relu)
    i, j = _loops(sch, "C")
    sch.annotate(i, "pragma_unroll", 1)
    assert_refused(sch, lambda: sch.fuse(i, j), "fuse: loop 'i' has annotations or a thread")
    sch.bind(j, "threadIdx.x")
    sch.unannotate(i, "pragma_unroll")
    assert_refused(sch, lambda: sch.fuse(i, j), "fuse: loop 'j' has annotations or a thread")


def test_reorder_refuses_to_swap_the_pieces_of_a_loop_fused_across_spatial_and_reduction():
    # Swapped, the pieces of i * 13 + k would visit (i = 3, k = 7) before (i = 3, k = 0),
    # where B's init runs.
    sch = tir.Schedule(row_sum_13)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    outer, inner = sch.split(fused, factors=[2, None])
    before = sch.mod
    with pytest.raises(ScheduleError, match="reorder: loop 'i_k_fused_.' feeds both spatial"):
        sch.reorder(inner, outer)
    assert_structural_equal(sch.mod, before)
    sch.reorder(outer, inner)  # their order as it is: nothing moves
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])
