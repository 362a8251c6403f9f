"""FuseOpsByPattern: matches become private composite functions called from the block."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.relax.dpl import is_call_tir, is_op, make_fused_bias_activation_pattern, wildcard
from mlckit.relax.transform.bind_params import BindParams
from mlckit.relax.transform.fuse_ops_by_pattern import (
    FuseOpsByPattern,
    FusionError,
    PatternCheckContext,
)
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

MATMUL = is_op("relax.matmul")(wildcard(), wildcard())
DENSE_RELU = make_fused_bias_activation_pattern(
    "relax.matmul", with_bias=True, activation="relax.nn.relu"
)


@I.ir_module
class Mlp:
    @R.function
    def main(
        x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32"), b: R.Tensor((8,), "float32")
    ):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w)
            gv = R.exp(lv3)
            R.output(gv)
        return gv


@I.ir_module
class MlpFused:
    @R.function
    def main(
        x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32"), b: R.Tensor((8,), "float32")
    ):
        cls = MlpFused
        with R.dataflow():
            lv2 = cls.fused_relax_matmul_relax_add_relax_nn_relu(x, w, b)
            lv3 = cls.fused_relax_matmul(lv2, w)
            gv = R.exp(lv3)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_matmul_relax_add_relax_nn_relu(
        x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32"), b: R.Tensor((8,), "float32")
    ) -> R.Tensor((4, 8), "float32"):
        R.func_attr({"Primitive": 1, "Composite": "cpu.dense_relu"})
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_matmul(
        lv2: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")
    ) -> R.Tensor((4, 8), "float32"):
        R.func_attr({"Primitive": 1, "Composite": "cpu.matmul"})
        with R.dataflow():
            gv = R.matmul(lv2, w)
            R.output(gv)
        return gv


def test_two_patterns_outline_two_composite_functions():
    after = FuseOpsByPattern([("cpu.dense_relu", DENSE_RELU), ("cpu.matmul", MATMUL)])(Mlp)
    assert_structural_equal(after, MlpFused)
    assert relax.analysis.well_formed(after)
    assert_structural_equal(mlckit.script.from_source(after.script()), after)


def test_earlier_patterns_win():
    after = FuseOpsByPattern([("cpu.matmul", MATMUL), ("cpu.dense_relu", DENSE_RELU)])(Mlp)
    assert sorted(gv.name_hint for gv in after.functions) == [
        "fused_relax_matmul",
        "fused_relax_matmul1",
        "main",
    ]
    ops = [b.value.op for b in after["main"].body.blocks[0].bindings]
    assert [getattr(op, "name", None) or op.name_hint for op in ops] == [
        "fused_relax_matmul",
        "relax.add",
        "relax.nn.relu",
        "fused_relax_matmul1",
        "relax.exp",
    ]


def test_a_larger_match_absorbs_an_earlier_group():
    dense = is_op("relax.add")(MATMUL, wildcard())
    pattern = dense | is_op("relax.nn.relu")(dense)
    after = FuseOpsByPattern([("cpu.dense_or_dense_relu", pattern)])(Mlp)
    assert "fused_relax_matmul_relax_add_relax_nn_relu" in after
    assert relax.analysis.well_formed(after)


@I.ir_module
class Branch:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.exp(lv0)
            lv2 = R.nn.relu(lv0)
            gv = R.add(lv1, lv2)
            R.output(gv)
        return gv


@I.ir_module
class BranchFused:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        cls = BranchFused
        with R.dataflow():
            lv = cls.fused_relax_matmul_relax_nn_relu(x, w)
            lv0 = lv[0]
            lv2 = lv[1]
            lv1 = R.exp(lv0)
            gv = R.add(lv1, lv2)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_relax_matmul_relax_nn_relu(
        x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")
    ) -> R.Tuple(R.Tensor((4, 8), "float32"), R.Tensor((4, 8), "float32")):
        R.func_attr({"Primitive": 1, "Composite": "cpu.matmul_relu"})
        with R.dataflow():
            gv0 = R.matmul(x, w)
            gv1 = R.nn.relu(gv0)
            R.output(gv0, gv1)
        return (gv0, gv1)


def test_a_value_also_used_outside_the_match_becomes_an_extra_output():
    pattern = is_op("relax.nn.relu")(MATMUL)
    after = FuseOpsByPattern([("cpu.matmul_relu", pattern)])(Branch)
    assert_structural_equal(after, BranchFused)


def test_a_match_depending_on_itself_is_a_cyclic_dependency():
    pattern = is_op("relax.add")(is_op("relax.nn.relu")(MATMUL), wildcard())
    with pytest.raises(FusionError, match="cyclic dependency"):
        FuseOpsByPattern([("cpu.bad", pattern)])(Branch)


def test_check_function_sees_the_match_and_may_reject_it():
    lhs, rhs = wildcard(), wildcard()
    root = is_op("relax.matmul")(lhs, rhs)
    seen: list[PatternCheckContext] = []

    def reject(context: PatternCheckContext) -> bool:
        seen.append(context)
        return False

    patterns = [("cpu.matmul", root, {"lhs": lhs, "rhs": rhs}, reject)]
    assert_structural_equal(FuseOpsByPattern(patterns)(Branch), Branch)
    (context,) = seen
    assert context.annotated_expr["lhs"].name_hint == "x"
    assert context.annotated_expr["rhs"].name_hint == "w"
    assert context.matched_expr.op.name == "relax.matmul"
    (lv0,) = context.matched_bindings
    assert [v.name_hint for v in context.var_usages[lv0]] == ["lv1", "lv2"]
    # A check given as the third item of the tuple.
    accept = FuseOpsByPattern([("cpu.matmul", root, lambda context: True)])(Branch)
    assert "fused_relax_matmul" in accept


def test_constants_stay_inside_unless_bind_constants_is_false():
    weight = np.ones((8, 8), "float32")
    mod = BindParams("main", {"w": weight})(Branch)
    kept = FuseOpsByPattern([("cpu.matmul", MATMUL)])(mod)
    func = kept["fused_relax_matmul"]
    assert len(func.params) == 1
    assert isinstance(func.body.blocks[0].bindings[0].value.args[1], relax.Constant)

    lifted = FuseOpsByPattern([("cpu.matmul", MATMUL)], bind_constants=False)(mod)
    func = lifted["fused_relax_matmul"]
    assert [p.name_hint for p in func.params] == ["x", "param_1"]
    call = lifted["main"].body.blocks[0].bindings[0].value
    assert isinstance(call.args[1], relax.Constant)


def test_annotate_codegen_wraps_the_composite_in_a_codegen_function():
    after = FuseOpsByPattern([("dnnl.matmul", MATMUL)], annotate_codegen=True)(Branch)
    outer = after["fused_relax_matmul_dnnl"]
    assert outer.attrs == {"Codegen": "dnnl", "global_symbol": "fused_relax_matmul_dnnl"}
    local, call = outer.body.blocks[0].bindings
    assert isinstance(local.value, relax.Function)
    assert local.value.attrs == {"Composite": "dnnl.matmul"}
    assert call.value.op is local.var and list(call.value.args) == list(outer.params)
    assert relax.analysis.well_formed(after)
    # Fused functions are not fused again.
    again = FuseOpsByPattern([("dnnl.matmul", MATMUL)], annotate_codegen=True)(after)
    assert_structural_equal(again, after)


def test_no_pattern_or_no_match_changes_nothing():
    assert_structural_equal(FuseOpsByPattern([])(Mlp), Mlp)
    assert_structural_equal(
        FuseOpsByPattern([("x.exp2", is_op("relax.sqrt")(wildcard()))])(Mlp), Mlp
    )


def test_bad_pattern_entries_are_reported():
    with pytest.raises(FusionError, match=r"takes patterns as \(name, pattern\)"):
        FuseOpsByPattern([MATMUL])
    with pytest.raises(FusionError, match="got a int and a"):
        FuseOpsByPattern([(1, MATMUL)])


@I.ir_module
class Kernels:
    @T.prim_func
    def linear(
        X: T.Buffer((4, 8), "float32"),
        W: T.Buffer((8, 8), "float32"),
        Y: T.Buffer((4, 8), "float32"),
    ):
        for i, j, k in T.grid(4, 8, 8):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0.0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vk, vj]

    @T.prim_func
    def relu(X: T.Buffer((4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        cls = Kernels
        with R.dataflow():
            lv0 = R.call_tir(cls.linear, (x, w), out_sinfo=R.Tensor((4, 8), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((4, 8), "float32"))
            lv2 = R.call_tir(cls.linear, (lv1, w), out_sinfo=R.Tensor((4, 8), "float32"))
            gv = R.call_tir(cls.relu, (lv2,), out_sinfo=R.Tensor((4, 8), "float32"))
            R.output(gv)
        return gv


def test_fusing_call_tir_keeps_numerics():
    pattern = is_call_tir("relu", [is_call_tir("linear")])
    after = FuseOpsByPattern([("cpu.linear_relu", pattern)])(Kernels)
    assert [gv.name_hint for gv in after.functions].count(
        "fused_relax_call_tir_relax_call_tir"
    ) == 1
    assert "fused_relax_call_tir_relax_call_tir1" in after
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype("float32")
    w = rng.standard_normal((8, 8)).astype("float32")
    want = np.maximum(np.maximum(x @ w, 0) @ w, 0)
    for mod in (Kernels, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x, w).numpy(), want, rtol=1e-5, atol=1e-5)
