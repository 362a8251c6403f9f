"""The course's scheduling exercise on ``mm_relu``, step by step.

split j by 4, reorder to (i, j_0, k, j_1), reverse_compute_at the relu block under j_0,
decompose_reduction at k: after each step the printed program is the one the course shows,
the generated Python loops move the same way, and the numerics never change.
"""

from __future__ import annotations

from schedule_helpers import assert_same_numerics, mm_relu

from mlckit import tir
from mlckit.backend import generate_function
from mlckit.ir import assert_structural_equal
from mlckit.script import tir as T


@T.prim_func
def after_split(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    T.func_attr({"global_symbol": "mm_relu"})
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j_0, j_1, k in T.grid(128, 32, 4, 128):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j_0 * 4 + j_1)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def after_reorder(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    T.func_attr({"global_symbol": "mm_relu"})
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j_0 * 4 + j_1)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def after_reverse_compute_at(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    T.func_attr({"global_symbol": "mm_relu"})
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j_0 in T.grid(128, 32):
        for k, j_1 in T.grid(128, 4):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + ax0)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def after_decompose_reduction(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    T.func_attr({"global_symbol": "mm_relu"})
    Y = T.alloc_buffer((128, 128), "float32")
    for i, j_0 in T.grid(128, 32):
        for j_1_init in range(4):
            with T.block("Y_init"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1_init)
                T.reads()
                T.writes(Y[vi, vj])
                Y[vi, vj] = T.float32(0)
        for k, j_1 in T.grid(128, 4):
            with T.block("Y_update"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1)
                vk = T.axis.reduce(128, k)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + ax0)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def loop_outline(func) -> list[str]:
    """The generated Python's loops, block comments and init tests, indented as emitted
    (the arguments' shape checks that open the function left out)."""
    source = generate_function(func, "mm_relu").source
    keep = ("for ", "# block ", "if ")
    return [
        line
        for line in source.splitlines()
        if line.strip().startswith(keep) and ".shape != " not in line
    ]


def test_the_course_exercise_step_by_step():
    shapes = [(128, 128)] * 3
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y", func_name="main")
    _, j, k = sch.get_loops(block_Y)
    assert loop_outline(sch.mod["main"]) == [
        "    for i in range(128):",
        "        for j in range(128):",
        "            for k in range(128):",
        "                # block Y",
        "                if k == 0:",
        "    for i in range(128):",
        "        for j in range(128):",
        "            # block C",
    ]

    j0, j1 = sch.split(j, factors=[None, 4])
    assert_structural_equal(sch.mod["main"], after_split)

    sch.reorder(j0, k, j1)
    assert_structural_equal(sch.mod["main"], after_reorder)

    block_C = sch.get_block("C", "main")
    sch.reverse_compute_at(block_C, j0)
    assert_structural_equal(sch.mod["main"], after_reverse_compute_at)
    # The relu now runs on each 4-wide tile of Y right after the tile is computed.
    assert loop_outline(sch.mod["main"]) == [
        "    for i in range(128):",
        "        for j_0 in range(32):",
        "            for k in range(128):",
        "                for j_1 in range(4):",
        "                    # block Y",
        "                    if k == 0:",
        "            for ax0 in range(4):",
        "                # block C",
    ]
    assert_same_numerics(mm_relu, sch.mod, shapes)

    sch.decompose_reduction(block_Y, k)
    assert_structural_equal(sch.mod["main"], after_decompose_reduction)
    # The initialization has its own loop before k; the update loop has no test left.
    assert loop_outline(sch.mod["main"]) == [
        "    for i in range(128):",
        "        for j_0 in range(32):",
        "            for j_1_init in range(4):",
        "                # block Y_init",
        "            for k in range(128):",
        "                for j_1 in range(4):",
        "                    # block Y_update",
        "            for ax0 in range(4):",
        "                # block C",
    ]
    assert_same_numerics(mm_relu, sch.mod, shapes, target="llvm")

    assert str(sch.trace).splitlines()[-2:] == [
        "sch.reverse_compute_at(block=b6, loop=l4)",
        "b7 = sch.decompose_reduction(block=b0, loop=l3)",
    ]
    replayed = tir.Schedule(mm_relu)
    sch.trace.apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, sch.mod)
