"""transform_layout: new shapes, rewritten accesses and regions, parameters, errors."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_helpers import assert_same_numerics, mm_relu, run

from mlckit import te, tir
from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


def test_intermediate_buffer_gets_the_mapped_shape_and_accesses():
    sch = tir.Schedule(mm_relu)
    sch.transform_layout(sch.get_block("Y"), ("write", 0), lambda i, j: [i // 4, j, i % 4])

    @T.prim_func
    def expected(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu"})
        Y = T.alloc_buffer((32, 128, 4), "float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi // 4, vj, vi % 4] = T.float32(0)
                Y[vi // 4, vj, vi % 4] = Y[vi // 4, vj, vi % 4] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi // 4, vj, vi % 4], T.float32(0))

    assert_structural_equal(sch.mod["main"], expected)
    assert_same_numerics(mm_relu, sch.mod, [(128, 128)] * 3)


@T.prim_func
def row_sums(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.float32(0)
            for k in range(8):
                B[vi] = B[vi] + A[vi, k]


def test_a_parameter_changes_the_signature_and_ranged_regions_are_mapped():
    sch = tir.Schedule(row_sums)
    sch.transform_layout(sch.get_block("B"), "A", lambda i, k: [k, i])

    @T.prim_func
    def expected(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16,), "float32")):
        T.func_attr({"global_symbol": "row_sums"})
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                T.reads(B[vi], A[0:8, vi])
                B[vi] = T.float32(0)
                for k in range(8):
                    B[vi] = B[vi] + A[k, vi]

    assert_structural_equal(sch.mod["main"], expected)
    a = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    (_, b) = run(sch.mod, np.ascontiguousarray(a.T), np.zeros(16, "float32"))
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_trace_replays():
    sch = tir.Schedule(mm_relu)
    sch.transform_layout(sch.get_block("C"), ("read", 0), lambda i, j: [j // 8, i, j % 8])
    assert (
        "sch.transform_layout(block=b0, buffer=['read', 0], "
        "index_map=lambda i, j: [j // 8, i, j % 8])" in str(sch.trace)
    )
    fresh = tir.Schedule(mm_relu)
    sch.trace.apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)


@pytest.mark.parametrize(
    ("buffer", "index_map", "pad_value", "message"),
    [
        ("Y", lambda i, j: [i, i], None, "several elements of buffer 'Y' .* same place"),
        ("Y", lambda i, j: [i // 3, j, i % 3], None, r"into a \(43, 128, 3\) buffer of 16512"),
        ("Y", lambda i: [i], None, r"index_map takes 1 argument\(s\) but buffer 'Y' .* has 2"),
        ("Y", lambda i, j: [i - 1, j], None, r"new index 0 \(i - 1\) .* starts at -1, not 0"),
        ("Y", lambda i, j: [i, j], 0.0, "pad_value is not supported"),
        (("write", 1), lambda i, j: [i, j], None, "write index 1 is out of range"),
        ("Z", lambda i, j: [i, j], None, "block 'C' accesses no buffer named 'Z'"),
    ],
)
def test_bad_layouts_raise_and_leave_the_schedule_unchanged(buffer, index_map, pad_value, message):
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("C")
    with pytest.raises(ScheduleError, match=f"transform_layout: .*{message}"):
        sch.transform_layout(block, buffer, index_map, pad_value=pad_value)
    assert_structural_equal(sch.mod["main"], mm_relu)
    assert len(sch.trace) == 1


def _doubling(shape: tuple[int, int]) -> tir.PrimFunc:
    a = te.placeholder(shape, "float32", name="A")
    b = te.compute(shape, lambda i, j: a[i, j] * 2, name="B")
    return te.create_prim_func([a, b])


def test_a_large_buffer_is_checked_one_old_index_at_a_time():
    # 2^25 elements, too many to check one by one; each new index reads one old index, so each
    # old index's part is checked alone (8192 and 4096 places).
    sch = tir.Schedule(_doubling((8192, 4096)))
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: [j, i % 8, i // 8])
    (param,) = [b for b in sch.mod["main"].buffer_map.values() if b.name == "B"]
    assert [int(d) for d in param.shape] == [4096, 8, 1024]
    # The sizes agree (8 * 512 * 4096 * 2), but i's part has 4096 places for 8192 rows.
    with pytest.raises(ScheduleError, match="several elements of buffer 'A' .* same place"):
        sch.transform_layout(
            sch.get_block("B"), ("read", 0), lambda i, j: [i % 8, i // 16, j, j % 2]
        )


def test_a_split_layout_runs_like_the_original():
    func = _doubling((64, 32))
    sch = tir.Schedule(func)
    sch.transform_layout(sch.get_block("B"), ("read", 0), lambda i, j: [j, i % 8, i // 8])
    a = np.random.rand(64, 32).astype("float32")
    relaid = a.reshape(8, 8, 32).transpose(2, 1, 0).copy()
    _, out = run(sch.mod, relaid, np.empty_like(a))
    np.testing.assert_allclose(out, a * 2)
