"""A 1024x1024x1024 float32 matmul ``C = A @ B.T`` on target "llvm", tensorized as chapter 8
does it, against the same schedule computing with scalar loops and numpy.

* "scheduled": split into 16x16x16 tiles, ``blockize`` the tile, its operands staged in the
  scopes ``global.A_reg`` / ``global.B_reg`` and its result in ``global.accumulator``
  (``cache_read`` / ``cache_write``), the init decomposed: the tiles run as scalar loops;
* "tensorized": the same program with each tile's update replaced by ``tensorize`` with the
  intrinsic ``tmm16``, whose implementation calls a numba micro-kernel registered with
  ``tir.op.register_extern``;
* numpy's ``a @ b.T`` (OpenBLAS) on one thread, as the mlckit kernels run, and on its default
  threads.

Each result is checked against numpy. GFLOP/s count 2 * 1024^3 operations; each variant's
time is the best of several rounds that take the variants in turn, so that a busy machine
slows all of them alike. Only reports: the micro-kernel is software doing the same scalar
multiply-adds as the loops it replaces, so there is no speed to expect of it, only to measure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
from timing import best_times

import mlckit
from mlckit import te, tir
from mlckit.runtime.ndarray import aligned_copy, aligned_empty
from mlckit.testing.examples import tmm16_desc, tmm16_impl, tmm16_micro_kernel

N, TILE = 1024, 16
FLOP = 2 * N**3
INTRINSIC = "bench_tmm16"


def matmul_func() -> tir.PrimFunc:
    a = te.placeholder((N, N), "float32", name="A")
    b = te.placeholder((N, N), "float32", name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def staged(func: tir.PrimFunc) -> tuple[tir.Schedule, Any]:
    """Chapter 8's schedule up to tensorize; the schedule and the tile's block."""
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, TILE])
    j0, j1 = sch.split(j, [None, TILE])
    k0, k1 = sch.split(k, [None, TILE])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    tile = sch.blockize(i1)
    sch.compute_at(sch.cache_read(tile, 0, "global.A_reg"), k0)
    sch.compute_at(sch.cache_read(tile, 1, "global.B_reg"), k0)
    sch.reverse_compute_at(sch.cache_write(tile, 0, "global.accumulator"), j0)
    sch.decompose_reduction(tile, k0)
    return sch, tile


def row(name: str, value: float, unit: str, goal: str = "", ok: bool | None = None) -> dict:
    return dict(name=name, value=value, unit=unit, goal=goal, ok=ok)


def run() -> list[dict[str, Any]]:
    tir.op.register_extern("tmm16", tmm16_micro_kernel, override=True)
    tir.TensorIntrin.register(INTRINSIC, tmm16_desc, tmm16_impl, override=True)
    rng = np.random.default_rng(0)
    a = aligned_copy(rng.random((N, N), dtype=np.float32))
    b = aligned_copy(rng.random((N, N), dtype=np.float32))
    expected = a @ b.T

    sch, tile = staged(matmul_func())
    scheduled = sch.mod.copy()
    sch.tensorize(tile, INTRINSIC)
    kernels = {"scheduled": scheduled, "tensorized": sch.mod}
    outputs = {name: aligned_empty((N, N), np.float32) for name in kernels}
    calls = {}
    for name, mod in kernels.items():
        compiled, out = mlckit.build(mod, "llvm")["main"], outputs[name]
        calls[name] = lambda compiled=compiled, out=out: compiled(a, b, out)
    threads = threadpool_info()[0]["num_threads"]
    with threadpool_limits(limits=1):
        calls["numpy, 1 thread"] = lambda: a @ b.T
        times = best_times(calls, rounds=5)
    times[f"numpy, {threads} threads"] = best_times({"numpy": lambda: a @ b.T}, rounds=5)["numpy"]
    # Relative to the largest element: the sums of 1024 products reach about 256.
    scale = float(np.abs(expected).max())
    errors = {name: float(np.abs(out - expected).max()) / scale for name, out in outputs.items()}

    rows = [row(f"{name} GFLOP/s", FLOP / s / 1e9, "GFLOP/s") for name, s in times.items()]
    rows.append(
        row(
            "tensorized equals numpy (max |error| / max |C|)",
            errors["tensorized"],
            "",
            "<= 1e-5",
            max(errors.values()) <= 1e-5,
        )
    )
    for name in ("tensorized", "numpy, 1 thread"):
        rows.append(row(f"{name} / scheduled", times["scheduled"] / times[name], "x"))
    ratio = times["numpy, 1 thread"] / times["tensorized"]
    rows.append(row("tensorized / numpy, 1 thread", ratio, "x"))
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']:40s} {r['value']:10.4g} {r['unit']:8s} {r['goal']} {r['ok']}")
