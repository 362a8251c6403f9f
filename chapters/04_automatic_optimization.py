# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Automatic program optimization
#
# In chapter 2 we made a matrix product fast by hand: we chose a
# [schedule](glossary.md#schedule), split a loop by 4, moved the reduction, and measured. Every
# choice there was a guess. Which tile size is best depends on the sizes of the tensors, on
# the processor's caches and vector units, on the code generator, and the choices interact:
# the best split of `j` depends on where `k` goes. A model has dozens of kernels, each with
# its own shapes, and each new machine needs its choices made again. Nobody wants to do that
# by hand.
#
# This chapter lets the computer make the choices. The idea of the MLC course's chapter 4, and
# of TVM's **MetaSchedule** (`mlckit.meta_schedule`, imported as `ms`), is short:
#
# 1. write the schedule with its choices left open, as *random draws*: the schedule then
#    describes a whole set of programs, a **search space**;
# 2. draw programs from it, build and time each one on the real machine, keep the fastest;
# 3. draw cleverly: learn from the programs measured so far which ones are likely to be fast.
#
# We follow the course: the [trace](glossary.md#trace) of a schedule, `sample_perfect_tile`
# and a stochastic schedule function, a random search written by hand, then `ms.tune_tir`
# with our own space and with the default one, how its cost model and evolutionary search
# work, and finally a tuned model: the FashionMNIST MLP with its kernels tuned.

# %%
import random
import tempfile
import time
import timeit
from pathlib import Path

import matplotlib.pyplot as plt
import numba
import numpy as np
from IPython.display import SVG, display

import mlckit
from mlckit import meta_schedule as ms
from mlckit import relax, tir, viz
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.meta_schedule.features import FEATURE_NAMES
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.viz.dot import render

dev = mlckit.cpu()
notebook_start = time.perf_counter()

# %% [markdown]
# ## The program and a schedule
#
# The program is the course's `MyModule`: `C = A @ B` for 128 × 128 matrices, the plain loop
# nest with the reduction `k` innermost.


# %%
@I.ir_module
class MyModule:
    @T.prim_func
    def main(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


rng = np.random.default_rng(0)
a_np = rng.uniform(size=(128, 128)).astype("float32")
b_np = rng.uniform(size=(128, 128)).astype("float32")
c_mm = a_np @ b_np
a_nd, b_nd = mlckit.nd.array(a_np), mlckit.nd.array(b_np)
c_nd = mlckit.nd.empty((128, 128), "float32")


def evaluate(mod: mlckit.IRModule) -> float:
    """Build ``mod``, check it against numpy, and return its time per call in seconds: the best
    of 5 measurements, the one least disturbed by other programs on the machine."""
    lib = mlckit.build(mod, target="llvm")
    lib["main"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)
    timer = lib.time_evaluator("main", dev, number=5, repeat=5)
    return timer(a_nd, b_nd, c_nd).min


print(f"unscheduled: {evaluate(MyModule) * 1e3:.3f} ms")

# %% [markdown]
# Chapter 2's schedule splits `j` by a factor, moves the inner part `j_1` below `k` so that
# the innermost loop walks along a row of `B` and `C`, and separates the initialization of
# `C` from the update (`decompose_reduction`). The factor is a parameter we pick:


# %%
def schedule_mm(sch: tir.Schedule, jfactor: int = 4) -> tir.Schedule:
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_0, j_1 = sch.split(loop=j, factors=[None, jfactor])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


sch = schedule_mm(tir.Schedule(MyModule))
print(f"j split by 4: {evaluate(sch.mod) * 1e3:.3f} ms")
sch.mod.show()

# %% [markdown]
# ## The trace: a schedule as a list of steps
#
# A `tir.Schedule` records each [schedule primitive](glossary.md#schedule-primitive) it
# applies, with its arguments and results, in its **trace**. The trace prints as the Python
# that replays it: `b0` names a block handle, `l1`, `l2`, ... loop handles.
# <!-- shown-by: trace -->

# %% tags=["nbval-check-output", "shows:trace"]
print(sch.trace)

# %% [markdown]
# The trace is the schedule *as data*: it can be stored, replayed on a fresh
# `tir.Schedule(MyModule)` to get the same program back, and, what this chapter is about,
# changed. `viz.graph(sch)` draws it: lookups white, transformations blue, and, soon,
# sampling steps yellow.

# %%
viz.graph(sch)

# %% [markdown]
# ## A schedule with its choices left open
#
# `sch.sample_perfect_tile(loop=j, n=2)` draws, at random, two factors whose product is the
# extent of `j` (128): a *perfect* tiling, with no remainder. Used in place of `[None, 4]`, it
# turns our schedule into a **stochastic schedule function**: each run draws a tiling, so the
# function describes many programs at once. This is the course's `stochastic_schedule_mm`:


# %%
def stochastic_schedule_mm(sch: tir.Schedule) -> tir.Schedule:
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


# %% [markdown]
# A schedule draws from its own random generator, seeded by `tir.Schedule(mod, seed=...)`.
# The trace records the value each sampling step drew, its **decision**: replaying the trace
# replays the decision, so the program of one draw can always be rebuilt.

# %% tags=["nbval-check-output"]
sch = stochastic_schedule_mm(tir.Schedule(MyModule, seed=1))
print(sch.trace)

# %% [markdown]
# Different seeds draw different tilings. `sample_perfect_tile` caps the inner factor at
# `max_innermost_factor` (16 by default, as in TVM), so for `j` of extent 128 the space holds
# five programs:

# %% tags=["nbval-check-output"]
for seed in range(6):
    drawn = stochastic_schedule_mm(tir.Schedule(MyModule, seed=seed))
    step = next(s for s in drawn.trace.instructions if s.kind == "sample_perfect_tile")
    print(f"seed {seed}: j split as {step.decision}")

decisions = set()
for seed in range(100):
    drawn = stochastic_schedule_mm(tir.Schedule(MyModule, seed=seed))
    decisions.add(tuple(drawn.trace.instructions[2].decision))
print("every tiling the space holds:", sorted(decisions))

# %% [markdown]
# The picture of a stochastic schedule's trace shows the sampling step in yellow, with its
# decision:

# %%
viz.graph(sch)

# %% [markdown]
# ## Random search, by hand
#
# With a space in hand, the simplest tuner draws programs from it, measures each and keeps
# the fastest. Here it is in a few lines: each trial runs the stochastic schedule on a fresh
# schedule with its own seed, builds, checks and times the result.


# %%
def random_search(mod: mlckit.IRModule, num_trials: int = 5) -> tir.Schedule:
    best_time, best_sch = float("inf"), None
    for trial in range(num_trials):
        sch = stochastic_schedule_mm(tir.Schedule(mod, seed=trial))
        seconds = evaluate(sch.mod)
        print(
            f"trial {trial}: j split as {sch.trace.instructions[2].decision}, {seconds * 1e3:.3f} ms"
        )
        if seconds < best_time:
            best_time, best_sch = seconds, sch
    return best_sch


best_sch = random_search(MyModule)
print("the best trace:")
print(best_sch.trace)

# %% [markdown]
# Two weaknesses show already. Random draws repeat themselves (the space has only five
# programs), so some trials measure a program twice. And each trial's build and timing runs
# in this process, one after the other. `ms.tune_tir` fixes both, and adds the part that
# matters for large spaces: it learns where to look.
#
# ## `ms.tune_tir`: the tuner
#
# `ms.tune_tir(mod, target, work_dir=..., max_trials_global=..., space=...)` searches `mod`'s
# single PrimFunc with at most `max_trials_global` measurements (`max_trials` for short). Its
# `space` is our stochastic schedule function (the course wraps it as
# `ms.space_generator.ScheduleFn(stochastic_schedule_mm)`; the function alone does too). Every
# measured program goes into a **database** (`ms.JSONDatabase`) kept in `work_dir`: a file of
# JSON lines, one *tuning record* per measurement (a program's trace, its times, which function
# and target it belongs to). As in TVM, `tune_tir` returns that database, and a later run on
# the same `work_dir` reads it back to resume instead of measuring the same programs again.
#
# Each trial is one short measurement, and on a busy machine the fastest of many short
# measurements is often a lucky one. So when the trials are done, `tune_tir` measures the four
# fastest programs three more times each, in turn (a slow spell of the machine falls on all of
# them), and the database ranks each program by the median of all its repeats. If that lets
# a program measured only once into the top four, the new top four are measured again too:
# the winner is never one lucky measurement. These extra measurements are not trials: they
# add records of programs already measured (`remeasure_top_k=0` turns them off).
#
# Candidates are built by a `ms.Builder`, several at once in worker processes (numba compiles
# each kernel; that is most of the cost of a trial), and timed by a `ms.Runner`, one at a
# time so that two measurements never disturb each other, in a worker process of its own so
# that a kernel that crashes or hangs is only a failed trial. We make both once and reuse
# them; the runner times each candidate `repeat` times after a warm-up, each time for at
# least `min_repeat_ms`, small values that keep this chapter quick.
#
# With `progress=True` a progress bar shows the trials and the best throughput so far. In a
# running notebook it is a live widget; a saved page such as this book's keeps only its first
# drawing (0 %), since the widget's later states are not stored with the page.

# %%
builder = ms.Builder()
runner = ms.Runner(number=1, repeat=3, min_repeat_ms=5)
work_dir = Path(tempfile.mkdtemp(prefix="tune_"))

database = ms.tune_tir(
    MyModule,
    "llvm",
    work_dir=work_dir,
    max_trials_global=8,
    num_trials_per_iter=8,
    space=stochastic_schedule_mm,
    builder=builder,
    runner=runner,
    progress=True,
)

# %% [markdown]
# We asked for 8 trials and got fewer: the tuner never measures a program twice (two traces
# that give the same program count once), and the space holds five.
# `ms.merge_measurements(database.get_all_tuning_records())` lists each measured program once,
# in the order of its first measurement, with all its times:

# %% tags=["nbval-check-output"]
records = ms.merge_measurements(database.get_all_tuning_records())
print(f"{len(records)} programs measured")
measured = sorted(tuple(r.trace[2]["decision"]) for r in records)
print("their j tilings:", measured)

# %% [markdown]
# Their times (the median of each program's measurements; they vary from run to run), and the
# start of the database file in `work_dir`: a line for the function tuned (its workload, with
# its TVMScript), then one line per record.

# %%
for record in sorted(records, key=lambda r: r.median_secs()):
    print(f"j split as {record.trace[2]['decision']}: {record.median_secs() * 1e3:.3f} ms")
print(database.path.relative_to(work_dir))
for line in database.path.read_text().splitlines()[:2]:
    print(line[:160], "...")

# %% [markdown]
# `ms.compile_tir(database, mod, target)` replays the fastest record's trace on the
# unscheduled module and returns the `tir.Schedule`, ready to build:

# %%
sch_tuned = ms.compile_tir(database, MyModule, "llvm")
print(sch_tuned.trace)
print(f"tuned: {evaluate(sch_tuned.mod) * 1e3:.3f} ms")

# %% [markdown]
# ## The default search space
#
# Our space has one choice in it. A real kernel has many: tile sizes at several levels for
# every loop, where to keep a partial result, which loops run in parallel, how wide a vector.
# With `space=None`, `tune_tir` derives a space from the program itself, in the spirit of
# MetaSchedule's rules. For the CPU, a reduction block such as our matrix product gets
# *multi-level tiling*: the spatial loops `i`, `j` split into 3 levels by
# `sample_perfect_tile` (and `j`'s contiguous part into a vector by `sample_categorical`, a
# draw among a few values), the reduction `k` into 2, all reordered so that the reduction
# runs inside the outer tiles and outside the vector; a local accumulator tile placed at a
# level or left out; the outer loops fused and run in `parallel`; the vector loop
# `vectorize`d. For a small loop nest (this one: 128³ iterations), leaving the outer loops
# serial is drawn too: waking up threads costs microseconds, which a small kernel may not win
# back. One sample of it:

# %% tags=["nbval-check-output"]
space = ms.default_space("llvm")
sample = space.sample(MyModule, seed=0)
print(sample.trace)

# %% [markdown]
# Every `sample_perfect_tile` and `sample_categorical` step is a decision, so this space holds
# thousands of programs: far too many to measure them all. Searching it well needs two more
# ideas.
#
# ## How the tuner searches: a cost model and evolution
#
# **A cost model** predicts how fast a program is without running it. Building and timing a
# candidate takes about a second here; predicting takes a fraction of a millisecond. mlckit's
# `ms.CostModel`, like TVM's, does not read the program itself: `ms.extract_features`
# describes the loop nest after lowering by a fixed list of numbers (how many iterations, which
# loops are parallel or vectorized and how long, how far apart consecutive iterations access
# memory, how many bytes a loop's body touches, the estimated traffic through a 32 KiB and a 1
# MiB cache, arithmetic per byte, and the *register tile*: the outputs the innermost reduction
# loop accumulates into, which stay in registers when they are a few vectors, and the
# arithmetic per byte of input it reads), and a gradient-boosted tree ensemble (scikit-learn)
# learns the map from features to *normalized throughput*: the best time measured so far
# divided by the program's time, 1 for the best. It is trained again on everything measured
# after each round of measurements.
#
# A few of the features of the two programs we have seen, the hand-split one and the default
# space's sample:

# %% tags=["nbval-check-output"]
hand = schedule_mm(tir.Schedule(MyModule))
features = {
    "split j by 4": ms.extract_features(hand.mod),
    "default space, seed 0": ms.extract_features(sample.mod),
}
print(f"{len(FEATURE_NAMES)} features per program; a few of them (log2(1 + x) scale):")
for name in [
    "main.inner_extent",
    "main.parallel_extent",
    "main.vectorized_extent",
    "main.traffic_l1",
    "main.accumulator_bytes",
]:
    column = FEATURE_NAMES.index(name)
    values = "  ".join(f"{label}: {f[column]:5.2f}" for label, f in features.items())
    print(f"  {name:24s} {values}")

# %% [markdown]
# **An evolutionary search** uses the model to choose what to measure. It keeps a
# *population* of programs: the best measured so far and fresh random samples. A program's
# *neighbour* is its trace with **one decision** drawn anew (another tiling of one loop,
# another vector width) and replayed: `ms.mutate` makes one. Each generation breeds children
# by mutating parents, picked in proportion to their predicted score, and keeps the best
# predicted; after a few generations the best predicted programs not measured yet fill a
# quarter of the batch to measure. A small fraction of each batch (*epsilon-greedy*, 5 %) are fresh random samples, so
# the model also learns about programs it does not already like.
#
# The rest of each batch is chosen by the model among fresh random samples, eight for each
# program to measure. A search of tens of trials (not the thousands TVM runs) has few
# parents, and their offspring all look alike; a model trained on a few dozen programs is
# better at picking good programs out of a wide pool than at telling near neighbours apart.
#
# One mutation of the default space's sample: one decision changed, the rest of the trace
# replayed as it was.

# %% tags=["nbval-check-output"]
neighbour = ms.mutate(sample, MyModule, random.Random(0))
for before, after in zip(sample.trace.instructions, neighbour.trace.instructions):
    if before.decision is not None and before.decision != after.decision:
        print(f"{before.kind}: {before.decision} -> {after.decision}")

# %% [markdown]
# One round of the tuner, as a picture:

# %% tags=["hide-input"]
loop = viz.Digraph(
    graph_attr={"rankdir": "LR", "fontname": "Helvetica", "fontsize": "10", "nodesep": "0.3"},
    node_attr={
        "fontname": "Helvetica",
        "fontsize": "10",
        "shape": "box",
        "style": "rounded,filled",
    },
    edge_attr={"fontname": "Helvetica", "fontsize": "9"},
)
loop.node("space", "search space\n(sampled traces)", fillcolor="#EEDD88")
loop.node(
    "evolve",
    "evolve a population:\nmutate one decision,\nrank by the cost model",
    fillcolor="#99DDFF",
)
loop.node("build", "Builder\n(in parallel)", fillcolor="#BBCC33")
loop.node("run", "Runner\n(one at a time)", fillcolor="#BBCC33")
loop.node("db", "database\n(JSON records)", fillcolor="#DDDDDD")
loop.node(
    "model", "cost model\n(features -> gradient\nboosting -> throughput)", fillcolor="#FFAABB"
)
loop.edge("space", "evolve", label="random samples")
loop.edge("evolve", "build", label="the best predicted\n+ 5 % random")
loop.edge("build", "run")
loop.edge("run", "db", label="times")
loop.edge("run", "model", label="train")
loop.edge("model", "evolve", label="predict", style="dashed")
loop.edge("db", "evolve", label="best measured\nbecome parents", style="dashed")
display(SVG(render(loop)))

# %% [markdown]
# `strategy="evolutionary"` is the default; `strategy="random"` measures random samples, like
# our hand-written loop. We tune `MyModule` in the default space with both, from the same seed,
# 12 trials each in two rounds of 6. Before its first round the evolutionary search's model
# knows nothing and ranks at random; for the second it has learned from the first six.
#
# The default space also *hints* at one program: the one `relax.build`'s default schedule
# would give this function (`space.hints(func)`). Both searches measure it first, so their
# curves start where an untuned build stands, and tuning cannot end with a program slower
# than the default in its own measurements. (`ms.default_space("llvm",
# hint_default_schedule=False)` leaves the hint out, to see what a search finds on its own.)
# <!-- checked-by: tests/meta_schedule/test_tune.py::test_the_default_space_measures_the_default_schedule_first -->

# %%
# No work_dir: each database is kept in memory only.
evolutionary = ms.tune_tir(
    MyModule,
    "llvm",
    max_trials_global=12,
    num_trials_per_iter=6,
    builder=builder,
    runner=runner,
    progress=False,
)
random_search = ms.tune_tir(
    MyModule,
    "llvm",
    max_trials_global=12,
    num_trials_per_iter=6,
    strategy="random",
    builder=builder,
    runner=runner,
    progress=False,
)

# %% [markdown]
# `ms.plot_tuning_curves` draws the best throughput found after each trial, each program at the
# median of all its measurements. (`ms.estimate_flops` counts the float operations of one
# call: 2 × 128³.)

# %%
flops = ms.estimate_flops(MyModule["main"])
runs = {"random": random_search, "evolutionary": evolutionary}
ms.plot_tuning_curves({name: db.get_all_tuning_records() for name, db in runs.items()}, flops)
plt.show()

# %% [markdown]
# Read this curve with care. At 12 trials on a small matrix, one lucky draw decides it: the
# two lines cross or swap from one run to the next, and the timings of programs that take a
# few dozen microseconds are noisy on a shared machine. The model needs data before it helps
# (here it guided only the last six trials), and a large space before it has something to
# find. The benchmark
# `benchmarks/bench_tune.py` compares the two strategies properly, on a 512 × 512 × 512
# matrix product with 64 trials each, in rounds of 8 so that the model learns from seven
# rounds, over 3 seeds.
#
# The fastest program the evolutionary search found, with the tile sizes, accumulator and
# parallel or serial outer loops the search chose:

# %%
sch_best = ms.compile_tir(evolutionary, MyModule, "llvm")
sch_best.mod.show()
best_gflops = flops / evaluate(sch_best.mod) / 1e9
# numpy's own speed: the best of 5 rounds of 20 calls. Right after a parallel kernel, numba's
# threads still spin for a moment on the cores that OpenBLAS's threads need, and the first
# calls would time that fight instead.
numpy_seconds = min(timeit.repeat(lambda: a_np @ b_np, number=20, repeat=5)) / 20
numpy_gflops = flops / numpy_seconds / 1e9
print(f"tuned: {best_gflops:.1f} GFLOP/s; numpy: {numpy_gflops:.1f} GFLOP/s")

# %% [markdown]
# ## Putting a tuned kernel back into the model
#
# Now the FashionMNIST MLP of chapter 3. Tuning measures real programs on real arrays, so
# every shape must be known: the tuner cannot time a kernel whose batch size `n` is symbolic
# (`ms.extract_tasks` skips such kernels with a warning). As the course does, we build the
# model for one image at a time (a batch of 1) with a
# [BlockBuilder](glossary.md#blockbuilder), from high-level operators, with the weights as
# constants.

# %%
params = mlp_params()
batch = 1


def mlp_module(batch: int) -> mlckit.IRModule:
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
    return bb.get()


# %% [markdown]
# The "zero" pipeline does what chapter 3 and the graph-optimization chapter do step by step:
# [legalization](glossary.md#legalization) of every operator into a PrimFunc,
# [fusion](glossary.md#operator-fusion) of each matrix product with its bias and activation,
# [FuseTIR](glossary.md#fusetir). The transposes of the constant weights are computed at
# compile time (FoldConstant), and `DeadCodeElimination` drops their PrimFuncs. What is left
# to tune is two kernels, one per layer:

# %% tags=["nbval-check-output"]
mlp = relax.transform.DeadCodeElimination()(relax.get_pipeline("zero")(mlp_module(batch)))
print(list(ms.extract_tasks(mlp)))

# %% [markdown]
# `ms.tune_relax(mod, params, target, work_dir, max_trials_global, ...)` (TVM's
# `ms.relax_integration.tune_relax`) runs `tune_tir` on every kernel into one database, and
# `relax.transform.MetaScheduleApplyDatabase(database, target)` (or with the `work_dir` tuning
# kept it in) is a [pass](glossary.md#pass) that replaces each kernel the database knows by its
# best schedule, marking it scheduled; `relax.build` gives the kernels it does not know its
# default CPU schedule. (The course does the same by hand for one kernel: `tune_tir` on it,
# `compile_tir`, and `mod.update_func` to put the tuned PrimFunc back in the
# [IRModule](glossary.md#irmodule).)

# %%
mlp_database = ms.tune_relax(
    mlp,
    target="llvm",
    max_trials_per_task=12,
    num_trials_per_iter=12,
    builder=builder,
    runner=runner,
    progress=False,
)
mlp_tuned = relax.transform.MetaScheduleApplyDatabase(mlp_database, "llvm")(mlp)
vm_default = relax.VirtualMachine(relax.build(mlp, "llvm"), dev)
vm_tuned = relax.VirtualMachine(relax.build(mlp_tuned, "llvm"), dev)
mlp_tuned["fused_matmul_add_relu"].show()

# %% [markdown]
# The tuned model classifies 64 real images, one at a time, as numpy's reference MLP does:

# %% tags=["nbval-check-output"]
data = fashion_mnist("sprite900")
picked = np.random.default_rng(0).permutation(len(data.images))[:64]
images = data.images[picked]
pixels = images.reshape(64, 1, 784).astype("float32") / 255
tuned_logits = np.concatenate([vm_tuned["main"](mlckit.nd.array(x)).numpy() for x in pixels])
predicted = tuned_logits.argmax(axis=1)
reference = mlp_reference(images, params)
print("same predictions as numpy:", bool((predicted == reference.argmax(axis=1)).all()))
print(
    "largest difference in the logits below 1e-4:",
    bool(np.abs(tuned_logits - reference).max() < 1e-4),
)
print("the first six:", [data.class_names[c] for c in predicted[:6]])

# %% [markdown]
# Is it faster? We stop the tuner's worker processes first, then time the two builds in
# turn, three times each, and keep each one's best median: <!-- shown-by: tuned-vs-default -->

# %% tags=["shows:tuned-vs-default"]
x_nd = mlckit.nd.array(pixels[0])
builder.shutdown()
runner.shutdown()
best = {"default schedule": float("inf"), "tuned": float("inf")}
for _ in range(3):
    for label, vm in [("default schedule", vm_default), ("tuned", vm_tuned)]:
        timer = vm.time_evaluator("main", dev, number=20, repeat=5)
        best[label] = min(best[label], float(np.median(timer(x_nd).results)))
for label, seconds in best.items():
    print(f"{label:16s}: {seconds * 1e6:6.1f} µs per image")
print(f"(parallel loops, where a program has them, use {numba.get_num_threads()} threads)")
print(f"speedup: {best['default schedule'] / best['tuned']:.2f}x")

# %% [markdown]
# For one image, the first layer is a matrix-vector product: 784 × 128 multiply-adds, a few
# microseconds of work, which the default build runs on one thread (the default schedule
# leaves a nest this small serial). The tuner's space draws serial or parallel loops for it,
# split and ordered in other ways, and measures what pays instead of guessing. With twelve trials per kernel, drawn before the cost model has seen a single
# measurement, this run may or may not have drawn a better program than the default, so the
# number above can go either way; timings of a few microseconds are noisy on a shared machine
# too. <!-- shown-by: tuned-vs-default --> The benchmark `benchmarks/bench_tune.py` tunes both kernels with 64
# trials each, for one image and for a batch of 64, and reports what it measured.

# %% [markdown]
# ## Summary
#
# - A schedule's trace is the schedule as data: the steps that produce the program, replayable
#   on the unscheduled module.
# - Sampling primitives (`sample_perfect_tile`, `sample_categorical`) leave choices open; the
#   trace records each draw as a decision. A stochastic schedule function describes a search
#   space.
# - `ms.tune_tir` draws programs, builds them in parallel and times them one at a time, records
#   every result in a database (kept in `work_dir`, and returned), and never measures a program
#   twice; `ms.compile_tir` replays the best trace. The default space tiles, parallelizes and vectorizes any reduction kernel.
# - The evolutionary search mutates one decision at a time and measures what a cost model
#   (features of the lowered loop nest, gradient-boosted trees) predicts to be fast, plus a few
#   random samples.
# - For a whole model, `ms.tune_relax` tunes every kernel of static shape, and
#   `MetaScheduleApplyDatabase` puts the best schedules into the module before `relax.build`.
#
# ## Exercise
#
# `check(name, answer)` tells you whether an answer is right, and if not, what differs and
# where to look. `hint(name, 1)`, `hint(name, 2)`, ... give more and more help;
# `solution(name)` shows a reference solution, once you have tried.
#
# ### A search space that tiles `i` and `j`
#
# The course's space samples one loop. A matrix product is usually tiled along both spatial
# loops, so that a small block of `C` stays in cache while the reduction runs through `A` and
# `B`, and which block shape is best is exactly the kind of question to leave to the tuner.
# <!-- background: how matrix products are tiled in general; the exercise's check runs it -->
# `TileMatmul` computes `C = A @ B` for `A` of shape (64, 32) and `B` of shape (32, 96). Write
# `stochastic_tile_ij(sch)` that draws a tiling of `i` into 2 loops and one of `j` into 2
# loops with `sch.sample_perfect_tile`, splits both with the drawn factors, orders the loops
# `(i_0, j_0, k, i_1, j_1)` and returns the schedule. The checker samples your function with
# several seeds, as `tune_tir` would, reads the sampling steps in the traces, and runs the
# programs against numpy. (Once it passes, `ms.tune_tir(TileMatmul, "llvm", max_trials_global=16,
# space=stochastic_tile_ij)` would search your space.)

# %%
from mlckit.exercises.ch4 import TileMatmul

TileMatmul.show()


# %%
def stochastic_tile_ij(sch: tir.Schedule) -> tir.Schedule:
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)  # noqa: RUF059 - the loops to tile
    # your code here: sample a tiling of i and of j, split both, reorder
    return sch


check("ch4.stochastic_tile_ij", stochastic_tile_ij)

# %%
print(f"this notebook ran in {time.perf_counter() - notebook_start:.0f} s")
