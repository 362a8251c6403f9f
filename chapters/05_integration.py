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
# # 5. Integration with machine learning frameworks
#
# So far we wrote every model by hand: TensorIR functions in TVMScript, a Relax `main` that
# calls them. Nobody writes a real model that way. Models are written in a framework, most often
# PyTorch, and the compiler has to take them from there. This chapter follows the MLC course's
# chapter 5: we build IRModules from Python instead of TVMScript, first with **tensor
# expressions** (TE) for the loops and a [BlockBuilder](glossary.md#blockbuilder) for the
# graph, then from a PyTorch model, by walking the graph that `torch.fx` traces: first with an
# importer we write ourselves, then with mlckit's own, `relax.frontend.torch.from_fx`. We end
# with `relax.frontend.nn`, which builds models in the style of PyTorch without PyTorch.

# %%
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import mlckit
from mlckit import relax, te, topi, viz
from mlckit.datasets import cnn_params, fashion_mnist, mlp_params
from mlckit.exercises import check, hint, solution  # noqa: F401 - for the exercises
from mlckit.ir import IRModule
from mlckit.script import relax as R

dev = mlckit.cpu()

# %% [markdown]
# ## Tensor expressions
#
# A [tensor expression](glossary.md#tensor-expression-te) describes a computation by what each
# output element is, not by loops. `te.placeholder` declares an input; `te.compute(shape, f)`
# declares a tensor whose element at `(i, j)` is `f(i, j)`; a reduction names its axis with
# `te.reduce_axis`. Here are a matrix product and a relu:


# %%
def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n, m = A.shape[0], B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


# %% [markdown]
# Nothing is computed yet: these are descriptions. `te.create_prim_func` turns the inputs and
# outputs of a description into a TensorIR function, with the loops written out:

# %% tags=["nbval-check-output"]
A = te.placeholder((128, 128), name="A", dtype="float32")
B = te.placeholder((128, 128), name="B", dtype="float32")
C = te_matmul(A, B)
print(te.create_prim_func([A, B, C]).script())

# %% [markdown]
# The relu of the product, both in one function: the intermediate `matmul` becomes a buffer of
# the function (`T.alloc_buffer`), as in the TVMScript we wrote in chapter 2.

# %%
D = te_relu(C)
te.create_prim_func([A, B, D]).show()

# %% [markdown]
# ## BlockBuilder: building the graph from Python
#
# A `relax.BlockBuilder` builds a Relax function binding by binding. `bb.function` opens the
# function, `bb.dataflow` a [dataflow block](glossary.md#dataflow-block), and
# `bb.emit_te(f, *args)` does three things at once: it calls the TE function `f` on
# placeholders shaped like the arguments, turns the result into a PrimFunc that it adds to the
# module (named after `f`), and emits a `R.call_tir` of that PrimFunc on the arguments.

# %%
A = relax.Var("A", R.Tensor((128, 128), "float32"))
B = relax.Var("B", R.Tensor((128, 128), "float32"))

bb = relax.BlockBuilder()
with bb.function("main"):
    with bb.dataflow():
        C = bb.emit_te(te_matmul, A, B)
        D = bb.emit_te(te_relu, C)
        R_out = bb.emit_output(D)
    bb.emit_func_output(R_out, params=[A, B])

MyModule = bb.get()
MyModule.show()

# %% [markdown]
# The module has the two PrimFuncs `te_matmul` and `te_relu` and a `main` calling them. Inside
# the dataflow block, `emit_te` gave **`DataflowVar`s**: values local to the block. `emit_output`
# gave a plain **`Var`**, the one value the block hands on to the rest of the function. Only a
# `Var` may be used after the block, so the compiler is free to drop or fuse what the block
# computes as long as its outputs stay the same.

# %% tags=["nbval-check-output"]
print(type(C).__name__, C.name_hint, C.struct_info)
print(type(R_out).__name__, R_out.name_hint, R_out.struct_info)

# %% [markdown]
# The graph of `main`: the inputs, one box per kernel call, the output.

# %%
viz.graph(MyModule, function="main")

# %% [markdown]
# The module builds and runs like every other (`relax.build` gives its kernels the default CPU
# schedule):

# %% tags=["nbval-check-output"]
a_np = np.random.default_rng(0).random((128, 128), dtype=np.float32)
b_np = np.random.default_rng(1).random((128, 128), dtype=np.float32)
vm = relax.VirtualMachine(relax.build(MyModule, "llvm"), dev)
out = vm["main"](mlckit.nd.array(a_np), mlckit.nd.array(b_np)).numpy()
print("matches numpy:", np.allclose(out, np.maximum(a_np @ b_np, 0), rtol=1e-5))

# %% [markdown]
# ## Importing a PyTorch model by hand
#
# Here is a small PyTorch model: a matrix product with a weight of its own, then a relu.


# %%
class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(128, 128))

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = torch.relu(x)
        return x


torch.manual_seed(0)
model = MyModel()

# %% [markdown]
# `torch.fx.symbolic_trace` runs `forward` on stand-in tensors that record every operation
# instead of computing it. What comes out is a `GraphModule`, whose `graph` lists the
# operations as **nodes**, in order. Each node has a kind (`op`): `placeholder` for an input,
# `get_attr` to read a parameter of the model, `call_function` for a function such as
# `torch.matmul`, `call_module` for a submodule such as an `nn.Linear`, `call_method` for a
# method of a tensor, and `output`.

# %% tags=["nbval-check-output"]
fx_module = torch.fx.symbolic_trace(model)
for node in fx_module.graph.nodes:
    target = getattr(node.target, "__name__", node.target)  # torch.matmul prints as "matmul"
    print(f"{node.op:14s} {node.name:8s} target={target!s:8s} args={node.args}")

# %% [markdown]
# That is all an importer needs: walk the nodes in order and emit, for each, the Relax
# binding that computes the same thing, keeping a map from each node to the Relax value made
# for it. Parameters become constants. How to translate a `call_function` or `call_module` is
# looked up in two tables the caller passes in, so that the walk itself stays the same for
# every model:


# %%
def map_param(param: nn.Parameter) -> relax.Constant:
    return relax.const(param.data.cpu().numpy(), "float32")


def fetch_attr(fx_mod: torch.fx.GraphModule, target: str):
    """The attribute ``target`` ("layer.weight") of the model."""
    value = fx_mod
    for name in target.split("."):
        value = getattr(value, name)
    return value


def from_fx(fx_mod, input_shapes, call_function_map, call_module_map) -> IRModule:
    input_index = 0
    node_map = {}
    named_modules = dict(fx_mod.named_modules())

    bb = relax.BlockBuilder()
    fn_inputs = []
    with bb.function("main"):
        with bb.dataflow():
            for node in fx_mod.graph.nodes:
                if node.op == "placeholder":
                    shape = input_shapes[input_index]
                    input_index += 1
                    input_var = relax.Var(node.target, R.Tensor(shape, "float32"))
                    fn_inputs.append(input_var)
                    node_map[node] = input_var
                elif node.op == "get_attr":
                    node_map[node] = map_param(fetch_attr(fx_mod, node.target))
                elif node.op == "call_function":
                    node_map[node] = call_function_map[node.target](bb, node_map, node)
                elif node.op == "call_module":
                    named_module = named_modules[node.target]
                    converter = call_module_map[type(named_module)]
                    node_map[node] = converter(bb, node_map, node, named_module)
                elif node.op == "output":
                    output = bb.emit_output(node_map[node.args[0]])
        bb.emit_func_output(output, fn_inputs)
    return bb.get()


# %% [markdown]
# The converters for our model's two functions, with the TE functions from above:


# %%
def map_matmul(bb, node_map, node):
    A = node_map[node.args[0]]
    B = node_map[node.args[1]]
    return bb.emit_te(te_matmul, A, B)


def map_relu(bb, node_map, node):
    A = node_map[node.args[0]]
    return bb.emit_te(te_relu, A)


MyImported = from_fx(
    fx_module,
    input_shapes=[(1, 128)],
    call_function_map={torch.matmul: map_matmul, torch.relu: map_relu},
    call_module_map={},
)
MyImported.show()

# %% [markdown]
# The weight is now a constant of `main` (the printer lists constants as `metadata`, since
# their values are too long to print). The imported module computes what the model does:

# %% tags=["nbval-check-output"]
x_np = np.random.default_rng(2).random((1, 128), dtype=np.float32)
vm = relax.VirtualMachine(relax.build(MyImported, "llvm"), dev)
ours = vm["main"](mlckit.nd.array(x_np)).numpy()
with torch.no_grad():
    theirs = model(torch.from_numpy(x_np)).numpy()
print("matches torch:", np.allclose(ours, theirs, rtol=1e-5, atol=1e-5))

# %% [markdown]
# ## The FashionMNIST MLP from PyTorch
#
# The MLP of chapter 3, written as PyTorch writes it, with `nn.Linear` and `nn.ReLU` modules,
# and the course's trained weights copied in:


# %%
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128, bias=True)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10, bias=True)

    def forward(self, x):
        x = self.linear0(x)
        x = self.relu(x)
        x = self.linear1(x)
        return x


params = mlp_params()
mlp_model = MLP().eval()
with torch.no_grad():
    mlp_model.linear0.weight.copy_(torch.from_numpy(params["w0"]))
    mlp_model.linear0.bias.copy_(torch.from_numpy(params["b0"]))
    mlp_model.linear1.weight.copy_(torch.from_numpy(params["w1"]))
    mlp_model.linear1.bias.copy_(torch.from_numpy(params["b1"]))

# %% [markdown]
# Its layers are `call_module` nodes. Their converters read the module's own parameters;
# `topi` ("tensor operator inventory") is mlckit's library of TE functions, so we need not
# write `dense` ourselves:


# %%
def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    b = map_param(nn_mod.bias) if nn_mod.bias is not None else None
    return bb.emit_te(topi.nn.dense, x, w, b)


def map_nn_relu(bb, node_map, node, nn_mod):
    return map_relu(bb, node_map, node)


MLPModule = from_fx(
    torch.fx.symbolic_trace(mlp_model),
    input_shapes=[(1, 784)],
    call_function_map={},
    call_module_map={nn.Linear: map_nn_linear, nn.ReLU: map_nn_relu},
)
MLPModule.show()

# %% [markdown]
# We classify a few of the shipped FashionMNIST images with the imported module and with
# PyTorch:

# %% tags=["nbval-check-output"]
data = fashion_mnist("sprite900")
picked = np.random.default_rng(0).permutation(len(data.images))[:16]
vm = relax.VirtualMachine(relax.build(MLPModule, "llvm"), dev)
for index in picked[:4]:
    image = (data.images[index].astype(np.float32) / 255).reshape(1, 784)
    ours = vm["main"](mlckit.nd.array(image)).numpy()
    with torch.no_grad():
        theirs = mlp_model(torch.from_numpy(image)).numpy()
    print(
        f"image {index}: mlckit says {data.class_names[ours.argmax()]!r}, torch says "
        f"{data.class_names[theirs.argmax()]!r}, logits agree: "
        f"{np.allclose(ours, theirs, atol=1e-4)}, label {data.class_names[data.labels[index]]!r}"
    )

# %% [markdown]
# ## Translating into high-level operators
#
# Our converters lowered each layer to TensorIR right away (`emit_te`). A converter may instead
# emit a **high-level operator**, `relax.op.linear` for instance, and leave the lowering to
# the compiler: `relax.transform.LegalizeOps` replaces each high-level operator by its
# TensorIR later. The graph then says what the model does, which is what graph passes need to
# see (chapter 7 fuses exactly such operators).


# %%
def map_nn_linear_op(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    b = map_param(nn_mod.bias) if nn_mod.bias is not None else None
    return bb.emit(relax.op.linear(x, w, b))


def map_nn_relu_op(bb, node_map, node, nn_mod):
    return bb.emit(relax.op.nn.relu(node_map[node.args[0]]))


MLPModuleHighLevel = from_fx(
    torch.fx.symbolic_trace(mlp_model),
    input_shapes=[(1, 784)],
    call_function_map={},
    call_module_map={nn.Linear: map_nn_linear_op, nn.ReLU: map_nn_relu_op},
)
MLPModuleHighLevel.show()

# %% [markdown]
# ## mlckit's importer: `relax.frontend.torch`
#
# `relax.frontend.torch.from_fx(graph_module, input_info)` is this importer, complete: it
# knows the usual layers, functions and tensor methods, emits high-level operators, and takes
# each input's shape and dtype (a name such as `"n"` in a shape makes the dimension symbolic).
# Its table of operators is generated from its code (`coverage()`):

# %%
from mlckit.relax.frontend.torch import coverage, from_exported_program
from mlckit.relax.frontend.torch import from_fx as import_fx

for form, names in coverage().items():
    print(f"{form} ({len(names)}): {', '.join(names[:8])}, ...")

# %% [markdown]
# The MLP again, this time with `from_fx` from mlckit, its weights bound as constants. Its
# `main` now calls high-level operators, as our second importer did:

# %% tags=["nbval-check-output"]
MLPImported = import_fx(torch.fx.symbolic_trace(mlp_model), [((1, 784), "float32")])
bindings = MLPImported["main"].body.blocks[0].bindings
print([b.value.op.name for b in bindings if isinstance(b.value, relax.Call)])

# %% [markdown]
# We import the course's CNN (chapter 3's exercise: convolution, relu, max pooling, flatten,
# two linear layers, and here a softmax at the end) with its trained weights:


# %%
class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, kernel_size=3)
        self.pool = nn.MaxPool2d(2)
        self.linear0 = nn.Linear(32 * 13 * 13, 100)
        self.linear1 = nn.Linear(100, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.linear0(x))
        return F.softmax(self.linear1(x), dim=1)


cnn_model = CNN().eval()
weights = cnn_params()
with torch.no_grad():
    for layer, name in [
        (cnn_model.conv, "conv2d"),
        (cnn_model.linear0, "linear0"),
        (cnn_model.linear1, "linear1"),
    ]:
        layer.weight.copy_(torch.from_numpy(weights[f"{name}_weight"]))
        layer.bias.copy_(torch.from_numpy(weights[f"{name}_bias"]))

CNNModule = import_fx(torch.fx.symbolic_trace(cnn_model), [(("n", 1, 28, 28), "float32")])
CNNModule.show()

# %% [markdown]
# The graph, as imported (each box a high-level operator), and after the default pipeline has
# legalized and fused it (each box a kernel):

# %%
viz.graph(CNNModule, function="main")

# %%
CNNCompiled = relax.get_pipeline("default")(CNNModule)
viz.graph(CNNCompiled, function="main")

# %% [markdown]
# The batch is symbolic (`n`), so one build classifies any number of images. We run 16 and
# compare with PyTorch:

# %% tags=["nbval-check-output"]
batch = (data.images[picked].astype(np.float32) / 255).reshape(16, 1, 28, 28)
vm = relax.VirtualMachine(relax.build(CNNCompiled, "llvm"), dev)
ours = vm["main"](mlckit.nd.array(batch)).numpy()
with torch.no_grad():
    theirs = cnn_model(torch.from_numpy(batch)).numpy()
print("largest difference from torch below 1e-4:", bool(np.abs(ours - theirs).max() < 1e-4))
print("same predictions:", bool((ours.argmax(1) == theirs.argmax(1)).all()))
print("first six:", [data.class_names[c] for c in ours.argmax(1)[:6]])

# %% [markdown]
# `torch.export` is PyTorch's newer way to capture a model: it records ATen operators (the
# operators under every PyTorch function) and keeps the example input's shapes.
# `from_exported_program` imports that form. An exported program returns a tuple, so our
# module does too:

# %% tags=["nbval-check-output"]
exported = torch.export.export(cnn_model, (torch.from_numpy(batch[:2]),))
ExportedModule = from_exported_program(exported)
vm = relax.VirtualMachine(relax.build(relax.get_pipeline("default")(ExportedModule), "llvm"), dev)
(ours_exported,) = vm["main"](mlckit.nd.array(batch[:2]))
print("matches torch:", np.allclose(ours_exported.numpy(), theirs[:2], atol=1e-4))

# %% [markdown]
# A model with an operator the importer does not know stops the import with an error that
# names the operator, the node, the line of `forward` that made it, and what is supported:


# %% tags=["nbval-check-output"]
class Cumulative(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=0)


try:
    import_fx(torch.fx.symbolic_trace(Cumulative()), [((3, 4), "float32")])
except mlckit.MLCError as err:
    print(str(err)[:160], "...")

# %% [markdown]
# ## Models without a framework: `relax.frontend.nn`
#
# Sometimes there is no PyTorch model to import, and writing the BlockBuilder calls by hand is
# tedious. `relax.frontend.nn` (the same names as TVM's) lets us write the model as PyTorch
# does, with modules and parameters, and *export* it: `export_tvm` runs `forward` once on
# symbolic tensors and records each operation as a Relax binding. (We import it as `relax_nn`,
# since `nn` is PyTorch's here.)

# %%
from mlckit.relax.frontend import nn as relax_nn


class RelaxMLP(relax_nn.Module):
    def __init__(self):
        self.linear0 = relax_nn.Linear(784, 128)
        self.relu = relax_nn.ReLU()
        self.linear1 = relax_nn.Linear(128, 10)

    def forward(self, x: relax_nn.Tensor) -> relax_nn.Tensor:
        return self.linear1(self.relu(self.linear0(x)))


relax_mlp = RelaxMLP()
relax_mlp.load_state_dict(
    {
        "linear0.weight": params["w0"],
        "linear0.bias": params["b0"],
        "linear1.weight": params["w1"],
        "linear1.bias": params["b1"],
    }
)
NNModule, nn_params = relax_mlp.export_tvm(
    {"forward": {"x": relax_nn.spec.Tensor(("n", 784), "float32")}}
)
NNModule.show()

# %% [markdown]
# The weights are parameters of `forward`, after the input, named by their place in the model;
# `nn_params` pairs each name with its `Parameter`. `bind_params` makes them constants, and the
# module compiles like any other:

# %% tags=["nbval-check-output"]
print([name for name, _ in nn_params])
bound = relax_nn.bind_params(NNModule, nn_params)
vm = relax.VirtualMachine(relax.build(relax.get_pipeline("default")(bound), "llvm"), dev)
images = (data.images[picked].astype(np.float32) / 255).reshape(16, 784)
ours = vm["forward"](mlckit.nd.array(images)).numpy()
with torch.no_grad():
    theirs = mlp_model(torch.from_numpy(images)).numpy()
print("matches torch:", np.allclose(ours, theirs, atol=1e-4))

# %% [markdown]
# ## Summary
#
# - A tensor expression describes each output element; `te.create_prim_func` writes the
#   loops. `bb.emit_te(f, *args)` adds the PrimFunc of `f` to the module and emits a
#   `call_tir` of it.
# - A BlockBuilder builds a Relax function from Python: `emit` and `emit_te` give
#   `DataflowVar`s local to the dataflow block, `emit_output` the `Var` that leaves it.
# - `torch.fx.symbolic_trace` turns a model into a graph of nodes; an importer walks it and
#   emits one binding per node, looked up in tables of converters. Converters can lower
#   right away (`emit_te`) or emit high-level operators that `LegalizeOps` lowers later.
# - `relax.frontend.torch.from_fx` and `from_exported_program` are such importers, with the
#   usual layers covered; what they do not know, they name.
# - `relax.frontend.nn` writes models as modules and parameters without a framework;
#   `export_tvm` records `forward` as a Relax function.
#
# ## Exercise
#
# Each exercise is checked by `check(name, answer)`; `hint(name, 1)` (then 2, 3) gives graded
# hints and `solution(name)` shows a solution.
#
# ### Import the course CNN with your own converters (`ch5.fx_cnn`)
#
# Our hand-written `from_fx` knows `nn.Linear` and `nn.ReLU`. Write converters for
# `nn.Conv2d`, `nn.MaxPool2d` and `nn.Flatten` with `bb.emit_te` and `topi`, and a function
# `import_cnn(fx_module)` that imports the course CNN (convolution, relu, max pooling, flatten,
# linear, relu, linear) with `from_fx` and your converters, for one image of shape
# `(1, 1, 28, 28)`. The checker imports the CNN with your function, runs it on real images and
# compares with PyTorch.


# %%
def import_cnn(
    fx_module: torch.fx.GraphModule,
) -> IRModule: ...  # your converters, then from_fx(fx_module, [(1, 1, 28, 28)], ..., ...)


check("ch5.fx_cnn", import_cnn)
