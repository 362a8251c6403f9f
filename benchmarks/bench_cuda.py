"""Chapter 6's matmul schedules on target "cuda", against the GPU's fp32 matmul library.

The schedules are those of ``mlckit.testing.gpu_schedules``, with chapter 6's tiles: one
thread per element (8x8 threads per block), local blocking (8x8 results per thread, 8x8
threads, k tiles of 8) and the course's shared-memory matmul (the same, with the A and B tiles
fetched into shared memory cooperatively, 4 elements per thread and round); and the
shared-memory matmul with the larger tiles of a CUDA sgemm (16x16 threads, k tiles of 16).
They run at 1024 and 4096 (float32, N^3 multiply-adds) and are compared, in the same run, with
torch's fp32 matmul with TF32 off (cupy's when torch has no GPU, numba's naive
one-thread-per-element kernel when neither is installed). Goal: the best shared-memory matmul
at 4096 reaches at least 25% of the library's GFLOP/s.

At 4096 the matmul is also *tuned*: ``TUNE_DRAWS`` draws from ``sgemm_space`` (the
shared-memory matmul with its per-thread tile, thread block, k tile, copy width and
shared-memory layout sampled) give up to as many different programs; ``meta_schedule.measure``
checks each against the reference and times it on the GPU, in this process, and the fastest is
timed like the others. Goal: at least 50% of the library. (``tune_tir`` is not used: its
database stores traces as JSON, and ``transform_layout``'s index map is a Python function.)

``python benchmarks/run.py cuda --json benchmarks/results/cuda_<gpu>.json`` records the
figures chapter 6 shows.

Without an NVIDIA GPU the cuda target runs in numba's simulator, where times say nothing about
a GPU: the rows then report that and measure nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import mlckit
from mlckit import meta_schedule as ms
from mlckit import te, tir
from mlckit.runtime.gpu import numba_cuda, simulated
from mlckit.testing.gpu_schedules import (
    SGEMM_CHOICES,
    local_blocking_matmul,
    one_thread_per_element,
    sgemm_space,
    shared_memory_matmul,
)
from mlckit.tir.function import PrimFunc

SIZES = (1024, 4096)
GOAL = 0.25
TUNED_SIZE = 4096
TUNE_DRAWS = 40
TUNE_GOAL = 0.5
COURSE_TILES = {"local": (8, 8), "block": (8, 8), "tile_k": 8}
# 128x128 tiles of C per thread block: the classic shape of a CUDA sgemm.
SGEMM_TILES = {"local": (8, 8), "block": (16, 16), "tile_k": 16}
SCHEDULES = {
    "one thread per element": one_thread_per_element,
    "local blocking": lambda func: local_blocking_matmul(func, **COURSE_TILES),
    "shared-memory blocking": lambda func: shared_memory_matmul(func, **COURSE_TILES, vector=4),
    "shared-memory blocking, 128x128 tiles": lambda func: shared_memory_matmul(
        func, **SGEMM_TILES, vector=4
    ),
}


def matmul_func(n: int) -> PrimFunc:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def row(name: str, value: Any, unit: str, goal: str = "", ok: bool | None = None) -> dict:
    return dict(name=name, value=value, unit=unit, goal=goal, ok=ok)


def gpu_name(device: Any) -> str:
    # numba's built-in cuda gives bytes, the numba-cuda package a str.
    name = device.name
    return name.decode() if isinstance(name, bytes) else name


def best_seconds(run: Callable[[], Any], synchronize: Callable[[], Any], repeat: int = 10) -> float:
    run()
    synchronize()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def library_matmul(a: np.ndarray, b: np.ndarray) -> tuple[str, Callable[[], Any], Any]:
    """The reference: (its name, a call, its synchronize)."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            return "torch fp32 (TF32 off)", lambda: ta @ tb, torch.cuda.synchronize
    except ImportError:
        pass
    try:
        import cupy

        ca, cb = cupy.asarray(a), cupy.asarray(b)
        return "cupy fp32", lambda: ca @ cb, cupy.cuda.Device().synchronize
    except ImportError:
        pass
    cuda = numba_cuda()

    @cuda.jit
    def naive(A, B, C):
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            total = np.float32(0)
            for k in range(A.shape[1]):
                total += A[i, k] * B[k, j]
            C[i, j] = total

    da, db = cuda.to_device(a), cuda.to_device(b)
    dc = cuda.device_array(a.shape, np.float32)
    n = a.shape[0]
    grid = ((n + 15) // 16, (n + 15) // 16)
    return "numba naive kernel", lambda: naive[grid, (16, 16)](da, db, dc), cuda.synchronize


def tuned_matmul(n: int) -> tuple[tir.Schedule, int]:
    """The fastest program drawn from ``sgemm_space`` for an n^3 matmul, measured on this GPU in
    this process (a worker process would start a CUDA context of its own), and how many
    different programs were measured."""
    func = matmul_func(n)
    space = ms.ScheduleFnSpace(sgemm_space)
    programs: dict[str, tir.Schedule] = {}
    for seed in range(TUNE_DRAWS):
        sch = space.sample(func, seed)
        programs.setdefault(knobs(sch), sch)
    here = ms.InProcessExecutor()
    with ms.Builder(here) as builder, ms.Runner(here) as runner:
        results = ms.measure(
            [sch.mod["main"] for sch in programs.values()], "cuda", builder, runner, reference=func
        )
    failed = [r.error for r in results if r.error is not None]
    if len(failed) == len(results):
        raise RuntimeError(f"every program of sgemm_space failed; the first: {failed[0]}")
    seconds = [r.median_secs() for r in results]
    best = min(range(len(seconds)), key=seconds.__getitem__)
    return list(programs.values())[best], len(programs)


def knobs(sch: tir.Schedule) -> str:
    """The choices ``sgemm_space`` drew for ``sch``, in words."""
    drawn = [inst.decision for inst in sch.trace if inst.kind == "sample_categorical"]
    return ", ".join(
        f"{knob} {choices[index]}" for (knob, choices), index in zip(SGEMM_CHOICES.items(), drawn)
    )


def run() -> list[dict[str, Any]]:
    if simulated():
        return [
            {
                "name": "cuda matmul",
                "value": "no GPU (numba simulator)",
                "unit": "",
                "goal": f">= {GOAL:.0%} of the library at 4096",
                "ok": None,
            }
        ]
    cuda = numba_cuda()
    device = mlckit.cuda()
    rows: list[dict[str, Any]] = [
        {
            "name": "GPU",
            "value": gpu_name(cuda.get_current_device()),
            "unit": "",
            "goal": "",
            "ok": None,
        }
    ]
    rng = np.random.default_rng(0)
    for n in SIZES:
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        expected = a @ b
        A, B = mlckit.nd.array(a, device), mlckit.nd.array(b, device)
        flop = 2 * n**3
        seconds, errors = {}, []
        schedules = dict(SCHEDULES)
        if n == TUNED_SIZE:
            tuned, measured = tuned_matmul(n)
            schedules["tuned"] = lambda _, tuned=tuned: tuned
            rows.append(row(f"{n}: tuned, best of {measured} programs", knobs(tuned), ""))
        for name, schedule in schedules.items():
            lib = mlckit.build(schedule(matmul_func(n)).mod, "cuda")
            C = mlckit.nd.empty((n, n), "float32", device)
            seconds[name] = best_seconds(
                lambda f=lib["main"], A=A, B=B, C=C: f(A, B, C), cuda.synchronize
            )
            errors.append(float(np.abs(C.numpy() - expected).max() / np.abs(expected).max()))
            rows.append(
                {
                    "name": f"{n}: {name}",
                    "value": flop / seconds[name] / 1e9,
                    "unit": "GFLOP/s",
                    "goal": "",
                    "ok": None,
                }
            )
        library, reference, synchronize = library_matmul(a, b)
        theirs = best_seconds(reference, synchronize)
        ratio = theirs / min(v for k, v in seconds.items() if k.startswith("shared"))
        if "tuned" in seconds:
            tuned_ratio = theirs / seconds["tuned"]
            rows.append(
                row(
                    f"{n}: tuned / library",
                    tuned_ratio,
                    "x",
                    f">= {TUNE_GOAL}",
                    tuned_ratio >= TUNE_GOAL,
                )
            )
        rows += [
            {
                "name": f"{n}: {library}",
                "value": flop / theirs / 1e9,
                "unit": "GFLOP/s",
                "goal": "",
                "ok": None,
            },
            {
                "name": f"{n}: best shared-memory blocking / library",
                "value": ratio,
                "unit": "x",
                "goal": f">= {GOAL}" if n == 4096 else "",
                "ok": ratio >= GOAL if n == 4096 else None,
            },
        ]
        worst = max(errors)
        rows.append(
            {
                "name": f"{n}: max |error| / max |C| vs numpy",
                "value": worst,
                "unit": "",
                "goal": "< 1e-5",
                "ok": worst < 1e-5,
            }
        )
    return rows
