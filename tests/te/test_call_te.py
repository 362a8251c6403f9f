"""bb.call_te / bb.emit_te: relax values in, a PrimFunc added and an R.call_tir out."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import MLCError, relax, te, tir, topi
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


def test_mlp_with_emit_te_runs_on_the_vm():
    bb = relax.BlockBuilder()
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 16), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((8, 16), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((8,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((4, 8), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit_te(topi.nn.dense, x, w0)
            lv1 = bb.emit_te(topi.add, lv0, b0)
            lv2 = bb.emit_te(topi.nn.relu, lv1)
            lv3 = bb.emit_te(topi.nn.dense, lv2, w1)
            gv = bb.emit_output(bb.call_te(topi.add, lv3, b1))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert [gv.name_hint for gv in mod.functions] == [
        "dense",
        "add",
        "relu",
        "dense1",
        "add1",
        "main",
    ]
    assert_structural_equal(from_source(mod.script()), mod)

    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal(s).astype("float32") for s in [(3, 16), (8, 16), (8,), (4, 8), (4,)]
    ]
    out = relax.VirtualMachine(relax.build(mod, "python"))["main"](*args)
    xs, w0_, b0_, w1_, b1_ = args
    np.testing.assert_allclose(
        out.numpy(), np.maximum(xs @ w0_.T + b0_, 0) @ w1_.T + b1_, rtol=1e-4, atol=1e-5
    )


def test_add_prints_as_tvm_legalizes_it():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 4), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x, y]):
        gv = bb.emit_te(topi.add, x, y)
        bb.emit_func_output(gv)

    @I.ir_module
    class Expected:
        @T.prim_func(private=True)
        def add(
            x: T.Buffer((T.int64(1), T.int64(4)), "float32"),
            y: T.Buffer((T.int64(4),), "float32"),
            T_add: T.Buffer((T.int64(1), T.int64(4)), "float32"),
        ):
            T.func_attr({"tir.noalias": True})
            for ax0, ax1 in T.grid(T.int64(1), T.int64(4)):
                with T.block("T_add"):
                    v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                    T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + y[v_ax1]

        @R.function
        def main(
            x: R.Tensor((1, 4), dtype="float32"), y: R.Tensor((4,), dtype="float32")
        ) -> R.Tensor((1, 4), dtype="float32"):
            cls = Expected
            gv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((1, 4), dtype="float32"))
            return gv

    assert_structural_equal(bb.get(), Expected)


def test_symbolic_value_not_in_any_shape_becomes_a_tir_var():
    bb = relax.BlockBuilder()
    m = tir.Var("m", "int64")
    x = relax.Var("x", relax.TensorStructInfo((10,), "float32"))
    y = relax.Var("y", relax.ShapeStructInfo([m]))

    def te_func(A: te.Tensor, offset: tir.PrimExpr) -> te.Tensor:
        return te.compute(A.shape, lambda i: A[i + offset], name="B")

    with bb.function("main", [x, y]):
        out = bb.emit_te(te_func, x, m)
        bb.emit_func_output(out)

    @I.ir_module
    class Expected:
        @T.prim_func(private=True)
        def te_func(
            A: T.Buffer((T.int64(10),), "float32"),
            B: T.Buffer((T.int64(10),), "float32"),
            m: T.int64,
        ):
            T.func_attr({"tir.noalias": True})
            for i in range(T.int64(10)):
                with T.block("B"):
                    v_i = T.axis.spatial(T.int64(10), i)
                    B[v_i] = A[v_i + m]

        @R.function
        def main(x: R.Tensor((10,), dtype="float32"), y: R.Shape(["m"])) -> R.Tensor(
            (10,), dtype="float32"
        ):
            m = T.int64()
            cls = Expected
            gv = R.call_tir(
                cls.te_func, (x,), out_sinfo=R.Tensor((10,), dtype="float32"), tir_vars=R.shape([m])
            )
            return gv

    assert_structural_equal(bb.get(), Expected)


def test_identical_prim_funcs_are_shared_and_names_deduplicated():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    with bb.function("main", [x]):
        a = bb.emit_te(topi.exp, x)
        b = bb.emit_te(topi.exp, x)
        c = bb.emit_te(topi.multiply, a, b, primfunc_name_hint="exp")
        d = bb.emit_te(topi.concatenate, [c, x], axis=1)
        bb.emit_func_output(d)
    mod = bb.get()
    assert [gv.name_hint for gv in mod.functions] == ["exp", "exp1", "concatenate", "main"]
    arr = np.random.rand(2, 3).astype("float32")
    out = relax.VirtualMachine(relax.build(mod, "python"))["main"](arr).numpy()
    np.testing.assert_allclose(out, np.concatenate([np.exp(arr) ** 2, arr], 1), rtol=1e-5)


def test_call_te_errors():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(dtype="float32", ndim=2))
    with bb.function("main", [x]):
        with pytest.raises(MLCError, match="shape and dtype are known"):
            bb.emit_te(topi.exp, x)
        with pytest.raises(MLCError, match="must return a te tensor"):
            bb.call_te(lambda: 1.0)
        bb.emit_func_output(x)
