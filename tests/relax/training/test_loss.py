"""relax.training.loss: each loss, built as a Relax function and run through the VM, equals
torch.nn.functional's on random inputs for every reduction; the functions print as TVM's
expected TVMScript and round-trip; Gradient differentiates them to central differences; bad
reductions, parameters and shapes are StructInfoErrors naming the loss."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.errors import MLCError, StructInfoError
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.relax.training.loss import (
    CategoricalCrossEntropyLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
)
from mlckit.script import from_source
from mlckit.script import relax as R
from mlckit.testing import check_numerical_grads

torch = pytest.importorskip("torch")
F = torch.nn.functional

N, C = 3, 5
REDUCTIONS = ("mean", "sum", "none")


def _tensor(shape, dtype="float32"):
    return relax.TensorStructInfo(shape, dtype)


def _vm(func):
    mod = IRModule({func.attrs["global_symbol"]: func})
    built = relax.build(relax.transform.LegalizeOps()(mod), "llvm")
    return relax.VirtualMachine(built, mlckit.cpu()), mod


def _run(func, *args):
    vm, _ = _vm(func)
    return vm[func.attrs["global_symbol"]](*args).numpy()


def _rng():
    return np.random.default_rng(0)


def _labels(rng, ignore_index=None):
    labels = rng.integers(0, C, size=N).astype("int64")
    if ignore_index is not None:
        labels[0] = ignore_index  # at least one example is ignored
    return labels


def _one_hot(labels):
    return np.eye(C, dtype="int64")[labels]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("loss_class", "reference"), [(L1Loss, F.l1_loss), (MSELoss, F.mse_loss)])
def test_elementwise_losses_equal_torch(loss_class, reference, reduction):
    rng = _rng()
    pred, target = (rng.standard_normal((N, C)).astype("float32") for _ in range(2))
    func = loss_class(reduction)(_tensor((N, C)), _tensor((N, C)))
    expected = reference(torch.tensor(pred), torch.tensor(target), reduction=reduction)
    np.testing.assert_allclose(_run(func, pred, target), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_equals_torch(reduction, weighted, ignore_index):
    rng = _rng()
    pred = rng.standard_normal((N, C)).astype("float32")
    labels = _labels(rng, ignore_index if ignore_index >= 0 else None)
    weights = rng.uniform(0.5, 2.0, C).astype("float32")
    loss = CrossEntropyLoss(reduction, ignore_index)
    args = (pred, labels, weights) if weighted else (pred, labels)
    func = loss(_tensor((N, C)), _tensor((N,), "int64"), *([_tensor((C,))] if weighted else []))
    expected = F.cross_entropy(
        torch.tensor(pred),
        torch.tensor(labels),
        weight=torch.tensor(weights) if weighted else None,
        ignore_index=ignore_index,
        reduction=reduction,
    )
    np.testing.assert_allclose(_run(func, *args), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_categorical_cross_entropy_follows_tvm_against_torch(reduction, weighted):
    # TVM reduces the (N, C) matrix -log_softmax * one_hot (* weights): "sum" is torch's
    # cross_entropy with probability targets, "mean" divides that by N * C, "none" is the
    # matrix whose rows sum to torch's per-example losses.
    rng = _rng()
    pred = rng.standard_normal((N, C)).astype("float32")
    one_hot = _one_hot(_labels(rng))
    weights = rng.uniform(0.5, 2.0, C).astype("float32")
    loss = CategoricalCrossEntropyLoss(reduction)
    params = [_tensor((N, C)), _tensor((N, C), "int64")] + ([_tensor((C,))] if weighted else [])
    args = (pred, one_hot, weights) if weighted else (pred, one_hot)
    got = _run(loss(*params), *args)
    per_example = F.cross_entropy(
        torch.tensor(pred),
        torch.tensor(one_hot, dtype=torch.float32),
        weight=torch.tensor(weights) if weighted else None,
        reduction="none",
    ).numpy()
    if reduction == "none":
        assert got.shape == (N, C)
        np.testing.assert_allclose(got.sum(axis=1), per_example, rtol=1e-5)
    else:
        scale = {"sum": 1, "mean": N * C}[reduction]
        np.testing.assert_allclose(got, per_example.sum() / scale, rtol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_categorical_cross_entropy_with_ignore_index_is_cross_entropy_of_argmax(reduction):
    rng = _rng()
    pred = rng.standard_normal((N, C)).astype("float32")
    labels = _labels(rng, ignore_index=1)
    weights = rng.uniform(0.5, 2.0, C).astype("float32")
    func = CategoricalCrossEntropyLoss(reduction, ignore_index=1)(
        _tensor((N, C)), _tensor((N, C), "int64"), _tensor((C,))
    )
    expected = F.cross_entropy(
        torch.tensor(pred),
        torch.tensor(labels),
        weight=torch.tensor(weights),
        ignore_index=1,
        reduction=reduction,
    )
    got = _run(func, pred, _one_hot(labels), weights)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-6)


def test_loss_runs_through_the_default_pipeline():
    rng = _rng()
    pred = rng.standard_normal((N, C)).astype("float32")
    labels = _labels(rng)
    func = CrossEntropyLoss()(_tensor((N, C)), _tensor((N,), "int64"))
    lowered = relax.get_pipeline("default")(IRModule({"cross_entropy_loss": func}))
    built = relax.build(lowered, "llvm")
    got = relax.VirtualMachine(built, mlckit.cpu())["cross_entropy_loss"](pred, labels).numpy()
    expected = F.cross_entropy(torch.tensor(pred), torch.tensor(labels)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


# ---------------------------------------------------------------- TVMScript
@R.function
def tvm_l1_loss(
    predictions: R.Tensor((3, 5), "float32"), targets: R.Tensor((3, 5), "float32")
) -> R.Tensor((), "float32"):
    R.func_attr({"global_symbol": "l1_loss"})
    with R.dataflow():
        lv: R.Tensor((3, 5), "float32") = R.subtract(predictions, targets)
        lv1: R.Tensor((3, 5), "float32") = R.abs(lv)
        gv: R.Tensor((), "float32") = R.mean(lv1, axis=None, keepdims=False)
        R.output(gv)
    return gv


@R.function
def tvm_cross_entropy_loss(
    predictions: R.Tensor((3, 5), "float32"),
    targets: R.Tensor((3,), "int64"),
    weights: R.Tensor((5,), "float32"),
) -> R.Tensor((), "float32"):
    R.func_attr({"global_symbol": "cross_entropy_loss"})
    with R.dataflow():
        lv: R.Tensor((3, 5), "float32") = R.nn.log_softmax(predictions, axis=-1)
        gv: R.Tensor((), "float32") = R.nn.nll_loss(
            lv, targets, weights, reduction="sum", ignore_index=1
        )
        R.output(gv)
    return gv


@R.function
def tvm_categorical_cross_entropy_loss(
    predictions: R.Tensor((3, 5), "float32"), targets: R.Tensor((3, 5), "int64")
) -> R.Tensor((), "float32"):
    R.func_attr({"global_symbol": "categorical_cross_entropy_loss"})
    with R.dataflow():
        lv: R.Tensor((3, 5), "float32") = R.nn.log_softmax(predictions, axis=-1)
        gv: R.Tensor((), "float32") = R.mean(-lv * targets.astype("float32"))
        R.output(gv)
    return gv


def test_functions_equal_tvms_expected_tvmscript():
    # TVM's test_training_loss.py expectations for L1Loss(), CrossEntropyLoss("sum", 1) and
    # CategoricalCrossEntropyLoss() (nested calls parse into bindings as the loss emits them).
    assert_structural_equal(L1Loss()(_tensor((N, C)), _tensor((N, C))), tvm_l1_loss)
    func = CrossEntropyLoss("sum", ignore_index=1)(
        _tensor((N, C)), _tensor((N,), "int64"), _tensor((C,))
    )
    assert_structural_equal(func, tvm_cross_entropy_loss)
    func = CategoricalCrossEntropyLoss()(_tensor((N, C)), _tensor((N, C), "int64"))
    assert_structural_equal(func, tvm_categorical_cross_entropy_loss)


LOSSES = {
    "l1_loss": (L1Loss("sum"), [_tensor((N, C)), _tensor((N, C))]),
    "mse_loss": (MSELoss(), [_tensor((N, C)), _tensor((N, C))]),
    "cross_entropy_loss": (
        CrossEntropyLoss(ignore_index=1),
        [_tensor((N, C)), _tensor((N,), "int64"), _tensor((C,))],
    ),
    "categorical_cross_entropy_loss": (
        CategoricalCrossEntropyLoss(),
        [_tensor((N, C)), _tensor((N, C), "int64"), _tensor((C,))],
    ),
}


@pytest.mark.parametrize("name", LOSSES)
def test_named_as_tvm_in_one_dataflow_block_and_round_trips(name):
    loss, params = LOSSES[name]
    func = loss(*params)
    assert func.attrs["global_symbol"] == name
    assert len(func.body.blocks) == 1
    assert isinstance(func.body.blocks[0], relax.DataflowBlock)
    mod = IRModule({name: func})
    assert_structural_equal(from_source(mod.script()), mod)


def test_vars_are_copied_not_shared():
    predictions = relax.Var("logits", _tensor((N, C)))
    func = MSELoss()(predictions, _tensor((N, C)))
    assert func.params[0].name_hint == "logits"
    assert func.params[0] is not predictions


# ---------------------------------------------------------------- gradients
def _float_inputs(rng, params):
    """Random values for the float parameters, fixed labels or one-hot rows for int ones."""
    labels = _labels(rng)
    values = []
    for param in params:
        sinfo = param.struct_info
        if sinfo.dtype == "int64":
            values.append(labels if sinfo.ndim == 1 else _one_hot(labels))
        elif sinfo.ndim == 1:
            values.append(rng.uniform(0.5, 2.0, C).astype("float32"))
        else:
            values.append(rng.standard_normal((N, C)).astype("float32"))
    return values


@pytest.mark.parametrize("name", LOSSES)
def test_gradient_equals_central_differences(name):
    loss, params = LOSSES[name]
    func = loss(*params)
    float_params = [p for p in func.params if p.struct_info.dtype == "float32"]
    mod = relax.transform.Gradient(name, require_grads=float_params)(IRModule({name: func}))
    vm = relax.VirtualMachine(relax.build(relax.transform.LegalizeOps()(mod), "llvm"), mlckit.cpu())
    inputs = _float_inputs(_rng(), func.params)
    _, grads = vm[f"{name}_adjoint"](*inputs)
    floats = [i for i, p in enumerate(func.params) if p.struct_info.dtype == "float32"]

    def loss_value(*float_values):
        args = list(inputs)
        for i, value in zip(floats, float_values):
            args[i] = value
        return vm[name](*args).numpy()

    check_numerical_grads(loss_value, [inputs[i] for i in floats], [g.numpy() for g in grads])


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "loss_class", [L1Loss, MSELoss, CrossEntropyLoss, CategoricalCrossEntropyLoss]
)
def test_bad_reduction_is_an_error(loss_class):
    with pytest.raises(
        StructInfoError, match=r"reduction must be one of 'mean', 'sum', 'none', got 'avg'"
    ):
        loss_class(reduction="avg")


@pytest.mark.parametrize(
    ("loss", "params", "message"),
    [
        (
            L1Loss(),
            [_tensor((N, C)), _tensor((N, 4))],
            r"l1_loss: predictions and targets must have the same shape, but predictions has "
            r"shape \(3, 5\) and targets has shape \(3, 4\)",
        ),
        (
            MSELoss(),
            [_tensor((N, C)), _tensor((C,))],
            r"mse_loss: .* predictions has shape \(3, 5\) and targets has shape \(5,\)",
        ),
        (
            CategoricalCrossEntropyLoss(),
            [_tensor((N, C)), _tensor((N, C))],
            r"categorical_cross_entropy_loss: the one-hot targets must be an int tensor, got float32",
        ),
        (
            CategoricalCrossEntropyLoss(),
            [_tensor((N, C)), _tensor((N, 4), "int64")],
            r"categorical_cross_entropy_loss: predictions and targets must have the same shape",
        ),
        (
            MSELoss(),
            [relax.ShapeStructInfo([N, C]), _tensor((N, C))],
            r"mse_loss: predictions must be a TensorStructInfo or a Var of one",
        ),
    ],
)
def test_bad_parameters_are_errors_naming_the_loss(loss, params, message):
    with pytest.raises(StructInfoError, match=message):
        loss(*params)


def test_cross_entropy_shape_errors_come_from_nll_loss():
    # Targets of the wrong batch size: nll_loss's own check names both shapes.
    with pytest.raises(MLCError, match="nll_loss"):
        CrossEntropyLoss()(_tensor((N, C)), _tensor((N + 1,), "int64"))


def test_symbolic_batch_runs_for_any_batch_size():
    n = tir.Var("n", "int64")
    func = CategoricalCrossEntropyLoss("mean", ignore_index=0)(
        _tensor((n, C)), _tensor((n, C), "int64")
    )
    mod = IRModule({"categorical_cross_entropy_loss": func})
    assert_structural_equal(from_source(mod.script()), mod)
    vm, _ = _vm(func)
    rng = _rng()
    for batch in (2, 7):
        pred = rng.standard_normal((batch, C)).astype("float32")
        labels = rng.integers(0, C, size=batch)
        labels[0] = 0
        got = vm["categorical_cross_entropy_loss"](pred, _one_hot(labels)).numpy()
        expected = F.cross_entropy(torch.tensor(pred), torch.tensor(labels), ignore_index=0)
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5)
