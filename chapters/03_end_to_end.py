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
# # 3. End-to-end model execution
#
# The last two chapters looked at one [primitive tensor function](glossary.md#primitive-tensor-function)
# at a time: a matrix multiplication, a ReLU, written as a [PrimFunc](glossary.md#primfunc) and
# transformed loop by loop. A model is many such functions, called one after the other, with
# tensors flowing from one to the next. This chapter runs a whole model: a small classifier of
# FashionMNIST images, from its weights to its predictions.
#
# The model lives in one [IRModule](glossary.md#irmodule) that holds two kinds of functions side
# by side: the PrimFuncs that do the arithmetic, and a [Relax](glossary.md#relax) function `main`
# that says which PrimFunc runs on which tensors, in which order. On the way we meet
#
# - `R.call_tir`, the bridge from the graph to the loops, explained by its low-level numpy meaning;
# - [dataflow blocks](glossary.md#dataflow-block), the regions of a function the compiler may
#   rearrange freely, and why they must be [pure](glossary.md#purity);
# - [struct info](glossary.md#struct-info): the shape and dtype the compiler knows for every value,
#   including a [symbolic](glossary.md#symbolic-shape) batch size `n`;
# - `relax.build` and the [virtual machine](glossary.md#virtual-machine) that runs the result;
# - [extern functions](glossary.md#extern-function) from a library, mixed with TensorIR, and
#   [BindParams](glossary.md#bindparams), which turns the weights into constants.
#
# The code follows the MLC course's chapter on end-to-end execution. The course's own notebook
# runs on mlckit with `import tvm` changed to `import mlckit as tvm` and a few marked edits
# (no downloads, a dataset read from the files mlckit ships), listed in mlckit's
# `tests/course/README.md`, whose test runs it.
# <!-- checked-by: tests/course/test_course.py::test_course_notebook_runs -->

# %%
import matplotlib.pyplot as plt
import numpy as np

import mlckit
from mlckit import relax, topi, viz
from mlckit.datasets import fashion_mnist, mlp_params
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

# %% [markdown]
# ## The data and the model
#
# `mlckit.datasets` ships real FashionMNIST images: 28x28 greyscale pictures of clothes in ten
# classes. The `sprite900` split holds 90 images of each class, in label order; `dtype="float32"`
# scales the pixels to [0, 1], the input the model was trained on.

# %%
images, labels, class_names = fashion_mnist(split="sprite900", dtype="float32")
print(images.shape, images.dtype, labels.shape)

fig, axes = plt.subplots(1, 10, figsize=(12, 1.8))
for c, ax in enumerate(axes):
    ax.imshow(images[90 * c], cmap="gray_r")
    ax.set_title(class_names[c], fontsize=8)
    ax.axis("off")
plt.show()

# %% [markdown]
# The model is the course's pretrained two-layer perceptron: a linear layer from 784 pixels to
# 128 features, a ReLU, and a linear layer from 128 features to 10 class scores (logits).
# `mlp_params()` gives its weights in PyTorch's `nn.Linear` layout, `(out, in)`, so a layer
# computes `x @ w.T + b`.

# %%
params = mlp_params()
for name, value in params.items():
    print(name, value.shape, value.dtype)

# %% [markdown]
# In numpy, with high-level array operations, the model is three lines:


# %% tags=["nbval-check-output"]
def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    lv2 = lv1 @ w1.T + b1
    return lv2


x = images[:1].reshape(1, 784)  # a batch of one image, flattened
numpy_logits = numpy_mlp(x, **params)
print("predicted:", class_names[numpy_logits.argmax()], "| true:", class_names[labels[0]])

# %% [markdown]
# ## The same model in low-level numpy
#
# An ML compiler sees through `@` and `np.maximum` down to loops, so let us write the model the
# way the compiler will run it, following two rules: loops instead of array operations, and
# every array allocated explicitly with `np.empty`. Each function gets its output as an argument
# and only writes into it, the [destination-passing style](glossary.md#destination-passing-style);
# `lnumpy_mlp` allocates the intermediate tensors and passes them along.


# %%
def lnumpy_linear0(X, W, B, Z):
    Y = np.empty((1, 128), dtype="float32")
    for i in range(1):
        for j in range(128):
            for k in range(784):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
    for i in range(1):
        for j in range(128):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_relu0(X, Y):
    for i in range(1):
        for j in range(128):
            Y[i, j] = np.maximum(X[i, j], 0)


def lnumpy_linear1(X, W, B, Z):
    Y = np.empty((1, 10), dtype="float32")
    for i in range(1):
        for j in range(10):
            for k in range(128):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
    for i in range(1):
        for j in range(10):
            Z[i, j] = Y[i, j] + B[j]


def lnumpy_mlp(x, w0, b0, w1, b1):
    lv0 = np.empty((1, 128), dtype="float32")
    lnumpy_linear0(x, w0, b0, lv0)
    lv1 = np.empty((1, 128), dtype="float32")
    lnumpy_relu0(lv0, lv1)
    out = np.empty((1, 10), dtype="float32")
    lnumpy_linear1(lv1, w1, b1, out)
    return out


print("low-level numpy agrees:", np.allclose(lnumpy_mlp(x, **params), numpy_logits, atol=1e-4))

# %% [markdown]
# ## The model as an IRModule
#
# Here is the same program in TVMScript. Each low-level numpy function becomes a `@T.prim_func`
# (the TensorIR of chapter 2, with the same loops and the same destination-passing signature),
# and `lnumpy_mlp` becomes the Relax function `main`, decorated with `@R.function`.


# %%
@I.ir_module
class MyModule:
    @T.prim_func
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(
        X: T.Buffer((1, 784), "float32"),
        W: T.Buffer((128, 784), "float32"),
        B: T.Buffer((128,), "float32"),
        Z: T.Buffer((1, 128), "float32"),
    ):
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def linear1(
        X: T.Buffer((1, 128), "float32"),
        W: T.Buffer((10, 128), "float32"),
        B: T.Buffer((10,), "float32"),
        Z: T.Buffer((1, 10), "float32"),
    ):
        Y = T.alloc_buffer((1, 10), "float32")
        for i, j, k in T.grid(1, 10, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 10):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        cls = MyModule
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32"))
            lv1 = R.call_tir(cls.relu0, (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            out = R.call_tir(cls.linear1, (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), "float32"))
            R.output(out)
        return out


# %% [markdown]
# Read `main` next to `lnumpy_mlp`: one line per step, the same names, the same order. `cls`
# stands for the module, so `cls.linear0` is the [GlobalVar](glossary.md#globalvar) that names the
# PrimFunc `linear0`. Older course texts spell the call
# `R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")` and the buffers
# `T.Buffer[(1, 128), "float32"]`; mlckit accepts those spellings too and prints the current one.
# <!-- checked-by: tests/script/test_printer.py::test_legacy_module -->
#
# Pictures help to see the two levels. The module's call graph shows `main` calling the three
# PrimFuncs; `function="main"` draws `main`'s dataflow graph, one node per binding.

# %%
viz.graph(MyModule)

# %%
viz.graph(MyModule, function="main")

# %% [markdown]
# ## `call_tir`: destination passing, hidden from the graph
#
# The first line of `main`,
#
# ```python
# lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32"))
# ```
#
# means exactly what these two lines of `lnumpy_mlp` do:
#
# ```python
# lv0 = np.empty((1, 128), dtype="float32")
# lnumpy_linear0(x, w0, b0, lv0)
# ```
#
# [`call_tir`](glossary.md#call_tir) allocates an output with the given struct info
# (`out_sinfo`), calls the PrimFunc with the inputs followed by that output, and returns the
# output, which the PrimFunc has filled. Exercise 1 below asks you to write this once, as a
# numpy function `lnumpy_call_tir`.
#
# Why split the work this way? Because the PrimFunc then never decides where memory comes
# from. Its caller, the graph, sees every allocation of the model in one place, so it can plan
# them together: reuse the buffer of `lv0` once `lv1` is computed, place them all in one
# arena, or allocate on a GPU. This is how low-level libraries are written too (BLAS routines
# take their output array). The price: the caller must know the output's shape before the call,
# which is impossible for a few operators whose output shape depends on the data (like
# `np.unique`). Those are written in other ways; for everything else, destination passing is the
# rule.
#
# And why not write the two lines in `main` itself? Because `lv0 = R.call_tir(...)` is a single
# binding that creates a new value from existing ones and changes nothing else. At the graph
# level, every step is a pure function of its inputs, which is what lets the compiler reason
# about the graph, as the next sections show.
#
# ## Struct info: what the compiler knows about every value
#
# Every Relax value carries [struct info](glossary.md#struct-info): for a tensor, its shape and
# dtype. The parameters get it from their annotations, and each binding from what it calls
# (for `call_tir`, from `out_sinfo`). Let us list `main`'s bindings with theirs:

# %% tags=["nbval-check-output"]
main = MyModule["main"]
for param in main.params:
    print(f"param {param.name_hint:3}: {param.struct_info}")
for block in main.body.blocks:
    print(type(block).__name__)
    for binding in block.bindings:
        var = binding.var
        print(f"  {var.name_hint:4} {type(var).__name__:12} {var.struct_info}")

# %% [markdown]
# The printed module shows the same thing in TVMScript, each binding annotated with its
# struct info (`lv0: R.Tensor((1, 128), dtype="float32") = ...`). Because the compiler
# infers struct info as it reads the program, a shape error is found before anything runs. Here
# the weight is used without its transpose:

# %% tags=["nbval-check-output"]
wrong = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32")):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            R.output(lv0)
        return lv0
"""
try:
    mlckit.script.from_source(wrong)
except mlckit.StructInfoError as err:
    print(err)

# %% [markdown]
# A caveat: for `call_tir` the struct info of the result is `out_sinfo`, taken on trust. The
# compiler does not prove that the PrimFunc writes a tensor of that shape; writing it correctly is
# your part of the contract.
#
# ## Dataflow blocks and purity
#
# The listing above also shows that `lv0` and `lv1` are `DataflowVar`s and `out` a plain `Var`.
# They live in a [dataflow block](glossary.md#dataflow-block), `with R.dataflow():`. Inside it,
# every operation must be [pure](glossary.md#purity) (side-effect free): it only reads its inputs
# and produces a new value; it does not write into an existing tensor, print, or bump a counter.
# Every `call_tir` is pure in this sense, since the tensor it writes is one it has just allocated.
#
# Purity is what makes a dataflow block a *computational graph*: the order of its bindings
# matters only through the values they pass, so the compiler may reorder them, fuse neighbours
# into one kernel, or drop a binding nobody uses. Only the variables listed in `R.output(...)`
# are visible after the block; the `DataflowVar`s are private to it, so the compiler may remove
# or merge them without breaking anything outside. Code with side effects goes outside dataflow
# blocks, where bindings run strictly in order.
#
# Why mark the blocks by hand instead of letting the compiler find them? Because the compiler
# cannot always tell: a call to a library function (below) might modify its arguments. Marking
# makes the programmer's knowledge explicit, and many optimizations, fusion among them, work
# only inside dataflow blocks. `relax.analysis.well_formed` checks the rules; here an impure
# `R.call_packed` (a call to a function that may do anything) sits inside a dataflow block:

# %% tags=["nbval-check-output"]
impure = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 784), "float32")):
        with R.dataflow():
            lv0 = R.call_packed("env.print", x, sinfo_args=R.Object)
            lv1 = R.nn.relu(x)
            R.output(lv1)
        return lv1
"""
try:
    relax.analysis.well_formed(mlckit.script.from_source(impure), raise_error=True)
except mlckit.WellFormedError as err:
    print(err)

# %% [markdown]
# ## Build and run: `relax.build` and the virtual machine
#
# `relax.build` compiles the whole module into an [Executable](glossary.md#executable): every
# PrimFunc becomes a kernel (Python loop code that numba compiles to machine code for the target
# `"llvm"`), and `main` becomes code for the [virtual machine](glossary.md#virtual-machine), which
# runs it on a device. Inputs and outputs are [NDArrays](glossary.md#ndarray).

# %%
ex = relax.build(MyModule, target="llvm")
vm = relax.VirtualMachine(ex, mlckit.cpu())

data_nd = mlckit.nd.array(x)
nd_params = {name: mlckit.nd.array(value) for name, value in params.items()}
nd_res = vm["main"](data_nd, nd_params["w0"], nd_params["b0"], nd_params["w1"], nd_params["b1"])

print(type(nd_res).__name__, nd_res.shape)
print("agrees with numpy:", np.allclose(nd_res.numpy(), numpy_logits, atol=1e-4))
print("MyModule prediction:", class_names[nd_res.numpy().argmax()])

# %% [markdown]
# What does the virtual machine run for `main`? `ex.source("main")` shows it, and it is our
# `lnumpy_mlp`, line for line: allocate, call the kernel in destination-passing style, go on.
# The argument checks at the top come from the parameters' struct info. Where `lnumpy_mlp`
# calls `np.empty`, the VM calls `pooled_empty(slot, shape, dtype)`: the first call of `main`
# allocates each output (its data starting on a 64-byte cache line, which vectorized kernels
# read faster), and later calls reuse the array of the same slot once nothing else refers to
# it. <!-- shown-by: vm-main -->

# %% tags=["nbval-check-output", "shows:vm-main"]
print(ex.source("main"))

# %% [markdown]
# `ex.source("linear0")` shows the code of a kernel. `relax.build` gave each PrimFunc mlckit's
# default CPU schedule first, with transformations of chapter 2: the sum's init is split out
# of the reduction (`decompose_reduction`), and the bias loop is split so that its inner 64
# iterations are vectorized. No loop runs in parallel: at 100,352 multiply-adds, `linear0` is
# too small for threads to pay for waking up; the default schedule runs a loop nest in
# parallel from `PARALLEL_MIN_WORK` iterations on.
# <!-- shown-by: vm-linear0 -->

# %% tags=["nbval-check-output", "shows:vm-linear0"]
from mlckit.tir.schedule.default_schedule import PARALLEL_MIN_WORK

print(ex.source("linear0"))
print("PARALLEL_MIN_WORK =", PARALLEL_MIN_WORK)

# %% [markdown]
# ## One build for every batch size: a symbolic `n`
#
# `MyModule` classifies exactly one image per call: every shape in it is fixed. To classify a
# batch, the shapes need a variable, the batch size `n`. In Relax a
# [symbolic shape](glossary.md#symbolic-shape) such as `("n", 784)` declares `n` in the
# parameters' annotations; inside the function body, `n = T.int64()` makes it available for the
# `out_sinfo` of the calls. The PrimFuncs take their buffers as `T.handle`s and declare their
# shapes with `T.match_buffer`, with variables of their own (`M`, `N`, `K`), so one `linear`
# serves both layers.


# %%
@I.ir_module
class MLP:
    @T.prim_func
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        M, N, K = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (M, K), "float32")
        W = T.match_buffer(w, (N, K), "float32")
        B = T.match_buffer(b, (N,), "float32")
        Z = T.match_buffer(z, (M, N), "float32")
        Y = T.alloc_buffer((M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(M, N):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def relu(x: T.handle, y: T.handle):
        M, N = T.int64(), T.int64()
        X = T.match_buffer(x, (M, N), "float32")
        Y = T.match_buffer(y, (M, N), "float32")
        for i, j in T.grid(M, N):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(
        x: R.Tensor(("n", 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        n = T.int64()
        cls = MLP
        with R.dataflow():
            lv0 = R.call_tir(cls.linear, (x, w0, b0), out_sinfo=R.Tensor((n, 128), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((n, 128), "float32"))
            out = R.call_tir(cls.linear, (lv1, w1, b1), out_sinfo=R.Tensor((n, 10), "float32"))
            R.output(out)
        return out


MLP["main"].show()

# %% [markdown]
# Every tensor of `main` now has the shape `(n, ...)` with the *same* `n`: the compiler knows that
# `lv0`, `lv1` and `out` have as many rows as `x`, without knowing how many that is. We build
# once and run a batch of 1 and a batch of 8 through the same executable:

# %% tags=["nbval-check-output"]
mlp_vm = relax.VirtualMachine(relax.build(MLP, target="llvm"), mlckit.cpu())
weights = [nd_params[name] for name in ("w0", "b0", "w1", "b1")]

batch8 = images[::113][:8].reshape(8, 784)  # eight images of eight classes
for batch in (images[:1].reshape(1, 784), batch8):
    logits = mlp_vm["main"](mlckit.nd.array(batch), *weights).numpy()
    print(
        f"batch {batch.shape} -> logits {logits.shape}:", [class_names[c] for c in logits.argmax(1)]
    )

# %% [markdown]
# The virtual machine checks each argument against the parameter's struct info when `main` is
# called, so a tensor of the wrong rank or dtype is refused with a message instead of being read
# as garbage. Images that were not flattened, and pixels in float64:

# %%
for bad in (images[:8], images[:8].reshape(8, 784).astype("float64")):
    try:
        mlp_vm["main"](mlckit.nd.array(bad), *weights)
    except mlckit.VMError as err:
        print(err)

# %% [markdown]
# With the batch size free, one call classifies all 900 images:

# %% tags=["nbval-check-output"]
all_logits = mlp_vm["main"](mlckit.nd.array(images.reshape(-1, 784)), *weights).numpy()
predictions = all_logits.argmax(axis=1)
print(f"accuracy on the {len(labels)} sprite900 images: {(predictions == labels).mean():.1%}")
print(
    "same as numpy:",
    np.array_equal(predictions, numpy_mlp(images.reshape(-1, 784), **params).argmax(1)),
)

# %% [markdown]
# A few of them, with what the compiled model says (red where it is wrong):

# %%
shown = [90 * c + 7 for c in range(10)] + [200, 555]  # one image per class, and two more
fig, axes = plt.subplots(2, 6, figsize=(10, 4))
for ax, i in zip(axes.flat, shown):
    ok = predictions[i] == labels[i]
    ax.imshow(images[i], cmap="gray_r")
    ax.set_title(
        f"{class_names[predictions[i]]}\n(true: {class_names[labels[i]]})",
        fontsize=8,
        color="black" if ok else "red",
    )
    ax.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Extern functions: calling a library from the graph
#
# A compiler should not have to generate every kernel itself: vendors ship fast libraries (cuBLAS,
# cuDNN, oneDNN) and a model may well use them for some operators. Relax calls such an
# [extern function](glossary.md#extern-function) by name. Any Python function becomes one when it
# is registered with `mlckit.register_func`; here `env.linear` and `env.relu` are implemented
# with numpy. They follow the destination-passing convention too: they receive the output
# NDArray and fill it in place (`np.from_dlpack` views an NDArray's memory as a numpy array,
# without copying).


# %%
@mlckit.register_func("env.linear", override=True)
def numpy_linear(x, w, b, out):
    np.from_dlpack(out)[:] = np.from_dlpack(x) @ np.from_dlpack(w).T + np.from_dlpack(b)


@mlckit.register_func("env.relu", override=True)
def numpy_relu(x, out):
    np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))


# %% [markdown]
# [`R.call_dps_packed`](glossary.md#call_dps_packed) calls them from `main`, exactly like
# `call_tir`: the output is allocated by the caller from `out_sinfo` and passed last.


# %%
@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.call_dps_packed(
                "env.linear", (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32")
            )
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            out = R.call_dps_packed(
                "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), "float32")
            )
            R.output(out)
        return out


# %% [markdown]
# Older texts write these calls `R.call_tir("env.linear", (x, w0, b0), (1, 128), dtype="float32")`,
# with the callee as a string. mlckit reads that as `call_dps_packed`; the course's version in
# `mlckit.testing.examples` is written that way and is the same program:

# %%
from mlckit.testing import examples

print(
    "old spelling, same module:",
    mlckit.ir.structural_equal(examples.MyModuleWithExternCall, MyModuleWithExternCall),
)
ex_extern = relax.build(MyModuleWithExternCall, target="llvm")
vm_extern = relax.VirtualMachine(ex_extern, mlckit.cpu())
extern_res = vm_extern["main"](data_nd, *weights)
print("agrees with numpy:", np.allclose(extern_res.numpy(), numpy_logits, atol=1e-4))
print(ex_extern.source("main"))

# %% [markdown]
# The executable has no kernel at all: the virtual machine calls `env.linear` and `env.relu`
# through the registry, by name, at run time.
#
# ## Mixing TensorIR and extern functions
#
# The two kinds of calls mix freely in one graph. `MyModuleMixture` computes the first layer with
# the PrimFunc `linear0` and the rest with the library:


# %%
@I.ir_module
class MyModuleMixture:
    @T.prim_func
    def linear0(
        X: T.Buffer((1, 784), "float32"),
        W: T.Buffer((128, 784), "float32"),
        B: T.Buffer((128,), "float32"),
        Z: T.Buffer((1, 128), "float32"),
    ):
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        cls = MyModuleMixture
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            out = R.call_dps_packed(
                "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), "float32")
            )
            R.output(out)
        return out


mixture_vm = relax.VirtualMachine(relax.build(MyModuleMixture, target="llvm"), mlckit.cpu())
print(
    "agrees with numpy:",
    np.allclose(mixture_vm["main"](data_nd, *weights).numpy(), numpy_logits, atol=1e-4),
)
viz.graph(MyModuleMixture, function="main")

# %% [markdown]
# In the picture the `call_tir` node is coloured by the kind of computation its PrimFunc does
# (the compiler can read it), while the extern calls are grey and dashed: opaque boxes. The graph
# cannot tell the two apart by what they compute, only by what the compiler knows:
#
# | | `R.call_tir(cls.linear0, ...)` | `R.call_dps_packed("env.linear", ...)` |
# |---|---|---|
# | callee | a PrimFunc in the same IRModule | a function registered by name, found when the program runs |
# | the compiler can | read its loops, schedule them, fuse them with neighbours | nothing but call it: its body is invisible |
# | struct info of the result | `out_sinfo` | `out_sinfo` |
#
# Both calls are pure from the graph's point of view and may sit in a dataflow block, but only
# `call_tir` leaves the compiler room to optimize. That is the trade-off: a library kernel may
# be faster today, a PrimFunc can be transformed tomorrow.
# <!-- background: a trade-off in general, not a measurement of this page -->
#
# ## BindParams: the weights become part of the program
#
# So far every call passes the weights along with the image, although they never change. The
# pass [`relax.transform.BindParams`](glossary.md#bindparams) replaces parameters of a function,
# chosen by name, with constants. Like every pass it returns a new module; the diff shows what
# changed in `main`:

# %% tags=["nbval-check-output"]
MyModuleWithParams = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
viz.diff(
    MyModuleMixture["main"],
    MyModuleWithParams["main"],
    names=("MyModuleMixture", "MyModuleWithParams"),
)

# %% [markdown]
# `main` now takes only `x`; the weights appear as `metadata["relax.expr.Constant"][i]`, stored with
# the module (`script(show_meta=True)` would print them). Besides a shorter call, the compiler now
# sees the weights as known values: later passes may precompute with them, for example change
# their layout once at compile time instead of at every call.

# %%
ex_bound = relax.build(MyModuleWithParams, target="llvm")
bound_res = relax.VirtualMachine(ex_bound, mlckit.cpu())["main"](data_nd)
print("agrees with numpy:", np.allclose(bound_res.numpy(), numpy_logits, atol=1e-4))
print(ex_bound.source("main"))

# %% [markdown]
# ## Building a module from Python: BlockBuilder and `emit_te`
#
# Writing every PrimFunc by hand does not scale to a real model. A
# [BlockBuilder](glossary.md#blockbuilder) builds the Relax function binding by binding from Python,
# and `bb.emit_te` takes a [tensor expression](glossary.md#tensor-expression-te) function from the
# operator library `mlckit.topi` (`topi.nn.dense`, `topi.nn.relu`, ...), generates its PrimFunc,
# adds it to the module and emits the `call_tir` to it, with `out_sinfo` inferred. Here is the MLP
# once more, for any batch size, with the weights as constants from the start (`relax.const`):

# %%
n = mlckit.tir.Var("n", "int64")
x_var = relax.Var("x", relax.TensorStructInfo((n, 784), "float32"))

bb = relax.BlockBuilder()
with bb.function("main", [x_var]):
    with bb.dataflow():
        lv0 = bb.emit_te(topi.nn.dense, x_var, relax.const(params["w0"]), relax.const(params["b0"]))
        lv1 = bb.emit_te(topi.nn.relu, lv0)
        out = bb.emit_output(
            bb.call_te(topi.nn.dense, lv1, relax.const(params["w1"]), relax.const(params["b1"]))
        )
    bb.emit_func_output(out)
MLPFromPython = bb.get()
MLPFromPython["main"].show()

# %% [markdown]
# The module holds the generated PrimFuncs next to `main` (`dense` and `dense1` differ in their
# shapes); each is ordinary TensorIR that chapter 2's schedules could transform:

# %%
print([gv.name_hint for gv in MLPFromPython.functions])
MLPFromPython["relu"].show()

# %%
bb_vm = relax.VirtualMachine(relax.build(MLPFromPython, target="llvm"), mlckit.cpu())
bb_logits = bb_vm["main"](mlckit.nd.array(images.reshape(-1, 784))).numpy()
print("same predictions as the TVMScript MLP:", np.array_equal(bb_logits.argmax(1), predictions))

# %% [markdown]
# ## Shipping the model
#
# A compiled model can leave the notebook. `export_library` writes the executable to one file:
# the generated Python of the kernels and of `main`, the weights, the target, the versions of
# mlckit, numba and Python, and a hash of each part. The file lists them:
# <!-- shown-by: shipped-file -->

# %% tags=["shows:shipped-file"]
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ship_dir = Path(tempfile.mkdtemp())
relax.build(MLPFromPython, target="llvm").export_library(ship_dir / "mlp.so")
np.save(ship_dir / "images.npy", images.reshape(-1, 784))
print(zipfile.ZipFile(ship_dir / "mlp.so").namelist())

# %% [markdown]
# `mlckit.runtime.load_module` (TVM's name) reads the file back in another process, which runs
# the model without the IRModule: no TVMScript is parsed and no pass runs, numba compiles the
# kernels' sources or takes them from its kernel cache. A notebook cannot restart its own kernel,
# so a fresh Python process stands in for the server the model is shipped to, and it gives the
# same predictions. Like a pickle, the file is code: load only files you trust.
# <!-- shown-by: shipped-run -->
# <!-- checked-by: tests/runtime/test_export_library.py::test_the_course_mlp_runs_in_another_process_without_compiling -->

# %% tags=["shows:shipped-run"]
FRESH_PROCESS = """
import sys
import numpy as np
import mlckit
from mlckit import relax

lib = mlckit.runtime.load_module(sys.argv[1])
vm = relax.VirtualMachine(lib, mlckit.cpu())
print(vm["main"](np.load(sys.argv[2])).numpy().argmax(1).tolist())
"""
args = [sys.executable, "-c", FRESH_PROCESS, ship_dir / "mlp.so", ship_dir / "images.npy"]
shipped = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
print("same predictions in a fresh process:", np.array_equal(shipped, predictions))

# %% [markdown]
# ## Summary
#
# - A model is an IRModule: PrimFuncs for the tensor computations, and a Relax function that calls
#   them and passes the tensors along.
# - `R.call_tir` hides destination passing from the graph: it allocates the output, calls the
#   PrimFunc with it, and returns it; the graph stays pure, and memory is planned in one place.
# - A dataflow block is a region of pure bindings, a computational graph the compiler may
#   rearrange; side effects go outside it.
# - Struct info gives every value a shape and dtype, possibly symbolic (`n`): errors are found
#   before running, and one build serves every batch size.
# - `relax.build` turns the module into an executable, which the virtual machine runs: allocation,
#   kernel calls, argument checks.
# - `R.call_dps_packed` calls registered extern functions, such as libraries, with the same
#   convention; they mix with TensorIR in one graph. `BindParams` turns the weights into constants.
#
# ## Exercises
#
# `check(name, answer)` tells you whether an answer is right, and if not, what differs and where to
# look. `hint(name, 1)`, `hint(name, 2)`, ... give more and more help; `solution(name)` shows a
# reference solution, once you have tried.
#
# ### Exercise 1: `call_tir` in numpy
#
# Write `lnumpy_call_tir(prim_func, inputs, shape, dtype)`, the meaning of
# `R.call_tir(prim_func, inputs, out_sinfo=R.Tensor(shape, dtype))` in numpy: it allocates the
# output, calls `prim_func` in destination-passing style and returns the output. With it,
# `lnumpy_mlp` would read line for line like `main`:
# `lv0 = lnumpy_call_tir(lnumpy_linear0, (x, w0, b0), (1, 128), "float32")`.
# <!-- background: what the exercise leads to; its check runs the answer -->


# %%
def lnumpy_call_tir(prim_func, inputs, shape, dtype):
    # your code here: allocate, call, return
    return None


check("ch3.call_tir_numpy", lnumpy_call_tir)

# %% [markdown]
# ### Exercise 2: one build for every batch size
#
# `MyModuleMixture` handles exactly one image. Turn it into `MyModuleAnyBatch`, whose `main` takes
# `x` of shape `(n, 784)` for any `n` (same weights, same extern functions), so that one
# `relax.build` runs batches of 1, 3 and 8 images. This is where the shapes of the graph and the
# buffers of a PrimFunc have to agree: the checker tells you where they do not. (A compiled kernel
# checks the shapes it is given, so a PrimFunc left at batch 1 refuses a batch of 3 at run time
# with a `VMError`; the checker finds it before anything runs.)


# %%
@I.ir_module
class MyModuleAnyBatch:
    @T.prim_func
    def linear0(
        X: T.Buffer((1, 784), "float32"),
        W: T.Buffer((128, 784), "float32"),
        B: T.Buffer((128,), "float32"),
        Z: T.Buffer((1, 128), "float32"),
    ):
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        cls = MyModuleAnyBatch
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            out = R.call_dps_packed(
                "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), "float32")
            )
            R.output(out)
        return out


check("ch3.any_batch", MyModuleAnyBatch)

# %% [markdown]
# ### Exercise 3: a CNN with BlockBuilder and `emit_te`
#
# The course's assignment model is a small convolutional network, and `cnn_params()` holds its
# trained weights. Build it with a BlockBuilder, one `bb.emit_te` per step:
#
# conv2d 3x3 (stride 1, no padding) + bias → relu → max-pool 2x2 (stride 2) → flatten (NCHW) →
# linear0 → relu → linear1 → softmax
#
# The weights are `conv2d_weight (32, 1, 3, 3)`, `conv2d_bias (32,)`, `linear0_weight (100, 5408)`,
# `linear0_bias (100,)`, `linear1_weight (10, 100)`, `linear1_bias (10,)`, the linear ones in
# (out, in) layout. `main` takes the image `x: R.Tensor((1, 1, 28, 28), "float32")` and returns
# the `(1, 10)` class probabilities. Put the weights in as constants with `relax.const`, or, if
# you prefer, as parameters of `main` after `x`, named like the keys of `cnn_params()` (the
# checker binds those with `BindParams`). The topi functions you need are `topi.nn.conv2d_nchw`,
# `topi.add`, `topi.nn.relu`, `topi.nn.max_pool2d`, `topi.nn.flatten`, `topi.nn.dense` and
# `topi.nn.softmax`; print `bb.get()` as you go to see each step's shape. The checker builds your
# module for `"llvm"`, runs it on real images and compares with a numpy CNN.

# %%
from mlckit.datasets import cnn_params

cnn_weights = cnn_params()
bb = relax.BlockBuilder()
image = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32"))
with bb.function("main", [image]):
    with bb.dataflow():
        conv = bb.emit_te(
            topi.nn.conv2d_nchw, image, relax.const(cnn_weights["conv2d_weight"]), 1, 0, 1
        )
        # your code here: bias, relu, max-pool, flatten, linear0, relu, linear1, softmax
        result = bb.emit_output(conv)
    bb.emit_func_output(result)
CNN = bb.get()

check("ch3.cnn", CNN)

# %% [markdown]
# Once your CNN passes, run it on a few images of `images` (reshaped to `(1, 1, 28, 28)`) and
# compare its accuracy with the MLP's.
