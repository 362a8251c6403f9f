"""Chapter 6's exercises: the reference solutions pass, and typical wrong answers fail with the
message and hint written for them (never with a traceback). The kernels run in numba's CUDA
simulator on a machine without a GPU."""

from __future__ import annotations

import pytest
from replies import assert_verdict

from mlckit import tir
from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.ch6 import Matmul, Transpose
from mlckit.exercises.solutions import ch6 as solutions


def test_the_chapter_has_two_exercises_with_graded_hints():
    names = [e.name for e in exercises(6)]
    assert names == ["ch6.bind_transpose", "ch6.local_matmul"]
    for name in names:
        assert "last hint" in str(hint(name, 3))
        assert solution(name)._repr_markdown_().startswith("```python\ndef ")


@pytest.mark.parametrize("name", ["bind_transpose", "local_matmul"])
def test_each_reference_solution_passes(name):
    result = check(f"ch6.{name}", getattr(solutions, name)())
    assert result.passed, str(result)


@pytest.mark.parametrize("name", ["ch6.bind_transpose", "ch6.local_matmul"])
@pytest.mark.parametrize("answer", [None, 42, "sch", tir.Schedule])
def test_answers_of_the_wrong_kind_never_raise(name, answer):
    result = check(name, answer)
    assert_verdict(result, "expected a PrimFunc")


@pytest.mark.parametrize(
    ("name", "start"), [("ch6.bind_transpose", Transpose), ("ch6.local_matmul", Matmul)]
)
def test_the_unscheduled_program_names_the_unbound_block(name, start):
    result = check(name, tir.Schedule(start))
    assert not result
    assert_verdict(result, "does not build for cuda")
    assert "is bound to no thread" in result.message


# ------------------------------------------------------------------------- bind_transpose
def tiled_transpose(
    threads=(8, 8), bind=("blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x")
):
    sch = tir.Schedule(Transpose)
    i, j = sch.get_loops(sch.get_block("B"))
    i_0, i_1 = sch.split(i, factors=[None, threads[0]])
    j_0, j_1 = sch.split(j, factors=[None, threads[1]])
    sch.reorder(i_0, j_0, i_1, j_1)
    for loop, axis in zip((i_0, j_0, i_1, j_1), bind):
        if axis:
            sch.bind(loop, axis)
    return sch


def test_one_block_of_all_threads_is_over_the_limit():
    sch = tir.Schedule(Transpose)
    sch.bind(sch.fuse(*sch.get_loops(sch.get_block("B"))), "threadIdx.x")
    result = check("ch6.bind_transpose", sch)
    assert not result
    assert_verdict(result, "a thread block of 2048 threads")
    assert "at most 1024" in result.message
    assert "blockIdx" in result.hint


def test_two_nested_loops_on_one_thread_axis_are_named():
    sch = tiled_transpose(bind=("blockIdx.y", "blockIdx.x", "threadIdx.x", "threadIdx.x"))
    result = check("ch6.bind_transpose", sch)
    assert not result
    assert_verdict(result, "loops i_1 and j_1 around block 'B' are both bound to threadIdx.x")
    assert "threadIdx.y" in result.hint


def test_a_loop_left_on_the_host_is_named():
    sch = tiled_transpose(bind=(None, "blockIdx.x", "threadIdx.y", "threadIdx.x"))
    result = check("ch6.bind_transpose", sch)
    assert not result
    assert_verdict(result, "loop i_0 (extent 8) around block 'B' runs on the host")
    assert "blockIdx" in result.hint


def test_several_elements_per_thread_are_named():
    sch = tiled_transpose(bind=("blockIdx.y", "blockIdx.x", "threadIdx.y", None))
    result = check("ch6.bind_transpose", sch)
    assert not result
    assert_verdict(result, "loop j_1 (extent 8) runs serially inside each thread")


def test_the_wrong_block_shape_is_named():
    result = check("ch6.bind_transpose", tiled_transpose(threads=(4, 16)))
    assert not result
    assert_verdict(result, "4 × 16 (threadIdx.y: 4, threadIdx.x: 16)")
    assert_verdict(result, "asks for 8 × 8")


def test_a_shared_memory_transpose_passes():
    # The fetch into shared memory is bound to the same thread axes, inside the thread loops:
    # the block does not depend on the outer loops, so this nesting is right.
    sch = tiled_transpose()
    block_B = sch.get_block("B")
    A_shared = sch.cache_read(block_B, 0, "shared")
    sch.compute_at(A_shared, sch.get_loops(block_B)[-1])
    ax0, ax1 = sch.get_loops(A_shared)[-2:]
    sch.bind(ax0, "threadIdx.y")
    sch.bind(ax1, "threadIdx.x")
    result = check("ch6.bind_transpose", sch)
    assert result.passed, str(result)


def test_thread_x_down_the_columns_is_named():
    sch = tiled_transpose(bind=("blockIdx.y", "blockIdx.x", "threadIdx.x", "threadIdx.y"))
    result = check("ch6.bind_transpose", sch)
    assert not result
    assert_verdict(result, "threadIdx.x (loop i_1) walks down the columns of B")
    assert "j (the columns of B) to threadIdx.x" in result.hint


# --------------------------------------------------------------------------- local_matmul
def blocked_matmul(scope="local", tile=(2, 2), write_back=True):
    sch = tir.Schedule(Matmul)
    block_C = sch.get_block("C")
    cache = sch.cache_write(block_C, 0, scope) if scope else None
    i, j, k = sch.get_loops(block_C)
    i_0, i_1, i_2 = sch.split(i, factors=[None, 8, tile[0]])
    j_0, j_1, j_2 = sch.split(j, factors=[None, 16, tile[1]])
    sch.reorder(i_0, j_0, i_1, j_1, k, i_2, j_2)
    if cache is not None and write_back:
        sch.reverse_compute_at(cache, j_1)
    for loop, axis in zip(
        (i_0, j_0, i_1, j_1), ("blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x")
    ):
        sch.bind(loop, axis)
    return sch


def test_accumulating_in_global_memory_is_named():
    result = check("ch6.local_matmul", blocked_matmul(scope=None))
    assert not result
    assert_verdict(result, "block 'C' adds every product into C, in global memory")
    assert "cache_write(block_C, 0, 'local')" in result.hint


def test_a_shared_accumulator_is_named():
    result = check("ch6.local_matmul", blocked_matmul(scope="shared"))
    assert not result
    assert_verdict(result, "accumulates in C_shared, in shared memory")


def test_a_write_back_outside_the_threads_points_to_reverse_compute_at():
    result = check("ch6.local_matmul", blocked_matmul(write_back=False))
    assert not result
    assert (
        "the local buffer 'C_local' is allocated outside every thread-bound loop" in result.message
    )
    assert "reverse_compute_at(C_local, j_1)" in result.hint


def test_the_wrong_tile_per_thread_is_named():
    # 8 x 16 threads of 4 x 1 elements: the right block shape, the wrong tile (and grid).
    result = check("ch6.local_matmul", blocked_matmul(tile=(4, 1)))
    assert not result
    assert_verdict(result, "each thread writes a tile of 4 × 1 elements of C")
