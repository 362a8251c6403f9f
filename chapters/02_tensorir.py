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
# # 2. TensorIR
#
# Chapter 1 ended on a gap: our compiled loop nest does the same arithmetic as numpy's matrix
# product, yet runs slower, because of the *shape* of the loop nest: the order of the loops,
# how they walk memory, what the processor can do several at a time.
# <!-- background: measured at the end of chapter 1 --> This chapter is about
# changing that shape. It looks closely at [TensorIR](glossary.md#tensorir), the language in
# which mlckit holds a [primitive tensor function](glossary.md#primitive-tensor-function),
# and at what makes it transformable: [blocks](glossary.md#block) whose
# [iterators](glossary.md#block-iterator) declare what kind of axis they walk. Then it
# transforms one program step by step with a [schedule](glossary.md#schedule), looks at the
# loop nest and the data its inner loops touch after each step, and measures each variant.
#
# The example is the course's `mm_relu`: a 128×128 matrix product followed by a ReLU,
# `C = max(A @ B, 0)`.

# %%
import os
import timeit

import matplotlib.pyplot as plt
import numba
import numpy as np

import mlckit
from mlckit import te, tir
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir.analysis import footprint
from mlckit.widgets import ScheduleExplorer

rng = np.random.default_rng(0)
a_np = rng.uniform(-1, 1, (128, 128)).astype("float32")
b_np = rng.uniform(-1, 1, (128, 128)).astype("float32")
c_mm_relu = np.maximum(a_np @ b_np, 0)

# %% [markdown]
# ## From numpy to TensorIR
#
# As in chapter 1, we first write the computation in low-level numpy: explicit loops over
# scalars, every array allocated explicitly, and the result written into a destination that
# the caller passes ([destination-passing style](glossary.md#destination-passing-style)).
# `Y` is the intermediate result of the matrix product.


# %%
def lnumpy_mm_relu(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j in range(128):
            for k in range(128):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(128):
        for j in range(128):
            C[i, j] = max(Y[i, j], 0)


c_np = np.empty((128, 128), dtype="float32")
lnumpy_mm_relu(a_np, b_np, c_np)
np.testing.assert_allclose(c_np, c_mm_relu, rtol=1e-5, atol=1e-5)

# %% [markdown]
# Here is the same program in TensorIR, written in TVMScript as a
# [PrimFunc](glossary.md#primfunc) inside an [IRModule](glossary.md#irmodule). Its block
# iterators are written out in full this time; the next section reads them.


# %%
@I.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(
        A: T.Buffer((128, 128), "float32"),
        B: T.Buffer((128, 128), "float32"),
        C: T.Buffer((128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


# %% [markdown]
# Line by line it is `lnumpy_mm_relu`: [buffers](glossary.md#buffer) for the arrays
# (`T.alloc_buffer` for `Y`), `T.grid` for the nested loops, `T.init()` for the `if k == 0`.
# Two things have no counterpart. `T.func_attr` gives the function's attributes:
# `global_symbol` is the name it is called by once compiled (the cell below shows it), and
# `tir.noalias` promises that the buffers do not overlap in memory. And each loop body is
# wrapped in a **block**. <!-- shown-by: global-symbol -->
#
# `global_symbol` and the function's name in the module may differ. Here the module names its
# function `main`, and the build names the compiled function `scale_transpose`, as its
# `global_symbol` says (it also answers to `main`, the module's name for it). Printed alone,
# a PrimFunc takes its `global_symbol` as its name. Printed in a module, the attribute is left
# out where it equals the function's name, as in TVM (the schedules below print `mm_relu`
# so); parsing the text gives it back. <!-- shown-by: global-symbol -->


# %% tags=["nbval-check-output", "shows:global-symbol"]
@I.ir_module
class Scale:
    @T.prim_func
    def main(A: T.Buffer((2, 3), "float32"), B: T.Buffer((3, 2), "float32")):
        T.func_attr({"global_symbol": "scale_transpose", "tir.noalias": True})
        for i, j in T.grid(3, 2):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi] * T.float32(2)


lib = mlckit.build(Scale, target="python")
a, b = mlckit.nd.array(np.arange(6, dtype="float32").reshape(2, 3)), mlckit.nd.empty((3, 2))
lib["scale_transpose"](a, b)
print(lib)
print(b.numpy())
print(*(line for line in Scale["main"].script().splitlines() if line.startswith("def ")))

# %% [markdown]
# ## Blocks and their iterators
#
# A block, `with T.block("Y"):`, is the computation of one iteration together with a
# description of it. Its first lines declare its [block iterators](glossary.md#block-iterator):
#
# ```python
# vi = T.axis.spatial(128, i)
# vj = T.axis.spatial(128, j)
# vk = T.axis.reduce(128, k)
# ```
#
# Each declaration says three things about one iterator:
#
# * its **binding**: the value it takes from the loops around the block (`vi = i`);
# * its **domain**: the range it covers, here `[0, 128)`;
# * its **kind**: *spatial* or *reduction* (the [spatial and reduction
#   axes](glossary.md#spatial-and-reduction-axes)). `vi` and `vj` are spatial: each of their
#   values computes a different element `Y[vi, vj]`, independently of the others. `vk` is a
#   reduction axis: all its values add into the same element, and the block's init gives the
#   value that sum starts from. The init runs when every reduction axis is at its first value.
#
# The body is written only with the block iterators, never with the loop variables. From the
# body and the iterators' domains mlckit derives which elements the block reads and writes,
# without looking at any loop: the block is self-contained. The picture of the function's
# [loop nest](glossary.md#loop-nest) shows each block with its iterators (`S` spatial, `R`
# reduction), their bindings and the regions it reads and writes:

# %%
mlckit.viz.graph(MyModule["mm_relu"])

# %% [markdown]
# A schedule, the tool of the rest of this chapter, gives access to the same facts:

# %% tags=["nbval-check-output"]
sch = tir.Schedule(MyModule)
block = sch.get(sch.get_block("Y", func_name="mm_relu"))
for iv in block.iter_vars:
    kind = "spatial" if iv.iter_type == tir.IterVar.DataPar else "reduction"
    print(f"{iv.var}: {kind:9}  domain {iv.dom}")
print("reads: ", ", ".join(region.script() for region in block.reads))
print("writes:", ", ".join(region.script() for region in block.writes))

# %% [markdown]
# Binding an iterator straight to a loop variable is so common that TVMScript has a short form,
# `T.axis.remap`: one letter per iterator (`S` spatial, `R` reduction) and the loops they are
# bound to. The three lines above are written
#
# ```python
# vi, vj, vk = T.axis.remap("SSR", [i, j, k])
# ```
#
# and mean exactly the same. mlckit compares programs *structurally* (two programs are equal
# when they have the same structure, whatever their variables are called), so we can check it:


# %%
@T.prim_func
def mm_relu_remap(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    C: T.Buffer((128, 128), "float32"),
):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128), dtype="float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


# %%
print("the same program:", mlckit.ir.structural_equal(mm_relu_remap, MyModule["mm_relu"]))

# %% [markdown]
# ## Why the iterators make transformations safe
#
# Why write all this down, when the loops already say everything needed to *run* the
# program? Because a compiler does not only run programs: it rewrites them, and every rewrite
# must leave the results unchanged. Take "run the iterations of a loop in parallel, on all
# cores". For loop `i` this is fine: each iteration of `i` writes its own row of `Y`. For loop
# `k` it is wrong: every iteration of `k` adds into the same `Y[vi, vj]`, and threads adding
# into one element at the same time lose updates. To tell the two apart from the loops and
# the body alone, a compiler would need a dependence analysis of the body, which is hard and
# often gives up. With block iterators it is a lookup: loop `k` is bound to `vk`, a
# reduction axis, so the iterations of `k` are not independent. A
# [schedule primitive](glossary.md#schedule-primitive) checks exactly that, and refuses
# with the reason:

# %% tags=["nbval-check-output"]
i, j, k = sch.get_loops(sch.get_block("Y", func_name="mm_relu"))
try:
    sch.parallel(k)
except mlckit.errors.ScheduleError as err:
    print(err)

# %% [markdown]
# A refused step leaves the schedule unchanged. Every primitive checks its own conditions from
# the same declarations: `reverse_compute_at`, below, computes which region of `Y` a block of
# `C` needs from `C`'s iterators and their domains; `decompose_reduction` needs to know which
# iterators are reductions to know where the init must go. The declarations also make each
# block a unit that can be moved on its own: since the body uses only block iterators, moving
# the block under other loops only changes the bindings.
#
# ## Transforming `mm_relu` step by step
#
# Here is a variant of `lnumpy_mm_relu`, written by hand: the `j` loop is *split* into two
# loops, `j0` over 32 blocks of 4 columns and `j1` over the 4 columns of a block
# (`j = j0 * 4 + j1`), and the loops are *reordered* so that `k` runs between them.


# %%
def lnumpy_mm_relu_v2(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j0 in range(32):
            for k in range(128):
                for j1 in range(4):
                    j = j0 * 4 + j1
                    if k == 0:
                        Y[i, j] = 0
                    Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(128):
        for j in range(128):
            C[i, j] = max(Y[i, j], 0)


c_np = np.empty((128, 128), dtype="float32")
lnumpy_mm_relu_v2(a_np, b_np, c_np)
np.testing.assert_allclose(c_np, c_mm_relu, rtol=1e-5, atol=1e-5)

# %% [markdown]
# It computes the same values in a different order. Rewriting programs by hand like this is
# slow and easy to get wrong; a `tir.Schedule` does it with checked primitives. A schedule
# holds a copy of the module; `get_block` finds a block by name, and `get_loops` returns
# handles to the loops around it, outermost first.

# %%
sch = tir.Schedule(MyModule)
block_Y = sch.get_block("Y", func_name="mm_relu")
i, j, k = sch.get_loops(block_Y)
steps = {"original": MyModule}  # the module after each step, to time them later

# %% [markdown]
# ### Step 1: `split`
#
# `split(j, factors=[None, 4])` replaces `j` by two loops of extents 32 and 4 (`None` means
# "whatever is left": 128 / 4). Look at how the block changed: only the binding of `vj`, now
# `j_0 * 4 + j_1`. The body still says `Y[vi, vj]`.

# %%
j0, j1 = sch.split(j, factors=[None, 4])
steps["split"] = sch.mod.copy()
print(sch.mod["mm_relu"].script())

# %% [markdown]
# ### Step 2: `reorder`
#
# `reorder(j0, k, j1)` puts the three loops in this order, which is `lnumpy_mm_relu_v2`.

# %% tags=["nbval-check-output"]
sch.reorder(j0, k, j1)
steps["reorder"] = sch.mod.copy()
print(sch.mod["mm_relu"].script())

# %% [markdown]
# What did the reordering change? The arithmetic is the same; what changed is which data
# the processor needs close at hand at each moment. The [working set](glossary.md#working-set)
# of a loop is the data touched during one of its iterations, by everything inside it.
# `footprint` computes it for each loop around a block (bytes of each buffer; a float32 is
# 4 bytes). Before the transformation:

# %%
print(footprint(steps["original"]["mm_relu"], "Y"))

# %% [markdown]
# Read it from the bottom. One iteration of `k`, the innermost loop, touches one element of
# each buffer. One iteration of `j` (all of `k` inside it) touches a row of `A` and a
# *column* of `B`, 512 bytes each. One iteration of `i` touches all of `B`, 64 KiB. After the
# split and the reorder:

# %% tags=["nbval-check-output"]
print(footprint(sch.mod["mm_relu"], "Y"))

# %% [markdown]
# The innermost loop is now `j_1`, and one iteration of `k` runs it over 4 neighbouring
# elements of a row of `B` and of `Y`; one iteration of `j_0` works on a 128×4 strip of `B`
# (2 KiB) and 4 elements of `Y`. Bytes are half the story: memory reaches the cache in lines
# of 64 bytes, so data that is adjacent in memory arrives together, while data spread out
# costs a whole line per element. Count the cache lines of `B` that the innermost loop of
# each version touches in one iteration of the loop around it:

# %%
LINE = 64  # bytes per cache line
ROW = 128 * 4  # bytes per row of a 128x128 float32 matrix


def lines_of_B(rows, cols):
    """How many cache lines the elements B[r, c] (r in rows, c in cols) lie on."""
    return len({(r * ROW + c * 4) // LINE for r in rows for c in cols})


print("original, inner loop k (B[k, j], 128 values):", lines_of_B(range(128), [5]), "lines")
print("reordered, inner loop j_1 (B[k, j_0*4 + j_1], 4 values):", lines_of_B([7], range(4)), "line")

# %% [markdown]
# The original inner loop walks down a column of `B`: 128 values on 128 different lines (8 KiB
# of cache for 512 bytes of data). The reordered inner loop walks along a row of `B` and of
# `Y`: consecutive addresses, one line. Consecutive addresses are also what a processor's
# vector instructions need to load and add several floats at once. How much each effect is
# worth depends on the sizes and the machine: at 128×128 the three matrices (192 KiB) fit in
# this machine's second-level cache, so we will have to measure.
#
# ### Step 3: `reverse_compute_at`
#
# `C` is computed in a loop nest of its own after all of `Y`: `Y` is written completely (64
# KiB) before the ReLU reads it back. `reverse_compute_at(block_C, j0)` moves block `C` under
# loop `j_0` of `Y`, so that each strip of 4 elements of `Y` gets its ReLU right after it is
# computed. mlckit derives from `C`'s iterators which elements of `Y` one iteration of `j_0`
# produces and makes `C`'s new loop (`ax0`) cover exactly those.

# %%
block_C = sch.get_block("C", func_name="mm_relu")
sch.reverse_compute_at(block_C, j0)
steps["reverse_compute_at"] = sch.mod.copy()
mlckit.viz.graph(sch.mod["mm_relu"], show_buffers=False)

# %% [markdown]
# Now only 4 elements of `Y` are alive at a time. The build notices it: `Y` is allocated inside
# the `j_0` loop as a 1×4 scratch array (16 bytes), not as a 128×128 matrix. This is the code
# mlckit generates for this step:

# %% tags=["nbval-check-output"]
source = mlckit.build(sch.mod, target="llvm").source("mm_relu")
print(source[source.index("def ") :])

# %% [markdown]
# ### Step 4: `decompose_reduction`
#
# The update of `Y` still tests `if k == 0` on every one of its 2 million iterations.
# `decompose_reduction(block_Y, k)` moves the init into a block of its own, `Y_init`, with its
# own loop placed right before `k`; the update, now `Y_update`, has no test left.

# %% tags=["nbval-check-output"]
block_Y_init = sch.decompose_reduction(block_Y, k)
steps["decompose_reduction"] = sch.mod.copy()
print(sch.mod["mm_relu"].script())

# %% [markdown]
# The picture outlines what changed with this step and greys out what is gone:

# %%
mlckit.viz.graph_diff(steps["reverse_compute_at"]["mm_relu"], sch.mod["mm_relu"])

# %% [markdown]
# The schedule recorded every step in its [trace](glossary.md#trace), which prints as the
# Python that replays it: <!-- shown-by: trace -->

# %% tags=["nbval-check-output", "shows:trace"]
print(sch.trace)

# %% [markdown]
# ### Loop kinds: `parallel`, `vectorize`, `unroll`
#
# Three more primitives change not the order of the loops but how a loop runs: `parallel`
# splits its iterations over the CPU cores (numba's `prange`), `vectorize` marks it for SIMD
# instructions, and `unroll` writes out its iterations. The last two are hints in mlckit: the
# generated code keeps the loop and marks it with a comment, and numba's LLVM vectorizes or
# unrolls what it can prove safe. We run the rows `i` in parallel and vectorize the
# innermost loops of `Y_init` and `C` (the last exercise uses `unroll`).
#
# One detail of mlckit: `parallel` accepts a loop only while each block under it is the only
# one writing its output there. After `decompose_reduction`, both `Y_init` and `Y_update` write
# `Y` under `i`, so mlckit refuses `parallel(i)` then (TVM accepts it). We therefore start a
# new schedule from the program as it was after step 3, mark `i` parallel, and only then
# decompose the reduction.

# %%
sch_par = tir.Schedule(steps["reverse_compute_at"])
block = sch_par.get_block("Y", func_name="mm_relu")
i_loop, _, k_loop, _ = sch_par.get_loops(block)
sch_par.parallel(i_loop)
init = sch_par.decompose_reduction(block, k_loop)
sch_par.vectorize(sch_par.get_loops(init)[-1])
sch_par.vectorize(sch_par.get_loops(sch_par.get_block("C", func_name="mm_relu"))[-1])
parallel_mod = sch_par.mod
sch_par.mod["mm_relu"].show()

# %% [markdown]
# ## Measuring each variant
#
# Every variant is built with `mlckit.build(mod, target="llvm")` and checked against numpy
# before it is timed: a transformation that changed the results would be a bug. Each
# compiled function has a `time_evaluator` that calls it `number` times per measurement,
# `repeat` times. Other programs on the machine slow some measurements down, never speed one
# up, so we keep each variant's best measurement, and take the variants in turn, round after
# round, so that a busy spell of the machine falls on all of them alike.
#
# The course also tries other split factors for `j`. `split_j` applies steps 1 and 2 with a
# given factor: with 128, `j_0` has one iteration and the loop order is in effect `(i, k, j)`.

# %%
dev = mlckit.cpu()
a_nd, b_nd = mlckit.nd.array(a_np, dev), mlckit.nd.array(b_np, dev)
c_nd = mlckit.nd.empty((128, 128), "float32", dev)


def evaluator(mod):
    """Build ``mod``, check its result against numpy; its time_evaluator (seconds per call)."""
    lib = mlckit.build(mod, target="llvm")
    lib["mm_relu"](a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_nd.numpy(), c_mm_relu, rtol=1e-5, atol=1e-5)
    return lib.time_evaluator("mm_relu", dev, number=5, repeat=3)


def best_milliseconds(mods, rounds=7):
    """The best time of each module over ``rounds`` rounds that time them in turn, in ms."""
    evaluators = {name: evaluator(mod) for name, mod in mods.items()}
    best = dict.fromkeys(mods, float("inf"))
    for _ in range(rounds):
        for name, timer in evaluators.items():
            best[name] = min(best[name], timer(a_nd, b_nd, c_nd).min * 1e3)
    return best


def split_j(mod, factor):
    sch = tir.Schedule(mod)
    _, j, k = sch.get_loops(sch.get_block("Y", func_name="mm_relu"))
    j0, j1 = sch.split(j, factors=[None, factor])
    sch.reorder(j0, k, j1)
    return sch.mod


factors = [2, 4, 8, 16, 32, 64, 128]
variant_ms = best_milliseconds(
    {**steps, **{f: split_j(MyModule, f) for f in factors}, "parallel": parallel_mod}
)
step_ms = {name: variant_ms[name] for name in steps}
factor_ms = {f: variant_ms[f] for f in factors}
parallel_ms = variant_ms["parallel"]
numpy_ms = 1e3 * min(timeit.repeat(lambda: np.maximum(a_np @ b_np, 0), number=20, repeat=15)) / 20
for name, ms in step_ms.items():
    print(f"{name:22} {ms:.3f} ms (one thread)")
threads = numba.get_num_threads()
print(f"parallel + vectorize   {parallel_ms:.3f} ms ({threads} threads on {os.cpu_count()} cores)")

# %% tags=["shows:step-chart"]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [3, 2]})
bars = left.bar(range(len(step_ms)), list(step_ms.values()), color="#99DDFF")
left.bar_label(bars, fmt="%.2f", fontsize=8)
left.set_xticks(range(len(step_ms)), list(step_ms), rotation=25, ha="right", fontsize=9)
left.set_ylabel("ms per call (best of 21)")
left.set_title("mm_relu after each step")
right.plot([str(f) for f in factors], list(factor_ms.values()), "o-", color="#EE8866")
right.set_xlabel("split factor of j (length of the inner loop j_1)")
right.set_title("split + reorder with other factors")
for axes in (left, right):
    axes.axhline(numpy_ms, color="#44BB99", linestyle="--", label="numpy (BLAS)")
    axes.set_ylim(0, max(*step_ms.values(), *factor_ms.values()) * 1.15)
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Numbers depend on the machine (and on what else it is doing), so read the saved chart
# together with these observations, which held on every run while this chapter was written
# (with another program keeping one of the two cores busy, too):
#
# * `split` alone changes nothing: the loops run in the same order as before.
# * `reorder` makes the function markedly faster. Its innermost loop `j_1` walks consecutive
#   addresses of `B` and `Y`, and its 4 iterations update 4 *different* elements of `Y`, so
#   the processor can overlap their additions; in the original, every iteration of `k` adds
#   into the same `Y[i, j]` and must wait for the previous addition to finish. The factor
#   chart agrees: an inner loop of 2 elements is faster than the original (which is the
#   factor 1), one of 4 or 8 faster still.
# * `reverse_compute_at` and `decompose_reduction` do not make it faster: the work they
#   remove was already small (the pass over `Y` for the ReLU, the `k == 0` test), and the
#   loops they leave compile a little differently, sometimes a little slower.
# * Long inner loops are what pays most: with a factor of 64 or 128, LLVM compiles the inner
#   loop to vector instructions (each multiplies and adds 4 floats at once; with a factor of
#   16 or less, the machine code has none), and the function is several times faster.
#   Factors of 16 and 32 are slower than 8: how LLVM compiles an inner loop of a given length
#   is hard to predict, which is why chapter 4 measures candidates instead of predicting them.
# * `parallel` (the last line above the chart) helps as much as there are free
#   cores. This machine has 2, shared with other work while the book is built: when both are
#   busy, the threads of the parallel loop wait for each other and for a core, and the
#   parallel version can be many times slower than the serial one. Its time is left out of
#   the chart for that reason. <!-- shown-by: step-chart -->
#
# Even the fastest variant stays behind numpy, whose BLAS also keeps blocks of `A` and `B` in
# registers and uses hand-tuned kernels. Closing that gap is a search over many schedules,
# chapter 4's subject. What this chapter shows is the mechanism: each variant is one
# schedule away from the original, checked, and measured in a line.
#
# ## Three ways to make TensorIR
#
# We have written TensorIR by hand in TVMScript, and produced new TensorIR by transforming
# it. The third way generates it from a [tensor expression](glossary.md#tensor-expression-te):
# `te.placeholder` declares an input, and `te.compute` describes an output by a function from
# its indices to its value, `te.sum` over a `te.reduce_axis` for a reduction. No loops, no
# blocks, no init: `te.create_prim_func` derives them, with the iterators' kinds from where
# the reduce axis appears.

# %%
A = te.placeholder((128, 128), "float32", name="A")
B = te.placeholder((128, 128), "float32", name="B")
k = te.reduce_axis((0, 128), "k")
Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0), name="C")
te_func = te.create_prim_func([A, B, C]).with_attr({"global_symbol": "mm_relu"})
MyModuleFromTE = mlckit.IRModule({"mm_relu": te_func})
MyModuleFromTE.show()

# %% tags=["nbval-check-output"]
print("the same program as MyModule:", mlckit.ir.structural_equal(MyModuleFromTE, MyModule))

# %% [markdown]
# The three ways meet in the same IR:
#
# 1. **TVMScript**: write the PrimFunc yourself, every loop and block explicit. Full control,
#    and how transformed programs print.
# 2. **Tensor expressions**: describe each output element; a small description gives a correct
#    loop nest. This is how mlckit's operator library, `mlckit.topi`, writes its operators,
#    and how a whole model is lowered to TensorIR in chapter 7.
# 3. **Transformations**: start from either and apply a schedule. The result is TensorIR
#    again, which can be printed, transformed further, or built; the trace is a program that
#    makes it, and replays on the original to the same result:

# %%
replayed = tir.Schedule(MyModuleFromTE)
sch.trace.apply_to_schedule(replayed)
print("the trace replayed on the te version:", mlckit.ir.structural_equal(replayed.mod, sch.mod))

# %% [markdown]
# ## Exploring schedules interactively
#
# `ScheduleExplorer(MyModule, func_name="mm_relu")` is a widget for trying schedules by hand:
# pick a primitive, the block or loop it works on and its arguments, press *apply*, and it
# shows the new TVMScript, what changed, the Python the function compiles to, the loop nest's
# picture and a chart of the run time of every step so far; *undo* goes back. Run it in
# Jupyter to use it. Here, with our schedule's trace replayed as its first steps, it is shown
# as a static stepper (use the arrows to go through the steps):

# %%
explorer = ScheduleExplorer(MyModule, func_name="mm_relu", trace=sch.trace)
explorer.static()

# %% [markdown]
# ## Summary
#
# * A TensorIR PrimFunc is loops around blocks. A block's iterators declare, for each axis,
#   its binding to the loops, its domain and its kind (spatial or reduction);
#   `T.axis.remap("SSR", [i, j, k])` is the short form.
# * These declarations make a block self-contained (its read and write regions follow from
#   them) and let every schedule primitive check its own legality: `parallel` refuses a
#   reduction loop, `reverse_compute_at` knows which region to compute.
# * A `tir.Schedule` transforms a PrimFunc step by step (`split`, `reorder`,
#   `reverse_compute_at`, `decompose_reduction`, `parallel`, `vectorize`, `unroll`) and
#   records a trace that replays the steps.
# * The working set of the inner loops, and whether they walk consecutive addresses, is what a
#   transformation changes; measuring tells what it is worth on a given machine.
# * TensorIR comes from TVMScript, from tensor expressions, or from transforming TensorIR.
#
# ## Exercises
#
# `check(name, answer)` runs your answer on random inputs and compares it with a reference
# and, for the last exercise, with a target program; it says what differs and gives a hint.
# `hint(name, 1)` gives a gentle hint, higher levels say more, and `solution(name)` shows a
# solution, for when you have tried.
#
# ### Exercise 1: broadcast add (`ch2.broadcast_add`)
#
# Numpy adds arrays of different shapes by *broadcasting*: `A + B` with `A` of shape (4, 4)
# and `B` of shape (4,) adds `B` to every row of `A`. A compiler has no broadcasting: it has
# to write out which element of `B` each iteration reads. Write `add(A, B, C)` with int64
# buffers so that `C = A + B`, numpy's way. The starting program below only copies `A`.


# %%
@I.ir_module
class MyAdd:
    @T.prim_func
    def add(
        A: T.Buffer((4, 4), "int64"),
        B: T.Buffer((4,), "int64"),
        C: T.Buffer((4, 4), "int64"),
    ):
        T.func_attr({"global_symbol": "add", "tir.noalias": True})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]


check("ch2.broadcast_add", MyAdd)

# %% [markdown]
# ### Exercise 2: a 2-D convolution (`ch2.conv2d`)
#
# A convolution layer slides a small kernel over an image: each output element is a sum over
# the input channels and the kernel's rows and columns. It is a reduction over three axes at
# once, and the first operator in this course whose input is indexed by a sum of two
# iterators (`h + kh`). Write `conv(data, weight, out)` for `N, CI, H, W, CO, K = 1, 1, 8, 8,
# 2, 3` (stride 1, no padding, int64):
#
# `out[n, co, h, w]` = sum over `ci`, `kh`, `kw` of `data[n, ci, h + kh, w + kw] * weight[co, ci, kh, kw]`
#
# The starting program has the right signature and sets the output to zero.

# %%
N, CI, H, W, CO, K = 1, 1, 8, 8, 2, 3
OUT_H, OUT_W = H - K + 1, W - K + 1


@I.ir_module
class MyConv:
    @T.prim_func
    def conv(
        data: T.Buffer((N, CI, H, W), "int64"),
        weight: T.Buffer((CO, CI, K, K), "int64"),
        out: T.Buffer((N, CO, OUT_H, OUT_W), "int64"),
    ):
        T.func_attr({"global_symbol": "conv", "tir.noalias": True})
        for n, co, h, w in T.grid(N, CO, OUT_H, OUT_W):
            with T.block("out"):
                vn, vco, vh, vw = T.axis.remap("SSSS", [n, co, h, w])
                out[vn, vco, vh, vw] = T.int64(0)


check("ch2.conv2d", MyConv)

# %% [markdown]
# ### Exercise 3: schedule `bmm_relu` until it is the target program (`ch2.bmm_relu`)
#
# Reading a transformed program and finding the schedule that produced it is how you learn
# what each primitive does to a loop nest. `MyBmmRelu` is a batched `mm_relu`: 16 pairs of
# 128×128 matrices, `C[n] = max(A[n] @ B[n], 0)`.

# %%
from mlckit.exercises.ch2 import MyBmmRelu, TargetModule

MyBmmRelu.show()

# %% [markdown]
# Transform it with a schedule into this program (loop names may differ: the check compares
# structure). mlckit accepts `parallel` on a loop only while one block writes `Y` under it,
# so mark the batch loop parallel before `decompose_reduction`.

# %%
print(TargetModule.script())

# %% [markdown]
# Its loop nest:

# %%
mlckit.viz.graph(TargetModule["bmm_relu"], show_buffers=False)

# %% [markdown]
# Complete the schedule below; as given, it does nothing yet, and the check says what to do
# first. Look at `hint("ch2.bmm_relu", 1)` when stuck.

# %%
sch = tir.Schedule(MyBmmRelu)
block_Y = sch.get_block("Y", func_name="bmm_relu")
block_C = sch.get_block("C", func_name="bmm_relu")
n, i, j, k = sch.get_loops(block_Y)
# your steps: split, reorder, reverse_compute_at, parallel, decompose_reduction, ...

check("ch2.bmm_relu", sch)

# %%
hint("ch2.bmm_relu", 1)
