"""The functions Gradient, ForwardGradient and AppendLoss add have symbolic dims of their
own: a module with a symbolic batch prints and reads back as the same module, and builds."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.relax.training import AppendLoss
from mlckit.relax.training.loss import MSELoss
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.tir import expr as texpr


@I.ir_module
class Symbolic:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32")):
        n = T.int64()
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.reshape(lv, R.shape([n * 3]))
            gv = R.sum(lv1)
            R.output(gv)
        return gv


def _dims(func):
    return {
        id(d) for p in func.params for d in p.struct_info_.shape_values if isinstance(d, texpr.Var)
    }


@pytest.mark.parametrize(
    "transform, added",
    [
        (relax.transform.Gradient("main"), "main_adjoint"),
        (relax.transform.ForwardGradient("main"), "main_jvp"),
    ],
)
def test_differentiated_function_has_its_own_dims(transform, added):
    mod = transform(Symbolic)
    assert _dims(mod[added]) and not _dims(mod[added]) & _dims(mod["main"])
    assert_structural_equal(from_source(mod.script()), mod)
    vm = relax.VirtualMachine(
        mlckit.build(relax.get_pipeline("default")(mod), "llvm"), mlckit.cpu()
    )
    x = np.ones((5, 4), "float32")
    w = np.ones((4, 3), "float32")
    args = [x, w] if added == "main_adjoint" else [x, w, x, w]
    result, _ = vm[added](*args)
    assert float(result.numpy()) == 60.0


def test_append_loss_maps_the_loss_dims_onto_the_backbone_ones():
    @I.ir_module
    class Backbone:
        @R.function
        def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32")):
            with R.dataflow():
                lv = R.matmul(x, w)
                R.output(lv)
            return lv

    prediction = relax.TensorStructInfo((texpr.Var("m", "int64"), 3), "float32")
    loss = MSELoss(reduction="sum")(prediction, prediction)
    mod = AppendLoss("main", loss)(Backbone)
    main_loss = mod["main_loss"]
    x, _, targets = main_loss.params
    assert targets.struct_info_.shape_values[0] is x.struct_info_.shape_values[0]
    assert not _dims(main_loss) & _dims(mod["main"])
    assert_structural_equal(from_source(mod.script()), mod)
