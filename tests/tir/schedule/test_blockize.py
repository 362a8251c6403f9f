"""blockize: outer blocks over tiles, reduction inits moved out, numerics, errors."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu, row_sum_13

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


@T.prim_func
def scale(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def test_blockize_a_split_loop_makes_a_block_per_tile():
    sch = tir.Schedule(scale)
    _, j = sch.get_loops(sch.get_block("B"))
    _, j1 = sch.split(j, factors=[None, 16])
    outer = sch.blockize(j1)
    assert outer.name == "B_o"

    @T.prim_func
    def expected(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
        T.func_attr({"global_symbol": "scale"})
        for i, j_0 in T.grid(64, 4):
            with T.block("B_o"):
                vi_o, vj_o = T.axis.remap("SS", [i, j_0])
                T.reads(A[vi_o, vj_o * 16 : vj_o * 16 + 16])
                T.writes(B[vi_o, vj_o * 16 : vj_o * 16 + 16])
                for j_1 in range(16):
                    with T.block("B"):
                        vj_i = T.axis.spatial(16, j_1)
                        B[vi_o, vj_o * 16 + vj_i] = A[vi_o, vj_o * 16 + vj_i] * T.float32(2)

    assert_structural_equal(sch.mod["main"], expected)
    assert [iv.var.name_hint for iv in sch.get(outer).iter_vars] == ["vi_o", "vj_o"]
    assert_same_numerics(scale, sch.mod, [(64, 64), (64, 64)])


def test_blockize_a_reduction_tile_moves_the_init_to_the_outer_block():
    sch = tir.Schedule(mm_relu)
    _, _, k = sch.get_loops(sch.get_block("Y"))
    _, k1 = sch.split(k, factors=[None, 4])
    sch.blockize(k1)

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i, j, k_0 in T.grid(128, 128, 32):
            with T.block("Y_o"):
                vi_o, vj_o, vk_o = T.axis.remap("SSR", [i, j, k_0])
                T.reads(A[vi_o, vk_o * 4 : vk_o * 4 + 4], B[vk_o * 4 : vk_o * 4 + 4, vj_o])
                T.writes(Y[vi_o, vj_o])
                with T.init():  # noqa: SIM117 (TVMScript nests the init block in T.init())
                    with T.block("Y_init"):
                        Y[vi_o, vj_o] = T.float32(0)
                for k_1 in range(4):
                    with T.block("Y"):
                        vk_i = T.axis.reduce(4, k_1)
                        T.reads(Y[vi_o, vj_o], A[vi_o, vk_o * 4 + vk_i], B[vk_o * 4 + vk_i, vj_o])
                        T.writes(Y[vi_o, vj_o])
                        Y[vi_o, vj_o] = (
                            Y[vi_o, vj_o] + A[vi_o, vk_o * 4 + vk_i] * B[vk_o * 4 + vk_i, vj_o]
                        )
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_blockize_spatial_tiles_of_a_reduction_keeps_an_init_loop_nest():
    sch = tir.Schedule(mm_relu)
    i, j, _ = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)
    outer = sch.get(sch.get_block("Y_o"))
    assert [(iv.var.name_hint, iv.dom.extent.value) for iv in outer.iter_vars] == [
        ("vi_o", 16),
        ("vj_o", 16),
        ("vk_o", 1),
    ]
    text = sch.mod.script()
    assert 'with T.block("Y_init"):' in text
    assert "Y[vi_o * 8 + vi_i_init, vj_o * 8 + vj_i_init] = T.float32(0.0)" in text
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_trace_replays():
    sch = tir.Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.blockize(i)
    assert "b3 = sch.blockize(target_loop=l1)" in str(sch.trace)
    fresh = tir.Schedule(scale)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


@T.prim_func
def strided(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi = T.axis.spatial(64, i + j * 8)
            B[vi] = A[vi]


@T.prim_func
def products(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi = T.axis.spatial(64, i * j)
            B[vi] = A[vi]


@T.prim_func
def two_blocks(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8), "float32")
    for i in range(8):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]


@pytest.mark.parametrize(
    ("func", "loop", "message"),
    [
        (
            strided,
            1,
            r"binding vi = i \+ j \* 8 of block 'B' cannot be divided at loop 'j' .*"
            r"covers 57 values, which does not divide the extent 64",
        ),
        (products, 1, r"binding vi = i \* j of block 'B' .*the term i \* j mixes both"),
        (two_blocks, 0, r"blockize: loop 'i' must contain exactly one block, it contains 2"),
    ],
)
def test_bad_blockizes_raise_and_leave_the_schedule_unchanged(func, loop, message):
    sch = tir.Schedule(func)
    loops = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=message):
        sch.blockize(loops[loop])
    assert_structural_equal(sch.mod["main"], func)
    assert len(sch.trace) == 2


def _blockized_matmul() -> tuple[tir.Schedule, tir.schedule.BlockRV]:
    """mm_relu with Y blockized over j: Y_o's T.init() holds the loop nest of block Y_init."""
    sch = tir.Schedule(mm_relu)
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    return sch, sch.blockize(j)


def test_a_block_inside_an_init_cannot_be_scheduled():
    sch, _ = _blockized_matmul()
    before = sch.mod
    with pytest.raises(ScheduleError, match="'Y_init' is inside the T.init\\(\\) of block 'Y_o'"):
        sch.cache_write(sch.get_block("Y_init"), 0, "local")
    assert_structural_equal(sch.mod, before)


def test_cache_write_under_a_block_whose_init_writes_the_buffer_is_refused():
    sch, _ = _blockized_matmul()
    with pytest.raises(ScheduleError, match="also written by the T.init\\(\\) of .* 'Y_o'"):
        sch.cache_write(sch.get_block("Y"), 0, "local")


def test_after_decompose_reduction_the_init_block_can_be_scheduled():
    sch, outer = _blockized_matmul()
    (i,) = sch.get_loops(outer)
    sch.decompose_reduction(outer, i)
    sch.cache_write(sch.get_block("Y_init"), 0, "local")
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_blockize_under_a_split_wider_than_the_loop_skips_the_tiles_past_the_end():
    sch = tir.Schedule(row_sum_13)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[16, None])
    sch.blockize(k1)
    assert "T.where(k_0 < 13)" in sch.mod.script()
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])


def test_blockize_starts_the_init_at_the_first_iteration_of_the_inner_reduction_loops():
    # B_rf's predicate k_0 * 5 + k_1 < 13 mentions its reduction loop k_0, which the init
    # nest of B_rf_o does not copy: there it is at its first iteration, k_0 = 0.
    sch = tir.Schedule(row_sum_13)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 5])
    sch.rfactor(k1, 0)
    (i, _, _) = sch.get_loops(sch.get_block("B_rf"))
    sch.blockize(i)
    init = sch.get(sch.get_block("B_rf_o")).init
    assert "k_0" not in init.script()
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])


@T.prim_func
def row_sum_twice(A: T.Buffer((6, 10), "float32"), B: T.Buffer((6,), "float32")):
    # Loop _r runs the whole reduction twice; B's init starts it over the second time.
    for _r, i, k in T.grid(2, 6, 10):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_blockize_refuses_to_start_a_repeated_reduction_once():
    sch = tir.Schedule(row_sum_twice)
    r, _, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="blockize: block 'B' may compute an instance more"):
        sch.blockize(r)
    assert_structural_equal(sch.mod["main"], row_sum_twice)
