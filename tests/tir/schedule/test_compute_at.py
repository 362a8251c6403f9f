"""compute_at and reverse_compute_at: regenerated loops, predicates, positions, and bad calls."""

from __future__ import annotations

import pytest
from schedule_helpers import assert_same_numerics, mm_relu, row_sum_13

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T
from mlckit.testing.fuzzing import schedules


@T.prim_func
def two_elementwise(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


@T.prim_func
def three_elementwise(A: T.Buffer((128, 128), "float32"), D: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    C = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(128, 128):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = A[vi, vj] - T.float32(1)


def _main(sch):
    return sch.mod["main"]


def test_compute_at_covers_one_row_per_iteration():
    sch = tir.Schedule(two_elementwise)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "two_elementwise"})
        B = T.alloc_buffer((128, 128), "float32")
        for i in range(128):
            for ax0 in range(128):
                with T.block("B"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, ax0)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for j in range(128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

    assert_structural_equal(_main(sch), expected)
    assert_same_numerics(two_elementwise, sch.mod, [(128, 128)] * 2)


def test_compute_at_preserving_unit_loops():
    sch = tir.Schedule(two_elementwise)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i, preserve_unit_loops=True)

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "two_elementwise"})
        B = T.alloc_buffer((128, 128), "float32")
        for i in range(128):
            for ax0, ax1 in T.grid(1, 128):
                with T.block("B"):
                    vi = T.axis.spatial(128, i + ax0)
                    vj = T.axis.spatial(128, ax1)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for j in range(128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)

    assert_structural_equal(_main(sch), expected)


def test_compute_at_a_tile_of_a_non_dividing_split_gets_a_predicate():
    sch = tir.Schedule(two_elementwise)
    _, j = sch.get_loops(sch.get_block("C"))
    j0, _ = sch.split(j, factors=[None, 5])
    sch.compute_at(sch.get_block("B"), j0)

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "two_elementwise"})
        B = T.alloc_buffer((128, 128), "float32")
        for i, j_0 in T.grid(128, 26):
            for ax0 in range(5):
                with T.block("B"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 5 + ax0)
                    T.where(j_0 * 5 + ax0 < 128)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for j_1 in range(5):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 5 + j_1)
                    T.where(j_0 * 5 + j_1 < 128)
                    C[vi, vj] = B[vi, vj] + T.float32(1)

    assert_structural_equal(_main(sch), expected)
    assert_same_numerics(two_elementwise, sch.mod, [(128, 128)] * 2)


def test_compute_at_of_a_reduction_keeps_its_whole_reduction_domain():
    sch = tir.Schedule(mm_relu)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("Y"), i)

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((128, 128), "float32")
        for i in range(128):
            for ax0, ax1 in T.grid(128, 128):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, ax0, ax1])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for j in range(128):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(_main(sch), expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_reverse_compute_at_goes_after_the_producer():
    sch = tir.Schedule(two_elementwise)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)

    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "two_elementwise"})
        B = T.alloc_buffer((128, 128), "float32")
        for i in range(128):
            for j in range(128):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for ax0 in range(128):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, ax0)
                    C[vi, vj] = B[vi, vj] + T.float32(1)

    assert_structural_equal(_main(sch), expected)
    assert_same_numerics(two_elementwise, sch.mod, [(128, 128)] * 2)


def test_reverse_compute_at_under_a_tile_covers_the_tile():
    sch = tir.Schedule(two_elementwise)
    i, _ = sch.get_loops(sch.get_block("B"))
    i0, _ = sch.split(i, factors=[None, 8])
    sch.reverse_compute_at(sch.get_block("C"), i0)
    c_loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("C"))]
    assert [lp.loop_var.name_hint for lp in c_loops] == ["i_0", "ax0", "ax1"]
    assert [lp.extent.value for lp in c_loops] == [16, 8, 128]
    assert "vi = T.axis.spatial(128, i_0 * 8 + ax0)" in sch.mod.script()
    assert_same_numerics(two_elementwise, sch.mod, [(128, 128)] * 2)


def test_index_places_the_block_between_dependences_and_the_trace_replays():
    sch = tir.Schedule(two_elementwise)
    i, _ = sch.get_loops(sch.get_block("C"))
    b = sch.get_block("B")
    with pytest.raises(ScheduleError, match="compute_at: index 1 .* positions 0 to 0"):
        sch.compute_at(b, i, index=1)
    sch.compute_at(b, i, index=0)
    assert "sch.compute_at(block=b3, loop=l1, index=0)" in str(sch.trace)
    fresh = tir.Schedule(two_elementwise)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


def _assert_fails(sch, call, message):
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        call()
    assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == steps


def test_illegal_locations_raise_and_leave_the_schedule_unchanged():
    sch = tir.Schedule(three_elementwise)
    b, c, d = sch.get_block("B"), sch.get_block("C"), sch.get_block("D")
    d_i, _ = sch.get_loops(d)
    b_i, _ = sch.get_loops(b)
    c_i, _ = sch.get_loops(c)
    _assert_fails(
        sch,
        lambda: sch.compute_at(b, d_i),
        "compute_at: loop 'i' does not enclose block 'C', a consumer of block 'B'",
    )
    _assert_fails(sch, lambda: sch.compute_at(d, c_i), "compute_at: block 'D' has no consumer")
    _assert_fails(sch, lambda: sch.compute_at(b, b_i), "compute_at: loop 'i' already encloses")
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_at(b, c_i),
        "reverse_compute_at: block 'B' has no producer",
    )
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_at(c, d_i),
        "reverse_compute_at: loop 'i' does not enclose block 'B', a producer of block 'C'",
    )


def test_reverse_compute_at_refuses_a_strided_producer_tile():
    """Rows i_0 * 8 + i_1 * 4 + i_2 for i_1 in 0..1, per i_2: every 4th row. The write-back
    over their bounding box would copy the 3 rows between, never computed at that point."""
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    i0, i1, i2 = sch.split(i, [None, 2, 4])
    sch.reorder(i0, i2, i1, j, k)
    local = sch.cache_write(y, 0, "local")
    _assert_fails(
        sch,
        lambda: sch.reverse_compute_at(local, i2),
        "under loop 'i_2', the producer writes dimension 0 of buffer 'Y_local' with a stride "
        "of 4 \\(loop 'i_1'\\)",
    )
    # Split the other way round, the tile is contiguous (rows i_0 * 8 + i_2 * 2 + i_1).
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    i0, i2, i1 = sch.split(i, [None, 4, 2])
    local = sch.cache_write(y, 0, "local")
    sch.reverse_compute_at(local, i2)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


def test_compute_at_carries_a_predicate_relating_iter_vars():
    # After rfactor, B_rf has T.where(k_0 * 5 + k_1 < 13) with vk_0 = k_0, vk_1 = k_1: its new
    # loops must keep it as vk_0 * 5 + vk_1 < 13, or B_rf reads A past its end.
    sch = tir.Schedule(row_sum_13)
    _, k = sch.get_loops(sch.get_block("B"))
    k0, _ = sch.split(k, factors=[3, None])
    sch.rfactor(k0, 0)
    _, k0 = sch.get_loops(sch.get_block("B"))
    sch.compute_at(sch.get_block("B_rf"), k0)
    assert "T.where(k_0 * 5 + ax0 < 13)" in sch.mod.script()
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])


@T.prim_func
def padded(A: T.Buffer((4, 4), "float32"), P: T.Buffer((6, 6), "float32")):
    B = T.alloc_buffer((4, 4), "float32")
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(6, 6):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = T.if_then_else(
                vi >= 1 and vi < 5 and vj >= 1 and vj < 5, B[vi - 1, vj - 1], T.float32(0)
            )


def test_reverse_compute_at_refuses_to_leave_part_of_the_consumer_undone():
    # Under B's loops, P would only write the 4x4 inside its border.
    sch = tir.Schedule(padded)
    _, j = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"iter var 'vi' over \[1, 4\] only, not .* \[0, 5\]"):
        sch.reverse_compute_at(sch.get_block("P"), j)
    assert_structural_equal(sch.mod["main"], padded)


def test_reverse_compute_at_runs_the_consumer_only_where_a_repeated_producer_runs():
    # A unit loop around B split by 4 repeats B's loops four times, B running in the first
    # only; C under B's loop j must run then too, not read what B wrote repetitions earlier
    # (buffer compaction allocates B per iteration of j).
    sch = tir.Schedule(two_elementwise)
    unit = sch.add_unit_loop(sch.get_loops(sch.get_block("B"))[0])
    sch.split(unit, factors=[None, 4])
    _, _, _, j = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), j)
    assert "T.where(u_1 < 1)" in sch.mod.script()  # on C
    assert_same_numerics(two_elementwise, sch.mod, [(128, 128)] * 2)


def test_compute_at_of_a_blockized_block_whose_tile_is_predicated():
    # B_rf's predicate k_0 * 5 + k_1 < 13 relates the loop above B_rf_o to the one inside:
    # inside B_rf_o it reads k_0 through B_rf_o's iter var, so B_rf_o can move.
    sch = tir.Schedule(row_sum_13)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, factors=[None, 5])
    sch.rfactor(k1, 0)
    _, _, k1 = sch.get_loops(sch.get_block("B_rf"))
    sch.blockize(k1)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.compute_at(sch.get_block("B_rf_o"), i)
    assert_same_numerics(row_sum_13, sch.mod, [(7, 13), (7,)])


@T.prim_func
def scale_add_7(A: T.Buffer((7,), "float32"), C: T.Buffer((7,), "float32")):
    B = T.alloc_buffer((7,), "float32")
    for i in range(7):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(7):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] + T.float32(1)


def test_compute_at_under_tiles_past_the_end_guards_instead_of_a_negative_extent():
    # Tiles of 16 over 7 elements: clipped to the buffer, the tiles past the end would loop
    # over range(7 - i_0 * 16), a negative count.
    sch = tir.Schedule(scale_add_7)
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, factors=[3, 16])
    sch.compute_at(sch.get_block("B"), i0)
    _, ax0 = sch.get_loops(sch.get_block("B"))
    assert sch.get(ax0).extent.value == 16
    assert "T.where(i_0 * 16 + ax0 < 7)" in sch.mod.script()
    assert_same_numerics(scale_add_7, sch.mod, [(7,), (7,)])


@T.prim_func
def matmul_7x13(
    A: T.Buffer((7, 10), "float32"),
    B: T.Buffer((10, 13), "float32"),
    C: T.Buffer((7, 13), "float32"),
):
    for i, j, k in T.grid(7, 13, 10):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_reverse_compute_at_under_a_fused_loop_copies_what_one_iteration_wrote():
    # Per iteration of f_0 the product writes C_global[f_0 // 13, f_0 % 13]: one element, which
    # interval arithmetic on f % 13 would widen to the whole row.
    sch = tir.Schedule(matmul_7x13)
    copy = sch.cache_write(sch.get_block("C"), 0, "global")
    i, j, _ = sch.get_loops(sch.get_block("C"))
    f0, _ = sch.split(sch.fuse(i, j), factors=[91, 1])
    sch.reverse_compute_at(copy, f0)
    assert not sch.get_loops(copy)[1:]  # no loop over a row: a single element
    assert_same_numerics(matmul_7x13, sch.mod, [(7, 10), (10, 13), (7, 13)])


@T.prim_func
def row_copy(A: T.Buffer((4, 13), "float32"), C: T.Buffer((4, 13), "float32")):
    B = T.alloc_buffer((4, 13), "float32")
    for i, j in T.grid(4, 13):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 13):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj]


def test_reverse_compute_at_refuses_a_fused_and_split_producer_index():
    # Under f_0 the producer writes B[(f_0 * 4 + f_1) // 13, (f_0 * 4 + f_1) % 13] for f_1 < 4:
    # four elements, which may straddle two rows; their bounding box is not what is written.
    sch = tir.Schedule(row_copy)
    f0, _ = sch.split(sch.fuse(*sch.get_loops(sch.get_block("B"))), factors=[None, 4])
    with pytest.raises(ScheduleError, match="moves in steps that are not constant"):
        sch.reverse_compute_at(sch.get_block("C"), f0)


def test_reverse_compute_at_refuses_a_consumer_tile_wider_than_one_iteration_writes():
    # C_o reads a whole row of B; under B's loop j one element of it is written.
    sch = tir.Schedule(row_copy)
    _, j = sch.get_loops(sch.get_block("C"))
    tile = sch.blockize(j)
    _, j = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"would read dimension 1 of buffer 'B' over \[0, 12\]"):
        sch.reverse_compute_at(tile, j)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(tile, i)  # a whole row is written per iteration of i
    assert_same_numerics(row_copy, sch.mod, [(4, 13), (4, 13)])


def _conv2d_rfactor_over_channels() -> tuple[tir.Schedule, list]:
    sch = tir.Schedule(schedules.OPERATORS["conv2d"]())
    sch.compute_inline(sch.get_block("pad_temp"))
    loops = sch.get_loops(sch.get_block("conv2d_nchw"))
    sch.split(loops[-1], [None, 3])
    rf = sch.rfactor(sch.get_loops(sch.get_block("conv2d_nchw"))[4], 4)
    return sch, sch.get_loops(rf)


def test_reverse_compute_at_refuses_a_loop_inside_the_producers_reduction():
    # Under the producer's reduction loop ry the consumer added each partial sum 3 times.
    sch, (_, _, _, _, rc, _, rx_0, _) = _conv2d_rfactor_over_channels()
    with pytest.raises(ScheduleError, match="inside loop 'ry', which reduces producer"):
        sch.reverse_compute_at(sch.get_block("conv2d_nchw"), rx_0)
    sch.reverse_compute_at(sch.get_block("conv2d_nchw"), rc)
    conv2d = schedules.OPERATORS["conv2d"]()
    shapes = [[int(d) for d in conv2d.buffer_map[p].shape] for p in conv2d.params]
    assert_same_numerics(conv2d, sch.mod["main"], shapes)


def test_reverse_compute_at_refuses_a_producer_that_skips_part_of_its_tile():
    # A nested split (4 x 4 for 5) wrote 4 + 1 elements of a tile the consumer read as 16.
    sch = tir.Schedule(schedules.OPERATORS["matmul"]())
    rf = sch.rfactor(sch.get_loops(sch.get_block("T_matmul"))[2], 0)
    copy = sch.cache_write(rf, 0, "global")
    _, inner = sch.split(sch.get_loops(copy)[2], [3, None])
    outer, _, _ = sch.split(inner, [4, 4, None])
    with pytest.raises(ScheduleError, match="skips part of its tile under loop 'ax2_1_0'"):
        sch.reverse_compute_at(sch.get_block("T_matmul"), outer)
