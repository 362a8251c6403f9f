"""The course's shared-memory matmul on target "cuda", against the GPU's fp32 matmul library.

The schedule is ``mlckit.testing.gpu_schedules.shared_memory_matmul`` (8x8 results per thread,
8x8 threads per block, k tiles of 8, A and B tiles fetched into shared memory cooperatively,
4 elements per thread and round). It runs at 1024 and 4096 (float32, N^3 multiply-adds) and
is compared, in the same run, with torch's fp32 matmul with TF32 off (cupy's when torch has no
GPU, numba's naive one-thread-per-element kernel when neither is installed). Goal: at 4096,
at least 25% of the library's GFLOP/s.

Without an NVIDIA GPU the cuda target runs in numba's simulator, where times say nothing about
a GPU: the rows then report that and measure nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import mlckit
from mlckit import te
from mlckit.runtime.cuda import numba_cuda, simulated
from mlckit.testing.gpu_schedules import shared_memory_matmul
from mlckit.tir.function import PrimFunc

SIZES = (1024, 4096)
GOAL = 0.25


def matmul_func(n: int) -> PrimFunc:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


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
            "value": cuda.get_current_device().name.decode(),
            "unit": "",
            "goal": "",
            "ok": None,
        }
    ]
    rng = np.random.default_rng(0)
    for n in SIZES:
        sch = shared_memory_matmul(matmul_func(n), local=(8, 8), block=(8, 8), tile_k=8, vector=4)
        lib = mlckit.build(sch.mod, "cuda")
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        A, B = mlckit.nd.array(a, device), mlckit.nd.array(b, device)
        C = mlckit.nd.empty((n, n), "float32", device)
        ours = best_seconds(lambda f=lib["main"], A=A, B=B, C=C: f(A, B, C), cuda.synchronize)
        error = float(np.abs(C.numpy() - a @ b).max())
        name, reference, synchronize = library_matmul(a, b)
        theirs = best_seconds(reference, synchronize)
        flop = 2 * n**3
        ratio = theirs / ours
        rows += [
            {
                "name": f"{n}: mlckit shared-memory matmul",
                "value": flop / ours / 1e9,
                "unit": "GFLOP/s",
                "goal": "",
                "ok": None,
            },
            {
                "name": f"{n}: {name}",
                "value": flop / theirs / 1e9,
                "unit": "GFLOP/s",
                "goal": "",
                "ok": None,
            },
            {
                "name": f"{n}: mlckit / library",
                "value": ratio,
                "unit": "x",
                "goal": f">= {GOAL}" if n == 4096 else "",
                "ok": ratio >= GOAL if n == 4096 else None,
            },
            {
                "name": f"{n}: max |error| vs numpy",
                "value": error,
                "unit": "",
                "goal": "",
                "ok": None,
            },
        ]
    return rows
