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
# # 7. Computational graph optimization
#
# Most of ML compilation is transforming tensor functions. The earlier chapters transformed
# one [primitive tensor function](glossary.md#primitive-tensor-function) at a time: a loop
# nest was split, reordered, vectorized. This chapter works one level up, on the
# *computational graph*: the [Relax](glossary.md#relax) function that says which tensor
# functions run, in which order, on which values. Graph transformations are what turn a
# model written with many small operators into a few large kernels, and they are written
# the same way as any other compiler pass: a function from an
# [IRModule](glossary.md#irmodule) to a new IRModule.
#
# We follow one model, the FashionMNIST MLP of the earlier chapters with its trained weights,
# through four steps:
#
# 1. read the IR's data structures, and rewrite a pattern in them with a visitor;
# 2. fuse each `dense` with the `add` after it, by hand, into a sub-function;
# 3. lower the high-level operators to TensorIR, and merge each fused sub-function into a
#    single TensorIR function with `FuseTIR`;
# 4. let mlckit's own passes find the fusions, and measure what fusion buys.
#
# The code is the MLC course's ("Computational Graph Optimization"). If you follow that
# text: its notebook runs on mlckit with `import tvm` changed to `import mlckit as tvm` and
# the edits listed in mlckit's `tests/course/README.md` (no downloads; the dataset read from
# the files mlckit ships). Here we import `mlckit` under its own name.
# <!-- checked-by: tests/course/test_course.py::test_course_notebook_runs -->

# %%
import matplotlib.pyplot as plt
import numba
import numpy as np

import mlckit
from mlckit import relax, topi, viz
from mlckit.datasets import fashion_mnist, mlp_reference
from mlckit.ir import IRModule
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.widgets import PassStepper

# %% [markdown]
# ## Pattern matching and rewriting
#
# Here is the smallest graph worth rewriting: a function that multiplies two tensors and
# adds the second one again. Our goal is to find the pair `multiply` then `add` and replace
# it with one call of the operator `R.ewise_fma` (element-wise fused multiply-add,
# `ewise_fma(a, b, c) = a * b + c`).


# %%
@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0


# %% [markdown]
# ### Walking the IR's data structures
#
# Before changing a program we have to know what it is made of. An IRModule is a collection
# of functions; each function is a tree of nodes, an *abstract syntax tree*. Let us walk
# down the tree of `main`, one field at a time.

# %%
relax_func = MyModule["main"]
type(relax_func)

# %% [markdown]
# The function has a list of parameters, and a body:

# %%
relax_func.params

# %%
func_body = relax_func.body
type(func_body)

# %% [markdown]
# The body is a `SeqExpr`: a sequence of binding blocks, and the value the function returns.
# Our function has one block, a [dataflow block](glossary.md#dataflow-block) (the
# `with R.dataflow():` region), and its bindings are the two lines `lv0 = ...` and
# `gv0 = ...`. Each binding has a `var` (the left-hand side) and a `value` (the right-hand
# side, here a `relax.Call` of an operator).

# %% tags=["nbval-check-output"]
dataflow_block = func_body.blocks[0]
print("blocks:  ", [type(block).__name__ for block in func_body.blocks])
print("returns: ", func_body.body)
for binding in dataflow_block.bindings:
    call = binding.value
    print(f"binding: var={binding.var.name_hint} ({type(binding.var).__name__})")
    print(f"         value={type(call).__name__}: op={call.op.name}, args={list(call.args)}")

# %% [markdown]
# The variables are `DataflowVar`s, local to the dataflow block, except `gv0`, which
# `R.output` makes visible after it. The whole tree is easier to take in as a picture:
# `viz.graph(node, tree=True)` draws any node as the IR's own tree, one box per node and one
# edge per field.

# %%
viz.graph(relax_func, tree=True)

# %% [markdown]
# A `Call` node's `op` field holds the operator (`Op("relax.multiply")`), its `args` field
# the argument expressions, which are `Var` nodes pointing back at parameters or at earlier
# bindings. Rewriting the program means building a new tree in which some of these nodes are
# replaced.
#
# ### A rewrite with a visitor
#
# We could walk this tree with our own recursive function, rebuilding every node on the way
# back. mlckit (like TVM) provides that walk ready-made, following the *visitor pattern*: a
# `relax.PyExprMutator` visits every node of a function and rebuilds it, calling a method
# for each kind of node (`visit_call_` for calls, `visit_var_` for variables, ...). We
# override only the method for the node we care about.
#
# `EwiseFMARewriter` looks at every call. If it is an `add` whose first argument is bound to
# a `multiply`, it returns an `ewise_fma` call in its place; otherwise it returns the call
# unchanged. `lookup_binding(var)` is what makes the match possible: it gives the value a
# variable was bound to earlier in the function. Two more details: the first line,
# `self.visit_expr_post_order(call)`, visits the call's arguments before the call itself
# (post-order), so the method always sees arguments that are already rewritten; and in
# `relax.Call(op, args, None, None)` the two `None`s are the call's attributes and its
# explicit output struct info, which the mutator infers when it puts the new call back into
# the function.


# %%
@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        add_op = mlckit.ir.Op.get("relax.add")
        multiply_op = mlckit.ir.Op.get("relax.multiply")
        ewise_fma_op = mlckit.ir.Op.get("relax.ewise_fma")

        if call.op != add_op:
            return call

        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != multiply_op:
            return call

        fma_call = relax.Call(
            ewise_fma_op, [value.args[0], value.args[1], call.args[1]], None, None
        )
        return fma_call


updated_fn = EwiseFMARewriter().visit_expr(MyModule["main"])
updated_fn.show()

# %% [markdown]
# `gv0` now computes `ewise_fma(x, y, y)`, but `lv0 = R.multiply(x, y)` is still there,
# though nothing reads it any more. The mutator replaces nodes; it does not decide what has
# become useless. `relax.analysis.remove_all_unused` drops the bindings nothing uses (inside
# a dataflow block that is always safe: every binding there is pure).

# %% tags=["nbval-check-output"]
print(relax.analysis.remove_all_unused(updated_fn).script())

# %% [markdown]
# Notice that the rewrite built new nodes: `MyModule["main"]` is unchanged. IR nodes are
# immutable, which is what lets a compiler keep the program before and after each pass side
# by side. A rewrite must also keep the program's meaning. Here we can check it by running
# both versions: `LegalizeOps` (more on it below) turns the operators into TensorIR so that
# the functions can be built.

# %%
fma_module = IRModule({"main": relax.analysis.remove_all_unused(updated_fn)})
x_in, y_in = np.random.default_rng(0).random((2, 3, 4), dtype=np.float32)
for name, mod in [("original", MyModule), ("rewritten", fma_module)]:
    lowered = relax.transform.LegalizeOps()(mod)
    vm = relax.VirtualMachine(relax.build(lowered, target="python"))
    out = vm["main"](x_in, y_in).numpy()
    print(f"{name:>9}: equals x * y + y: {np.allclose(out, x_in * y_in + y_in)}")

# %% [markdown]
# ## Fusing dense and add
#
# Now a real model. The MLP is `relu(x @ w0.T + b0) @ w1.T + b1`, and we build it with a
# [BlockBuilder](glossary.md#blockbuilder) from high-level operators: `relax.op.dense(x, w)`
# computes `x @ w.T`, with `w` in PyTorch's (out, in) layout, which is how `mlp_params()`
# stores the trained weights. The weights enter the graph as constants. `create_model`
# takes the batch size: 1 as in the course (the timings at the end also use 64).

# %%
mlp_params = mlckit.datasets.mlp_params()  # w0 (128, 784), b0 (128,), w1 (10, 128), b1 (10,)


def create_model(batch=1):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((batch, 784), "float32"))
    w0 = relax.const(mlp_params["w0"], "float32")
    b0 = relax.const(mlp_params["b0"], "float32")
    w1 = relax.const(mlp_params["w1"], "float32")
    b1 = relax.const(mlp_params["b1"], "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.dense(x, w0))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.relu(lv1))
            lv3 = bb.emit(relax.op.dense(lv2, w1))
            lv4 = bb.emit(relax.op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)
    return bb.get()


MLPModel = create_model()
MLPModel.show()

# %% [markdown]
# (The course's older Relax wrote the input as
# `relax.Var("x", (1, 784), relax.DynTensorType(2, "float32"))`; today a variable carries
# its shape and dtype in one [struct info](glossary.md#struct-info),
# `relax.TensorStructInfo((1, 784), "float32")`. mlckit runs the old spelling too, with a
# warning that names the new one.
# The `metadata[...]` entries are the weight constants, left out of the printout.)
#
# As a graph, the MLP is a chain of five operator calls:

# %%
viz.graph(MLPModel["main"])

# %% [markdown]
# We want to *fuse* each `dense` with the `add` that follows it into one group, which will
# later become one kernel. `DenseAddFusor` does it in three steps:
#
# 1. find the pattern: an `add` whose first argument is bound to a `dense`;
# 2. make a new function `fused_dense_add<i>(x, w, b)` that calls the two operators, and add
#    it to the module;
# 3. replace the `add` by a call of that function (the `dense` binding becomes unused and
#    `remove_all_unused` drops it).
#
# The new function gets the attribute `Primitive`: it marks a
# [primitive function](glossary.md#primitive-function), a group that later passes treat as
# one unit, to be turned into a single kernel. `transform` skips functions already marked
# so. The mutator's own `builder_` (a BlockBuilder) collects the module being rebuilt: the
# updated functions and the new ones.


# %%
@relax.expr_functor.mutator
class DenseAddFusor(relax.PyExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__()
        self.mod_ = mod
        # cache pre-defined ops
        self.add_op = mlckit.ir.Op.get("relax.add")
        self.dense_op = mlckit.ir.Op.get("relax.nn.dense")
        self.counter = 0

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            # avoid already fused primitive functions
            if func.attrs.get("Primitive", 0) != 0:
                continue
            updated_func = self.visit_expr(func)
            updated_func = relax.analysis.remove_all_unused(updated_func)
            self.builder_.update_func(global_var, updated_func)

        return self.builder_.get()

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        def match_call(node, op):
            if not isinstance(node, relax.Call):
                return False
            return node.op == op

        # pattern match dense => add
        if not match_call(call, self.add_op):
            return call

        value = self.lookup_binding(call.args[0])
        if value is None:
            return call

        if not match_call(value, self.dense_op):
            return call

        x = value.args[0]
        w = value.args[1]
        b = call.args[1]

        # construct a new fused primitive function
        param_x = relax.Var("x", x.struct_info)
        param_w = relax.Var("w", w.struct_info)
        param_b = relax.Var("b", b.struct_info)

        bb = relax.BlockBuilder()

        fn_name = f"fused_dense_add{self.counter}"
        self.counter += 1
        with bb.function(fn_name, [param_x, param_w, param_b]):
            with bb.dataflow():
                lv0 = bb.emit(relax.op.nn.dense(param_x, param_w))
                gv = bb.emit_output(relax.op.add(lv0, param_b))
            bb.emit_func_output(gv)

        # Add Primitive attribute to the fused funtions
        fused_fn = bb.get()[fn_name].with_attr("Primitive", 1)
        global_var = self.builder_.add_func(fused_fn, fn_name)

        # construct call into the fused function
        return relax.Call(global_var, [x, w, b], None, None)


@mlckit.ir.transform.module_pass(opt_level=2, name="DenseAddFuse")
class FuseDenseAddPass:
    """The wrapper for the DenseAddFusor pass."""

    def transform_module(self, mod, ctx):
        return DenseAddFusor(mod).transform()


# %% [markdown]
# The decorator `module_pass` makes the class a [pass](glossary.md#pass): an object that
# takes an IRModule and returns one, which can be chained with other passes and run under a
# `PassContext`. Each parameter of the new function takes the struct info of the argument
# it stands for (`relax.Var("x", x.struct_info)`; the course's older Relax wrote
# `relax.Var("x", x.shape_, x._checked_type_)`), so the fused function is typed exactly for
# the values it receives.

# %% tags=["nbval-check-output"]
MLPFused = FuseDenseAddPass()(MLPModel)
print(MLPFused.script())

# %% [markdown]
# `main` now calls `fused_dense_add0`, the ReLU, then `fused_dense_add1`: three steps
# instead of five. In the graph (drawn over the one before), the calls of the fused
# functions are outlined as new, and the `dense` calls they absorbed are greyed as gone:

# %%
viz.graph_diff(MLPModel, MLPFused, function="main")

# %% [markdown]
# ### Why a sub-function?
#
# We could instead have invented an operator `dense_add`, as `ewise_fma` is an operator for
# multiply-then-add. But fusion combines operators in ever more ways (dense + add + relu,
# conv + bias + relu, add + multiply + tanh, ...), and one operator per combination would
# never end. A sub-function says what the fused group computes with the operators we
# already have, and carries all the information later steps need to generate its code,
# without any new operator.
#
# ## Lowering to TensorIR with `call_te`
#
# The fused module still calls high-level operators, which have no loops yet. To optimize
# and generate code, each operator call must become a call of a
# [TensorIR](glossary.md#tensorir) function. `LowerToTensorIR` walks every relax function
# (the fused ones included) and replaces each call of an operator found in `op_map` by what
# the mapping function returns.
#
# The mapping functions use `bb.call_te`: given a function that builds a
# [tensor expression](glossary.md#tensor-expression-te) (`topi.nn.dense`, `topi.add`,
# `topi.nn.relu` are mlckit's operator library, written with `te`) and the relax arguments,
# it makes a [PrimFunc](glossary.md#primfunc) for the argument shapes, adds it to the module
# under a fresh name (`dense`, then `dense1`, ...), and emits an
# `R.call_tir(that PrimFunc, args, out_sinfo=...)` ([call_tir](glossary.md#call_tir): call
# a PrimFunc in destination-passing style, with the output allocated by the caller).


# %%
@relax.expr_functor.mutator
class LowerToTensorIR(relax.PyExprMutator):
    def __init__(self, mod: IRModule, op_map) -> None:
        super().__init__()
        self.mod_ = mod
        self.op_map = {mlckit.ir.Op.get(k): v for k, v in op_map.items()}

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        if call.op in self.op_map:
            return self.op_map[call.op](self.builder_, call)
        return call

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            updated_func = self.visit_expr(func)
            self.builder_.update_func(global_var, updated_func)

        return self.builder_.get()


def map_dense(bb, call):
    x, w = call.args
    return bb.call_te(topi.nn.dense, x, w)


def map_add(bb, call):
    a, b = call.args
    return bb.call_te(topi.add, a, b)


def map_relu(bb, call):
    return bb.call_te(topi.nn.relu, call.args[0])


op_map = {
    "relax.nn.dense": map_dense,
    "relax.add": map_add,
    "relax.nn.relu": map_relu,
}


@mlckit.ir.transform.module_pass(opt_level=0, name="LowerToTensorIR")
class LowerToTensorIRPass:
    """The wrapper for the LowerToTensorIR pass."""

    def transform_module(self, mod, ctx):
        return LowerToTensorIR(mod, op_map).transform()


MLPModelTIR = LowerToTensorIRPass()(MLPFused)
MLPModelTIR.show()

# %% [markdown]
# Two levels are now visible. `main` calls `fused_dense_add0`, the ReLU kernel and
# `fused_dense_add1`; each `fused_dense_add<i>` is still a relax function, calling two
# PrimFuncs with `R.call_tir`. The module's call graph shows it (relax functions and
# PrimFuncs, and who calls whom):

# %%
viz.graph(MLPModelTIR)

# %% [markdown]
# ## FuseTIR, step by step
#
# A `Primitive` relax function that only calls PrimFuncs can become one PrimFunc, with the
# loop nests of its callees one after the other. That is what
# [FuseTIR](glossary.md#fusetir) does, and it is the step where fusion becomes real for the
# code generator: one kernel instead of two, one function call instead of two, and the
# intermediate result (the output of `dense`) no longer a tensor of the graph.
#
# Take `fused_dense_add0`. Its body is
#
# ```python
# lv = R.call_tir(cls.dense, (x, w), out_sinfo=R.Tensor((1, 128), "float32"))
# gv = R.call_tir(cls.add, (lv, b), out_sinfo=R.Tensor((1, 128), "float32"))
# return gv
# ```
#
# and FuseTIR makes one PrimFunc of it by answering, for every buffer of every callee, "which
# buffer is this in the fused function?":
#
# 1. **Parameters.** The fused PrimFunc takes the relax function's parameters (`x`, `w`,
#    `b`), then one output buffer for its result, in
#    [destination-passing style](glossary.md#destination-passing-style) like every
#    `call_tir` callee. A callee buffer that receives a parameter (`dense`'s first two, `add`'s
#    second) becomes that parameter's buffer, named after the relax parameter.
# 2. **The result.** The buffer the last callee writes the returned value into (`add`'s
#    `T_add`) becomes the output parameter.
# 3. **Intermediates.** A value passed from one callee to the next (`lv`) is used only inside
#    the group, so it becomes a local `T.alloc_buffer` of the fused function, named after
#    the buffer that writes it (`dense`'s `T_matmul_NT`). Both callees' buffers for `lv` map
#    to that one allocation.
# 4. **Bodies.** The callees' loop nests are copied in order, with every buffer access
#    redirected as above, fresh loop variables, and block names made unique.
# 5. **Call sites.** `main`'s `cls.fused_dense_add0(x, w0, b0)` becomes
#    `R.call_tir(cls.fused_dense_add0, (x, w0, b0), out_sinfo=...)`, and the PrimFuncs that
#    only the fused function called (`dense`, `add`) leave the module.
#
# The helper below prints steps 1 to 3 for a fused function: each `call_tir`, and for each
# buffer of its callee the relax value it receives and what that value becomes.
# <!-- shown-by: fuse-tir-plan -->


# %%
def fuse_tir_plan(mod: IRModule, name: str) -> None:
    """For each call_tir of the relax function ``name``: which buffer of the fused PrimFunc
    each of the callee's buffers turns into (FuseTIR's remapping)."""
    func = mod[name]
    params = {p.name_hint for p in func.params}
    returned = func.body.body
    local: dict[str, str] = {}  # relax var -> the alloc_buffer holding it
    for binding in func.body.blocks[0].bindings:
        callee_gv, args = binding.value.args[0], binding.value.args[1].fields
        callee = mod[callee_gv]
        print(f"{binding.var.name_hint} = R.call_tir({callee_gv.name_hint}, {list(args)})")
        buffers = [callee.buffer_map[p] for p in callee.params]
        for buffer, value in zip(buffers, [*args, binding.var]):
            where = f"{callee_gv.name_hint}.{buffer.name}"
            if value.name_hint in params:
                fate = f"parameter {value.name_hint}"
            elif value.same_as(returned):
                fate = f"output parameter {buffer.name}"
            elif value.name_hint in local:
                fate = f"the local buffer {local[value.name_hint]} (written above)"
            else:
                local[value.name_hint] = buffer.name
                fate = f"T.alloc_buffer {buffer.name} (an intermediate)"
            print(f"    {where:<24} receives {value.name_hint:<3} -> {fate}")


# %% tags=["nbval-check-output", "shows:fuse-tir-plan"]
fuse_tir_plan(MLPModelTIR, "fused_dense_add0")

# %% [markdown]
# Now run the pass, and look at the PrimFunc it made:

# %% tags=["nbval-check-output"]
MLPModelFinal = relax.transform.FuseTIR()(MLPModelTIR)
print(MLPModelFinal["fused_dense_add0"].script())

# %% [markdown]
# Everything the plan said is there: the parameters `x`, `w`, `b` and `T_add`,
# `T_matmul_NT` allocated inside with `T.alloc_buffer`, and the two loop nests in order, the
# second reading `T_matmul_NT` where `add` read its parameter `lv`. Side by side with the
# two callees it came from (left: `dense` and `add`; right: the fused function), the
# changes are few: two signatures became one, `dense`'s output parameter `T_matmul_NT`
# became an allocation, and `add`'s load of `lv` became a load of `T_matmul_NT`. The loop
# nests themselves are copied unchanged.


# %%
def listing(mod: IRModule, *names: str) -> str:
    """The functions ``names`` of ``mod`` printed one after another, without import lines."""
    lines = [line for name in names for line in mod[name].script(name=name).splitlines()]
    return "\n".join(line for line in lines if not line.startswith("# from"))


viz.diff(
    listing(MLPModelTIR, "dense", "add"),
    listing(MLPModelFinal, "fused_dense_add0"),
    side_by_side=True,
    names=("dense, add", "fused_dense_add0"),
)

# %% [markdown]
# A local allocation is what makes the fused kernel better than two calls. The intermediate
# is no longer a tensor the [virtual machine](glossary.md#virtual-machine) allocates and
# passes between kernels; it belongs to the kernel, where a schedule may shrink it to a few
# registers (or inline it away) since no one else reads it. In `main`, the calls changed
# form, and the relu kernel, which was not in any group, stayed as it was:

# %%
viz.diff(
    MLPModelTIR["main"],
    MLPModelFinal["main"],
    side_by_side=True,
    names=("before FuseTIR", "after FuseTIR"),
)

# %% [markdown]
# ## Build and run
#
# The final module is a relax `main` calling three PrimFuncs, ready for `relax.build`. We
# classify a FashionMNIST image from those shipped with mlckit (the course loads one with
# torchvision), and compare with numpy's forward pass of the same weights.

# %%
data = fashion_mnist("sprite900", dtype="float32")
index = 7 * 90 + 5  # a sneaker: the images come 90 per class, in label order
img, label = data.images[index], data.labels[index]

plt.figure(figsize=(3, 3))
plt.imshow(img, cmap="gray")
plt.axis("off")
plt.show()

# %% tags=["nbval-check-output"]
ex = relax.build(MLPModelFinal, target="llvm")
vm = relax.VirtualMachine(ex, mlckit.cpu())
data_nd = mlckit.nd.array(img.reshape(1, 784))
nd_res = vm["main"](data_nd)
pred_kind = np.argmax(nd_res.numpy(), axis=1)
print("Class:", data.class_names[label])
print("MLPModule Prediction:", data.class_names[pred_kind[0]])
print("same logits as numpy:", np.allclose(nd_res.numpy(), mlp_reference(img[None]), atol=1e-4))

# %% [markdown]
# One image proves little. The same executable on all 900 images, against numpy:

# %% tags=["nbval-check-output"]
preds = np.array([vm["main"](im.reshape(1, 784)).numpy()[0].argmax() for im in data.images])
numpy_preds = mlp_reference(data.images).argmax(axis=1)
print(f"predictions equal to numpy's: {(preds == numpy_preds).sum()} of {len(preds)}")
print(f"accuracy: {(preds == data.labels).mean():.3f}")

# %% [markdown]
# ## The automatic pipeline: LegalizeOps, AnnotateTIROpPattern, FuseOps, FuseTIR
#
# `DenseAddFusor` knew exactly one pattern, by operator name. A compiler cannot list every
# pattern worth fusing, and operator names say little about what can be fused. mlckit's
# pipeline (TVM's) decides from the loop nests instead, in four passes:
#
# 1. **`LegalizeOps`** ([legalization](glossary.md#legalization)) lowers every high-level
#    operator to a `call_tir` of a PrimFunc from `topi`: our `LowerToTensorIR`, for all
#    operators at once.
# 2. **`AnnotateTIROpPattern`** reads each PrimFunc's loop nest and labels it with an
#    [operator pattern kind](glossary.md#operator-pattern-kind): *element-wise* (each output
#    element reads the same element of an input: add, relu), *broadcast*, *injective*
#    (reshape, transpose), *reduction*, *out-element-wise-fusable* (a reduction like `dense`
#    whose output can absorb element-wise work), or *opaque* (never fused).
# 3. **`FuseOps`** walks the dataflow graph and groups calls by those kinds, for instance:
#    element-wise ops fuse with each other, and an out-element-wise-fusable op takes the
#    element-wise ops that follow it into its group. Each group becomes a `Primitive`
#    function, as ours did ([operator fusion](glossary.md#operator-fusion)).
# 4. **`FuseTIR`** merges each group into one PrimFunc, as above.
#
# `PassStepper` runs a pipeline and shows every step: the pass's name, its change to the
# printed module (as a diff), the graph of `main` with new nodes outlined, and the module
# after the step. Move through the steps with the buttons.

# %%
pipeline = [
    relax.transform.LegalizeOps(),
    relax.transform.AnnotateTIROpPattern(),
    relax.transform.FuseOps(),
    relax.transform.FuseTIR(),
]
stepper = PassStepper(MLPModel, pipeline)
stepper

# %% [markdown]
# (In a running notebook, `stepper.widget` gives the same steps as a live widget with a
# slider.) Each step's module is kept in `stepper.steps[i].after`. The labels that
# `AnnotateTIROpPattern` wrote, the groups `FuseOps` made, and the kernels left at the end:

# %% tags=["nbval-check-output"]
from mlckit.relax.analysis.op_pattern import OpPatternKind

legalized, annotated, grouped, fused = (step.after for step in stepper.steps[1:])
for gv, func in annotated.functions.items():
    if isinstance(func, mlckit.tir.PrimFunc):
        print(f"{gv.name_hint:<6} op_pattern = {OpPatternKind(func.attrs['op_pattern']).name}")
print()
for gv, func in grouped.functions.items():
    if isinstance(func, relax.Function) and func.attrs.get("Primitive"):
        kernels = [b.value.args[0].name_hint for b in func.body.blocks[0].bindings]
        print(f"group {gv.name_hint}: {' -> '.join(kernels)}")
print()
print(
    "main calls:",
    [
        b.value.args[0].name_hint
        for b in fused["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call)
    ],
)

# %% [markdown]
# `FuseOps` went further than our hand-written pass: `relu` is element-wise, so it joined
# the first group, giving `fused_dense_add_relu`, and the whole MLP runs as two kernels.
#
# Here is `main` after `LegalizeOps`, each kernel coloured by its pattern kind (drawn with
# the module, `viz.graph(mod, function="main")`, so that the picture can look into the
# PrimFuncs):

# %%
viz.graph(legalized, function="main", legend=True)

# %% [markdown]
# After `FuseOps`, the groups (`expand_fused=True` draws each fused function as a box
# around the calls it holds): each orange kernel took the blue ones after it, and the second
# group ends with the function's result.

# %%
viz.graph(grouped, function="main", expand_fused=True)

# %% [markdown]
# And after `FuseTIR`, drawn over the graph before fusion: the two kernels that remain
# (outlined) replace the five (greyed where gone).

# %%
viz.graph_diff(legalized, fused, function="main")

# %% [markdown]
# ## What fusion buys
#
# Fusion changes no arithmetic: the same multiplies and adds run. What it saves is
#
# * **kernel calls**: the virtual machine checks arguments and calls a kernel for every
#   `call_tir`: two calls instead of five;
# * **intermediate tensors**: each unfused `call_tir` writes a whole tensor that the next one
#   reads back; the VM allocates it, and the data makes a round trip through memory. Inside
#   a fused kernel the intermediate is local, and mlckit's default CPU schedule folds the bias
#   and the ReLU into the dense's write-back, so that the intermediate disappears.
#
# Counting both in `main`, before fusion (`LegalizeOps` only) and after the pipeline:


# %%
def calls_and_intermediates(mod: IRModule) -> tuple[int, int, int]:
    """The call_tirs in main, the tensors one of them passes to another, and their bytes."""
    calls = [
        b
        for b in mod["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call) and b.value.op == mlckit.ir.Op.get("relax.call_tir")
    ]
    read = {arg for b in calls for arg in b.value.args[1].fields}
    passed = [b.var for b in calls if b.var in read]
    nbytes = sum(4 * int(np.prod([int(d) for d in v.struct_info.shape.values])) for v in passed)
    return len(calls), len(passed), nbytes


# %%
for kind, mod in [("unfused", legalized), ("fused", fused)]:
    calls, tensors, nbytes = calls_and_intermediates(mod)
    plural = "s" if tensors != 1 else ""
    print(
        f"{kind:>7}: {calls} kernel calls, {tensors} intermediate tensor{plural} ({nbytes} bytes)"
    )

# %% [markdown]
# The one tensor left after fusion is the hidden layer, which the first kernel passes to the
# second. We build both versions for one image and for a batch of 64, and time `main` with
# the VM's `time_evaluator`: 150 single calls of each, in rounds that take the four builds
# in turn, keeping each one's fastest call. Other programs on the machine slow some calls
# down (the threads of a parallel loop wait for each other and for a core), never speed one
# up, and the rounds make a busy spell of the machine fall on all four alike. Timings still
# vary from run to run and from machine to machine. <!-- shown-by: fusion-timing -->


# %% tags=["shows:fusion-timing"]
def main_evaluator(mod: IRModule, batch: int):
    """The time_evaluator of ``mod``'s main, built for the CPU, and an input of ``batch`` rows."""
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), mlckit.cpu())
    x = mlckit.nd.array(np.random.default_rng(0).random((batch, 784), dtype=np.float32))
    return vm.time_evaluator("main", mlckit.cpu(), number=1, repeat=30), x


batches = [1, 64]
evaluators = {}
for batch in batches:
    model = create_model(batch)
    for kind, passes in [("unfused", pipeline[:1]), ("fused", pipeline)]:
        mod = mlckit.ir.transform.Sequential(passes)(model)
        evaluators[kind, batch] = main_evaluator(mod, batch)
best = dict.fromkeys(evaluators, float("inf"))
for _ in range(5):
    for key, (timer, x) in evaluators.items():
        best[key] = min(best[key], timer(x).min)
times = {kind: [best[kind, batch] for batch in batches] for kind in ("unfused", "fused")}

fig, axes = plt.subplots(1, 2, figsize=(8, 3))
for i, (ax, batch) in enumerate(zip(axes, batches)):
    values = [times["unfused"][i] * 1e6, times["fused"][i] * 1e6]
    ax.bar(["unfused\n(5 kernels)", "fused\n(2 kernels)"], values, color=["#BBBBBB", "#4477AA"])
    ax.set_title(f"batch {batch}")
    ax.set_ylabel("µs per call of main")
fig.tight_layout()
plt.show()
for i, batch in enumerate(batches):
    unfused_us, fused_us = times["unfused"][i] * 1e6, times["fused"][i] * 1e6
    print(f"batch {batch:>2}: unfused {unfused_us:6.1f} µs, fused {fused_us:6.1f} µs")
print(f"(parallel loops, at batch 64, use {numba.get_num_threads()} threads)")

# %% [markdown]
# What the chart shows depends on what dominates the time. For one image, the arithmetic
# takes a few microseconds, so the fixed cost of every kernel call and every allocated
# intermediate is a large part of the total, and fusion removes a visible share of it. For
# a batch of 64, the first `dense` does 64 times the arithmetic and dominates, while what
# fusion saves (three calls, and intermediates that stay in the cache at this size) hardly
# grows: which version wins can change from run to run. <!-- shown-by: fusion-timing -->
# Fusion matters most where memory traffic and call overhead, not arithmetic, dominate:
# small batches, and chains of element-wise operators on big tensors, where every unfused
# step reads and writes the whole tensor once more. On a GPU, where each kernel launch
# costs microseconds and memory bandwidth is the usual limit, it matters even more.
#
# ## Discussion
#
# This chapter came back to the course's theme: ML compilation as transformations of
# tensor functions, here at the level of the graph. Short as it is, the sequence above covers
# two optimizations every ML compiler makes: fusion, and lowering to loop-level code.
#
# Real fusion passes are more careful than `DenseAddFusor`. If the output of a `dense` fed
# two `add`s, our pass would copy the dense into two fused functions and compute it twice; a
# robust fusor detects that and skips the case. `FuseOps` avoids listing patterns at all by
# reasoning with operator pattern kinds. And the passes compose: a hand-written fusor for a
# pattern you care about can run first, and the library's passes then handle the rest
# (exercise 3 does exactly that).
#
# ## Summary
#
# * An IRModule's functions are trees of nodes (`Function`, `SeqExpr`, `DataflowBlock`,
#   `VarBinding`, `Call`, ...); `viz.graph(node, tree=True)` draws one.
# * A `relax.PyExprMutator` rewrites a function by visiting every node; override
#   `visit_call_`, find patterns with `lookup_binding`, and clean up with
#   `remove_all_unused`.
# * Fusion groups operators into a `Primitive` sub-function; `bb.call_te` lowers operators to
#   TensorIR; `FuseTIR` turns each group into one PrimFunc, remapping the callees' buffers to
#   the fused function's parameters and turning intermediates into local allocations.
# * `LegalizeOps → AnnotateTIROpPattern → FuseOps → FuseTIR` does all of it automatically,
#   deciding what to fuse from the loop nests.
# * Fusion saves kernel calls and intermediate tensors; it matters most where those, not the
#   arithmetic, cost the time.
#
# ## Exercises
#
# Each exercise is checked by `check(name, answer)`, which runs your answer and compares it
# with what the exercise asks for; `hint(name, 1)` (then 2, 3) gives graded hints, and
# `solution(name)` (`from mlckit.exercises import solution`) shows a solution once you have
# tried. The cells below run as they are and
# show "✗ not yet": edit them until the check passes.

# %%
from mlckit.exercises import check, hint
from mlckit.exercises.ch7 import AddReluModule, GroupedMLP, MulByTwoModule

# %% [markdown]
# ### Exercise 1: multiplying by two becomes an addition (`ch7.mul_by_two`)
#
# `x * 2` and `x + x` are equal, and an addition is cheaper than a multiplication on many
# processors; compilers make this swap (*strength reduction*) as a graph rewrite. Complete
# `MulByTwoToAdd` so that every `R.multiply(a, c)` where `c` is the scalar constant 2
# becomes `R.add(a, a)`, and every other call stays as it is. The check applies your class
# to `MulByTwoModule["main"]` (below: it multiplies by 2 twice, by 3 once and by a tensor
# once), looks at what is left, and runs both versions on random inputs. A constant operand
# is a `relax.Constant`; `c.data.numpy()` gives its value.

# %%
MulByTwoModule.show()


# %%
@relax.expr_functor.mutator
class MulByTwoToAdd(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        # your code: in place of R.multiply(a, 2), return relax.op.add(a, a)
        return call


check("ch7.mul_by_two", MulByTwoToAdd)

# %%
hint("ch7.mul_by_two", 1)

# %% [markdown]
# ### Exercise 2: fuse add and relu (`ch7.fuse_add_relu`)
#
# Write the fusion pass for another pattern: `R.nn.relu(R.add(a, b))` becomes a call of a
# new `Primitive` function `fused_add_relu<i>(a, b)` that computes the add, then the relu.
# `AddReluModule` has two such pairs, and a relu of a multiply that must stay. The check
# runs your pass on it, inspects `main` and the new functions, lowers the result with
# `LegalizeOps` and `FuseTIR` (so your functions must be fusable), and runs it on random
# inputs. The skeleton is `DenseAddFusor` with its pattern taken out.

# %%
AddReluModule.show()


# %%
@relax.expr_functor.mutator
class AddReluFusor(relax.PyExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__()
        self.mod_ = mod
        self.add_op = mlckit.ir.Op.get("relax.add")
        self.relu_op = mlckit.ir.Op.get("relax.nn.relu")
        self.counter = 0

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            if func.attrs.get("Primitive", 0) != 0:
                continue
            updated_func = self.visit_expr(func)
            updated_func = relax.analysis.remove_all_unused(updated_func)
            self.builder_.update_func(global_var, updated_func)
        return self.builder_.get()

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        # your code: match relu(add(a, b)), build fused_add_relu<i>(a, b) marked Primitive,
        # add it to self.builder_, and return a call of it
        return call


@mlckit.ir.transform.module_pass(opt_level=0, name="FuseAddRelu")
class FuseAddReluPass:
    def transform_module(self, mod, ctx):
        return AddReluFusor(mod).transform()


check("ch7.fuse_add_relu", FuseAddReluPass())

# %% [markdown]
# ### Exercise 3: finish a hand-made fusion with library passes (`ch7.lower_and_fuse`)
#
# Passes compose. `FuseDenseAddPass` groups each dense with its add into a `Primitive`
# function and leaves high-level operators everywhere (see `MLPFused` above). Give the list
# of library passes (from `relax.transform`, not the hand-written `LowerToTensorIR`) that
# turns such a module into one whose `main` calls exactly three TensorIR kernels: dense+add,
# relu, dense+add. The check runs your passes on `GroupedMLP`, a small MLP grouped the way
# `FuseDenseAddPass` groups it, and runs the result on random inputs. Try your list on
# `MLPFused` too, and build it.

# %%
GroupedMLP.show()

# %%
passes = []  # your passes, in the order they run

check("ch7.lower_and_fuse", passes)
