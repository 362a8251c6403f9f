"""Measuring: candidates are built in parallel and timed one at a time; a candidate that fails
to build, fails at run time, computes a wrong result or hangs is recorded as failed with its
reason, and the others are still measured."""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pytest

from mlckit import te, tir, topi
from mlckit.errors import MLCError
from mlckit.meta_schedule.measure import (
    Builder,
    MeasureResult,
    Runner,
    TensorInfo,
    _device_args,
    args_info_of,
    measure,
)
from mlckit.runtime.ndarray import ALIGNMENT, aligned_empty
from mlckit.script import tir as T


def matmul(n: int = 16, transpose_b: bool = False) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    if transpose_b:  # a different result with the same arguments: a "wrong" schedule
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    else:
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def parallel_matmul() -> tir.PrimFunc:
    sch = tir.Schedule(matmul())
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    return sch.mod["main"]


def thread_bound_matmul() -> tir.PrimFunc:
    """A GPU schedule: building it for the CPU fails."""
    sch = tir.Schedule(matmul())
    sch.bind(sch.get_loops(sch.get_block("C"))[0], "threadIdx.x")
    return sch.mod["main"]


@T.prim_func
def spin(A: T.Buffer((1,), "float32")):
    for i, j in T.grid(100000, 100000):
        with T.block("spin"):
            _vi, _vj = T.axis.remap("RR", [i, j])
            A[0] = A[0] + T.float32(1)


@pytest.fixture(scope="module")
def builder():
    with Builder() as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    with Runner(number=1, repeat=2, min_repeat_ms=0) as r:
        yield r


def _assert_timed(result: MeasureResult) -> None:
    assert result.error is None
    assert len(result.run_secs) == 2 and all(s > 0 for s in result.run_secs)
    assert result.median_secs() > 0


def test_a_failing_build_is_recorded_and_the_others_are_measured(builder, runner):
    results = measure([matmul(), thread_bound_matmul(), parallel_matmul()], "llvm", builder, runner)
    _assert_timed(results[0])
    _assert_timed(results[2])
    assert results[1].run_secs is None
    assert results[1].error.startswith("build: ")
    assert "threadIdx.x" in results[1].error
    assert results[1].median_secs() == float("inf")


def test_a_run_time_error_is_recorded(builder, runner):
    # Arguments of the wrong shape: the kernel's own shape check raises when it is called.
    wrong = [TensorInfo("float32", (8, 8))] * 3
    results = measure([matmul()], "llvm", builder, runner, args_info=wrong)
    assert results[0].run_secs is None
    assert results[0].error.startswith("run: ")
    assert "shape" in results[0].error
    # The runner goes on with the next workload.
    _assert_timed(measure([matmul()], "llvm", builder, runner)[0])


def test_a_wrong_result_is_a_failure(builder, runner):
    results = measure(
        [parallel_matmul(), matmul(transpose_b=True)],
        "llvm",
        builder,
        runner,
        reference=matmul(),
    )
    _assert_timed(results[0])
    assert results[1].run_secs is None
    assert results[1].error.startswith("run: wrong result in argument 2")


def test_a_hanging_kernel_times_out_and_the_next_one_runs(builder):
    with Runner(timeout_s=1, number=1, repeat=1, min_repeat_ms=0) as runner:
        hung = measure([spin], "llvm", builder, runner)
        assert hung == [MeasureResult(None, "run: timed out after 1 s")]
        # The hung worker was killed; a fresh one measures the next candidate.
        after = measure([matmul()], "llvm", builder, runner)
    assert after[0].error is None and len(after[0].run_secs) == 1


def test_any_executor_can_build_and_run():
    with cf.ThreadPoolExecutor(2) as pool:
        builder, runner = Builder(pool), Runner(pool, number=1, repeat=2, min_repeat_ms=0)
        results = measure(
            [matmul(), thread_bound_matmul()], "llvm", builder, runner, reference=matmul()
        )
    _assert_timed(results[0])
    assert results[1].error.startswith("build: ")


def test_args_info_and_symbolic_shapes():
    assert args_info_of(matmul(4)) == [TensorInfo("float32", (4, 4))] * 3
    n = te.var("n")
    A = te.placeholder((n,), "float32", name="A")
    func = te.create_prim_func([A, topi.exp(A)])
    with pytest.raises(MLCError, match="symbolic shape"):
        args_info_of(func)


def test_candidates_are_timed_on_arrays_aligned_to_a_cache_line():
    # Slices one float past a cache line: what numpy's allocator may hand out.
    raw = aligned_empty((2, 1 + 64 * 64), "float32")
    arrays = [raw[0, 1:], raw[1, 1:]]
    args, _ = _device_args(arrays, "llvm")
    assert [a.ctypes.data % ALIGNMENT for a in args] == [0, 0]
    for arg, array in zip(args, arrays):
        np.testing.assert_array_equal(arg, array)


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
def test_in_the_cuda_simulator_a_candidate_runs_once_to_be_checked(builder):
    from mlckit.runtime.gpu import simulated

    if not simulated():
        pytest.skip("a GPU is present: candidates are timed on it")
    with Runner(number=3, repeat=3, min_repeat_ms=20) as cuda_runner:
        (result,) = measure(
            [thread_bound_matmul()], "cuda", builder, cuda_runner, reference=matmul()
        )
        assert result.error is None and len(result.run_secs) == 1
        (wrong,) = measure(
            [thread_bound_matmul()],
            "cuda",
            builder,
            cuda_runner,
            reference=matmul(transpose_b=True),
        )
    assert wrong.error is not None
