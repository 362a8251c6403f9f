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
# # 1. Introduction and tensor programs
#
# This chapter takes a small, real model (a classifier of clothing images, with trained
# weights) and follows one part of it from the numpy code it is written in down to machine
# code. On the way it introduces the objects the rest of the course works with: tensor
# programs written as loops, the destination-passing style they are called in, and TensorIR,
# the language in which mlckit represents them so that they can be transformed and compiled.
#
# ## What ML compilation is
#
# A model exists in two forms. Its **development form** is how people write and train it: a few
# lines calling a framework's high-level operators (`data @ w0.T + b0`, a ReLU, ...) plus a file
# of trained weights. Its **deployment form** is what runs in production: the code of each
# operator compiled for one kind of device, a small runtime that calls them in order, and the
# weights.
# [ML compilation](glossary.md#ml-compilation) is the process that turns the first form into the
# second. It has three goals:
#
# * **Integration and dependency minimization.** The deployment form contains only what this
#   model needs. A phone app that classifies photos should not ship a training framework and
#   its hundreds of megabytes of operators; it ships the few functions the model calls.
# * **Hardware acceleration.** Each device has its own ways of being fast (vector
#   instructions, many cores, GPU threads, special matrix units); the deployment form's code is
#   specialized to use them.
# * **General optimization.** Transformations that keep the results the same while using less
#   time or memory: reordering loops so that data stays in the cache, fusing two operators so
#   that an intermediate array is never written out, reusing memory between steps.
#
# The picture shows the model of this chapter in both forms.

# %%
import inspect
import timeit

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import SVG, display

import mlckit
from mlckit.datasets import fashion_mnist, mlp_params
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.viz.dot import render

# %% tags=["hide-input"]
forms = mlckit.viz.Digraph(
    graph_attr={"rankdir": "LR", "fontname": "Helvetica", "fontsize": "11", "nodesep": "0.3"},
    node_attr={"fontname": "Helvetica", "fontsize": "12"},
    edge_attr={"fontname": "Courier", "fontsize": "10"},
)
forms.node(
    "dev",
    "development form\\l\\ldef numpy_mlp(data, w0, b0, w1, b1):\\l"
    "    lv0 = data @ w0.T + b0\\l    lv1 = np.maximum(lv0, 0)\\l    return lv1 @ w1.T + b1\\l",
    shape="box",
    style="rounded,filled",
    fillcolor="#F2F2F2",
    fontname="Courier",
    fontsize="10",
)
with forms.subgraph(name="cluster_deploy") as deploy:
    deploy.attr(label="deployment form: compiled tensor programs", style="rounded", color="#888")
    deploy.node("data", "data", shape="plain", fontname="Courier", fontsize="10")
    for name in ("linear0", "relu0", "linear1"):
        deploy.node(name, name, shape="box", style="filled", fillcolor="#99DDFF")
    deploy.node("out", "out", shape="plain", fontname="Courier", fontsize="10")
    deploy.edge("data", "linear0", label="f32[1, 784]")
    deploy.edge("linear0", "relu0", label="f32[1, 128]")
    deploy.edge("relu0", "linear1", label="f32[1, 128]")
    deploy.edge("linear1", "out", label="f32[1, 10]")
forms.edge("dev", "data", label="ML compilation", fontname="Helvetica", fontsize="11", penwidth="2")
display(SVG(render(forms)))

# %% [markdown]
# ## Tensor programs: what ML compilation works on
#
# Look at the deployment form: the model has become a chain of three functions, `linear0`,
# `relu0` and `linear1`, each taking multi-dimensional arrays (tensors) and producing one.
# Such a step is a [primitive tensor function](glossary.md#primitive-tensor-function), and a
# program that computes with tensors is a [tensor program](glossary.md#tensor-program).
# ML compilation works on tensor programs at two levels: the graph (which primitive functions
# are called, in what order, with what memory; chapters 3 and 7) and the inside of each
# primitive function, its loops (this chapter and the next).
#
# Why not just call a library such as numpy for each step? Because a library function is a
# black box: it cannot be fused with its neighbour, specialized to this model's shapes, or
# moved to a device the library does not support. To do those things, the compiler needs each
# primitive function as a program it can read and rewrite. The rest of this chapter builds
# that program for our model, step by step.
#
# ## The model: a FashionMNIST classifier
#
# [FashionMNIST](https://github.com/zalandoresearch/fashion-mnist) is a set of 28×28 grey
# images of clothes in ten classes. Our model is a two-layer perceptron trained on it: the
# 784 pixels go through a linear layer to 128 values, a ReLU, and a second linear layer to 10
# scores, one per class. mlckit ships the trained weights (`mlp_params()`, in PyTorch's
# `nn.Linear` layout: `w0` is `(out, in)` = `(128, 784)`) and 1,900 real images, so nothing
# is downloaded.

# %%
dataset = fashion_mnist(split="sprite900", dtype="float32")
params = mlp_params()
for name, value in params.items():
    print(f"{name}: {value.shape} {value.dtype}")

index = 810  # one image of the sprite set (90 per class, in label order)
image, label = dataset.images[index], dataset.labels[index]
plt.figure(figsize=(2.2, 2.2))
plt.imshow(image, cmap="gray_r")
plt.title(f"label: {dataset.class_names[label]}", fontsize=10)
plt.axis("off")
plt.show()

# %% [markdown]
# In numpy, the whole model is three lines. This is the development form: short and clear, and
# every line calls a numpy function whose loops we never see.


# %% tags=["nbval-check-output"]
def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    lv2 = lv1 @ w1.T + b1
    return lv2


x = image.reshape(1, 784)
w0, b0, w1, b1 = params["w0"], params["b0"], params["w1"], params["b1"]
scores = numpy_mlp(x, w0, b0, w1, b1)
print("numpy MLP predicts:", dataset.class_names[scores.argmax(axis=1)[0]])

# %% [markdown]
# ## Low-level numpy: the loops made visible
#
# To see what a compiler sees, we write the same model again in **low-level numpy**: numpy
# arrays for storage only, and every computation as explicit loops over scalars. Two more
# rules make the code look like what a compiler produces:
#
# * every array is **allocated explicitly**, with `np.empty`, at a place we choose;
# * each function writes its result into an output array that is passed to it, and returns
#   nothing. This is [destination-passing style](glossary.md#destination-passing-style):
#   `lnumpy_linear0(X, W, B, Z)` instead of `Z = linear0(X, W, B)`.
#
# `lnumpy_linear0` is the first layer: a loop nest over `i, j, k` that sums products into a
# temporary `Y` (set to 0 when `k == 0`, the start of each sum), then a second loop nest that
# adds the bias. Note `W[j, k]`: the weights are stored `(out, in)`.


# %%
def lnumpy_linear0(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
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


def lnumpy_relu0(X: np.ndarray, Y: np.ndarray):
    for i in range(1):
        for j in range(128):
            Y[i, j] = np.maximum(X[i, j], 0)


def lnumpy_linear1(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
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


def lnumpy_mlp(data, w0, b0, w1, b1):
    lv0 = np.empty((1, 128), dtype="float32")
    lnumpy_linear0(data, w0, b0, lv0)
    lv1 = np.empty((1, 128), dtype="float32")
    lnumpy_relu0(lv0, lv1)
    out = np.empty((1, 10), dtype="float32")
    lnumpy_linear1(lv1, w1, b1, out)
    return out


# %% [markdown]
# Same model, so the same scores, up to the rounding of float32 sums taken in another order:

# %% tags=["nbval-check-output"]
lnumpy_scores = lnumpy_mlp(x, w0, b0, w1, b1)
print("matches numpy:", np.allclose(lnumpy_scores, scores, rtol=1e-5, atol=1e-5))
print("low-level numpy predicts:", dataset.class_names[lnumpy_scores.argmax(axis=1)[0]])

# %% [markdown]
# Why destination passing? Look at `lnumpy_mlp`: every array the model uses is allocated in
# one place, by the caller, and the primitive functions only compute. Whoever calls them sees
# all the memory of the model and can plan it: allocate `lv0` once and reuse it for every
# image, give `out` the memory of `lv0` once `lv0` is no longer needed, or place the arrays on
# a GPU. The functions themselves stay pure loop nests over arrays they are given, which is
# the shape of code a compiler can analyse. (`Y` inside `lnumpy_linear0` is an internal
# temporary: a detail of that function, which a compiler may well remove.)
#
# ## The same program in TensorIR
#
# Low-level numpy is readable, but for a compiler it is only text: nothing in it says which
# loops may be reordered or which array holds the result. mlckit represents each primitive
# tensor function in [TensorIR](glossary.md#tensorir), written in TVMScript (Python syntax,
# parsed by mlckit) as a [PrimFunc](glossary.md#primfunc). Here are the three functions of
# the model, collected in an [IRModule](glossary.md#irmodule), the container that compilers
# pass around:


# %%
@I.ir_module
class MyModule:
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
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

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


# %% [markdown]
# Put `linear0` beside `lnumpy_linear0` and every line has its counterpart:
#
# | low-level numpy | TensorIR | what it says |
# |---|---|---|
# | `X: np.ndarray` | `X: T.Buffer((1, 784), "float32")` | a [buffer](glossary.md#buffer): an array whose shape and dtype are part of the program |
# | `Y = np.empty((1, 128), ...)` | `Y = T.alloc_buffer((1, 128), "float32")` | an intermediate array, allocated by the function |
# | three nested `for` loops | `for i, j, k in T.grid(1, 128, 784):` | the [loop nest](glossary.md#loop-nest) |
# | the loop body | `with T.block("Y"):` | a [block](glossary.md#block): the computation of one iteration, with a name |
# | (nothing) | `vi, vj, vk = T.axis.remap("SSR", [i, j, k])` | the [block iterators](glossary.md#block-iterator) and their kinds |
# | `if k == 0: Y[i, j] = 0` | `with T.init(): Y[vi, vj] = T.float32(0)` | where the sum starts |
# | `Z` among the parameters | `Z` among the parameters | destination-passing style |
#
# The one line without a counterpart is the most important. `T.axis.remap("SSR", [i, j, k])`
# declares that `vi` and `vj` are [spatial axes](glossary.md#spatial-and-reduction-axes)
# (each value writes a different element of `Y`, so those iterations are independent) and `vk`
# a reduction axis (its iterations accumulate into the same `Y[vi, vj]`). The block's init runs
# when the reduction axes are at their first value: that is the `if k == 0`. With this
# information a transformation can check that it is legal, for example that a loop it wants to
# run in parallel is not a reduction. Chapter 2 goes deep into blocks and their
# transformations; for now, here is `linear0` drawn as a tree: its buffers, then its two
# loop nests, each ending in its block:

# %%
mlckit.viz.graph(MyModule["linear0"])

# %% [markdown]
# Every TensorIR program prints itself as TVMScript (here `relu0`, as mlckit holds it after
# parsing), so any program, whether you wrote it or a transformation produced it, can be read
# the same way: <!-- shown-by: script -->

# %% tags=["shows:script"]
MyModule["relu0"].show()

# %% [markdown]
# ## Building: from TensorIR to code that runs
#
# `mlckit.build(mod, target=...)` compiles every PrimFunc of a module. It first *lowers* each
# PrimFunc to Python loops over numpy arrays; the target then decides how those loops run:
#
# * `target="python"`: CPython interprets the generated code: slow, but easy to step through;
# * `target="llvm"`: numba compiles the same code to machine code through LLVM.
#
# The result is a runtime module: `lib["linear0"]` is a function called in destination-passing
# style with [NDArrays](glossary.md#ndarray) (`mlckit.nd.array` copies a numpy array into one,
# `mlckit.nd.empty` allocates one). `run_mlp` below is `lnumpy_mlp` again, with the compiled
# functions in place of the hand-written ones.

# %%
lib_py = mlckit.build(MyModule, target="python")
dev = mlckit.cpu()


def run_mlp(lib, data, w0, b0, w1, b1):
    data, w0, b0, w1, b1 = (mlckit.nd.array(a, dev) for a in (data, w0, b0, w1, b1))
    lv0 = mlckit.nd.empty((1, 128), "float32", dev)
    lib["linear0"](data, w0, b0, lv0)
    lv1 = mlckit.nd.empty((1, 128), "float32", dev)
    lib["relu0"](lv0, lv1)
    out = mlckit.nd.empty((1, 10), "float32", dev)
    lib["linear1"](lv1, w1, b1, out)
    return out.numpy()


# %% tags=["nbval-check-output"]
py_scores = run_mlp(lib_py, x, w0, b0, w1, b1)
print(lib_py)
print("matches numpy:", np.allclose(py_scores, scores, rtol=1e-5, atol=1e-5))
print('TensorIR, target="python", predicts:', dataset.class_names[py_scores.argmax(axis=1)[0]])

# %% [markdown]
# ### The generated code, beside the hand-written loops
#
# `lib.source(name)` returns the code the build generated for a function. Here is `linear0`:

# %% tags=["nbval-check-output"]
print(lib_py.source("linear0"))

# %% [markdown]
# It is our `lnumpy_linear0`, with one addition at the top: it checks the shape of every
# argument against the PrimFunc's buffers and raises a `VMError` for a wrong one, where our
# hand-written function would compute with whatever it was given. The rest differs in
# spelling only: the generated code writes constants as `np.float32(0.0)`, names the
# function after the PrimFunc, and marks where each block's body starts with a comment
# (`# block Y`); the block's init became the `if k == 0:` we wrote by hand. The diff below
# shows both. (The cell after it passes an image of the wrong size: `lib_py["linear0"]`
# checks its arguments before it calls that code, and says which one is wrong.)
# <!-- shown-by: generated-vs-hand-written --> <!-- shown-by: shape-check -->

# %% tags=["shows:generated-vs-hand-written"]
generated = lib_py.source("linear0")
mlckit.viz.diff(
    inspect.getsource(lnumpy_linear0),
    generated[generated.index("def ") :],
    side_by_side=True,
    context=30,
    names=("hand-written low-level numpy", 'generated by mlckit.build(target="python")'),
)

# %% tags=["shows:shape-check", "nbval-check-output"]
small_image = np.zeros((1, 100), dtype="float32")  # 100 pixels instead of 784
try:
    lib_py["linear0"](*(mlckit.nd.array(a) for a in (small_image, w0, b0, np.empty_like(b0[None]))))
except mlckit.VMError as err:
    print("VMError:", err)

# %% [markdown]
# The two columns play different roles. The left one is an *explanation* that we wrote: it
# is how we think the PrimFunc behaves, and like any explanation written by hand it could be
# wrong (an index swapped, a bound off by one) or become stale when the PrimFunc changes. The
# right one is not an explanation of the program: it *is* the program that runs.
# `lib_py["linear0"]` is this very text, executed by CPython; with `target="llvm"` numba
# compiles the same text. Whatever the PrimFunc means, that text shows it, because nothing
# else runs. So when a transformation rewrites a PrimFunc (chapter 2 does this all the time),
# printing the generated code shows exactly what the new program does, with no chance of the
# picture in our head and the code disagreeing.
#
# For `target="llvm"`, the generated code differs only in how it starts: numba is imported,
# and `@njit` with the argument types (float32 arrays, C-contiguous) makes numba compile the
# function to machine code when the module is built.

# %% tags=["nbval-check-output"]
lib_llvm = mlckit.build(MyModule, target="llvm")
print(mlckit.viz.diff(lib_py.source("linear0"), lib_llvm.source("linear0"), context=1).text)

# %% tags=["nbval-check-output"]
llvm_scores = run_mlp(lib_llvm, x, w0, b0, w1, b1)
print("matches numpy:", np.allclose(llvm_scores, scores, rtol=1e-5, atol=1e-5))
print('TensorIR, target="llvm", predicts:', dataset.class_names[llvm_scores.argmax(axis=1)[0]])

# %% [markdown]
# ## How fast is each form?
#
# Four implementations of the first layer, `linear0`, on one image: the hand-written
# low-level numpy, the generated code run by CPython (`target="python"`), the same code
# compiled by numba (`target="llvm"`), and numpy's `x @ w0.T + b0`. Compiled functions have a
# `time_evaluator` (as in TVM) that calls them `number` times per measurement, `repeat` times;
# the plain Python ones are timed with `timeit`. We keep the best of a few measurements: the
# one least disturbed by other programs on the machine. The CPython ones are slow, so they run
# only a few times. Our loops, compiled or not, run on one thread.


# %% tags=["shows:timings"]
def best_seconds(func, *args, number, repeat=5):
    return min(timeit.repeat(lambda: func(*args), number=number, repeat=repeat)) / number


nd_args = [mlckit.nd.array(a, dev) for a in (x, w0, b0)]
nd_args.append(mlckit.nd.empty((1, 128), "float32", dev))
z = np.empty((1, 128), dtype="float32")
py_timer = lib_py.time_evaluator("linear0", dev, number=1, repeat=5)
llvm_timer = lib_llvm.time_evaluator("linear0", dev, number=100, repeat=5)
times = {
    "low-level numpy\n(hand-written,\nCPython)": best_seconds(
        lnumpy_linear0, x, w0, b0, z, number=1
    ),
    'target="python"\n(generated,\nCPython)': py_timer(*nd_args).min,
    'target="llvm"\n(generated,\nnumba)': llvm_timer(*nd_args).min,
    "numpy\nx @ w0.T + b0\n(BLAS)": best_seconds(lambda: x @ w0.T + b0, number=1000),
}


def readable(seconds):
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


fig, ax = plt.subplots(figsize=(7, 3.2))
bars = ax.bar(list(times), list(times.values()), color=["#BBBBBB", "#EE8866", "#99DDFF", "#44BB99"])
ax.set_yscale("log")
ax.set_ylabel("seconds per call (log scale)")
ax.set_title("linear0 on one image: 1 × 784 × 128 multiply-adds")
ax.bar_label(bars, labels=[readable(t) for t in times.values()], fontsize=9)
ax.set_ylim(1e-6, max(times.values()) * 10)
plt.tight_layout()
plt.show()

# %% [markdown]
# The first two bars are the same code run by the same interpreter, so they take about the
# same time. <!-- shown-by: timings --> The gap to the third is the price of interpretation: for each of the 100,352
# multiply-adds, CPython fetches `X[i, k]` and `W[j, k]` as new Python objects, dispatches `*`
# and `+` at run time and stores the result back, while numba turns the same line into a few
# machine instructions on registers, two to three orders of magnitude faster. numpy is faster
# still, because its matrix product calls a BLAS library whose loops are arranged for the
# cache and use vector instructions that process several floats at once, whereas our loop
# nest adds one product at a time, in the order we wrote. The remaining gap is not in the
# arithmetic (it is the same) but in the shape of the loop nest, which is exactly what
# transformations of TensorIR change, and what chapter 2 starts to work on.
#
# ## Summary
#
# * ML compilation turns a model's development form into a deployment form: integrated with
#   few dependencies, accelerated on the target hardware, and optimized.
# * It works on tensor programs: a model is a graph of primitive tensor functions, and each of
#   them is a loop nest over arrays.
# * Low-level numpy writes those loop nests by hand, with explicit allocation and
#   destination passing, so that the caller sees and plans all the memory.
# * TensorIR is the same program in a form a compiler can check and transform: buffers, loop
#   nests and blocks whose iterators say which axes are spatial and which are reductions.
# * `mlckit.build` lowers PrimFuncs to Python loops; `lib.source(name)` shows that code, which
#   is the very program that runs, interpreted (`"python"`) or compiled by numba (`"llvm"`).
#
# ## Exercises
#
# Each exercise is checked by `check(name, answer)`, which runs your answer on random inputs
# and says what differs; `hint(name, 1)` (then 2, 3) gives graded hints, and
# `solution(name)` (`from mlckit.exercises import solution`) shows a solution once you have
# tried. The cells below run as they are and show "✗ not yet": edit them until the check
# passes.

# %%
from mlckit.exercises import check, hint

# %% [markdown]
# ### Exercise 1: a layer in destination-passing style (`ch1.lnumpy_linear_relu`)
#
# Writing a layer in low-level numpy is how you learn what a compiler has to generate. Write
# `lnumpy_linear_relu(X, W, B, Z)`, the first layer of the MLP together with its ReLU:
# `Z[i, j] = max(sum_k X[i, k] * W[j, k] + B[j], 0)`, with explicit loops, any temporary
# allocated with `np.empty`, the result written into the destination `Z`, and nothing
# returned. Read the sizes from the arrays: the check uses other sizes than the MLP's, and
# passes a `Z` that holds garbage.


# %%
def lnumpy_linear_relu(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
    # read the sizes from X.shape and W.shape, then compute Z[i, j] element by element
    pass


check("ch1.lnumpy_linear_relu", lnumpy_linear_relu)

# %% [markdown]
# Stuck? The first hint is gentle; later ones say more:

# %%
hint("ch1.lnumpy_linear_relu", 1)

# %% [markdown]
# ### Exercise 2: a PrimFunc with a broadcast (`ch1.bias_relu`)
#
# The second half of every layer of the MLP adds a bias that is the same for every row, then
# applies the ReLU. Write it as a PrimFunc: `C[i, j] = max(A[i, j] + B[j], 0)` for `A` and `C`
# of shape `(4, 16)` and `B` of shape `(16,)`, with one block whose axes have the right kinds.
# The starting program below only copies `A`.


# %%
@T.prim_func
def bias_relu(
    A: T.Buffer((4, 16), "float32"),
    B: T.Buffer((16,), "float32"),
    C: T.Buffer((4, 16), "float32"),
):
    for i, j in T.grid(4, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj]


check("ch1.bias_relu", bias_relu)

# %% [markdown]
# ### Exercise 3: read the generated code (`ch1.row_sum`)
#
# This PrimFunc should compute the sum of each row, `B[i] = sum_k A[i, k]`, as the low-level
# numpy `lnumpy_row_sum` does, but its numbers are wrong. Print the code mlckit generates for
# it, compare it with `lnumpy_row_sum`, and fix the PrimFunc until its generated code does
# what `lnumpy_row_sum` does. (The check shows the two generated programs side by side.)


# %%
def lnumpy_row_sum(A: np.ndarray, B: np.ndarray):
    for i in range(8):
        for k in range(16):
            if k == 0:
                B[i] = 0
            B[i] = B[i] + A[i, k]


@T.prim_func
def row_sum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            B[vi] = B[vi] + A[vi, vk]


print(mlckit.build(row_sum, target="python").source())

# %%
check("ch1.row_sum", row_sum)
