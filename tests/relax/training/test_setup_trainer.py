"""relax.training.SetupTrainer: the training module built from a backbone equals Apache TVM's
expected module (with and without model states), round-trips through TVMScript with its
optimizer state, is fully legalized, and refuses malformed backbones by name."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import relax
from mlckit.errors import IRError, TransformError
from mlckit.ir import assert_structural_equal
from mlckit.relax.training import SetupTrainer
from mlckit.relax.training.loss import MSELoss
from mlckit.relax.training.optimizer import SGD, MomentumSGD
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R

F64 = relax.TensorStructInfo((2, 2), "float64")


@I.ir_module
class Backbone:
    I.module_attrs({"param_num": 1, "state_num": 0})

    @R.function
    def backbone(x: R.Tensor((2, 2), "float64"), y: R.Tensor((2, 2), "float64")):
        with R.dataflow():
            x1 = x + y
            R.output(x1)
        return x1


@I.ir_module
class Expected:
    I.module_attrs({"input_num": 1, "param_num": 1, "state_num": 0})

    @R.function
    def backbone(x: R.Tensor((2, 2), "float64"), y: R.Tensor((2, 2), "float64")):
        with R.dataflow():
            x1 = R.add(x, y)
            R.output(x1)
        return x1

    @R.function
    def backbone_loss(
        x: R.Tensor((2, 2), "float64"),
        y: R.Tensor((2, 2), "float64"),
        targets: R.Tensor((2, 2), "float64"),
    ):
        with R.dataflow():
            x1 = R.add(x, y)
            lv = R.subtract(x1, targets)
            lv1 = R.multiply(lv, lv)
            gv = R.sum(lv1, axis=None, keepdims=False)
            R.output(gv)
        return gv

    @R.function
    def backbone_loss_adjoint(
        x: R.Tensor((2, 2), "float64"),
        y: R.Tensor((2, 2), "float64"),
        targets: R.Tensor((2, 2), "float64"),
    ):
        with R.dataflow():
            x1 = R.add(x, y)
            lv = R.subtract(x1, targets)
            lv1 = R.multiply(lv, lv)
            gv = R.sum(lv1, axis=None, keepdims=False)
            gv_adjoint = R.ones(R.shape([]), dtype="float64")
            lv1_adjoint = R.broadcast_to(gv_adjoint, R.shape([2, 2]))
            lv_adjoint = R.multiply(lv1_adjoint, lv)
            lv_1 = R.multiply(lv1_adjoint, lv)
            lv_adjoint1 = R.add(lv_adjoint, lv_1)
            x1_adjoint = lv_adjoint1
            y_adjoint = x1_adjoint
            y_adjoint_out = y_adjoint
            R.output(gv, y_adjoint_out)
        return (gv, (y_adjoint_out,))

    @R.function
    def optimizer(
        params: R.Tuple(R.Tensor((2, 2), "float64")),
        gradients: R.Tuple(R.Tensor((2, 2), "float64")),
        optim_states: R.Tuple(R.Tensor((), "int64")),
    ):
        with R.dataflow():
            num_steps = optim_states[0]
            num_steps_new = R.add(num_steps, R.const(1, "int64"))
            y = params[0]
            y_grad = gradients[0]
            lv = R.multiply(R.const(0.1, "float64"), y_grad)
            y_new = R.subtract(y, lv)
            params_new = (y_new,)
            optim_states_new = (num_steps_new,)
            R.output(params_new, optim_states_new)
        return (params_new, optim_states_new)


def test_backbone_to_training_module():
    train_mod = SetupTrainer(MSELoss(reduction="sum"), SGD(0.1), [F64, F64], legalize=False)(
        Backbone
    )
    assert_structural_equal(train_mod.without_attr("optim_state"), Expected)
    (steps,) = train_mod.attrs["optim_state"]
    assert steps.numpy().dtype == np.int64 and steps.numpy() == 0
    # The optimizer state prints as tensors and reads back.
    assert_structural_equal(from_source(train_mod.script()), train_mod)


@I.ir_module
class BackboneWithState:
    I.module_attrs({"param_num": 1, "state_num": 1})

    @R.function
    def backbone(
        x: R.Tensor((2, 2), "float64"),
        y: R.Tensor((2, 2), "float64"),
        z: R.Tensor((2, 2), "float64"),
    ):
        with R.dataflow():
            x1 = x + y
            z1 = z + R.const(1, "float64")
            R.output(x1, z1)
        return x1, z1


def test_model_states_pass_through_the_loss_and_the_adjoint():
    train_mod = SetupTrainer(
        MSELoss(reduction="sum"), MomentumSGD(0.1, 0.1), [F64, F64], legalize=False
    )(BackboneWithState)
    assert train_mod.attrs["input_num"] == 1
    loss = train_mod["backbone_loss"]
    assert [p.name_hint for p in loss.params] == ["x", "y", "z", "targets"]
    assert [f.name_hint for f in loss.body.body.fields] == ["gv", "z1"]  # (loss, new state)
    adjoint = train_mod["backbone_loss_adjoint"]
    (loss_and_state, grads) = adjoint.body.body.fields
    assert [f.name_hint for f in loss_and_state.fields] == ["gv", "z1"]
    assert [g.name_hint for g in grads.fields] == ["y_adjoint_out"]  # the one parameter
    _steps, velocity = train_mod.attrs["optim_state"]  # momentum keeps a velocity per parameter
    assert velocity.shape == (2, 2)
    assert_structural_equal(from_source(train_mod.script()), train_mod)


def test_legalized_module_calls_only_kernels():
    train_mod = SetupTrainer(MSELoss(reduction="sum"), SGD(0.1), [F64, F64])(Backbone)
    for name in ("backbone", "backbone_loss", "backbone_loss_adjoint", "optimizer"):
        calls = [
            b.value.op.name
            for b in train_mod[name].body.blocks[0].bindings
            if isinstance(b.value, relax.Call)
        ]
        assert calls and set(calls) == {"relax.call_tir"}, (name, calls)


def _backbone_without(attrs):
    @I.ir_module
    class Module:
        @R.function
        def backbone(x: R.Tensor((2, 2), "float64"), y: R.Tensor((2, 2), "float64")):
            with R.dataflow():
                x1 = x + y
                R.output(x1)
            return x1

    return Module.with_attrs(attrs)


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({}, "needs a non-negative integer attribute 'param_num'"),
        ({"param_num": 1}, "attribute 'state_num'"),
        ({"param_num": "1", "state_num": 0}, r"'param_num', has '1'"),
        ({"param_num": 2, "state_num": 1}, "backbone has 2 parameters, fewer than"),
        ({"param_num": 1, "state_num": 1}, "state_num = 1, backbone must return a tuple"),
    ],
)
def test_refuses_bad_module_attributes(attrs, message):
    with pytest.raises(TransformError, match=message):
        SetupTrainer(MSELoss(), SGD(0.1), [F64, F64])(_backbone_without(attrs))


def test_refuses_a_module_without_backbone_and_wrong_arguments():
    @I.ir_module
    class WrongName:
        I.module_attrs({"param_num": 1, "state_num": 0})

        @R.function
        def main(x: R.Tensor((2, 2), "float64"), y: R.Tensor((2, 2), "float64")):
            with R.dataflow():
                x1 = x + y
                R.output(x1)
            return x1

    with pytest.raises(TransformError, match="no relax function named 'backbone'"):
        SetupTrainer(MSELoss(), SGD(0.1), [F64, F64])(WrongName)
    with pytest.raises(TransformError, match="loss must be a relax.training.loss.Loss"):
        SetupTrainer("mse", SGD(0.1), [F64, F64])  # type: ignore[arg-type]
    with pytest.raises(TransformError, match="optimizer must be"):
        SetupTrainer(MSELoss(), 0.1, [F64, F64])  # type: ignore[arg-type]


def test_integer_parameters_are_refused_by_the_optimizer():
    @I.ir_module
    class IntParam:
        I.module_attrs({"param_num": 1, "state_num": 0})

        @R.function
        def backbone(x: R.Tensor((2, 2), "float64"), n: R.Tensor((2, 2), "int64")):
            with R.dataflow():
                y = R.astype(n, "float64")
                x1 = R.add(x, y)
                R.output(x1)
            return x1

    with pytest.raises(IRError, match="parameter n has dtype int64"):
        SetupTrainer(MSELoss(), SGD(0.1), [F64, F64])(IntParam)
