"""1024x1024x1024 float32 matmul on target "llvm": unscheduled, hand-scheduled, and numpy.

* the unscheduled loop nest (i, j, k; the reduction innermost);
* a hand schedule written with ``tir.Schedule``: tiles of (16, 64, 4) for cache, the reduction
  loop moved outside the contiguous loop j (i-k-j order inside a tile), ``parallel`` on the
  outer tile loop (2 cores here), ``vectorize`` on the inner j loop, and
  ``cache_write(block, 0, "local")`` + ``reverse_compute_at`` + ``decompose_reduction``, which
  buffer compaction turns into a 16x64 accumulator tile allocated inside the tile loop;
  numba's fastmath stays off (the function attribute "fastmath" is not set);
* the same schedule with tiles (32, 64, 4) and fastmath on, for comparison;
* numpy's ``a @ b`` in this process (OpenBLAS as configured by the environment) and in a fresh
  process with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset.

GFLOP/s count 2 * 1024^3 operations. Each variant's time is the best of several runs, numpy and
the kernels measured in alternation so that a busy machine slows all of them alike; the goal
is the hand schedule at >= 0.8x numpy as configured (0.5x at the very least).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import best_times

import mlckit
from mlckit import te, tir
from mlckit.runtime.ndarray import aligned_copy, aligned_empty
from mlckit.tir.function import PrimFunc

N = 1024
FLOP = 2 * N**3

NUMPY_IN_FRESH_PROCESS = r"""
import json, time
import numpy as np
rng = np.random.default_rng(0)
a = rng.random((1024, 1024), dtype=np.float32)
b = rng.random((1024, 1024), dtype=np.float32)
a @ b
best = float("inf")
for _ in range(30):
    start = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - start)
print(json.dumps({"seconds": best}))
"""


def matmul_func() -> PrimFunc:
    a = te.placeholder((N, N), "float32", name="A")
    b = te.placeholder((N, N), "float32", name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def hand_schedule(func: PrimFunc, tile_i: int, tile_j: int, tile_k: int) -> PrimFunc:
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, tile_i])
    j0, j1 = sch.split(j, [None, tile_j])
    k0, k1 = sch.split(k, [None, tile_k])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, j0)
    sch.parallel(i0)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k0)
    return sch.mod[sch.func_name]


def numpy_without_openblas_settings() -> float:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    }
    out = subprocess.run(
        [sys.executable, "-c", NUMPY_IN_FRESH_PROCESS],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def row(name: str, value: float, unit: str, goal: str = "", ok: bool | None = None) -> dict:
    return dict(name=name, value=value, unit=unit, goal=goal, ok=ok)


def run() -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    # Aligned as mlckit.nd's arrays are: numpy's land anywhere 16 bytes apart.
    a = aligned_copy(rng.random((N, N), dtype=np.float32))
    b = aligned_copy(rng.random((N, N), dtype=np.float32))
    expected = a @ b
    func = matmul_func()
    kernels = {
        "unscheduled": func,
        "hand schedule": hand_schedule(func, 16, 64, 4),
        "hand schedule, fastmath": hand_schedule(func, 32, 64, 4).with_attr("fastmath", True),
    }
    outputs = {name: aligned_empty((N, N), np.float32) for name in kernels}
    calls: dict[str, Callable[[], Any]] = {}
    for name, kernel in kernels.items():
        compiled = mlckit.build(kernel, "llvm")[kernel.attrs.get("global_symbol", "main")]
        out = outputs[name]
        calls[name] = lambda compiled=compiled, out=out: compiled(a, b, out)
    calls["numpy"] = lambda: a @ b

    unscheduled = best_times({"unscheduled": calls.pop("unscheduled")}, rounds=2)
    times = {**unscheduled, **best_times(calls, rounds=15)}
    for out in outputs.values():
        np.testing.assert_allclose(out, expected, rtol=1e-3)
    numpy_plain = numpy_without_openblas_settings()

    rows = [
        row(f"{name} GFLOP/s", FLOP / seconds / 1e9, "GFLOP/s") for name, seconds in times.items()
    ]
    rows.append(row("numpy GFLOP/s, OPENBLAS_* unset", FLOP / numpy_plain / 1e9, "GFLOP/s"))
    for name in kernels:
        ratio = times["numpy"] / times[name]
        if name == "hand schedule":
            rows.append(row(f"{name} / numpy", ratio, "x", ">= 0.8x", ratio >= 0.8))
        else:
            rows.append(row(f"{name} / numpy", ratio, "x"))
    ratio = numpy_plain / times["hand schedule"]
    rows.append(row("hand schedule / numpy with OPENBLAS_* unset", ratio, "x"))
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']:45s} {r['value']:10.3f} {r['unit']:8s} {r['goal']} {r['ok']}")
