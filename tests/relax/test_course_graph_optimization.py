"""The course's "computational graph optimization" walk-through (seed 002), in its own API.

Only the imports and the spellings that even classic TVM dropped changed:
``relax.Var(name, x.shape_, x._checked_type_)`` is ``relax.Var(name, x.struct_info)``.
"""

from __future__ import annotations

# ruff: noqa: SIM118, UP031 - the course's code, kept as the course writes it
import numpy as np

import mlckit as tvm
from mlckit import relax, topi
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference
from mlckit.ir import IRModule

params = mlp_params()


def create_model():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    w0 = relax.const(params["w0"], "float32")
    b0 = relax.const(params["b0"], "float32")
    w1 = relax.const(params["w1"], "float32")
    b1 = relax.const(params["b1"], "float32")
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


@relax.expr_functor.mutator
class DenseAddFusor(relax.PyExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__()
        self.mod_ = mod
        self.add_op = tvm.ir.Op.get("relax.add")
        self.dense_op = tvm.ir.Op.get("relax.nn.dense")
        self.counter = 0

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            if "Primitive" in func.attrs.keys() and func.attrs["Primitive"] != 0:
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
        param_x = relax.Var("x", x.struct_info)
        param_w = relax.Var("w", w.struct_info)
        param_b = relax.Var("b", b.struct_info)
        bb = relax.BlockBuilder()
        fn_name = "fused_dense_add%d" % (self.counter)
        self.counter += 1
        with bb.function(fn_name, [param_x, param_w, param_b]):
            with bb.dataflow():
                lv0 = bb.emit(relax.op.nn.dense(param_x, param_w))
                gv = bb.emit_output(relax.op.add(lv0, param_b))
            bb.emit_func_output(gv)
        fused_fn = bb.get()[fn_name].with_attr("Primitive", 1)
        global_var = self.builder_.add_func(fused_fn, fn_name)
        return relax.Call(global_var, [x, w, b], None, None)


@tvm.ir.transform.module_pass(opt_level=2, name="DeseAddFuse")
class FuseDenseAddPass:
    """The wrapper for the LowerTensorIR pass."""

    def transform_module(self, mod, ctx):
        return DenseAddFusor(mod).transform()


@relax.expr_functor.mutator
class LowerToTensorIR(relax.PyExprMutator):
    def __init__(self, mod: IRModule, op_map) -> None:
        super().__init__()
        self.mod_ = mod
        self.op_map = {tvm.ir.Op.get(k): v for k, v in op_map.items()}

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


op_map = {"relax.nn.dense": map_dense, "relax.add": map_add, "relax.nn.relu": map_relu}


@tvm.ir.transform.module_pass(opt_level=0, name="LowerToTensorIR")
class LowerToTensorIRPass:
    """The wrapper for the LowerTensorIR pass."""

    def transform_module(self, mod, ctx):
        return LowerToTensorIR(mod, op_map).transform()


def _images(n: int):
    images, labels, _ = fashion_mnist("sprite900")
    picked = np.arange(0, 900, 900 // n)[:n]
    return images[picked], labels[picked]


def test_hand_written_fusion_and_lowering_then_fuse_tir_runs_the_mlp():
    MLPModel = create_model()
    MLPFused = FuseDenseAddPass()(MLPModel)
    names = sorted(gv.name_hint for gv in MLPFused.get_global_vars())
    assert names == ["fused_dense_add0", "fused_dense_add1", "main"]
    assert MLPFused["fused_dense_add0"].attrs["Primitive"] == 1
    calls = [b.value for b in MLPFused["main"].body.blocks[0].bindings]
    callees = [
        c.op.name_hint if isinstance(c.op, relax.GlobalVar) else c.op.name
        for c in calls
        if isinstance(c, relax.Call)
    ]
    assert callees == ["fused_dense_add0", "relax.nn.relu", "fused_dense_add1"]

    MLPModelTIR = LowerToTensorIRPass()(MLPFused)
    MLPModelFinal = relax.transform.FuseTIR()(MLPModelTIR)
    final_names = sorted(gv.name_hint for gv in MLPModelFinal.get_global_vars())
    assert "fused_dense_add0" in final_names and "fused_dense_add1" in final_names
    assert isinstance(MLPModelFinal["fused_dense_add0"], tvm.tir.PrimFunc)
    text = MLPModelFinal.script()
    assert 'with T.block("T_matmul_NT"):' in text and 'with T.block("T_add"):' in text

    ex = relax.build(MLPModelFinal, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    images, _ = _images(8)
    for img in images:
        data_nd = tvm.nd.array((img.reshape(1, 784) / 255).astype("float32"))
        nd_res = vm["main"](data_nd)
        expected = mlp_reference(img[None], params)
        np.testing.assert_allclose(nd_res.numpy(), expected, rtol=1e-4, atol=1e-4)
        assert np.argmax(nd_res.numpy(), axis=1)[0] == np.argmax(expected, axis=1)[0]


def _run_on_images(mod, target="python", count=4):
    vm = relax.VirtualMachine(relax.build(mod, target=target), tvm.cpu())
    images, _ = _images(count)
    for img in images:
        out = vm["main"]((img.reshape(1, 784) / 255).astype("float32")).numpy()
        np.testing.assert_allclose(out, mlp_reference(img[None], params), rtol=1e-4, atol=1e-4)


def test_automatic_pipeline_fuses_each_dense_with_its_bias_and_relu():
    mod = create_model()
    seq = tvm.ir.transform.Sequential(
        [
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )
    fused = seq(mod)
    kernels = sorted(
        gv.name_hint for gv, f in fused.functions.items() if isinstance(f, tvm.tir.PrimFunc)
    )
    assert kernels == ["fused_dense1_add1", "fused_dense_add_relu"]
    calls = [
        b.value for b in fused["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call)
    ]
    assert [c.args[0].name_hint for c in calls] == ["fused_dense_add_relu", "fused_dense1_add1"]
    _run_on_images(fused, target="llvm")
    # The named pipeline does the same (and drops dead code).
    names = sorted(gv.name_hint for gv in relax.get_pipeline("default")(mod).get_global_vars())
    assert names == ["fused_dense1_add1", "fused_dense_add_relu", "main"]


def test_memory_planning_on_the_mlp_allocates_less_and_computes_the_same():
    # Unfused, the MLP has five intermediates; the dead ones' storage is reused.
    mod = relax.transform.LegalizeOps()(create_model())
    explicit = relax.transform.CallTIRRewrite()(relax.transform.ToNonDataflow()(mod))
    planned = relax.transform.StaticPlanBlockMemory()(explicit)
    usage = relax.transform.estimate_memory_usage(planned)
    assert usage.bytes_after < usage.bytes_before
    assert relax.transform.estimate_memory_usage(explicit).bytes_after == usage.bytes_before
    _run_on_images(planned)


def test_rewritten_ewise_fma_program_legalizes_builds_and_runs():
    from test_expr_mutator import EwiseFMARewriter, MyModule

    rewritten = relax.analysis.remove_all_unused(EwiseFMARewriter().visit_expr(MyModule["main"]))
    mod = relax.transform.LegalizeOps()(IRModule({"main": rewritten}))
    vm = relax.VirtualMachine(relax.build(mod, "python"))
    x = np.random.default_rng(0).random((3, 4), dtype=np.float32)
    y = np.random.default_rng(1).random((3, 4), dtype=np.float32)
    np.testing.assert_allclose(vm["main"](x, y).numpy(), x * y + y, rtol=1e-6)
