"""Automatic optimization (``mlckit.meta_schedule``) on "llvm": evolutionary vs random search
on a 512x512x512 float32 matmul, and the FashionMNIST MLP with its kernels tuned.

* Matmul: for each seed in ``SEEDS``, ``tune_tir`` in the default space with
  ``strategy="evolutionary"`` (cost model) and with ``strategy="random"``, ``TRIALS`` measured
  trials each, ``TRIALS_PER_ITER`` per round, the same seed for both. The in-search times are
  noisy (one measurement each, on a shared machine), so the best program of every search is
  built again and all of them are timed at the end in alternation, the unscheduled program
  and numpy's ``a @ b`` apart; the in-search times are reported too. Each turn times a
  program as the searches' runner does (a warm-up call, then the mean of back-to-back calls
  lasting 20 ms or more), and each time is the median of ``ROUNDS`` turns, as the searches
  rank programs by medians: the calls of one parallel program spread widely here (one tuned
  program: median 90 GFLOP/s, fastest of 30 calls 135), and the fastest would reward the
  program with the luckiest spread. Also reported: the median of single calls taken in turn,
  each finding the caches as the other programs left them (one search's best ran 126 GFLOP/s
  so and 80 the runner's way, while the others lost 5-20%). The
  space leaves out the default schedule's hint, so that both searches start from nothing. Goals:
  evolutionary >= random for each seed; the slowest of the evolutionary bests >= 3x the
  unscheduled program. GFLOP/s count 2 * 512^3.
* MLP: the course's 784-128-10 MLP for a fixed batch (each of ``MLP_BATCHES``: one image, as
  the course tunes it, and 64) from high-level operators (weights as constants), through the
  "zero" pipeline (legalize, fuse) and dead code elimination: two kernels, each tuned with
  ``MLP_TRIALS_PER_KERNEL`` trials (``MLP_TRIALS_PER_ITER`` per round) by ``tune_relax`` in
  the default space (whose first trial is the default schedule's program; the four fastest are
  measured again before one is chosen),
  put back with ``MetaScheduleApplyDatabase`` and built.
  Checked: the same predictions as numpy on real images. Reported: the latency of the untuned
  build (``relax.build``'s default CPU schedule) and of the tuned one, timed in alternation;
  goal: tuned faster.

* Models (``python bench_tune.py models``, not in the default parts): ``tune_relax`` on
  bench_models' CNN at batch 1 and residual block at 32 channels (imported from torch, the
  default pipeline), ``MODEL_TRIALS_PER_KERNEL`` trials per kernel with its default builder
  and runner (the leaders measured again in this process, the default schedule's program
  among them), against the untuned build, both timed in this process; goal: tuned no slower
  than untuned (<= 1.1x, for noise).

* CUDA (``python bench_tune.py cuda``, on a machine with an NVIDIA GPU): a
  ``CUDA_N``^3 float32 matmul tuned for target "cuda" in the default space (thread binding,
  per-thread tiles), ``CUDA_TRIALS`` trials of each search, seed 0, against the default GPU
  schedule (what an untuned build runs) and the GPU's fp32 matmul library, each the fastest of
  10 calls. Under numba's simulator it reports that and measures nothing.

Tuning takes several minutes; run it alone on the machine (``python benchmarks/run.py
tune``): timings of parallel kernels on a busy 2-core machine are meaningless.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_cuda import best_seconds, gpu_name, library_matmul
from timing import as_the_runner_does, best_times, median_times

import mlckit
from mlckit import meta_schedule as ms
from mlckit import relax, te
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference
from mlckit.ir import IRModule
from mlckit.runtime.gpu import numba_cuda, simulated
from mlckit.runtime.ndarray import aligned_copy, aligned_empty
from mlckit.tir import PrimFunc
from mlckit.tir.schedule.default_gpu_schedule import schedule_for_gpu

N = 512
FLOP = 2 * N**3
CUDA_N = 1024
CUDA_TRIALS = 32
SEEDS = (0, 1, 2)
TRIALS = 64
# Eight rounds of 8: the cost model learns from each round before choosing the next.
TRIALS_PER_ITER = 8
MLP_TRIALS_PER_ITER = 16
ROUNDS = 30
# The course tunes the MLP for one image; a batch of 64 is the other end.
MLP_BATCHES = (1, 64)
MLP_TRIALS_PER_KERNEL = 64
# Models of bench_models tuned whole (name, size), and their budget.
MODELS = (("cnn", 1), ("res", 32))
MODEL_TRIALS_PER_KERNEL = 16


def row(name: str, value: Any, unit: str, goal: str = "", ok: bool | None = None) -> dict:
    return dict(name=name, value=value, unit=unit, goal=goal, ok=ok)


def matmul_func(n: int = N) -> PrimFunc:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def tune_matmul(
    func: PrimFunc, target: str = "llvm", seeds: Sequence[int] = SEEDS, trials: int = TRIALS
) -> dict[str, tuple[PrimFunc, float]]:
    """The best program of each search and its time as measured in the search, by the search's
    label ("evolutionary, seed 0", ...)."""
    best = {}
    # The pools are closed before anything is timed outside them.
    with ms.Builder() as builder, ms.Runner() as runner:
        for seed in seeds:
            for strategy in ("evolutionary", "random"):
                database = ms.tune_tir(
                    func,
                    target,
                    max_trials=trials,
                    num_trials_per_iter=TRIALS_PER_ITER,
                    strategy=strategy,
                    # The searches on their own: without the default schedule's program to
                    # start from, which both would measure first.
                    space=ms.default_space(target, hint_default_schedule=False),
                    seed=seed,
                    builder=builder,
                    runner=runner,
                    progress=False,
                )
                program = ms.compile_tir(database, func, target).mod["main"]
                measured = database.get_all_tuning_records()
                best[f"{strategy}, seed {seed}"] = (program, min(r.median_secs() for r in measured))
    return best


def matmul_rows() -> list[dict[str, Any]]:
    func = matmul_func()
    programs = tune_matmul(func)
    rng = np.random.default_rng(0)
    # Aligned as the runner's and the VM's arrays are (numpy's land anywhere 16 bytes apart,
    # and some programs run a fifth slower off a cache line).
    a, b = (aligned_copy(rng.random((N, N), dtype=np.float32)) for _ in range(2))
    expected = a @ b
    calls: dict[str, Callable[[], Any]] = {}
    for label, (program, _) in programs.items():
        kernel = mlckit.build(IRModule({"main": program}), "llvm")["main"]
        out = aligned_empty((N, N), np.float32)
        kernel(a, b, out)
        np.testing.assert_allclose(out, expected, rtol=1e-3)
        calls[label] = lambda kernel=kernel, out=out: kernel(a, b, out)
    unscheduled = mlckit.build(IRModule({"main": func}), "llvm")["main"]
    out = aligned_empty((N, N), np.float32)
    times = median_times({"unscheduled": lambda: unscheduled(a, b, out)}, 3, as_the_runner_does)
    times.update(median_times(calls, ROUNDS, as_the_runner_does))
    # numpy on its own: OpenBLAS's threads keep spinning for a while after a call and would
    # slow down the parallel kernel timed right after it.
    times.update(median_times({"numpy": lambda: a @ b}, ROUNDS, as_the_runner_does))
    gflops = {label: FLOP / seconds / 1e9 for label, seconds in times.items()}
    # Also one call per turn, after the other programs' calls: each call finds the caches as
    # the others left them, which the searches never measure.
    single = {label: FLOP / seconds / 1e9 for label, seconds in median_times(calls, ROUNDS).items()}

    rows = []
    for seed in SEEDS:
        evo, rand = gflops[f"evolutionary, seed {seed}"], gflops[f"random, seed {seed}"]
        in_search = {
            strategy: FLOP / programs[f"{strategy}, seed {seed}"][1] / 1e9
            for strategy in ("evolutionary", "random")
        }
        single_ratio = single[f"evolutionary, seed {seed}"] / single[f"random, seed {seed}"]
        rows += [
            row(f"evolutionary best, re-timed, seed {seed}", evo, "GFLOP/s"),
            row(f"random best, re-timed, seed {seed}", rand, "GFLOP/s"),
            *(
                row(f"{strategy} best as measured in the search, seed {seed}", value, "GFLOP/s")
                for strategy, value in in_search.items()
            ),
            *(
                row(f"{strategy} best, one call per turn, seed {seed}", value, "GFLOP/s")
                for strategy in ("evolutionary", "random")
                for value in [single[f"{strategy}, seed {seed}"]]
            ),
            row(f"evolutionary / random, seed {seed}", evo / rand, "x", ">= 1x", evo >= rand),
            row(f"evolutionary / random, one call per turn, seed {seed}", single_ratio, "x"),
        ]
    slowest = min(gflops[f"evolutionary, seed {seed}"] for seed in SEEDS)
    ratio = slowest / gflops["unscheduled"]
    rows += [
        row("unscheduled", gflops["unscheduled"], "GFLOP/s"),
        row("slowest evolutionary best / unscheduled", ratio, "x", ">= 3x", ratio >= 3),
        row("numpy", gflops["numpy"], "GFLOP/s"),
    ]
    for seed in SEEDS:
        label = f"evolutionary, seed {seed}"
        rows.append(
            row(f"evolutionary best / numpy, seed {seed}", gflops[label] / gflops["numpy"], "x")
        )
    return rows


def mlp_module(batch: int) -> IRModule:
    """The MLP for a fixed batch, from high-level operators, legalized and fused."""
    params = mlp_params()
    x = relax.Var("x", relax.TensorStructInfo((batch, 784), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.linear(x, relax.const(params["w0"]), relax.const(params["b0"])))
            lv1 = bb.emit(relax.op.nn.relu(lv0))
            out = bb.emit_output(
                relax.op.linear(lv1, relax.const(params["w1"]), relax.const(params["b1"]))
            )
        bb.emit_func_output(out)
    return relax.transform.DeadCodeElimination()(relax.get_pipeline("zero")(bb.get()))


def mlp_rows() -> list[dict[str, Any]]:
    return [r for batch in MLP_BATCHES for r in mlp_batch_rows(batch)]


def build_both(batch: int, database_path: str) -> None:
    """Build the untuned and the tuned MLP (in a worker process: see ``mlp_batch_rows``)."""
    mod = mlp_module(batch)
    relax.build(mod, "llvm")
    database = ms.JSONDatabase(database_path)
    relax.build(relax.transform.MetaScheduleApplyDatabase(database, "llvm")(mod), "llvm")


def mlp_batch_rows(batch: int) -> list[dict[str, Any]]:
    mod = mlp_module(batch)
    database_path = str(Path(tempfile.mkdtemp()) / "mlp.json")
    with ms.Builder() as builder, ms.Runner() as runner:
        database = ms.tune_relax(
            mod,
            target="llvm",
            max_trials_per_task=MLP_TRIALS_PER_KERNEL,
            num_trials_per_iter=MLP_TRIALS_PER_ITER,
            database=ms.JSONDatabase(database_path),
            builder=builder,
            runner=runner,
            progress=False,
        )
    # Both builds are compiled in another process and loaded here from the kernel cache, as a
    # later run of the model would, so that neither is timed as freshly compiled code and the
    # other as cached code: on one machine, numba ran a parallel kernel it had just compiled
    # up to 2x slower than the same kernel loaded from its cache (numba issue #10617).
    spawn = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        pool.submit(build_both, batch, database_path).result()
    tuned = relax.transform.MetaScheduleApplyDatabase(database, "llvm")(mod)
    vms = {
        "untuned": relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu()),
        "tuned": relax.VirtualMachine(relax.build(tuned, "llvm"), mlckit.cpu()),
    }
    data = fashion_mnist("sprite900")
    images = data.images[np.random.default_rng(0).permutation(len(data.images))[:batch]]
    x = mlckit.nd.array(images.reshape(batch, 784).astype(np.float32) / np.float32(255))
    expected = mlp_reference(images).argmax(axis=1)
    same = all(
        np.array_equal(vm["main"](x).numpy().argmax(axis=1), expected) for vm in vms.values()
    )

    def latency(vm: relax.VirtualMachine) -> Callable[[], Any]:
        return lambda: [vm["main"](x) for _ in range(20)]

    times = best_times({label: latency(vm) for label, vm in vms.items()}, ROUNDS)
    untuned, tuned_s = times["untuned"] / 20, times["tuned"] / 20
    # Where the time goes: each kernel's best time over the rounds of the VM's profiler.
    kernels = {label: kernel_times(vm, x) for label, vm in vms.items()}
    return [
        row(f"MLP batch {batch}: same predictions as numpy", same, "", "True", same),
        row(f"MLP batch {batch}: untuned (default schedule)", untuned * 1e6, "us"),
        row(f"MLP batch {batch}: tuned", tuned_s * 1e6, "us"),
        row(f"MLP batch {batch}: speedup", untuned / tuned_s, "x", "> 1x", tuned_s < untuned),
        *(
            row(f"MLP batch {batch}: {kernel}, {label}", secs * 1e6, "us")
            for label, by_kernel in kernels.items()
            for kernel, secs in by_kernel.items()
        ),
    ]


def kernel_times(vm: relax.VirtualMachine, x: Any) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for kernel, (_, seconds) in vm.profile("main", x).kernels.items():
            best[kernel] = min(best.get(kernel, float("inf")), seconds)
    return best


def cuda_rows() -> list[dict[str, Any]]:
    if simulated():
        return [row("cuda: tuned matmul", "no GPU (numba simulator)", "")]
    cuda = numba_cuda()
    return [row("cuda: GPU", gpu_name(cuda.get_current_device()), ""), *cuda_matmul_rows(CUDA_N)]


def cuda_matmul_rows(n: int, seeds: Sequence[int] = (0,)) -> list[dict[str, Any]]:
    """The searches' bests for an n^3 matmul on "cuda", the default GPU schedule and the
    library, the fastest of 10 calls each (``bench_cuda.best_seconds``)."""
    func = matmul_func(n)
    tuned = tune_matmul(func, "cuda", seeds, CUDA_TRIALS)
    programs = {label: program for label, (program, _) in tuned.items()}
    programs["default GPU schedule"] = schedule_for_gpu(func).mod["main"]
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    expected = a @ b
    device = mlckit.cuda()
    A, B = mlckit.nd.array(a, device), mlckit.nd.array(b, device)
    synchronize = numba_cuda().synchronize
    gflops = {}
    for label, program in programs.items():
        kernel = mlckit.build(IRModule({"main": program}), "cuda")["main"]
        C = mlckit.nd.empty((n, n), "float32", device)
        seconds = best_seconds(lambda kernel=kernel, C=C: kernel(A, B, C), synchronize)
        np.testing.assert_allclose(C.numpy(), expected, rtol=1e-3)
        gflops[label] = 2 * n**3 / seconds / 1e9
    library, reference, library_sync = library_matmul(a, b)
    gflops[library] = 2 * n**3 / best_seconds(reference, library_sync) / 1e9
    rows = [row(f"cuda {n}^3: {label}", value, "GFLOP/s") for label, value in gflops.items()]
    for seed in seeds:
        evo, rand = gflops[f"evolutionary, seed {seed}"], gflops[f"random, seed {seed}"]
        rows += [
            row(f"cuda {n}^3: evolutionary / random, seed {seed}", evo / rand, "x"),
            row(
                f"cuda {n}^3: evolutionary / default schedule, seed {seed}",
                evo / gflops["default GPU schedule"],
                "x",
            ),
            row(f"cuda {n}^3: evolutionary / {library}, seed {seed}", evo / gflops[library], "x"),
        ]
    return rows


# "cuda" runs only when asked for: it needs an NVIDIA GPU.
def model_rows() -> list[dict[str, Any]]:
    """tune_relax on models of bench_models (imported from torch, the default pipeline), the
    tuned build against the untuned one, timed in this process as the model runs."""
    import bench_models

    rows = []
    for name, size in MODELS:
        family = bench_models.FAMILIES[name]
        model = bench_models.make_model(family, size)
        shape = family.shape(size)
        mod = relax.get_pipeline("default")(
            bench_models.from_fx(bench_models.torch.fx.symbolic_trace(model), [(shape, "float32")])
        )
        database = ms.tune_relax(
            mod, target="llvm", max_trials_per_task=MODEL_TRIALS_PER_KERNEL, progress=False
        )
        tuned = relax.transform.MetaScheduleApplyDatabase(database, "llvm")(mod)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        runs = {
            label: relax.VirtualMachine(relax.build(m, "llvm"), mlckit.cpu())["main"]
            for label, m in (("untuned", mod), ("tuned", tuned))
        }
        same = np.allclose(runs["tuned"](x).numpy(), runs["untuned"](x).numpy(), atol=1e-4)
        times = best_times({label: (lambda f=f, x=x: f(x)) for label, f in runs.items()}, ROUNDS)
        label = f"{name} {family.size_name.format(size)}"
        rows += [
            row(f"{label}: tuned output equals untuned", same, "", "True", same),
            row(f"{label}: untuned (default schedule)", times["untuned"] * 1e6, "us"),
            row(
                f"{label}: tuned ({MODEL_TRIALS_PER_KERNEL} trials per kernel)",
                times["tuned"] * 1e6,
                "us",
            ),
            row(
                f"{label}: tuned / untuned",
                times["tuned"] / times["untuned"],
                "x",
                "<= 1.1x",
                times["tuned"] <= 1.1 * times["untuned"],
            ),
        ]
    return rows


PARTS = {"matmul": matmul_rows, "mlp": mlp_rows, "models": model_rows, "cuda": cuda_rows}
DEFAULT_PARTS = ("matmul", "mlp")


def run(parts: Sequence[str] = DEFAULT_PARTS) -> list[dict[str, Any]]:
    start = time.perf_counter()
    rows = [r for part in parts for r in PARTS[part]()]
    rows.append(row("wall time", time.perf_counter() - start, "s"))
    return rows


if __name__ == "__main__":
    import sys

    # python benchmarks/bench_tune.py [matmul] [mlp] [cuda]
    for r in run(sys.argv[1:] or DEFAULT_PARTS):
        value = f"{r['value']:10.3f}" if isinstance(r["value"], float) else f"{r['value']!s:>10}"
        print(f"{r['name']:45s} {value} {r['unit']:8s} {r['goal']} {r['ok']}")
