"""relax.training.Trainer: Apache TVM's numeric trainer tests (SGD from zero weights to a loss
near 0, Adam running), parameter and state loading and export, refusals, and the course MLP
trained on the shipped FashionMNIST images through mlckit-compiled kernels."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.datasets import fashion_mnist_split
from mlckit.errors import VMError
from mlckit.relax.training import SetupTrainer, Trainer
from mlckit.relax.training.loss import CrossEntropyLoss, MSELoss
from mlckit.relax.training.optimizer import SGD, Adam, Optimizer
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.testing.examples import MLPBackbone

PRED = relax.TensorStructInfo((1, 5), "float32")


@I.ir_module
class LinearRelu:
    I.module_attrs({"param_num": 2, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((1, 10), "float32"),
        w0: R.Tensor((10, 5), "float32"),
        b0: R.Tensor((5,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            out = R.nn.relu(lv1)
            R.output(out)
        return out


def _trainer(optimizer: Optimizer, backbone=LinearRelu, loss_args=(PRED, PRED), **kwargs):
    train_mod = SetupTrainer(MSELoss(reduction="sum"), optimizer, list(loss_args))(backbone)
    vm = relax.VirtualMachine(mlckit.build(train_mod, "llvm"), mlckit.cpu())
    return Trainer(train_mod, vm, mlckit.cpu(), **kwargs)


X_ONES = np.ones((1, 10), "float32")
Y_ONE_HOT = np.array([[0, 0, 1, 0, 0]], "float32")


def test_sgd_from_zero_weights_fits_one_example():
    """TVM's test: 200 SGD steps from zero weights fit one example (relu passes the
    gradient at 0, so zero weights still learn)."""
    trainer = _trainer(SGD(0.01))
    for _ in range(200):
        loss = trainer.update(X_ONES, Y_ONE_HOT)
    assert float(loss.numpy()) < 1e-6
    np.testing.assert_allclose(trainer.predict(X_ONES).numpy(), Y_ONE_HOT, atol=1e-6)


def test_one_step_equals_numpy():
    """The loss and the updated weights after one SGD step, written out by hand."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 10)).astype("float32")
    y = rng.normal(size=(1, 5)).astype("float32")
    w0 = rng.normal(size=(10, 5)).astype("float32")
    b0 = rng.normal(size=(5,)).astype("float32")
    trainer = _trainer(SGD(0.01))
    trainer.load_params([w0, b0])
    h = x @ w0 + b0
    pred = np.maximum(h, 0)
    d_pred = 2 * (pred - y) * (h >= 0)
    loss = trainer.update(x, y)
    np.testing.assert_allclose(loss.numpy(), np.sum((pred - y) ** 2), rtol=1e-5)
    params = trainer.export_params()
    np.testing.assert_allclose(params["w0"].numpy(), w0 - 0.01 * x.T @ d_pred, rtol=1e-5)
    np.testing.assert_allclose(params["b0"].numpy(), b0 - 0.01 * d_pred[0], rtol=1e-5)


def test_adam_from_xavier_weights_runs():
    np.random.seed(0)
    trainer = _trainer(Adam(0.01), zero_init_param_state=False)
    trainer.xaiver_uniform_init_params()
    w0 = trainer.export_params()["w0"].numpy()
    bound = np.sqrt(6 / (10 + 5))
    assert w0.dtype == np.float32 and np.abs(w0).max() <= bound and np.abs(w0).max() > bound / 2
    first = float(trainer.update(X_ONES, Y_ONE_HOT).numpy())
    for _ in range(100):
        last = float(trainer.update(X_ONES, Y_ONE_HOT).numpy())
    assert last < first / 10
    trainer.xavier_uniform_init_params()  # the correctly spelled name does the same


def test_load_and_export_params_by_name():
    trainer = _trainer(SGD(0.01))
    b0 = np.arange(5, dtype="float32")
    trainer.load_params({"b0": b0})
    exported = trainer.export_params()
    assert set(exported) == {"w0", "b0"}
    np.testing.assert_array_equal(exported["b0"].numpy(), b0)
    np.testing.assert_array_equal(exported["w0"].numpy(), np.zeros((10, 5), "float32"))
    np.testing.assert_allclose(trainer.predict(X_ONES).numpy(), b0[None])


@I.ir_module
class WithState:
    """A backbone with a model state: a running count of the batches it has seen."""

    I.module_attrs({"param_num": 1, "state_num": 1})

    @R.function
    def backbone(
        x: R.Tensor((1, 5), "float32"),
        w: R.Tensor((5,), "float32"),
        seen: R.Tensor((), "float32"),
    ):
        with R.dataflow():
            out = R.multiply(x, w)
            seen1 = R.add(seen, R.const(1, "float32"))
            R.output(out, seen1)
        return out, seen1


def test_model_states_are_kept_between_steps():
    trainer = _trainer(SGD(0.1), backbone=WithState)
    x = np.ones((1, 5), "float32")
    for _ in range(3):
        trainer.update(x, Y_ONE_HOT)
    assert float(trainer.export_states()["seen"].numpy()) == 3
    prediction = trainer.predict(x)  # the backbone's state output is dropped
    assert prediction.shape == (1, 5)
    trainer.load_states({"seen": np.array(10, "float32")})
    trainer.update(x, Y_ONE_HOT)
    assert float(trainer.export_states()["seen"].numpy()) == 11


def test_refusals_name_the_problem():
    trainer = _trainer(SGD(0.01), zero_init_param_state=False)
    with pytest.raises(VMError, match="Trainer.predict: parameter w0, b0 not initialized"):
        trainer.predict(X_ONES)
    with pytest.raises(VMError, match="no parameter named 'w1' \\(w0, b0\\)"):
        trainer.load_params({"w1": np.zeros((10, 5), "float32")})
    with pytest.raises(VMError, match="1 values given for the model's 2 parameters"):
        trainer.load_params([np.zeros((10, 5), "float32")])
    with pytest.raises(VMError, match=r"w0 is R.Tensor\(\(10, 5\).*shape \(5, 10\) and dtype"):
        trainer.load_params({"w0": np.zeros((5, 10), "float32")})
    with pytest.raises(VMError, match="b0 is .*dtype float64"):
        trainer.load_params({"b0": np.zeros((5,), "float64")})
    trainer.zero_init_params()
    with pytest.raises(VMError, match="the backbone takes 1 inputs, got 2"):
        trainer.predict(X_ONES, X_ONES)
    no_attrs = LinearRelu.without_attr("param_num")
    with pytest.raises(VMError, match="no attribute 'input_num'"):
        Trainer(no_attrs, trainer.vm, mlckit.cpu())


# ------------------------------------------------------------------ the course MLP
def test_course_mlp_learns_fashion_mnist():
    """784-128-10 from Xavier weights, Adam, batches of 50, 5 epochs over 1,500 shipped
    images: at least 75% of the 400 held-out images right (torch gets ~80% this way)."""
    train_mod = SetupTrainer(
        CrossEntropyLoss(),
        Adam(1e-3),
        [relax.TensorStructInfo((50, 10), "float32"), relax.TensorStructInfo((50,), "int64")],
    )(MLPBackbone)
    vm = relax.VirtualMachine(mlckit.build(train_mod, "llvm"), mlckit.cpu())
    trainer = Trainer(train_mod, vm, mlckit.cpu())
    np.random.seed(0)
    trainer.xaiver_uniform_init_params()
    train, test = fashion_mnist_split()
    images, labels = train.images.reshape(-1, 784), train.labels.astype("int64")
    rng = np.random.default_rng(0)
    losses = []
    for _epoch in range(5):
        order = rng.permutation(len(labels))
        for start in range(0, len(labels), 50):
            batch = order[start : start + 50]
            losses.append(float(trainer.update(images[batch], labels[batch]).numpy()))
    held_out = test.images.reshape(-1, 784)
    predicted = np.concatenate(
        [trainer.predict(held_out[i : i + 50]).numpy().argmax(1) for i in range(0, 400, 50)]
    )
    accuracy = np.mean(predicted == test.labels)
    assert accuracy >= 0.75, accuracy
    assert np.mean(losses[-30:]) < np.mean(losses[:30]) / 2


def test_training_on_cuda_equals_the_cpu():
    """The same three Adam steps built for "cuda" (numba's simulator where there is no GPU)
    and for "llvm", both through the default pipeline: same losses, same weights."""
    results = []
    for target, device in (("llvm", mlckit.cpu()), ("cuda", mlckit.cuda())):
        train_mod = SetupTrainer(MSELoss(reduction="sum"), Adam(0.01), [PRED, PRED])(LinearRelu)
        built = mlckit.build(relax.get_pipeline("default")(train_mod), target)
        trainer = Trainer(train_mod, relax.VirtualMachine(built, device), device)
        w0 = np.linspace(-1, 1, 50, dtype="float32").reshape(10, 5)
        trainer.load_params([w0, np.zeros(5, "float32")])
        losses = [float(trainer.update(X_ONES, Y_ONE_HOT).numpy()) for _ in range(3)]
        results.append((losses, trainer.export_params()["w0"].numpy()))
    (cpu_losses, cpu_w0), (gpu_losses, gpu_w0) = results
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    np.testing.assert_allclose(gpu_w0, cpu_w0, rtol=1e-5, atol=1e-7)
    assert cpu_losses[2] < cpu_losses[0]
