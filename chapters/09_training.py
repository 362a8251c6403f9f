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
# # 9. Training
#
# Every model of the earlier chapters came with its weights: the FashionMNIST MLP of chapters
# 3 and 7 was trained elsewhere, and the course only compiled its inference.
# Training needs one more thing from the compiler: the *gradient* of a loss with respect to
# every weight, so that an optimizer can move the weights downhill. A framework computes it
# by recording the operations as they run and replaying them backwards. An ML compiler has
# the whole program in hand, so it can work ahead of time: it *transforms* the function that
# computes the loss into a function that also computes the gradients, before anything runs.
# That new function is a Relax function like any other, so it is printed, drawn, fused,
# scheduled and compiled by everything the earlier chapters built.
#
# This is [automatic differentiation](glossary.md#automatic-differentiation), and this
# chapter builds it up in five steps:
#
# 1. the gradients of a tiny graph by hand, with the chain rule written out in numpy;
# 2. [forward mode](glossary.md#forward-mode): carry a *tangent* along with every value;
# 3. [reverse mode](glossary.md#reverse-mode): `relax.transform.Gradient` writes the
#    backward program, checked against central differences;
# 4. the backward program fused, scheduled and compiled like a forward one;
# 5. training the course's MLP on the FashionMNIST images that mlckit ships, with a loss, an
#    [optimizer](glossary.md#optimizer) and a trainer from `relax.training`, every step through
#    kernels mlckit compiled.

# %%
import time

import matplotlib.pyplot as plt
import numba
import numpy as np
import torch

import mlckit
from mlckit import relax, viz
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.ir import IRModule
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.testing import check_numerical_grads

rng = np.random.default_rng(0)

# %% [markdown]
# ## Gradients by hand
#
# Our first graph is one layer of a network and a sum: `x @ w + b`, a `tanh`, then the sum of
# everything, a single number. It is small enough to differentiate by hand, and it has what
# makes a real model's gradient interesting: a matrix product, a bias broadcast over the rows,
# and a nonlinearity.


# %%
@I.ir_module
class TinyModule:
    @R.function
    def main(
        x: R.Tensor((4, 3), "float32"),
        w: R.Tensor((3, 2), "float32"),
        b: R.Tensor((2,), "float32"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            lv2 = R.tanh(lv1)
            gv = R.sum(lv2)
            R.output(gv)
        return gv


x_np = rng.uniform(-1, 1, (4, 3)).astype("float32")
w_np = rng.uniform(-1, 1, (3, 2)).astype("float32")
b_np = rng.uniform(-1, 1, (2,)).astype("float32")

# %% [markdown]
# The gradient of `gv` with respect to `w` is a tensor of the shape of `w` whose element
# `[i, j]` says how fast `gv` changes when `w[i, j]` alone moves. The chain rule computes it
# one binding at a time, *backwards*. For each value `v` of the program we want its
# **[adjoint](glossary.md#adjoint)**, written `v_adjoint`: the derivative of the final
# result `gv` with respect to `v`, a tensor of `v`'s own shape. The adjoint of `gv` itself is
# 1. Then each binding `y = op(a, b)` passes `y_adjoint` on to its arguments, each through the
# op's own derivative:
#
# * `gv = sum(lv2)`: every element of `lv2` counts once in the sum, so `lv2_adjoint` is a
#   tensor of ones (`gv_adjoint` broadcast to `lv2`'s shape);
# * `lv2 = tanh(lv1)`: elementwise, with `tanh'(u) = 1 - tanh(u)²`, so
#   `lv1_adjoint = lv2_adjoint * (1 - lv2 * lv2)`, reusing the forward result `lv2`;
# * `lv1 = lv0 + b`: an addition passes the adjoint unchanged to both sides. But `b` has
#   shape `(2,)` and was *broadcast* over the 4 rows: each element of `b` was used four times,
#   so its adjoint is the sum of the four rows of `lv1_adjoint`;
# * `lv0 = x @ w`: `lv0[i, j]` is the sum of `x[i, k] * w[k, j]` over `k`, so
#   `x_adjoint = lv0_adjoint @ w.T` and `w_adjoint = x.T @ lv0_adjoint` (each shaped like
#   the matrix it belongs to, which is an easy way to remember where the transposes go).
#
# In numpy, the forward pass first, keeping every intermediate, then the backward pass:

# %% tags=["nbval-check-output"]
# forward
lv0 = x_np @ w_np
lv1 = lv0 + b_np
lv2 = np.tanh(lv1)
gv = lv2.sum()
# backward: from the result's adjoint, 1, to the parameters'
gv_adjoint = np.float32(1)
lv2_adjoint = np.broadcast_to(gv_adjoint, lv2.shape)
lv1_adjoint = lv2_adjoint * (1 - lv2 * lv2)
lv0_adjoint = lv1_adjoint
b_adjoint = lv1_adjoint.sum(axis=0)
x_adjoint = lv0_adjoint @ w_np.T
w_adjoint = x_np.T @ lv0_adjoint
by_hand = {"x": x_adjoint, "w": w_adjoint, "b": b_adjoint}
print(f"gv = {gv:.4f}")
print("w_adjoint =\n", w_adjoint.round(4))

# %% [markdown]
# Two things are worth noticing before any theory. The backward pass *reads the forward
# pass's intermediates* (`lv2` here; a ReLU would read its input): a training step has to keep
# them until the backward pass is done, which is where much of a training step's memory
# goes. And every backward line is about as costly as the forward line it comes from (a
# matmul gives two matmuls): the gradient with respect to *all* the parameters costs a small
# multiple of one forward pass, however many parameters there are.
#
# Is it right? The derivative is a limit, `(f(w + h) - f(w - h)) / 2h` for small `h`, which
# we can evaluate. For one element of `w`:
# <!-- shown-by: one-difference -->


# %% tags=["shows:one-difference"]
def tiny_forward(x, w, b):
    return np.tanh(x @ w + b).sum(dtype="float64")


h = 1e-3
w_plus, w_minus = w_np.astype("float64"), w_np.astype("float64")
w_plus[1, 0] += h
w_minus[1, 0] -= h
central = (tiny_forward(x_np, w_plus, b_np) - tiny_forward(x_np, w_minus, b_np)) / (2 * h)
print(f"central difference: {central:.5f}, by hand: {w_adjoint[1, 0]:.5f}")
assert abs(central - w_adjoint[1, 0]) < 1e-4

# %% [markdown]
# ## Forward mode: a tangent for every value
#
# The chain rule can also run *forwards*. Choose a direction in which to move the inputs, a
# tangent `x_dot`, `w_dot`, `b_dot` of the inputs' shapes, and ask how fast every value of the
# program changes when the inputs move that way. Each value `v` then travels as a pair
# `(v, v_dot)`, a *dual value*, and each instruction maps the pairs of its arguments to the
# pair of its result:
#
# | instruction | value | tangent |
# |---|---|---|
# | `matmul(a, b)` | `a @ b` | `a_dot @ b + a @ b_dot` (the product rule) |
# | `add(a, b)` | `a + b` | `a_dot + b_dot` (broadcast like the values) |
# | `tanh(a)` | `t = tanh(a)` | `(1 - t²) * a_dot` |
# | `sum(a)` | `sum(a)` | `sum(a_dot)` |
#
# Nothing has to be remembered or replayed: the tangent is computed in the same sweep as the
# value, instruction by instruction. That is forward mode: both values are carried over all
# instructions. In plain Python it is a table of rules and a loop over the bindings of
# `TinyModule["main"]`, which gives each op's name and its arguments:

# %%
TANGENT_RULES = {
    "relax.matmul": lambda a, b: (a[0] @ b[0], a[1] @ b[0] + a[0] @ b[1]),
    "relax.add": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "relax.tanh": lambda a: (np.tanh(a[0]), (1 - np.tanh(a[0]) ** 2) * a[1]),
    "relax.sum": lambda a: (a[0].sum(), a[1].sum()),
}


def run_with_tangents(func: relax.Function, duals: dict) -> tuple:
    """Run ``func``'s dataflow block on (value, tangent) pairs, one binding at a time."""
    env = {param: duals[param.name_hint] for param in func.params}
    for binding in func.body.blocks[0].bindings:
        rule = TANGENT_RULES[binding.value.op.name]
        env[binding.var] = rule(*(env[arg] for arg in binding.value.args))
        tangent_shape = env[binding.var][1].shape
        print(f"{binding.var.name_hint:>3} = {binding.value.op.name:<13} tangent {tangent_shape}")
    return env[func.body.body]


direction = {
    name: rng.uniform(-1, 1, value.shape).astype("float32") for name, value in by_hand.items()
}
value, tangent = run_with_tangents(
    TinyModule["main"],
    {"x": (x_np, direction["x"]), "w": (w_np, direction["w"]), "b": (b_np, direction["b"])},
)
print(f"gv = {value:.4f}, its tangent along the direction: {tangent:.4f}")

# %% [markdown]
# One forward sweep gives the derivative of `gv` along *one* direction: the
# [Jacobian-vector product](glossary.md#jacobian-vector-product-jvp) (JVP), here the number
# `sum(x_adjoint * x_dot) + sum(w_adjoint * w_dot) + sum(b_adjoint * b_dot)`, the adjoints
# dotted with the direction. The backward pass of the previous section gave all 12 + 6 + 2
# adjoints at once; forward mode would need 20 sweeps, one per input element (a direction
# with a single 1), to find them all. That is why training, which wants the derivative of one
# number with respect to millions of weights, uses reverse mode. Forward mode wins in the
# opposite case, few inputs and many outputs, and it needs no memory for intermediates. The
# two must agree:
# <!-- shown-by: jvp-equals-adjoints -->

# %% tags=["nbval-check-output", "shows:jvp-equals-adjoints"]
dotted = sum(float((by_hand[name] * direction[name]).sum()) for name in by_hand)
print(f"JVP by forward mode: {tangent:.5f}; adjoints dotted with the direction: {dotted:.5f}")
assert abs(tangent - dotted) < 1e-4

# %% [markdown]
# ### Forward mode as a pass: `relax.transform.ForwardGradient`
#
# Our loop interpreted the program with tangents. A compiler writes the tangents into the
# program instead: `relax.transform.ForwardGradient("main")` is a [pass](glossary.md#pass)
# that adds `main_jvp` to the module, a function of `main`'s parameters and of one tangent
# per parameter (`x_tangent`, `w_tangent`, `b_tangent`), returning `main`'s result and its
# tangent. Each binding is copied, and right after it come the bindings of its op's tangent
# rule, the rules of our table written as Relax:

# %% tags=["nbval-check-output", "shows:jvp-bindings"]
JvpModule = relax.transform.ForwardGradient("main")(TinyModule)
jvp_script = JvpModule["main_jvp"].script()
print(jvp_script)
for name in ("lv0", "lv1", "lv2", "gv"):
    assert f"{name}_tangent: R.Tensor" in jvp_script

# %% [markdown]
# Each value `v` now has its `v_tangent` bound right after it, and the rules' intermediate
# steps are named after the tangent they lead to (`_part`): the matmul's product rule is two
# matmuls and an add, the addition adds the tangents (broadcasting `b_tangent` as `b` is),
# `tanh`'s rule computes `1 - lv2 * lv2` from the value it has just computed, and the sum
# sums the tangent. <!-- shown-by: jvp-bindings -->
#
# Value and tangent travel side by side, and no value is kept for later. Compiled and run on
# our direction, it gives the tangent our loop computed:
# <!-- shown-by: jvp-compiled -->

# %% tags=["nbval-check-output", "shows:jvp-compiled"]
jvp_vm = relax.VirtualMachine(
    mlckit.build(relax.transform.LegalizeOps()(JvpModule), target="llvm"), mlckit.cpu()
)
jvp_value, jvp_tangent = jvp_vm["main_jvp"](
    x_np, w_np, b_np, direction["x"], direction["w"], direction["b"]
)
print(f"main_jvp: gv = {jvp_value.numpy():.4f}, tangent {jvp_tangent.numpy():.5f}")
assert abs(float(jvp_tangent.numpy()) - tangent) < 1e-4

# %% [markdown]
# ## Reverse mode: `relax.transform.Gradient`
#
# The backward pass we wrote by hand is a program too, and a compiler can write it from the
# forward one: walk the bindings backwards, and for each op emit its *gradient rule*, the
# bindings that turn the result's adjoint into the arguments' adjoints. mlckit's rules live
# beside the ops (`mlckit/relax/op/_op_gradient.py`, as TVM's do), one per op: the same rules
# we applied by hand, written as Relax. `relax.transform.Gradient("main")` is a
# [pass](glossary.md#pass) that adds `main_adjoint` to the module: it takes `main`'s
# parameters and returns `main`'s result together with the tuple of gradients (of every
# parameter, unless `require_grads` names some).

# %% tags=["nbval-check-output", "shows:adjoint-bindings"]
AdjointModule = relax.transform.Gradient("main")(TinyModule)
adjoint_script = AdjointModule["main_adjoint"].script()
print(adjoint_script)
for named in ("lv: R.Tensor", "lv3: R.Tensor", "R.collapse_sum_to(lv1_adjoint, R.shape([2]))"):
    assert named in adjoint_script  # the text below reads these bindings

# %% [markdown]
# Read it against our numpy. The forward bindings come first, copied. Then, backwards,
# `gv_adjoint` is 1, `lv2_adjoint` is it broadcast to `lv2`'s shape, and `tanh`'s rule
# computes `1 - lv2 * lv2` (two bindings, `lv` and `lv3`) and multiplies: `lv1_adjoint`. The
# addition passes it on to `lv0_adjoint` unchanged, and to `b` through
# `R.collapse_sum_to(lv1_adjoint, R.shape([2]))`: the sum over the rows that undoes the
# broadcast. The matmul's rule transposes `w` and `x` (`R.permute_dims`) and multiplies, one
# product per argument. The adjoints of the parameters are bound to `x_adjoint_out`,
# `w_adjoint_out`, `b_adjoint_out` and returned with `gv`. The names follow TVM's: the
# adjoint of `v` is `v_adjoint`. <!-- shown-by: adjoint-bindings -->
#
# The picture draws an adjoint function in its two parts: the forward bindings (blue), which
# compute the result, and the backward ones (pink), which compute the gradients. The dashed
# arrows are the forward values that the backward part reads: here `lv2`, which `tanh`'s rule
# needs. They are what a training step must keep from the forward pass. (The matmul's rule
# reads `x` and `w` too, but those are parameters, kept anyway.)

# %%
viz.graph(AdjointModule["main_adjoint"], legend=True)

# %% [markdown]
# Built and run, the gradients are those of our numpy. The module is compiled like any other
# (`mlckit.build` legalizes nothing: we lower the operators with `LegalizeOps` first, and the
# default schedule applies to every kernel):
# <!-- shown-by: adjoint-equals-by-hand -->

# %% tags=["nbval-check-output", "shows:adjoint-equals-by-hand"]
tiny_vm = relax.VirtualMachine(
    mlckit.build(relax.transform.LegalizeOps()(AdjointModule), target="llvm"), mlckit.cpu()
)
result, grads = tiny_vm["main_adjoint"](x_np, w_np, b_np)
for name, grad in zip(by_hand, grads):
    np.testing.assert_allclose(grad.numpy(), by_hand[name], rtol=1e-5, atol=1e-6)
    print(f"{name}_adjoint {grad.shape}: equal to the one by hand")

# %% [markdown]
# ## Checking gradients against central differences
#
# A gradient rule can be wrong in ways no type checker sees: a missing transpose on a square
# matrix, a sign, a forgotten broadcast. The test that catches them all is the one we did by
# hand for `w[1, 0]`, done for every element: perturb each input element by `±delta`, run the
# forward function twice, and compare the slope with the gradient.
# `mlckit.testing.check_numerical_grads(f, inputs, grads)` does that (it is TVM's
# `tvm.testing.check_numerical_grads`): it passes silently, or raises an error naming the
# input and its worst element. Here it checks the compiled `main_adjoint` against the
# compiled `main`:
# <!-- shown-by: numerical-check -->


# %% tags=["nbval-check-output", "shows:numerical-check"]
def run_main(x, w, b):
    return tiny_vm["main"](x, w, b).numpy()


check_numerical_grads(run_main, [x_np, w_np, b_np], [g.numpy() for g in grads])
print("main_adjoint's gradients equal central differences")

# %% [markdown]
# And here it catches a classic mistake: the derivative of `tanh` forgotten, as if the layer
# were linear. Every element of every gradient is off, and the check names the first input
# whose gradient is wrong, and where it is worst:
# <!-- shown-by: numerical-check-fails -->

# %% tags=["shows:numerical-check-fails"]
wrong = [lv2_adjoint @ w_np.T, x_np.T @ lv2_adjoint, lv2_adjoint.sum(axis=0)]
try:
    check_numerical_grads(run_main, [x_np, w_np, b_np], wrong)
except AssertionError as err:
    print(err)

# %% [markdown]
# ## Fusing and scheduling the backward kernels
#
# The adjoint function is an ordinary Relax function, so the pipeline of chapter 7 applies
# to it unchanged: `LegalizeOps` lowers every op (the backward ones included) to a PrimFunc,
# `FuseOps` groups them by their pattern kinds, `FuseTIR` makes each group one kernel, and
# `mlckit.build` schedules every kernel with the default CPU schedule and compiles it.
#
# Let us do it for a real loss: the course's MLP, `784 → 128 → 10` with a ReLU, followed by
# `log_softmax` and the negative log-likelihood of the true labels (`nll_loss`, averaged over
# a batch of 50 images): the cross-entropy loss a classifier is trained with. We ask for the
# gradients of the four weights only (`require_grads`): the images and labels are data.


# %%
@I.ir_module
class MLPLoss:
    @R.function
    def main(
        x: R.Tensor((50, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
        label: R.Tensor((50,), "int64"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, R.permute_dims(w0))
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, R.permute_dims(w1))
            lv4 = R.add(lv3, b1)
            lv5 = R.nn.log_softmax(lv4)
            gv = R.nn.nll_loss(lv5, label)
            R.output(gv)
        return gv


weights = list(MLPLoss["main"].params[1:5])
MLPAdjoint = relax.transform.Gradient("main", require_grads=weights)(MLPLoss)
pipeline = mlckit.ir.transform.Sequential(
    [
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
)
MLPAdjointFused = pipeline(MLPAdjoint)

# %% [markdown]
# Which kernels does `main_adjoint` call now? The helper below lists them in order, with the
# ops each one fused, and marks where the backward part starts (at `gv`, the loss):
# <!-- shown-by: backward-kernels -->


# %% tags=["nbval-check-output", "shows:backward-kernels"]
def kernels_of(mod: IRModule, name: str) -> list[str]:
    """Print each call_tir of ``mod[name]``, the variable it binds and the kernel it calls,
    with the forward and backward parts marked; return the kernels' names."""
    kernels = []
    print("forward")
    for binding in mod[name].body.blocks[0].bindings:
        value = binding.value
        if not (isinstance(value, relax.Call) and value.op == mlckit.ir.Op.get("relax.call_tir")):
            continue
        kernels.append(value.args[0].name_hint)
        print(f"  {binding.var.name_hint:<12} <- {kernels[-1]}")
        if binding.var.name_hint == "gv":
            print("backward")
    return kernels


adjoint_kernels = kernels_of(MLPAdjointFused, "main_adjoint")
# the kernels the text below names
assert {"fused_matmul_add", "relu", "greater_equal"} <= set(adjoint_kernels)
assert {"fused_exp_multiply1_subtract", "fused_matmul2_where2"} <= set(adjoint_kernels)

# %% [markdown]
# The forward part fused as in chapter 7, `matmul` with its bias (`fused_matmul_add`), but
# one thing is new: the `relu` stayed a kernel of its own. Its input `lv1` is needed by the
# backward pass (ReLU's rule passes the adjoint where `lv1 >= 0`: the kernel
# `greater_equal`), so `lv1` must be stored, and a group may not hide a value that another
# kernel reads. The backward part fused where its ops are elementwise: the softmax's rule
# (`fused_exp_multiply1_subtract`), the ReLU's mask with the matmul that produces the
# adjoint it masks (`fused_matmul2_where2`), and the many small steps of `nll_loss`'s rule,
# which counts the labels and spreads `-1/50` onto each image's true class.
# <!-- shown-by: backward-kernels -->
#
# How long does one gradient computation take, and how does it compare with the forward pass
# alone, and with PyTorch's autograd on the same batch? We build the adjoint twice, with
# `LegalizeOps` only (one kernel per op) and through the pipeline above, and time the four
# versions in turn, 30 rounds, keeping each one's fastest call: other programs on the machine
# slow some calls down, never speed one up, and the rounds make a busy spell fall on all four
# alike.
# <!-- shown-by: gradient-timing -->

# %% tags=["shows:gradient-timing"]
images, labels, class_names = mlckit.datasets.fashion_mnist("all", dtype="float32")
batch_x = images[:50].reshape(50, 784)
batch_label = labels[:50].astype("int64")
shapes = [tuple(int(d) for d in p.struct_info.shape.values) for p in weights]
init = [rng.normal(0, 0.05, shape).astype("float32") for shape in shapes]
mlp_args = [mlckit.nd.array(a) for a in [batch_x, *init, batch_label]]


def compiled(mod: IRModule) -> relax.VirtualMachine:
    """``mod`` built for the CPU (every kernel with the default schedule), ready to run."""
    return relax.VirtualMachine(mlckit.build(mod, target="llvm"), mlckit.cpu())


unfused_vm = compiled(relax.transform.LegalizeOps()(MLPAdjoint))
fused_vm = compiled(MLPAdjointFused)
torch_x, torch_label = torch.from_numpy(batch_x), torch.from_numpy(batch_label)
torch_weights = [torch.tensor(a, requires_grad=True) for a in init]


def torch_gradients():
    w0, b0, w1, b1 = torch_weights
    logits = torch.relu(torch_x @ w0.T + b0) @ w1.T + b1
    loss = torch.nn.functional.cross_entropy(logits, torch_label)
    return torch.autograd.grad(loss, torch_weights)


versions = {
    "forward only (main, fused)": lambda: fused_vm["main"](*mlp_args),
    "gradients, one kernel per op": lambda: unfused_vm["main_adjoint"](*mlp_args),
    "gradients, fused": lambda: fused_vm["main_adjoint"](*mlp_args),
    "gradients, torch autograd": torch_gradients,
}


def best_seconds(functions: dict, rounds: int = 30) -> dict:
    """The fastest of ``rounds`` calls of each function, the functions taken in turn in each
    round (each called once first)."""
    for call in functions.values():
        call()
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(rounds):
        for name, call in functions.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


seconds = best_seconds(versions)
for name, s in seconds.items():
    print(f"{name:<30} {s * 1e6:8.0f} µs")
print(
    f"(mlckit's parallel loops use {numba.get_num_threads()} threads, torch {torch.get_num_threads()})"
)
_, mlp_grads = fused_vm["main_adjoint"](*mlp_args)
for ours, theirs in zip(mlp_grads, torch_gradients()):
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)
print("the fused adjoint's gradients equal torch's")

# %% [markdown]
# Read the numbers with what each version does. The gradients cost a small multiple of the
# forward pass, as the count of the previous section said: each forward matmul has two in the
# backward part, and the backward part reads and writes more intermediates. Fusion saves
# kernel calls and intermediate tensors, as in chapter 7, on both sides of the loss. PyTorch
# does the same arithmetic, but records its graph on every call and replays it, in Python
# and C++; mlckit's backward program was written once, before the first call. How the
# versions compare is for the measurement to say, and it varies with the machine and its
# load; on the machine that built this page, the lines above give it.
# <!-- shown-by: gradient-timing -->
#
# ## Training the MLP
#
# Gradients are half of training. The other half is a loop: take a batch of images, compute
# the loss and its gradients, let an [optimizer](glossary.md#optimizer) update the weights,
# repeat. mlckit's `relax.training` (TVM's `tvm.relax.training`) builds everything that loop
# calls as Relax functions, so that all of it is compiled:
#
# * a **loss** (`relax.training.loss`: `CrossEntropyLoss`, `MSELoss`, ...) is a Relax
#   function of the predictions and the targets;
# * an **optimizer** (`relax.training.optimizer`: `SGD`, `MomentumSGD`, `Adam`) is a Relax
#   function `(params, gradients, states) -> (new params, new states)`, where the states hold
#   what the method carries from step to step (Adam's running averages, the step count);
# * `SetupTrainer(loss, optimizer, loss_args)` is a module pass that takes a module with the
#   model, a function named `backbone`, and adds the rest: `backbone_loss` (the backbone with
#   the loss appended, by `AppendLoss`), its adjoint `backbone_loss_adjoint` (by `Gradient`),
#   and the `optimizer`;
# * a `Trainer` holds the weights and the optimizer's state between calls, and runs the
#   compiled functions: `update(images, labels)` is one training step, `predict(images)` runs
#   the backbone.
#
# The data: the 1,900 FashionMNIST images that mlckit ships, cut into 1,500 to train on and
# 400 held out to measure the accuracy on, with the ten classes in the same proportions in
# both (`fashion_mnist_split`).

# %%
train, held_out = mlckit.datasets.fashion_mnist_split()  # 1,500 and 400 images, float32
train_images, train_labels = train.images.reshape(-1, 784), train.labels.astype("int64")
held_out_images = held_out.images.reshape(-1, 784)
print(f"{len(train_labels)} images to train on, {len(held_out.labels)} held out")
print("images per class in the training set:", np.bincount(train_labels))

# %% [markdown]
# The backbone is the course's MLP, `784 → 128 → 10` with a ReLU, for a batch of 50 images,
# written with the weights in the `(in, out)` layout that `R.matmul` reads as they are. Its
# parameters are the inputs first, then the weights; the module attribute `param_num` (set
# with `I.module_attrs` in TVMScript) says that the last 4 are the parameters to train, and
# `state_num` that there are no other model states (a batch norm's running mean would be
# one).


# %%
@I.ir_module
class MLPBackbone:
    I.module_attrs({"param_num": 4, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((50, 784), "float32"),
        w0: R.Tensor((784, 128), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((128, 10), "float32"),
        b1: R.Tensor((10,), "float32"),
    ) -> R.Tensor((50, 10), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
            out = R.add(lv3, b1)
            R.output(out)
        return out


# %% [markdown]
# The loss is cross-entropy averaged over the batch: `CrossEntropyLoss()` called with the
# struct info of its arguments, the backbone's output and the labels, is a Relax function,
# `log_softmax` then `nll_loss`. `AppendLoss` inlines it after the backbone, into the one
# function that is differentiated, `backbone_loss`; the labels become its last parameter:
# <!-- shown-by: backbone-loss -->

# %% tags=["nbval-check-output", "shows:backbone-loss"]
from mlckit.relax.training import AppendLoss, SetupTrainer, Trainer
from mlckit.relax.training.loss import CrossEntropyLoss
from mlckit.relax.training.optimizer import Adam

loss_args = [relax.TensorStructInfo((50, 10), "float32"), relax.TensorStructInfo((50,), "int64")]
with_loss = AppendLoss("backbone", CrossEntropyLoss()(*loss_args))(MLPBackbone)
print(with_loss["backbone_loss"].script())

# %% [markdown]
# `SetupTrainer(loss, optimizer, loss_args)` does that, then `Gradient` on `backbone_loss`
# for the 4 parameters, then adds the optimizer (Adam, learning rate 0.001), and legalizes
# everything: the module it returns holds three relax functions beside `backbone`, each op
# a `call_tir` of a PrimFunc. The Adam step is a Relax function too: for each weight, two
# running averages and the update, a chain of elementwise ops.
# <!-- shown-by: train-module -->

# %% tags=["nbval-check-output", "shows:train-module"]
train_mod = SetupTrainer(CrossEntropyLoss(), Adam(1e-3), loss_args)(MLPBackbone)
for gv, func in train_mod.functions.items():
    if isinstance(func, relax.Function):
        params = ", ".join(p.name_hint for p in func.params)
        print(f"{gv.name_hint}({params})")
kernels = [gv for gv, f in train_mod.functions.items() if isinstance(f, mlckit.tir.PrimFunc)]
print(f"and {len(kernels)} PrimFuncs")

# %% [markdown]
# We build it as any module: through the fusion pipeline of the previous section (without
# `LegalizeOps`, which `SetupTrainer` ran already), then `mlckit.build`, which schedules every
# kernel. The `Trainer` takes the module (for its attributes: how many inputs, parameters and
# states), the virtual machine and the device. `xaiver_uniform_init_params()` (TVM's
# spelling; `xavier_uniform_init_params` is the same method) draws each weight matrix
# uniformly in `±sqrt(6 / (fan_in + fan_out))` (a bias in `±sqrt(6 / size)`), Xavier
# Glorot's initialization, which keeps the activations' scale about the same from layer to
# layer.

# %%
fusion = mlckit.ir.transform.Sequential(
    [
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
)
train_vm = compiled(fusion(train_mod))
trainer = Trainer(train_mod, train_vm, mlckit.cpu())
np.random.seed(0)  # the initialization draws from numpy's global generator
trainer.xaiver_uniform_init_params()
initial = {name: value.numpy() for name, value in trainer.export_params().items()}
print({name: value.shape for name, value in initial.items()})

# %% [markdown]
# The training loop: 5 epochs, each a pass over the 1,500 images in a new random order, in
# batches of 50, so 150 steps. `update` runs `backbone_loss_adjoint` on the batch and then
# `optimizer` on the gradients it returned, and gives back the batch's loss before the step.
# Every step runs through kernels mlckit compiled.

# %%
EPOCHS, BATCH = 5, 50
order = np.random.default_rng(0)
batches = [
    epoch_order[start : start + BATCH]
    for epoch_order in (order.permutation(len(train_labels)) for _ in range(EPOCHS))
    for start in range(0, len(train_labels), BATCH)
]
start = time.perf_counter()
losses = [float(trainer.update(train_images[b], train_labels[b]).numpy()) for b in batches]
print(f"{len(batches)} steps in {time.perf_counter() - start:.2f} s")


def accuracy(predict) -> float:
    """The share of the held-out images whose highest score is their label."""
    scores = [
        predict(held_out_images[i : i + BATCH]) for i in range(0, len(held_out_images), BATCH)
    ]
    return float(np.mean(np.concatenate(scores).argmax(axis=1) == held_out.labels))


mlckit_accuracy = accuracy(lambda x: trainer.predict(x).numpy())
print(f"held-out accuracy: {mlckit_accuracy:.1%}")

# %% [markdown]
# How does that compare with PyTorch? The same recipe there: the same initial weights, Adam
# with the same learning rate, the same batches in the same order, torch's `cross_entropy`
# and autograd. Both optimizers follow the same formulas, so the two runs should follow the
# same path, up to rounding; the loss curves show it.
# <!-- shown-by: torch-recipe -->

# %% tags=["shows:torch-recipe"]
torch_params = [torch.tensor(initial[name], requires_grad=True) for name in initial]
torch_adam = torch.optim.Adam(torch_params, lr=1e-3)


def torch_mlp(x: torch.Tensor) -> torch.Tensor:
    w0, b0, w1, b1 = torch_params
    return torch.relu(x @ w0 + b0) @ w1 + b1


def torch_step(x: np.ndarray, label: np.ndarray) -> float:
    torch_adam.zero_grad()
    loss = torch.nn.functional.cross_entropy(
        torch_mlp(torch.from_numpy(x)), torch.from_numpy(label)
    )
    loss.backward()
    torch_adam.step()
    return loss.item()


torch_losses = [torch_step(train_images[b], train_labels[b]) for b in batches]
with torch.no_grad():
    torch_accuracy = accuracy(lambda x: torch_mlp(torch.from_numpy(x)).numpy())

fig, ax = plt.subplots(figsize=(8, 3))
ax.plot(losses, label="mlckit", color="#4477AA")
ax.plot(torch_losses, label="torch", color="#EE6677", linestyle="--")
for epoch in range(1, EPOCHS):
    ax.axvline(epoch * len(batches) // EPOCHS, color="#DDDDDD", linewidth=0.8)
ax.set_xlabel("training step (batch of 50; grey lines: epochs)")
ax.set_ylabel("cross-entropy loss")
ax.legend()
plt.tight_layout()
plt.show()
print(f"held-out accuracy: mlckit {mlckit_accuracy:.1%}, torch {torch_accuracy:.1%}")
curve_gap = float(np.max(np.abs(np.subtract(losses, torch_losses))))
print(f"first loss {losses[0]:.3f}; largest difference of the two loss curves: {curve_gap:.2g}")
assert mlckit_accuracy >= 0.75 and curve_gap < 0.01 and abs(mlckit_accuracy - torch_accuracy) < 0.01

# %% [markdown]
# The loss falls fast in the first epoch, from about 2.6 (a model that found the ten classes
# equally likely would score `ln 10 ≈ 2.3`), then more slowly and noisily, batch to batch. The two curves lie on top of each
# other (the cell asserts that they never differ by more than 0.01), and the held-out
# accuracies are within a percent of each other, above 75% after 150 steps on 1,500 images.
# <!-- shown-by: torch-recipe -->
#
# For scale, the course's pretrained weights of chapters 3 and 7 (the same MLP, trained by
# the course on FashionMNIST's full training set), on the same 400 held-out images:
# <!-- shown-by: pretrained-accuracy -->

# %% tags=["shows:pretrained-accuracy"]
pretrained_accuracy = accuracy(mlckit.datasets.mlp_reference)
print(f"held-out accuracy of the course's pretrained weights: {pretrained_accuracy:.1%}")

# %% [markdown]
# Last, the time of one training step, `trainer.update` against the same step in torch
# (forward, loss, backward, Adam), on one batch, timed in turn as before. A step of mlckit's
# is two calls of the virtual machine, the adjoint and the optimizer, each running a few
# dozen kernels.
# <!-- shown-by: step-timing -->

# %% tags=["shows:step-timing"]
step_x, step_label = train_images[:BATCH], train_labels[:BATCH]
step_seconds = best_seconds(
    {
        "mlckit trainer.update": lambda: trainer.update(step_x, step_label),
        "torch (autograd, torch.optim.Adam)": lambda: torch_step(step_x, step_label),
    }
)
for name, s in step_seconds.items():
    print(f"{name:<36} {s * 1e6:8.0f} µs per step")
print(
    f"(mlckit's parallel loops use {numba.get_num_threads()} threads, torch {torch.get_num_threads()})"
)

# %% [markdown]
# At this size a step's arithmetic (about 15 million multiply-adds, three times the forward
# pass's 5 million) is not all of its cost: the calls, allocations and Python around the
# kernels count too, on both sides. How the two compare is for the measurement to say, and it varies with
# the machine and its load; on the machine that built this page, the lines above give it.
# `benchmarks/bench_training.py` times the same step, fused and unfused, against torch over
# more rounds.
# <!-- shown-by: step-timing -->
#
# ## Summary
#
# * The gradient of a loss is computed by the chain rule, one binding at a time. Each value
#   `v` has an adjoint `v_adjoint`, the derivative of the loss with respect to `v`, of `v`'s
#   shape; each op's gradient rule passes its result's adjoint on to its arguments. A
#   broadcast argument sums its adjoint back (`collapse_sum_to`).
# * Forward mode carries a `(value, tangent)` pair through each instruction and gives the
#   derivative along one direction (a JVP) per sweep; `relax.transform.ForwardGradient("main")`
#   writes it as `main_jvp`. Reverse mode gives the gradient with respect to every parameter
#   in one backward sweep, and keeps the forward intermediates it reads.
# * `relax.transform.Gradient("main")` adds `main_adjoint`, returning
#   `(result, (gradients...))`: the forward bindings, then the backward ones, as Relax.
# * `mlckit.testing.check_numerical_grads(f, inputs, grads)` compares gradients with central
#   differences, element by element.
# * An adjoint function goes through `LegalizeOps`, `FuseOps`, `FuseTIR` and `mlckit.build`
#   like any other; a forward value the backward part reads must be stored, which limits
#   what fuses.
# * `relax.training` builds a whole training step as Relax: a loss, an optimizer
#   `(params, gradients, states) -> (new params, new states)`, and
#   `SetupTrainer(loss, optimizer, loss_args)`, which turns a module's `backbone` (with
#   `param_num` and `state_num` in its attributes) into `backbone_loss`, its adjoint and the
#   optimizer. A `Trainer` holds the weights and runs `update` and `predict`; trained for 150
#   steps on 1,500 images, the MLP follows torch's loss curve and reaches its accuracy.
#
# ## Exercises
#
# `check(name, answer)` checks your answer and says what is wrong, with a hint; `hint(name, 1)`
# gives a gentle hint, higher levels say more, and `solution(name)` shows a solution once you
# have tried. The cells below run as they are and show "✗ not yet": edit them until the check
# passes.
#
# ### Exercise 1: the gradients of a sigmoid layer, by hand (`ch9.sigmoid_grads`)
#
# Write `sigmoid_grads(x, w, b)`, returning `(x_adjoint, w_adjoint, b_adjoint)` for
# `loss = sum(sigmoid(x @ w + b))`, with `sigmoid(u) = 1 / (1 + exp(-u))`: the tiny graph of
# this chapter with a sigmoid in place of the `tanh`. The starting code is the chapter's
# backward pass for `tanh`; the check runs your function on random inputs (`x` of shape
# `(4, 3)`, `w` `(3, 2)`, `b` `(2,)`) and compares each gradient with central differences.


# %%
def sigmoid_grads(x, w, b):
    lv2 = np.tanh(x @ w + b)  # the layer's activation: make it the sigmoid
    lv1_adjoint = 1 - lv2 * lv2  # tanh's derivative: make it the sigmoid's
    b_adjoint = lv1_adjoint.sum(axis=0)
    x_adjoint = lv1_adjoint @ w.T
    w_adjoint = x.T @ lv1_adjoint
    return x_adjoint, w_adjoint, b_adjoint


check("ch9.sigmoid_grads", sigmoid_grads)

# %% [markdown]
# ### Exercise 2: forward mode through the sigmoid layer (`ch9.sigmoid_jvp`)
#
# Write `sigmoid_jvp(x, w, b, x_dot, w_dot, b_dot)`, returning `(value, tangent)`: the loss
# of exercise 1 and its derivative along the direction `(x_dot, w_dot, b_dot)`, by carrying
# a `(value, tangent)` pair through each instruction as `TANGENT_RULES` did. The check moves
# one input at a time, then all three, and compares with the gradients dotted with the
# direction. The starting code has two tangents wrong.


# %%
def sigmoid_jvp(x, w, b, x_dot, w_dot, b_dot):
    lv0, lv0_dot = x @ w, x_dot @ w  # the matmul's tangent: a term is missing
    lv1, lv1_dot = lv0 + b, lv0_dot + b_dot
    s = 1 / (1 + np.exp(-lv1))
    lv2, lv2_dot = s, lv1_dot  # your code: the sigmoid's tangent
    return lv2.sum(), lv2_dot.sum()


check("ch9.sigmoid_jvp", sigmoid_jvp)

# %% [markdown]
# ### Exercise 3: an optimizer that trains the MLP in one epoch (`ch9.one_epoch`)
#
# The chapter trained for five epochs with `Adam(1e-3)`. Choose an optimizer from
# `relax.training.optimizer` (`SGD`, `MomentumSGD` or `Adam`) and its settings so that a
# single epoch, 30 steps of 50 images from the chapter's initial weights, reaches 72% of the
# held-out images. The check trains the MLP with your optimizer (a few seconds) and reads the
# loss curve to tell steps that are too large from steps that are too small.

# %%
from mlckit.relax.training.optimizer import SGD, MomentumSGD  # noqa: F401 - for the exercise

check("ch9.one_epoch", SGD(0.01))
