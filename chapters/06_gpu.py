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
# # 6. GPU acceleration
#
# The earlier chapters compiled [tensor programs](glossary.md#tensor-program) for the CPU:
# a few cores, each running one loop nest fast. A GPU is built the other way round: thousands
# of simple threads, each slow on its own, that together do far more arithmetic per second
# than a CPU, provided the program keeps them all busy and feeds them data fast enough. This
# chapter is about writing [TensorIR](glossary.md#tensorir) for such a machine, with the same
# tool as before: a [schedule](glossary.md#schedule). Three new
# [schedule primitives](glossary.md#schedule-primitive) do most of the work: `bind` hands a
# loop's iterations to GPU threads, `cache_read(..., "shared")` and
# `cache_write(..., "local")` place data in the GPU's fast memories.
#
# We follow the MLC course's GPU chapter: a short look at the GPU's structure, then three
# programs (a vector add, a window sum, a matrix product), each scheduled for the GPU and
# checked against numpy, and finally a whole model built for the GPU with the default GPU
# schedule. The code is the course's. The course's own two GPU notebooks run on mlckit with
# `import tvm` changed to `import mlckit as tvm` and the edits listed in mlckit's
# `tests/course/README.md`: no downloads, and smaller sizes where numba's CUDA simulator
# would take minutes; their one cell that builds for OpenCL gets an error saying that mlckit
# has no such target. <!-- checked-by: tests/course/test_course.py::test_course_notebook_runs -->
#
# **No GPU needed.** mlckit compiles the `cuda` target to numba's CUDA kernels. On a machine
# without an NVIDIA GPU, such as the one this book was built on, numba's *CUDA simulator* runs
# them: every GPU thread is a Python thread, with the same shared memory, local arrays and
# barriers as on a GPU. The results are exact, the speed is not a GPU's, so we keep the
# sizes small.

# %%
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import SVG, display

import mlckit
from mlckit import relax, tir
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.runtime.gpu import simulated
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir.stmt_functor import StmtExprVisitor
from mlckit.viz.dot import render

# The simulator runs each GPU thread as a Python thread; switching between them more often
# than Python's default makes its barriers several times faster.
sys.setswitchinterval(1e-4)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the warning says what the next line prints
    on_simulator = simulated()
print("cuda kernels run on:", "numba's CUDA simulator" if on_simulator else "the GPU")
dev = mlckit.cuda()
rng = np.random.default_rng(0)

# %% [markdown]
# ## The GPU in brief
#
# A GPU is a set of **streaming multiprocessors** (SMs): an NVIDIA A100 has 108 of them, an
# H100 (SXM) 132. A program for the GPU is a **kernel**, and the CPU (the *host*) *launches* it as a
# grid of **thread blocks**, all running the same code. The GPU places each thread block on
# one SM, where all its threads (up to 1024) run at the same time; an SM runs several blocks
# at once, and the blocks of a grid run in any order. Each thread knows where it is from two
# numbers: `blockIdx` (which block) and `threadIdx` (which thread of its block), each with up
# to three axes, `.x`, `.y`, `.z`.
#
# Three kinds of memory matter for what follows:
#
# * **global memory**, the GPU's own DRAM (tens of GB): every thread of every block reads and
#   writes it, and it is the slowest;
# * **shared memory**, on each SM (some tens to a couple of hundred KiB): a thread block gets
#   its own part, which all its threads read and write, much faster than global memory. The
#   threads of a block can wait for each other at a *barrier* (`cuda.syncthreads()`), which
#   is what makes sharing data among them safe; threads of different blocks cannot;
# * **registers**, private to each thread and the fastest of all. A small array private to a
#   thread is *local memory* (`cuda.local.array`); the compiler keeps it in registers when it
#   can. <!-- background: how NVIDIA GPUs are built -->
#
# One more fact explains a choice below: an SM runs the threads of a block in groups of 32
# consecutive threads, *warps* (`threadIdx.x` varies fastest), which execute each instruction
# together. When the 32 threads of a warp load 32 neighbouring floats, the GPU combines the
# loads into a few wide memory transactions (the accesses are *coalesced*); 32 scattered
# floats take up to 32 transactions.

# %% tags=["hide-input"]
gpu = mlckit.viz.Digraph(
    graph_attr={"fontname": "Helvetica", "fontsize": "11", "nodesep": "0.15", "ranksep": "0.35"},
    node_attr={"fontname": "Helvetica", "fontsize": "10", "shape": "box", "style": "filled"},
    edge_attr={"dir": "both", "arrowsize": "0.5"},
)
with gpu.subgraph(name="cluster_gpu") as board:
    board.attr(label="GPU", style="rounded", color="#666666", fontsize="12")
    for sm in (0, 1):
        with board.subgraph(name=f"cluster_sm{sm}") as unit:
            unit.attr(
                label=f"streaming multiprocessor {sm}",
                style="rounded,filled",
                fillcolor="#F2F2F2",
                color="#999999",
            )
            for block in (2 * sm, 2 * sm + 1):
                with unit.subgraph(name=f"cluster_block{block}") as threads:
                    threads.attr(
                        label=f"thread block {block}",
                        style="rounded,filled",
                        fillcolor="#FFFFFF",
                        color="#44BB99",
                    )
                    threads.node(
                        f"shared{block}", "shared memory\n(one per block)", fillcolor="#BBCC33"
                    )
                    for t in range(3):
                        name = f"thread{block}_{t}"
                        threads.node(name, f"thread {t}\nregisters", fillcolor="#99DDFF")
                        threads.edge(f"shared{block}", name)
    board.node("more", "... more SMs", shape="plain", style="")
    board.node(
        "global",
        "global memory (the GPU's DRAM): read and written by every thread of every block",
        fillcolor="#EEDD88",
        width="8",
    )
for block in range(4):
    for t in range(3):
        gpu.edge(f"thread{block}_{t}", "global", color="#777777")
display(SVG(render(gpu)))

# %% [markdown]
# Where a CPU schedule decides which loops run in parallel on a few cores, a GPU schedule
# decides which loops become the grid of blocks and which the threads of a block, and which
# data goes into shared memory and registers on the way.
#
# ## Vector add: binding loops to threads
#
# The first program adds two vectors of 1024 elements, `C = A + B`.


# %%
@I.ir_module
class MyModuleVecAdd:
    @T.prim_func
    def main(
        A: T.Buffer((1024,), "float32"),
        B: T.Buffer((1024,), "float32"),
        C: T.Buffer((1024,), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]


# %% [markdown]
# For the `cuda` target, every computation must run on GPU threads. A
# [PrimFunc](glossary.md#primfunc) nobody scheduled has plain loops, which no thread runs,
# and the build says so, naming the [block](glossary.md#block) and its loops:

# %% tags=["nbval-check-output"]
try:
    mlckit.build(MyModuleVecAdd, "cuda")
except mlckit.errors.BuildError as err:
    print(err)

# %% [markdown]
# We split `i` into blocks of 128 iterations and *bind* the two loops to the GPU's thread
# axes: `i_0` to `blockIdx.x` and `i_1` to `threadIdx.x`. A bound loop is no longer a loop
# that one processor runs in order: its iterations are spread over blocks or threads, which
# all run at the same time. Thread `i_1` of block `i_0` computes element `i_0 * 128 + i_1`.
# Like `parallel` in chapter 2, `bind` accepts only a loop whose iterations are independent:
# a spatial loop.

# %% tags=["nbval-check-output"]
sch = tir.Schedule(MyModuleVecAdd)
block_C = sch.get_block("C")
(i,) = sch.get_loops(block=block_C)
i0, i1 = sch.split(i, [None, 128])
sch.bind(i0, "blockIdx.x")
sch.bind(i1, "threadIdx.x")
print(sch.mod["main"].script())

# %% [markdown]
# `T.thread_binding(8, thread="blockIdx.x")` reads "8 thread blocks, numbered by
# `blockIdx.x`". Building gives two pieces of code, printed below: the **kernel**,
# `main_kernel0`, which is the loop nest from one thread's point of view (the bound loops
# have become `cuda.blockIdx.x` and `cuda.threadIdx.x`), and the **host function** `main`,
# which checks its arguments and launches the kernel with `kernel[grid, block](...)`: 8 blocks
# of 128 threads. The grid and block sizes are the extents of the bound loops.

# %% tags=["nbval-check-output"]
lib = mlckit.build(sch.mod, "cuda")
source = lib.source("main")
print(source[source.index("@cuda.jit") :])

# %% [markdown]
# The arguments are arrays in the GPU's memory: `mlckit.nd.array(x, mlckit.cuda())` copies a
# numpy array there, `.numpy()` copies it back.

# %%
a_np = rng.uniform(size=1024).astype("float32")
b_np = rng.uniform(size=1024).astype("float32")
A_nd, B_nd = mlckit.nd.array(a_np, dev), mlckit.nd.array(b_np, dev)
C_nd = mlckit.nd.empty((1024,), "float32", dev)
lib["main"](A_nd, B_nd, C_nd)
print("C is on", C_nd.device, "| equal to numpy:", np.allclose(C_nd.numpy(), a_np + b_np))

# %% [markdown]
# Neighbouring threads of a block (consecutive `threadIdx.x`) read neighbouring elements of
# `A` and `B`, so each warp's loads are coalesced: binding the *inner* part of the split to
# `threadIdx.x` is what gives that.
#
# ## Window sum: shared memory and cooperative fetch
#
# The second program sums each window of three neighbours, `B[i] = A[i] + A[i + 1] + A[i + 2]`.


# %%
@I.ir_module
class MyModuleWindowSum:
    @T.prim_func
    def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]


# %% [markdown]
# Bound like the vector add, each thread loads its three elements of `A` from global memory,
# and each element is loaded by three threads: 3,072 loads from the slowest memory for 1,024
# results. The threads of a block need 130 neighbouring elements between them, so the block
# can load those once into shared memory and let every thread read its window there.
#
# `cache_read(block_C, 0, "shared")` adds a block `A_shared` that copies `A` into a buffer in
# shared memory, and makes `C` read that buffer instead. `compute_at(A_shared, i1)` moves the
# copy under the thread loop. Since shared memory belongs to the whole thread block, mlckit
# (like TVM) makes the copy cover what *all* threads of the block read: 130 elements, from
# `i_0 * 128`.

# %%
sch = tir.Schedule(MyModuleWindowSum)
nthread = 128
block_C = sch.get_block("C")
(i,) = sch.get_loops(block=block_C)
i0, i1 = sch.split(i, [None, nthread])
sch.bind(i0, "blockIdx.x")
sch.bind(i1, "threadIdx.x")
A_shared = sch.cache_read(block_C, read_buffer_index=0, storage_scope="shared")
sch.compute_at(A_shared, i1)
print(sch.mod["main"].script())

# %% [markdown]
# This is correct but wasteful: the `ax0` loop is inside the thread loop, so *every* thread
# copies all 130 elements. The copy is itself a loop whose iterations are independent, so its
# iterations can be shared among the threads too: split it by the 128 threads and bind the
# inner loop to `threadIdx.x`. Thread `t` copies elements `t` and `128 + t`; the `T.where`
# keeps all but threads 0 and 1 out of the second round. This is a **cooperative fetch**.

# %% tags=["nbval-check-output"]
ax = sch.get_loops(A_shared)[-1]
ax0, ax1 = sch.split(ax, [None, nthread])
sch.bind(ax1, "threadIdx.x")
print(sch.mod["main"].script())

# %% [markdown]
# The copy's thread loop `ax0_1` sits inside the thread loop `i_1`, and both are bound to
# `threadIdx.x`: they are the same index, so thread `t` runs iteration `t` of each, its part of
# the copy and then its part of `C`. (Nested loops bound to one axis are right only when, as
# here, the block inside does not depend on the outer one; a block that used both would run
# only where they are equal.) The generated kernel shows what else makes this correct: a **barrier**, `cuda.syncthreads()`, between the copy and the sum. Thread 127 reads
# `A_shared[128]` and `A_shared[129]`, which threads 0 and 1 write in the second round; no
# thread may read the shared buffer before every thread has finished writing it. mlckit's code
# generator puts a barrier wherever threads may read a shared buffer that other threads wrote,
# or overwrite one they may still be reading.

# %% tags=["nbval-check-output"]
lib = mlckit.build(sch.mod, "cuda")
source = lib.source("main")
print(source[source.index("@cuda.jit") : source.index("def main(")])

# %% [markdown]
# The shared array has 256 elements, what the two rounds of 128 threads could write; the `if`
# keeps the last 126 unused. (TVM uses the `T.where` to shrink the array to the 130 elements
# used; mlckit's buffer compaction does not read predicates yet.) Per thread block, global
# memory now serves 130 loads for 128 results instead of 384.

# %%
a_np = rng.uniform(size=1027).astype("float32")
B_nd = mlckit.nd.empty((1024,), "float32", dev)
lib["main"](mlckit.nd.array(a_np, dev), B_nd)
np.testing.assert_allclose(B_nd.numpy(), a_np[:1024] + a_np[1:1025] + a_np[2:1026], rtol=1e-6)

# %% [markdown]
# ## Matrix product: from one thread per element to tiles in shared memory
#
# The matrix product `C = A @ B` is where these ideas pay most, because every element of `A`
# and `B` is used by many outputs: by all of a row or a column of `C`. We schedule it three
# ways, each built and checked against numpy at 32×32 (the simulator's size), and then count
# what each way asks of global memory at a realistic size.


# %%
def matmul_module(n: int) -> mlckit.IRModule:
    @I.ir_module
    class MyModuleMatmul:
        @T.prim_func
        def main(
            A: T.Buffer((n, n), "float32"),
            B: T.Buffer((n, n), "float32"),
            C: T.Buffer((n, n), "float32"),
        ):
            T.func_attr({"global_symbol": "main", "tir.noalias": True})
            for i, j, k in T.grid(n, n, n):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return MyModuleMatmul


N = 32
a_np = rng.uniform(size=(N, N)).astype("float32")
b_np = rng.uniform(size=(N, N)).astype("float32")
A_nd, B_nd = mlckit.nd.array(a_np, dev), mlckit.nd.array(b_np, dev)
simulator_seconds = {}


def build_and_check(sch: tir.Schedule, name: str) -> str:
    """Build for cuda, run once in the simulator (timed), compare with numpy; the kernel code."""
    lib = mlckit.build(sch.mod, "cuda")
    C_nd = mlckit.nd.empty((N, N), "float32", dev)
    start = time.perf_counter()
    lib["main"](A_nd, B_nd, C_nd)
    simulator_seconds[name] = time.perf_counter() - start
    np.testing.assert_allclose(C_nd.numpy(), a_np @ b_np, rtol=1e-5)
    print(f"{name}: equal to numpy")
    source = lib.source("main")
    return source[source.index("@cuda.jit") : source.index("def main(")]


# %% [markdown]
# ### One thread per element
#
# The direct way: 2-D thread blocks of 8×8 threads, `threadIdx.y` along the rows of `C` and
# `threadIdx.x` along its columns (so that a warp reads neighbouring elements of `B` and writes
# neighbouring elements of `C`), and a grid of blocks over the whole matrix. Each thread runs
# the whole `k` loop for its element. `decompose_reduction` moves the init before `k`, as in
# chapter 2.


# %%
def bind_naive(mod: mlckit.IRModule, threads=(8, 8)) -> tir.Schedule:
    sch = tir.Schedule(mod)
    block_C = sch.get_block("C")
    i, j, k = sch.get_loops(block_C)
    i0, i1 = sch.split(i, [None, threads[0]])
    j0, j1 = sch.split(j, [None, threads[1]])
    sch.reorder(i0, j0, i1, j1, k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k)
    return sch


# %%
print(build_and_check(bind_naive(matmul_module(N)), "one thread per element"))

# %% [markdown]
# Look at the inner loop: each multiply-add loads `A[vi, k]` and `B[k, vj]` from global
# memory, and also loads and stores `C[vi, vj]` there, since the sum is accumulated in the
# output. Four global-memory accesses for one multiply-add.
#
# ### Local blocking: a tile of C per thread
#
# The course's first improvement gives each thread a small tile of `C` instead of one element,
# accumulated in registers:
#
# * `cache_write(block_C, 0, "local")` makes the block accumulate into `C_local`, a buffer in
#   local memory, and adds a block `C_local` that copies it to `C`;
# * `i` and `j` are split in three: thread blocks, threads of a block, and the thread's own
#   tile (`tile_local_y` × `tile_local_x`), and `k` in two;
# * `reverse_compute_at(C_local, j1)` moves the copy under the thread loops: each thread writes
#   its own tile back, once.
#
# In one step of `k`, a thread's tile needs a column of 4 elements of `A` and a row of 4
# elements of `B`, for 4 × 4 = 16 multiply-adds.


# %%
def blocking(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k0)
    return sch


# %% [markdown]
# The tile saves loads only if each of those 8 values is loaded once per step and then reused
# from a register. As the course's schedule writes it, the update block reads `A[vi, vk]` and
# `B[vk, vj]` inside the tile's loops, 32 loads per step where 8 would do, and it is left to
# the CUDA compiler to notice. We make the reuse explicit, as TVM's tuned GPU schedules do: a
# `cache_read` into `"local"` memory, placed under `k_1` with `compute_at`, loads the
# thread's column of `A` for this step into a local array, and the same for the row of `B`.


# %%
def fetch_into_registers(sch):
    """Load the values of A and B that the thread's tile uses in one step of k_1 into local
    arrays, once per step."""
    block = sch.get_block("C_update")
    k1 = sch.get_loops(block)[-3]
    for name in ("A", "B"):
        reads = [region.buffer.name for region in sch.get(block).reads]
        # The update reads A itself, or A_shared once A is staged in shared memory.
        index = reads.index(name) if name in reads else reads.index(f"{name}_shared")
        sch.compute_at(sch.cache_read(block, index, "local"), k1)
    return sch


# %% [markdown]
# At 32×32 we use tiles of 4×4 elements per thread, 4×4 threads per block (a 16×16 tile of
# `C` per block) and steps of 4 along `k`. Three local arrays per thread: the 4×4
# accumulator, and this step's column of `A` and row of `B`.

# %%
local_sch = fetch_into_registers(blocking(tir.Schedule(matmul_module(N)), 4, 4, 4, 4, 4))
print(build_and_check(local_sch, "local blocking"))

# %% [markdown]
# ### Shared-memory blocking
#
# The threads of a block still load the same data over and over: the 4 threads in a row of
# the block all load the same rows of `A`, the 4 in a column the same columns of `B`. The
# block as a whole needs, for each step `k_0` of 4 along `k`, a 16×4 tile of `A` and a 4×16
# tile of `B`. The course's second schedule has the block's threads fetch those two tiles
# into shared memory together (the cooperative fetch of the window sum, with the tile's two
# loops fused into one), then compute from shared memory. The threads are numbered by
# `threadIdx.x` alone (the thread loops `i1` and `j1` fused), which the fetch loops are bound to
# as well. The innermost loop of the fetch copies 4 consecutive elements per thread; the
# course marks it `vectorize`, which TVM compiles to one 16-byte load (mlckit's numba kernels
# keep it a loop).


# %%
def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    # vectorized cooperative fetch
    inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
    sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")


def blocking_with_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    sch.decompose_reduction(block_C, k0)
    return sch


# %% [markdown]
# The picture shows, at 32×32, what the thread block with `blockIdx.y = 0`, `blockIdx.x = 1`
# and one of its threads work on, and the two tiles the block fetches into shared memory at
# step `k_0 = 1`:

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6))
tiles = {
    # (row0, col0, rows, cols, colour, label)
    "A": [
        (0, 0, 16, 32, "#BBCC33", "rows the block reads"),
        (0, 4, 16, 4, "#44BB99", "A_shared at k_0 = 1"),
    ],
    "B": [
        (0, 16, 32, 16, "#BBCC33", "columns the block reads"),
        (4, 16, 4, 16, "#44BB99", "B_shared at k_0 = 1"),
    ],
    "C": [
        (0, 16, 16, 16, "#BBCC33", "block y = 0, x = 1: 16×16"),
        (4, 24, 4, 4, "#EE8866", "one thread: 4×4 in C_local"),
    ],
}
for ax, (name, rects) in zip(axes, tiles.items()):
    ax.add_patch(plt.Rectangle((0, 0), 32, 32, facecolor="#F2F2F2", edgecolor="#999999"))
    for r0, c0, rows, cols, colour, label in rects:
        ax.add_patch(
            plt.Rectangle((c0, r0), cols, rows, facecolor=colour, edgecolor="#333333", label=label)
        )
    ax.set_xlim(0, 32)
    ax.set_ylim(32, 0)
    ax.set_aspect("equal")
    ax.set_xticks([0, 8, 16, 24, 32])
    ax.set_yticks([0, 8, 16, 24, 32])
    ax.set_title(f"{name} (32×32)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, frameon=False)
plt.tight_layout()
plt.show()

# %% [markdown]
# We add the same loads into registers, from shared memory now. The kernel has two barriers
# in its `k_0` loop: one after the fetch, because each thread reads tile elements that other
# threads copied, and one at the end of each step, because the next step's fetch overwrites
# tiles that slower threads may still be reading. <!-- shown-by: two-barriers -->

# %% tags=["nbval-check-output", "shows:two-barriers"]
shared_sch = fetch_into_registers(
    blocking_with_shared(tir.Schedule(matmul_module(N)), 4, 4, 4, 4, 4)
)
print(build_and_check(shared_sch, "shared-memory blocking"))

# %% [markdown]
# The [loop nest](glossary.md#loop-nest) of this schedule, each loop with the thread axis it
# is bound to:

# %%
mlckit.viz.graph(shared_sch.mod["main"], show_buffers=False)

# %% [markdown]
# ### What each step saves
#
# How fast are these kernels? The simulator cannot say: its times measure Python threads
# taking turns, not a GPU (its barriers, for one, are slow, where a GPU's are cheap). The
# times of one call each, on the machine that built this page:

# %%
print(", ".join(f"{name}: {seconds:.2f} s" for name, seconds in simulator_seconds.items()))

# %% [markdown]
# What we can compute exactly is the traffic each schedule asks of global memory, which is
# what limits a matrix product on a GPU. The function below walks a scheduled PrimFunc and
# counts how many times each load and store runs, over all threads: an access inside loops
# runs once per iteration of each loop around it, bound loops included (one iteration per
# block or thread). We count at 1024×1024, with the course's tile sizes: 8×8 elements per
# thread, 8×8 threads per block, steps of 8 along `k`.


# %%
def count_accesses(func) -> Counter:
    """How many loads and stores of each memory scope the program runs, over all threads."""
    counts = Counter()

    class Count(StmtExprVisitor):
        trips = 1  # iterations of the loops around the current statement
        bound = frozenset()  # the thread axes bound by those loops

        def visit_for_(self, loop):
            outer = self.trips, self.bound
            # A loop bound to an axis an outer loop is bound to is the same thread index, not
            # more threads (the fetch loops inside the thread loop; equal extents here).
            if loop.thread_tag not in self.bound:
                self.trips *= loop.extent.value
            if loop.thread_tag:
                self.bound = self.bound | {loop.thread_tag}
            self.visit(loop.body)
            self.trips, self.bound = outer

        def visit_buffer_load_(self, load):
            counts[load.buffer.scope, "loads"] += self.trips
            self.generic_visit(load)

        def visit_buffer_store_(self, store):
            counts[store.buffer.scope, "stores"] += self.trips
            self.generic_visit(store)

    Count().visit(func.body)
    return counts


big = 1024
schedules = {
    "one thread per element": bind_naive(matmul_module(big)),
    "local blocking": fetch_into_registers(
        blocking(tir.Schedule(matmul_module(big)), 8, 8, 8, 8, 8)
    ),
    "shared-memory blocking": fetch_into_registers(
        blocking_with_shared(tir.Schedule(matmul_module(big)), 8, 8, 8, 8, 8)
    ),
}
multiply_adds = big**3

# %% tags=["nbval-check-output"]
traffic = {}  # bytes moved to and from global memory
print(f"{'':24} global accesses per multiply-add   global memory traffic")
for name, sch in schedules.items():
    counts = count_accesses(sch.mod["main"])
    accesses = counts["global", "loads"] + counts["global", "stores"]
    traffic[name] = 4 * accesses  # float32: 4 bytes each
    print(f"{name:24} {accesses / multiply_adds:>32.4f} {traffic[name] / 1e6:>18,.0f} MB")

# %% [markdown]
# The counts follow from the tiles. One thread per element: a load of `A`, of `B` and of `C`
# and a store of `C` for every multiply-add. Local blocking: a thread's 8 + 8 loads per step
# of `k` serve 8 × 8 multiply-adds, 0.25 loads each, and `C` is written once at the end.
# Shared-memory blocking: a block's 64 + 64 loads per step of `k` serve 64 × 64
# multiply-adds, 1/32 each (the threads' 0.25 loads per multiply-add now go to shared
# memory). From 17 GB to 140 MB: over a hundred times less traffic for the same arithmetic.
#
# Why this decides the speed: a GPU can do arithmetic much faster than its memory can feed
# it. An NVIDIA H100 (SXM, 80 GB), the GPU measured below, peaks at 67 TFLOP/s in float32 and
# 3,350 GB/s from its DRAM: about 40 multiply-adds in the time it reads one float. If every
# access went to DRAM, the traffic alone would limit each kernel to the speed below:
# <!-- background: the H100's data sheet --> <!-- shown-by: traffic-bounds -->

# %% tags=["shows:traffic-bounds"]
peak_flops, bandwidth = 67e12, 3.35e12  # H100 SXM 80 GB datasheet: float32, DRAM bytes/s
limit = {name: min(peak_flops, 2 * multiply_adds * bandwidth / b) for name, b in traffic.items()}

fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.4))
names = ["one thread\nper element", "local\nblocking", "shared-memory\nblocking"]
bars = left.bar(names, [b / 1e9 for b in traffic.values()], color="#99DDFF")
left.bar_label(bars, fmt="%.2f GB", fontsize=8)
left.set_yscale("log")
left.set_ylim(0.05, 50)
left.set_ylabel("GB to and from global memory")
left.set_title(f"global memory traffic, {big}×{big} matmul")
bars = right.bar(names, [f / 1e12 for f in limit.values()], color="#EE8866")
right.bar_label(bars, fmt="%.1f", fontsize=8)
right.axhline(peak_flops / 1e12, color="#44BB99", linestyle="--", label="H100 float32 peak")
right.set_ylabel("TFLOP/s at most")
right.set_title("the speed the traffic allows, all of it from DRAM")
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# The kernel with one thread per element could use at most 1% of the arithmetic, local
# blocking 10%; with shared memory, the traffic allows 80% of the peak, and what remains is
# how well the threads keep the arithmetic units busy. These are bounds from counting, not
# measurements: a real GPU's caches (an L1 per SM, an L2 shared by all) catch many of the
# repeated loads of the first two kernels, so these can run faster than their bound, but
# caches catch what they happen to hold, while the schedule *guarantees* the reuse.
# <!-- shown-by: traffic-bounds -->
#
# ### Measured on a GPU
#
# The same three schedules, with the same tiles, were built for the H100 and timed there by
# `benchmarks/bench_cuda.py` (`python benchmarks/run.py cuda --json
# benchmarks/results/cuda_h100.json`; the best of 10 calls after one warm-up), next to torch's
# float32 matrix product (cuBLAS, TF32 off) in the same run. This page reads the recorded
# figures; it does not need a GPU.

# %% tags=["nbval-check-output", "shows:h100-table"]
recorded = json.loads(
    (Path(mlckit.__file__).parents[1] / "benchmarks/results/cuda_h100.json").read_text()
)
measured = {row["name"]: row["value"] for row in recorded}
print(measured["GPU"])
print(f"{'GFLOP/s':42} {'1024':>8} {'4096':>8}")
kernels = [*schedules, "shared-memory blocking, 128x128 tiles", "torch fp32 (TF32 off)"]
for name in kernels:
    print(f"{name:42} {measured[f'1024: {name}']:>8,.0f} {measured[f'4096: {name}']:>8,.0f}")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(9, 3.4))
x = np.arange(len(kernels))
for offset, n, colour in ((-0.2, 1024, "#99DDFF"), (0.2, 4096, "#44BB99")):
    values = [measured[f"{n}: {name}"] / 1e3 for name in kernels]
    bars = ax.bar(x + offset, values, width=0.4, color=colour, label=f"{n}×{n}")
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
ax.scatter(
    x[:3] - 0.2,
    [f / 1e12 for f in limit.values()],
    marker="_",
    s=400,
    color="#EE8866",
    label="1024: DRAM-traffic bound",
    zorder=3,
)
ax.set_xticks(
    x,
    [
        "one thread\nper element",
        "local\nblocking",
        "shared-memory\nblocking",
        "shared, 128×128\ntiles",
        "torch (cuBLAS)",
    ],
)
ax.set_ylabel("TFLOP/s")
ax.set_title(f"float32 matmul on an {measured['GPU']}")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Each step pays, as the counts said it would, though not by their factors. One thread per
# element runs at about 1 TFLOP/s, more than twice its DRAM bound: at 1024 the three matrices
# (12 MB) fit in the H100's 50 MB L2 cache, so most of its loads never reach DRAM. Local
# blocking is 4.5 to 8.4 times faster, shared memory another 1.3 to 1.7 times. The
# shared-memory kernel stays far below its bound, at about a quarter of cuBLAS: the traffic
# no longer limits it; how its threads issue instructions does. Likely reasons, not measured
# here: neighbouring threads read words of `B_shared` 8 apart, which shared memory serves a
# few at a time (bank conflicts), and numba's kernels compute their indices in 64-bit
# integers. Larger tiles (128×128 per block of 16×16 threads, the shape of a classic CUDA
# sgemm) help at 4096 and hurt at 1024, where they make only 64 thread blocks for the H100's
# 132 SMs. Finding such choices is chapter 4's search; cuBLAS adds tricks mlckit does not
# schedule, such as loading the next tiles while computing on the current ones.
# <!-- shown-by: h100-table -->
#
# ## A whole model on the GPU: the default GPU schedule
#
# A model has many operators, and scheduling each by hand is what chapter 4 automates. To run
# a model on the GPU at all, `relax.build(mod, "cuda")` applies mlckit's default GPU schedule
# (like TVM's `DefaultGPUSchedule`) to every PrimFunc nobody scheduled: it fuses the outer spatial
# loops of each loop nest, splits them by 256 and binds them to `blockIdx.x` and
# `threadIdx.x`, one thread per output element; a reduction runs serially in each thread.
# Correct, not fast: no shared memory, no tiles. Here is what it does to the `linear`
# function of the FashionMNIST MLP, as a [trace](glossary.md#trace):

# %%
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference
from mlckit.demo import mlp_script
from mlckit.script import from_source
from mlckit.tir.schedule.default_gpu_schedule import schedule_for_gpu

MLPModule = from_source(mlp_script())
print(schedule_for_gpu(MLPModule["linear"]).trace)

# %% [markdown]
# The module is the MLP of chapter 3 with a symbolic batch size `n`, so the grid size is
# computed when the kernel is launched. The [executable](glossary.md#executable) runs on a
# [virtual machine](glossary.md#virtual-machine) created for the GPU device; the
# intermediate tensors are allocated in GPU memory and stay there from one kernel to the
# next. We classify four images:

# %% tags=["nbval-check-output"]
ex = relax.build(MLPModule, "cuda")
vm = relax.VirtualMachine(ex, mlckit.cuda())
data = fashion_mnist(split="sprite900")
picked = [10, 235, 460, 685]
images = data.images[picked]
x = mlckit.nd.array(images.reshape(len(picked), 784).astype("float32") / 255, mlckit.cuda())
params = mlp_params()
logits = vm["main"](x, params["w0"], params["b0"], params["w1"], params["b1"])
print("logits on", logits.device)
print("GPU:  ", [data.class_names[c] for c in logits.numpy().argmax(1)])
print("numpy:", [data.class_names[c] for c in mlp_reference(images).argmax(1)])
print("true: ", [data.class_names[c] for c in data.labels[picked]])
np.testing.assert_allclose(logits.numpy(), mlp_reference(images), rtol=1e-4, atol=1e-4)

# %% [markdown]
# ## Summary
#
# * A GPU runs a kernel as a grid of thread blocks; the threads of a block run on one
#   streaming multiprocessor, share its shared memory and can wait for each other at a
#   barrier. Registers (local memory) are per thread; global memory is shared by all and
#   slowest.
# * `sch.bind(loop, "blockIdx.x")` / `"threadIdx.x"` hands a loop's iterations to blocks or
#   threads; the `cuda` build turns the bound loop nest into a kernel and a host function
#   that launches it with the bound extents as grid and block sizes.
# * `cache_read(block, i, "shared")` + `compute_at` under the block's loops stages data that
#   the block's threads share; binding the copy's loop to `threadIdx.x` makes the fetch
#   cooperative. The code generator places `cuda.syncthreads()` where threads read what others
#   wrote.
# * `cache_write(block, 0, "local")` gives each thread an accumulator in registers; tiles per
#   thread and per block cut the traffic to global memory (here from 4 accesses per
#   multiply-add to 1/32), which is what limits a matrix product on a GPU.
# * `relax.build(mod, "cuda")` binds every function nobody scheduled with the default GPU
#   schedule, so a whole model runs on the GPU.
#
# ## Exercises
#
# `check(name, answer)` builds your answer for `cuda`, runs it on random inputs (in the
# simulator here), compares with numpy and checks that the kernel is the one asked for.
# `hint(name, 1)` gives a gentle hint, higher levels say more, and `solution(name)` shows a
# solution, for when you have tried.
#
# ### Exercise 1: bind a transpose to thread blocks (`ch6.bind_transpose`)
#
# Binding is the one step every GPU kernel needs, and a 2-D one is the common case. `Transpose`
# holds `B = A.T` for `A` of shape (32, 64). Schedule it so that each thread computes one
# element of `B`, a thread block is 8 × 8 threads (`threadIdx.y` for the row in an 8 × 8 tile
# of `B`, `threadIdx.x` for the column, so that neighbouring threads write neighbouring
# elements of `B`), and `blockIdx.y` / `blockIdx.x` pick the tile. The schedule below does
# nothing yet; the check says what is missing.

# %%
from mlckit.exercises.ch6 import Matmul, Transpose

print(Transpose["main"].script())

# %%
sch = tir.Schedule(Transpose)
block_B = sch.get_block("B")
i, j = sch.get_loops(block_B)
# your steps: split, reorder, bind

check("ch6.bind_transpose", sch)

# %% [markdown]
# (The reads of `A` in this transpose are not coalesced whichever way you bind it: a warp
# writing a row of `B` reads a column of `A`. The cure is shared memory: a block reads an 8 × 8
# tile of `A` row by row into shared memory and writes it out column by column. Try it once
# the exercise passes; the check accepts that version too.)
#
# ### Exercise 2: a matmul with a local accumulator per thread (`ch6.local_matmul`)
#
# `Matmul` holds `C = A @ B` for `A` of shape (32, 32) and `B` of shape (32, 64). Schedule it
# so that each thread computes a 2 × 2 tile of `C` in a `"local"` accumulator and writes it
# back itself, a thread block is 8 × 16 threads (`threadIdx.y` × `threadIdx.x`, the 16 along
# the columns of `C`), and the grid is 2 × 2 blocks.

# %%
sch = tir.Schedule(Matmul)
block_C = sch.get_block("C")
i, j, k = sch.get_loops(block_C)
# your steps: cache_write, split, reorder, reverse_compute_at, bind

check("ch6.local_matmul", sch)
