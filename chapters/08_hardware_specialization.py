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
# # 8. Hardware specialization
#
# Every program of the earlier chapters ends, at the bottom of its loop nest, in scalar
# arithmetic: one multiply-add of two floats at a time (or a few, when LLVM vectorizes the
# innermost loop). Machines built for machine learning work at a coarser grain. A GPU's
# tensor cores, Intel's AMX, Arm's SME and the matrix engines of the many "NPUs" multiply a
# whole small tile of a matrix by another in one instruction, reading their operands from
# registers or scratch memories of their own. To use such a machine, a compiler must find
# the parts of a program that are exactly what one instruction computes, move the operands
# into the memories the instruction reads, and replace each of those parts with a call of
# the instruction. This is **[tensorization](glossary.md#tensorization)**.
#
# This chapter follows the second part of the MLC course's chapter on specialized hardware:
# an imaginary accelerator with one matrix instruction, a matrix product written first with
# that accelerator's "low-level numpy" and then as a [schedule](glossary.md#schedule) of a
# [TensorIR](glossary.md#tensorir) matmul, `blockize` to cut out the tiles, storage scopes for
# the accelerator's memories, a [tensor intrinsic](glossary.md#tensor-intrinsic) that
# describes the instruction, and `tensorize`, which replaces each tile with it. Our
# accelerator is imaginary, so its instruction is implemented in software: a small kernel
# compiled by numba (and, where a C compiler is installed, one in C). What the chapter shows
# carries over to a real one; only the implementation of the instruction changes.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import mlckit
from mlckit import tir
from mlckit.contrib import clang
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.script import ir as I
from mlckit.script import tir as T

rng = np.random.default_rng(0)
N, TILE = 1024, 16  # a 1024 x 1024 matrix product, cut into 16 x 16 tiles
a_np = rng.uniform(-1, 1, (N, N)).astype("float32")
b_np = rng.uniform(-1, 1, (N, N)).astype("float32")
c_tmm = a_np @ b_np.T  # the product this chapter computes: A times B transposed

# %% [markdown]
# ## An accelerator's low-level numpy
#
# Our accelerator has three memories of its own, each holding one 16×16 tile of float32:
# `A_reg` and `B_reg` for the operands and an `accumulator` for the result. Its instructions:
#
# * `accel_fill_zero(C)` zeroes the accumulator;
# * `accel_dma_copy(dst, src)` copies a 16×16 tile between the machine's main memory and one
#   of the accelerator's memories (a *DMA* copy: the memory system does it, not the processor);
# * `accel_tmm_add(C, A, B)` adds `A @ B.T` to the accumulator: 16 × 16 × 16 = 4,096
#   multiply-adds in one instruction. (The "t" is for the transposed `B`: both operands are
#   read row by row, which is how matrix units like them.)
#
# In numpy, with slices standing for the memories:


# %%
def accel_fill_zero(C):
    C[:] = 0


def accel_tmm_add(C, A, B):
    C[:] += A @ B.T


def accel_dma_copy(reg, dram):
    reg[:] = dram[:]


# %% [markdown]
# A 1024×1024 product `C = A @ B.T` with this instruction set cuts `C` into 64 × 64 tiles of
# 16×16. For each tile of `C`, the accumulator starts at zero; then for each of the 64 steps
# along `k`, a tile of `A` and a tile of `B` are copied into the operand memories and
# multiplied into the accumulator; finally the accumulator is copied out to `C`.


# %%
def lnumpy_tmm(A: np.ndarray, B: np.ndarray, C: np.ndarray):
    accumulator = np.empty((TILE, TILE), dtype="float32")
    A_reg = np.empty((TILE, TILE), dtype="float32")
    B_reg = np.empty((TILE, TILE), dtype="float32")
    tiles = N // TILE
    for i in range(tiles):
        rows_of_C = slice(i * TILE, (i + 1) * TILE)
        for j in range(tiles):
            cols_of_C = slice(j * TILE, (j + 1) * TILE)
            accel_fill_zero(accumulator)
            for k in range(tiles):
                step = slice(k * TILE, (k + 1) * TILE)
                accel_dma_copy(A_reg, A[rows_of_C, step])
                accel_dma_copy(B_reg, B[cols_of_C, step])
                accel_tmm_add(accumulator, A_reg, B_reg)
            accel_dma_copy(C[rows_of_C, cols_of_C], accumulator)


c_np = np.empty((N, N), dtype="float32")
lnumpy_tmm(a_np, b_np, c_np)
np.testing.assert_allclose(c_np, c_tmm, rtol=1e-4, atol=1e-4)

# %% [markdown]
# That is 64³ = 262,144 calls of `accel_tmm_add` for 1024³ (about a billion) multiply-adds.
# The program's loops now run over *tiles*, and the unit of work inside them is a tile
# operation. The rest of the chapter makes a compiler reach this program from a plain
# matmul, and prove on the way that each step computes the same values.
#
# ## From a matmul to 16×16×16 blocks
#
# We start from the matmul as anyone would write it, with `B` transposed as the instruction
# wants it: `C[i, j]` is the sum over `k` of `A[i, k] * B[j, k]`.


# %%
@I.ir_module
class MatmulModule:
    @T.prim_func
    def main(
        A: T.Buffer((1024, 1024), "float32"),
        B: T.Buffer((1024, 1024), "float32"),
        C: T.Buffer((1024, 1024), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] += A[vi, vk] * B[vj, vk]


# %% [markdown]
# Splitting each loop by 16 and moving the three inner loops inside the three outer ones
# gives the tile structure of `lnumpy_tmm`: the loops `i_0, j_0, k_0` walk over tiles, and
# `i_1, j_1, k_1` run one tile's 4,096 multiply-adds.

# %% tags=["nbval-check-output"]
sch = tir.Schedule(MatmulModule)
i, j, k = sch.get_loops("matmul")
i, ii = sch.split(i, factors=[None, 16])
j, ji = sch.split(j, factors=[None, 16])
k, ki = sch.split(k, factors=[None, 16])
sch.reorder(i, j, k, ii, ji, ki)
print(sch.mod["main"].script())

# %% [markdown]
# The loops have the right shape, but nothing in the program says that the three inner loops
# belong together: to a schedule they are three loops around a block that computes one
# multiply-add. `blockize(ii)` makes the subtree under loop `ii` a [block](glossary.md#block)
# of its own, `matmul_o`:

# %% tags=["nbval-check-output"]
block_mm = sch.blockize(ii)
print(sch.mod["main"].script())

# %% [markdown]
# Read the new block's iterators: `vi_o, vj_o, vk_o` are bound to the tile loops, and the
# kinds carry over (`vk_o` is a reduction: the 64 steps along `k` add into the same tile of
# `C`). Its body is the whole tile computation, the old block `matmul` now inside it with
# its own loops, written with `vi_o * 16 + vi_i` where it used to say `vi`. The init went
# along: it zeroes a 16×16 tile, once per tile of `C`, as `accel_fill_zero` does. To the
# rest of the schedule, `matmul_o` is one unit of work that reads a tile of `A` and one of
# `B` and updates a tile of `C`: exactly what one call of `accel_tmm_add` does.
#
# ## The accelerator's memories: storage scopes
#
# `accel_tmm_add` does not read `A` and `B` where they are: its operands must be copied into
# `A_reg` and `B_reg` first, and it adds into the accumulator, which is copied out at the
# end. In TensorIR, where a buffer lives is its [storage scope](glossary.md#storage-scope). Chapter 6 used the GPU's
# `"shared"` and `"local"`; an accelerator's memories are named `"global.<tag>"`: memory
# that is, for the CPU running this program, ordinary memory, with a tag that says which
# of the accelerator's memories it stands for. `cache_read` and `cache_write` stage the
# block's operands and result in buffers of those scopes, and `compute_at` /
# `reverse_compute_at` place the copies where `lnumpy_tmm` does them: the operands at each
# step of `k`, the result once per tile of `C`.

# %% tags=["nbval-check-output"]
A_reg = sch.cache_read(block_mm, 0, storage_scope="global.A_reg")
B_reg = sch.cache_read(block_mm, 1, storage_scope="global.B_reg")
sch.compute_at(A_reg, k)
sch.compute_at(B_reg, k)

write_back_block = sch.cache_write(block_mm, 0, storage_scope="global.accumulator")
sch.reverse_compute_at(write_back_block, j)
print(sch.mod["main"].script())

# %% [markdown]
# Every piece of `lnumpy_tmm` is there. The new buffers are named after the buffer and the
# scope (`A_global_A_reg`: `A` in `global.A_reg`); the blocks `A_global_A_reg` and
# `B_global_B_reg` are the two DMA copies in the `k` loop, `matmul_o` reads what they copied
# and adds into `C_global_accumulator`, and the block `C_global_accumulator` copies the
# finished tile out. The program still computes with scalar
# multiply-adds, and builds and runs as any other:

# %%
dev = mlckit.cpu()
a_nd, b_nd = mlckit.nd.array(a_np, dev), mlckit.nd.array(b_np, dev)


def build_and_check(mod: mlckit.IRModule):
    """Build ``mod``, run it once, and compare with numpy; return the compiled function."""
    main = mlckit.build(mod, target="llvm")["main"]
    c_nd = mlckit.nd.empty((N, N), "float32", dev)
    main(a_nd, b_nd, c_nd)
    np.testing.assert_allclose(c_nd.numpy(), c_tmm, rtol=1e-4, atol=1e-4)
    return main


staged = sch.mod.copy()  # this version is timed against the tensorized one below
scheduled_main = build_and_check(staged)

# %% [markdown]
# ## A tensor intrinsic: what the instruction computes, and how to call it
#
# To replace `matmul_o` with a call of the accelerator's instruction, the compiler must know
# two things about the instruction, and a
# [tensor intrinsic](glossary.md#tensor-intrinsic) (`tir.TensorIntrin`) gives them as two
# PrimFuncs with the same parameters:
#
# * the **description** (`desc`) says *what* the instruction computes, in TensorIR: here
#   `C += A @ B.T` on 16×16 tiles, with `A` in `global.A_reg`, `B` in `global.B_reg` and `C`
#   in `global.accumulator`. `tensorize` compares it with the block to replace;
# * the **implementation** (`impl`) says *how* to compute it on the machine: here one call,
#   `T.call_extern("tmm16", ...)`, of a function named `tmm16` that the program links to.
#   It receives where each tile starts (`access_ptr`: `"w"` for the tile it writes, `"r"`
#   for those it reads) and how far apart the rows of each tile are in memory (the strides
#   `sa`, `sb`, `sc`: a tile of a 1024×1024 matrix has rows 1024 floats apart, a tile in a
#   16×16 scratch memory 16).
#
# `T.match_buffer(..., offset_factor=16)` declares a parameter as a view of some larger
# buffer (starting at a multiple of 16 elements), so that the same intrinsic applies to
# every tile wherever it lies; `strides=[sa, 1]` names the distance between its rows, which
# each call receives from the tile it is applied to.


# %%
@T.prim_func
def tmm16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


@T.prim_func
def tmm16_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
    sa = T.var("int32")
    sb = T.var("int32")
    sc = T.var("int32")
    A = T.match_buffer(
        a, (16, 16), "float32", offset_factor=16, strides=[sa, 1], scope="global.A_reg"
    )
    B = T.match_buffer(
        b, (16, 16), "float32", offset_factor=16, strides=[sb, 1], scope="global.B_reg"
    )
    C = T.match_buffer(
        c, (16, 16), "float32", offset_factor=16, strides=[sc, 1], scope="global.accumulator"
    )

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        T.evaluate(
            T.call_extern(
                "tmm16",
                C.access_ptr("w"),
                A.access_ptr("r"),
                B.access_ptr("r"),
                sa,
                sb,
                sc,
                dtype="int32",
            )
        )


tir.TensorIntrin.register("tmm16", tmm16_desc, tmm16_impl)

# %% [markdown]
# Our accelerator being imaginary, `tmm16` is ours to write. `tir.op.register_extern("tmm16")`
# registers a Python function under that name; the `llvm` target compiles it with numba into
# the kernel that calls it. Each `access_ptr` argument arrives as the tile it points to (a
# 16×16 view of the buffer, rows `sa`, `sb` or `sc` floats apart), so the function can index
# the tiles as arrays, and the strides are there for implementations that need them, like
# the one in C below. Its loops have constant extents, 16, which lets LLVM unroll and
# vectorize them as it sees fit.


# %%
@tir.op.register_extern("tmm16", override=True)  # override: re-running this cell replaces it
def tmm16(C, A, B, stride_a, stride_b, stride_c):
    for i in range(16):
        for j in range(16):
            total = C[i, j]
            for k in range(16):
                total += A[i, k] * B[j, k]
            C[i, j] = total
    return 0


# %% [markdown]
# ## Tensorize
#
# The intrinsic's description has no init: the instruction adds into the accumulator, it
# never zeroes it (`accel_fill_zero` is another instruction). So the block to replace must
# not have one either. `decompose_reduction(block_mm, k)` moves the init of `matmul_o` out
# into a block of its own before the `k` loop, as in chapter 2; what is left of `matmul_o`
# (now `matmul_o_update`) is the pure update `C += A @ B.T` on one tile.

# %% tags=["nbval-check-output"]
sch.decompose_reduction(block_mm, k)
decomposed = sch.mod.copy()  # kept for the mismatch example below
print(sch.mod["main"].script())

# %% [markdown]
# `tensorize(block_mm, "tmm16")` now compares the body of `matmul_o_update` with the
# intrinsic's description, node by node, up to the names of variables: the same loops
# (extents 16, 16, 16), the same kinds of iterators, the same computation, with each of the
# description's buffers standing for a 16×16 region of one of the block's buffers of the same
# scope. Where they agree, it replaces the body with the implementation, and binds each of
# the implementation's buffers to the region it stands for with a `T.match_buffer` inside
# the block: `A_1` is the tile `A_global_A_reg[vi_o_1 * 16 : vi_o_1 * 16 + 16, vk_o * 16 :
# vk_o * 16 + 16]`, whose rows are `sa` floats apart. The strides `sa`, `sb`, `sc`, declared
# at the top of the function, are read off the tiles when the program runs.

# %% tags=["nbval-check-output"]
sch.tensorize(block_mm, "tmm16")
print(sch.mod["main"].script())

# %% [markdown]
# The innermost work of the program is now one call of `tmm16` per tile and per step of
# `k`: 262,144 calls, as in `lnumpy_tmm`. It builds and gives numpy's result:

# %%
tensorized = sch.mod.copy()
tensorized_main = build_and_check(tensorized)

# %% [markdown]
# ## The same instruction in C
#
# The course implements `tmm16` in C, as a vendor's library would provide an instruction's
# intrinsic function, and attaches it to the program with an annotation:
# `sch.annotate(loop, "pragma_import_llvm", code)`. In TVM, `contrib.clang.create_llvm(code)`
# compiles the code with clang into LLVM IR, which is linked into the kernel. mlckit's kernels
# are numba code, which can call C functions through their address: `create_llvm` compiles
# the code with the system's C++ compiler into a shared library, and the build makes the
# kernel's `T.call_extern("tmm16", ...)` call the library's `tmm16`, which receives real
# pointers and the row strides. The function is declared `extern "C"` so that the library
# exports it under its plain name.
#
# This needs a C++ compiler (`g++`, `clang++` or `c++`, or the one `$CXX` names). Where there
# is none, `create_llvm` raises a `BuildError` saying so, which the cell below prints instead
# of timing the C version: everything else in this chapter runs without a compiler.
# <!-- shown-by: c-version -->

# %% tags=["shows:c-version"]
TMM16_C = """
extern "C" int tmm16(float *cc, float *aa, float *bb, int stride_a, int stride_b, int stride_c) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k)
        cc[i * stride_c + j] += aa[i * stride_a + k] * bb[j * stride_b + k];
  return 0;
}
"""

try:
    sch_c = tir.Schedule(tensorized)
    outer_loop = sch_c.get_loops("matmul_o_update")[0]
    sch_c.annotate(outer_loop, "pragma_import_llvm", clang.create_llvm(TMM16_C))
    c_main = build_and_check(sch_c.mod)
    print("the C version of tmm16 gives numpy's result too")
except mlckit.errors.BuildError as err:
    c_main = None
    print("no C version here:", err)

# %% [markdown]
# ## When the description does not fit
#
# `tensorize` replaces a block only where the description says exactly what the block
# computes; otherwise the program would silently compute something else. Take a second
# instruction, `mm16`, for the product of tiles *without* the transpose, `C += A @ B`: its
# description indexes `B[vkk, vjj]` where ours says `B[vjj, vkk]`. Applied to our block (on a
# fresh schedule of the program as it was before `tensorize`), it is refused, and the error
# shows the first place where the block and the description differ, side by side:


# %%
@T.prim_func
def mm16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]


# The implementation does not matter here: the description is compared first.
tir.TensorIntrin.register("mm16", mm16_desc, tmm16_impl, override=True)

# %% tags=["nbval-check-output"]
sch_mismatch = tir.Schedule(decomposed)
try:
    sch_mismatch.tensorize("matmul_o_update", "mm16")
except mlckit.errors.ScheduleError as err:
    print(err)

# %% [markdown]
# The first difference is named with its place in the block (under the loops `i_1`, `j_1`,
# `k_1`, in block `matmul`) and shown in the description's variable names, so that the two
# lines can be read against each other: the block reads `B[vjj, vkk]`, the description
# `B[vkk, vjj]`. The schedule is left as it was. The first exercise below asks for the
# description that fits a matmul of this other layout.
#
# ## How fast is it?
#
# We time four versions of the same product, each computed on one core: the program
# scheduled with tiles and scratch buffers but computing with scalar loops (`staged`, before
# `decompose_reduction` and `tensorize`), the tensorized program with the numba `tmm16` and,
# where a compiler was found, with the C one, and numpy's matrix product (OpenBLAS) limited
# to one thread. Numpy with all its threads is timed too, for reference. The versions run in
# turn, three rounds after a first call each, so that a busy phase of the machine slows all of
# them alike, and each keeps the median of its three times.


# %% tags=["shows:tensorize-timing"]
def median_seconds(functions: dict, rounds: int = 3) -> dict:
    """The median time of one call of each function, over ``rounds`` rounds taking them in
    turn (each called once first)."""
    for call in functions.values():
        call()
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, call in functions.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


c_nd = mlckit.nd.empty((N, N), "float32", dev)
versions = {
    "scheduled, scalar loops": lambda: scheduled_main(a_nd, b_nd, c_nd),
    "tensorized, numba tmm16": lambda: tensorized_main(a_nd, b_nd, c_nd),
}
if c_main is not None:
    versions["tensorized, C tmm16"] = lambda: c_main(a_nd, b_nd, c_nd)
with threadpool_limits(limits=1):
    versions["numpy, 1 thread"] = lambda: a_np @ b_np.T
    seconds = median_seconds(versions)
numpy_threads = threadpool_info()[0]["num_threads"]
seconds[f"numpy, {numpy_threads} threads"] = median_seconds({"numpy": lambda: a_np @ b_np.T})[
    "numpy"
]
gflops = {name: 2 * N**3 / s / 1e9 for name, s in seconds.items()}
for name, value in gflops.items():
    print(f"{name:26} {seconds[name] * 1e3:8.1f} ms {value:8.2f} GFLOP/s")

# %%
fig, ax = plt.subplots(figsize=(8, 3))
bars = ax.barh(list(gflops)[::-1], list(gflops.values())[::-1], color="#99DDFF")
ax.bar_label(bars, fmt="%.1f", fontsize=8)
ax.set_xscale("log")
ax.set_xlabel("GFLOP/s (log scale; median of 3 calls)")
ax.set_title(f"{N}×{N}×{N} float32 matmul, C = A @ B.T")
plt.tight_layout()
plt.show()

# %%
ratio = seconds["scheduled, scalar loops"] / seconds["tensorized, numba tmm16"]
print(f"the tensorized program (numba tmm16) runs at {ratio:.2f}x the speed of the scheduled one")

# %% [markdown]
# Read the numbers with what each version does. Our `tmm16` is software: it performs the
# same 4,096 scalar multiply-adds as the loops it replaces, so tensorizing gives the program
# no new arithmetic to do faster; what changes is that each tile's work becomes a call, on
# tiles the kernel passes as views (numba) or pointers (C), whose cost the compiled loops
# did not have. How the two compare is for the measurement to say, and it varies with the
# machine and its load; on the machine that built this page, the line above gives it. Numpy
# is far ahead of all of them: its BLAS kernel is itself a "micro-kernel" written for this
# processor's vector units, with operands kept in registers. <!-- shown-by: tensorize-timing -->
#
# On real hardware the balance is different in kind, not in degree: the instruction does
# its 4,096 multiply-adds in a few cycles in dedicated units, so replacing each tile with
# one instruction is what makes the accelerator useful at all. The compiler's part is the
# same as here: cut the program into pieces of the instruction's shape (`blockize`), place
# the operands in the instruction's memories (`cache_read`, `cache_write`), and prove that
# each piece computes what the instruction does before replacing it (`tensorize`).
#
# ## Summary
#
# * Specialized hardware computes on tiles: one instruction multiplies a 16×16 tile by
#   another, reading and writing memories of its own. Its "low-level numpy" is a loop nest
#   over tiles around such instructions.
# * `sch.blockize(loop)` turns the loops under `loop` into a block of their own, whose
#   iterators walk the tiles and whose body computes one tile.
# * Storage scopes `"global.<tag>"` name the accelerator's memories; `cache_read` and
#   `cache_write` stage a block's operands and results in them.
# * A tensor intrinsic, `tir.TensorIntrin.register(name, desc, impl)`, describes an
#   instruction: `desc` is what it computes, in TensorIR; `impl` is how to call it, here
#   `T.call_extern` of a function registered with `tir.op.register_extern` (numba) or
#   compiled from C (`contrib.clang.create_llvm` and the `"pragma_import_llvm"` annotation).
# * `sch.tensorize(block, name)` checks that the block computes exactly what the description
#   says, up to names, and replaces its body with the implementation; a mismatch is refused
#   with the first difference.
#
# ## Exercises
#
# `check(name, answer)` checks your answer: it runs your program on random inputs against
# numpy and says what is missing or wrong, with a hint. `hint(name, 1)` gives a gentle hint,
# higher levels say more, and `solution(name)` shows a solution, for when you have tried.
#
# ### Exercise 1: describe the instruction `mma16` (`ch8.mma16_desc`)
#
# The accelerator has a second instruction, `mma16`, for the product without the transpose:
# `C += A @ B` on 16×16 tiles, with `B` in its own layout (`B[k, j]`) and the operands in
# the same three memories as for `tmm16`. Write its description. The starting code below is
# `tmm16`'s, which computes the wrong product; the check runs your description on random
# tiles, then tensorizes a 64×64×64 matmul `C = A @ B` with it.


# %%
@T.prim_func
def mma16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")

    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


check("ch8.mma16_desc", mma16_desc)

# %% [markdown]
# ### Exercise 2: tensorize a matmul with `mma16` (`ch8.tensorize_mma16`)
#
# `MatmulNN` is that 64×64×64 matmul, `C = A @ B`. The exercises register the instruction as
# the tensor intrinsic `"ch8_mma16"` (with an implementation that calls a numba kernel).
# Schedule `MatmulNN` so that every multiply-add goes through the instruction, as this
# chapter did for `tmm16`. As given, the schedule does nothing yet; the check says what is
# missing.

# %%
from mlckit.exercises.ch8 import MatmulNN

print(MatmulNN.script())

# %%
sch = tir.Schedule(MatmulNN)
i, j, k = sch.get_loops("matmul")
# your steps: split, reorder, blockize, cache_read, cache_write, decompose_reduction, tensorize

check("ch8.tensorize_mma16", sch)
