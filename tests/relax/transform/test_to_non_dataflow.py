"""ToNonDataflow: dataflow blocks become binding blocks, dataflow vars plain vars."""

from __future__ import annotations

import numpy as np

from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.relax.transform.to_non_dataflow import ToNonDataflow
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


@I.ir_module
class Before:
    @T.prim_func
    def exp(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = T.exp(X[vi])

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Before
        y = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((4,), "float32"))
        with R.dataflow():
            lv0 = R.call_tir(cls.exp, (y,), out_sinfo=R.Tensor((4,), "float32"))
            lv1 = R.match_cast(lv0, R.Tensor((4,), "float32"))
            gv = R.call_tir(cls.exp, (lv1,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv


@I.ir_module
class Expected:
    @T.prim_func
    def exp(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = T.exp(X[vi])

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Expected
        y = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((4,), "float32"))
        lv0 = R.call_tir(cls.exp, (y,), out_sinfo=R.Tensor((4,), "float32"))
        lv1 = R.match_cast(lv0, R.Tensor((4,), "float32"))
        gv = R.call_tir(cls.exp, (lv1,), out_sinfo=R.Tensor((4,), "float32"))
        return gv


def test_dataflow_blocks_become_plain_bindings():
    after = ToNonDataflow()(Before)
    assert_structural_equal(after, Expected)
    func = after["main"]
    (block,) = func.body.blocks
    assert type(block) is relax.BindingBlock
    assert all(type(b.var) is relax.Var for b in block.bindings)
    assert relax.analysis.well_formed(after)
    x = np.linspace(-1, 1, 4).astype("float32")
    for mod in (Before, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(np.exp(np.exp(x))), rtol=1e-5)


def test_a_function_without_dataflow_is_unchanged():
    assert_structural_equal(ToNonDataflow()(Expected), Expected)
