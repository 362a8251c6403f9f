"""footprint: bytes per buffer inside one iteration of each loop, before and after tiling."""

from __future__ import annotations

import pytest

from mlckit import te, tir, topi
from mlckit.errors import MLCError
from mlckit.script import tir as T
from mlckit.tir.analysis import footprint


@T.prim_func
def mm_relu(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def _table(fp) -> list[tuple[str, int, dict[str, int | None]]]:
    return [(row.loop.name_hint, row.extent, row.bytes) for row in fp]


def test_the_plain_matmul_touches_all_of_b_in_one_row_of_a():
    fp = footprint(mm_relu, "Y")
    assert fp.block == "Y"
    assert _table(fp) == [
        ("i", 128, {"A": 512, "B": 65536, "Y": 512}),
        ("j", 128, {"A": 512, "B": 512, "Y": 4}),
        ("k", 128, {"A": 4, "B": 4, "Y": 4}),
    ]
    assert [row.total for row in fp] == [66560, 1028, 12]


def test_tiling_shrinks_the_inner_working_sets():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    fp = footprint(sch.mod, "Y")
    # One (i_0, j_0) tile reads an 8-row strip of A and an 8-column strip of B (4 KiB each,
    # together far under L1) and accumulates an 8x8 tile of Y; one k step touches a row
    # segment of B, a column segment of A and that tile.
    assert _table(fp) == [
        ("i_0", 16, {"A": 4096, "B": 65536, "Y": 4096}),
        ("j_0", 16, {"A": 4096, "B": 4096, "Y": 256}),
        ("k", 128, {"A": 32, "B": 32, "Y": 256}),
        ("i_1", 8, {"A": 4, "B": 32, "Y": 32}),
        ("j_1", 8, {"A": 4, "B": 4, "Y": 4}),
    ]
    before = footprint(mm_relu, "Y")
    assert fp[1].total < before[1].total * 10 < before[0].total


def test_a_sliding_window_is_counted_once():
    X = te.placeholder((1, 2, 6, 6), "float32", name="X")
    W = te.placeholder((3, 2, 3, 3), "float32", name="W")
    func = te.create_prim_func([X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)])
    fp = footprint(func)  # the default: the block under the most loops
    assert fp.block == "conv2d_nchw"
    rows = {row.loop.name_hint: row.bytes for row in fp}
    # One output row yy reads padded rows yy..yy+2, all 8 columns, both channels.
    assert rows["yy"] == {"pad_temp": 2 * 3 * 8 * 4, "W": 2 * 3 * 3 * 4, "conv2d_nchw": 6 * 4}
    assert rows["xx"] == {"pad_temp": 2 * 3 * 3 * 4, "W": 2 * 3 * 3 * 4, "conv2d_nchw": 4}
    assert rows["rx"] == {"pad_temp": 4, "W": 4, "conv2d_nchw": 4}


def test_the_table_reads_like_the_loop_nest():
    sch = tir.Schedule(mm_relu)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    text = str(footprint(sch.mod, "C"))
    assert text.splitlines() == [
        "footprint of block 'C': bytes touched in one iteration of each loop",
        "loop  extent  kind          Y      C    total",
        "i     128     parallel  512 B  512 B  1.0 KiB",
        "j     128                 4 B    4 B      8 B",
    ]
    big = str(footprint(mm_relu, "Y"))
    assert "64.0 KiB" in big and "65.0 KiB" in big


def test_symbolic_shapes_and_unknown_blocks():
    n = te.var("n")
    A = te.placeholder((n, 4), "float32", name="A")
    fp = footprint(te.create_prim_func([A, topi.add(A, 1.0)]))
    assert fp[0].extent.name_hint == "n"
    assert fp[0].bytes == {"A": 16, "T_add": 16}
    assert fp[1].bytes == {"A": 4, "T_add": 4}
    with pytest.raises(MLCError, match="no block named 'Z'; blocks: Y, C"):
        footprint(mm_relu, "Z")
