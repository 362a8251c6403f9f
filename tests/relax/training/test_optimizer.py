"""relax.training.optimizer: SGD, MomentumSGD and Adam steps run by the VM equal torch.optim's."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import IRError
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.relax.training.optimizer import SGD, Adam, MomentumSGD, Optimizer
from mlckit.script import from_source

torch = pytest.importorskip("torch")

SHAPES = {"x": (3, 4), "b": (4,)}


def _params(dtype="float32"):
    return [relax.Var(name, relax.TensorStructInfo(shape, dtype)) for name, shape in SHAPES.items()]


def _vm(opt: Optimizer, pipeline: str):
    """A VM running the optimizer's step function, lowered by the default pipeline or by
    LegalizeOps alone."""
    mod = IRModule({opt.name: opt.get_function()})
    lower = (
        relax.get_pipeline("default") if pipeline == "default" else relax.transform.LegalizeOps()
    )
    return relax.VirtualMachine(relax.build(lower(mod), "llvm"), mlckit.cpu())


# (mlckit optimizer, the torch.optim optimizer with the same hyperparameters)
CASES = {
    "sgd": (lambda: SGD(0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_weight_decay": (
        lambda: SGD(0.1, weight_decay=0.05),
        lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.05),
    ),
    "momentum": (
        lambda: MomentumSGD(0.1, 0.9, weight_decay=0.05),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05),
    ),
    "nesterov": (
        lambda: MomentumSGD(0.1, 0.9, weight_decay=0.05, nesterov=True),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05, nesterov=True),
    ),
    "adam": (lambda: Adam(0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    "adam_weight_decay": (
        lambda: Adam(0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
        lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    ),
}


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_steps_equal_torch_optim(case, steps):
    make_ours, make_torch = CASES[case]
    opt = make_ours().init(_params())
    vm = _vm(opt, "default" if steps == 1 else "legalize")
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype("float32") for s in SHAPES.values()]
    torch_params = [torch.tensor(v, requires_grad=True) for v in values]
    torch_opt = make_torch(torch_params)
    params, state = tuple(values), opt.state
    for _ in range(steps):
        grads = [rng.standard_normal(s).astype("float32") for s in SHAPES.values()]
        params, state = vm[opt.name](params, tuple(grads), state)
        for p, g in zip(torch_params, grads):
            p.grad = torch.tensor(g)
        torch_opt.step()
    for ours, theirs in zip(params, torch_params):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert int(state[0].numpy()) == steps


def test_dampening_applies_from_the_first_step():
    """TVM's momentum SGD damps every gradient, the first included (torch takes it whole)."""
    lr, momentum, dampening = 0.1, 0.9, 0.3
    opt = MomentumSGD(lr, momentum, dampening=dampening).init(_params())
    vm = _vm(opt, "legalize")
    rng = np.random.default_rng(1)
    params = [rng.standard_normal(s).astype("float32") for s in SHAPES.values()]
    velocity = [np.zeros_like(p) for p in params]
    got, state = tuple(params), opt.state
    for _ in range(3):
        grads = [rng.standard_normal(s).astype("float32") for s in SHAPES.values()]
        got, state = vm["MomentumSGD"](got, tuple(grads), state)
        velocity = [momentum * v + (1 - dampening) * g for v, g in zip(velocity, grads)]
        params = [p - lr * v for p, v in zip(params, velocity)]
    for ours, expected in zip(got, params):
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)
    for ours, expected in zip(state[1:], velocity):
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_state_layouts():
    x, b = _params()
    layouts = {
        SGD(0.1): [()],
        MomentumSGD(0.1, 0.9): [(), (3, 4), (4,)],
        Adam(0.1): [(), (), (), (3, 4), (4,), (3, 4), (4,)],
    }
    for opt, shapes in layouts.items():
        opt.init([x, b])
        assert opt.param_list == [x, b]
        assert [s.shape for s in opt.state] == shapes
        assert opt.state[0].dtype == "int64" and int(opt.state[0].numpy()) == 0
    adam = Adam(0.1).init(x)  # a single Var is a list of one
    assert [float(s.numpy()) for s in adam.state[1:3]] == [1.0, 1.0]


SGD_TEXT = """
@R.function
def SGD(
    params: R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")),
    gradients: R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")),
    optim_states: R.Tuple(R.Tensor((), dtype="int64")),
) -> R.Tuple(
    R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")),
    R.Tuple(R.Tensor((), dtype="int64")),
):
    with R.dataflow():
        num_steps: R.Tensor((), dtype="int64") = optim_states[0]
        num_steps_new: R.Tensor((), dtype="int64") = R.add(num_steps, R.const(1, "int64"))
        x: R.Tensor((3, 4), dtype="float32") = params[0]
        x_grad: R.Tensor((3, 4), dtype="float32") = gradients[0]
        lv: R.Tensor((3, 4), dtype="float32") = R.multiply(R.const(0.01, "float32"), x_grad)
        x_new: R.Tensor((3, 4), dtype="float32") = R.subtract(x, lv)
        b: R.Tensor((4,), dtype="float32") = params[1]
        b_grad: R.Tensor((4,), dtype="float32") = gradients[1]
        lv1: R.Tensor((4,), dtype="float32") = R.multiply(R.const(0.01, "float32"), b_grad)
        b_new: R.Tensor((4,), dtype="float32") = R.subtract(b, lv1)
        params_new: R.Tuple(
            R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")
        ) = (x_new, b_new)
        optim_states_new: R.Tuple(R.Tensor((), dtype="int64")) = (num_steps_new,)
        R.output(params_new, optim_states_new)
    return (params_new, optim_states_new)
"""


def test_sgd_function_is_tvms():
    """The function TVM's SGD builds, variable for variable (TVM's docstring example)."""
    expected = from_source("from mlckit.script import relax as R\n" + SGD_TEXT)
    assert_structural_equal(SGD(0.01).init(_params()).get_function(), expected)


@pytest.mark.parametrize("case", [*CASES, "damped"])
def test_function_round_trips_through_tvmscript(case):
    opt = (MomentumSGD(0.1, 0.9, dampening=0.1) if case == "damped" else CASES[case][0]()).init(
        _params()
    )
    func = opt.get_function()
    text = func.script()
    assert "R.dataflow()" in text and text.count("R.output(") == 1
    assert_structural_equal(from_source(text), func)


def test_hyperparameter_constants_keep_their_decimal_form():
    text = Adam(0.01, betas=(0.9, 0.999)).init(_params()).get_function().script()
    assert 'R.const(0.1, "float32")' in text and 'R.const(0.001, "float32")' in text


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_state_and_constants_take_the_parameters_dtype(dtype):
    opt = Adam(0.01).init(_params(dtype))
    assert {s.dtype for s in opt.state[1:]} == {dtype}
    assert f'R.const(0.01, "{dtype}")' in opt.get_function().script()


INIT_ERRORS = {
    "not a var": ([relax.const(1.0)], "is not a relax.Var"),
    "int dtype": ([relax.Var("n", relax.TensorStructInfo((2,), "int32"))], "dtype int32"),
    "mixed dtypes": (
        [
            relax.Var("a", relax.TensorStructInfo((2,), "float32")),
            relax.Var("c", relax.TensorStructInfo((2,), "float64")),
        ],
        "share one dtype",
    ),
    "symbolic shape": (
        [relax.Var("s", relax.TensorStructInfo(ndim=2, dtype="float32"))],
        "static shapes",
    ),
    "tuple param": (
        [relax.Var("t", relax.TupleStructInfo([relax.TensorStructInfo((2,), "float32")]))],
        "must be a tensor",
    ),
    "empty": ([], "no parameters"),
}


@pytest.mark.parametrize("case", list(INIT_ERRORS))
def test_init_rejects_bad_parameters(case):
    params, message = INIT_ERRORS[case]
    with pytest.raises(IRError, match=message):
        SGD(0.1).init(params)


def test_init_rejects_a_repeated_parameter():
    x, _ = _params()
    with pytest.raises(IRError, match="parameter x is listed more than once"):
        Adam(0.1).init([x, x])


@pytest.mark.parametrize("opt", [SGD(0.1), MomentumSGD(0.1, 0.9), Adam(0.1)])
def test_get_function_before_init(opt):
    with pytest.raises(IRError, match=r"get_function: call init\(params\) first"):
        opt.get_function()


HYPERPARAMETER_ERRORS = {
    "negative lr": (lambda: SGD(-0.1), "lr must be a non-negative number"),
    "negative weight decay": (lambda: SGD(0.1, weight_decay=-1), "weight_decay"),
    "negative momentum": (lambda: MomentumSGD(0.1, -0.9), "momentum"),
    "nesterov with dampening": (
        lambda: MomentumSGD(0.1, 0.9, dampening=0.1, nesterov=True),
        "Nesterov momentum needs",
    ),
    "nesterov without momentum": (lambda: MomentumSGD(0.1, 0, nesterov=True), "Nesterov"),
    "beta of one": (lambda: Adam(0.1, betas=(0.9, 1.0)), r"betas must be two numbers in \[0, 1\)"),
    "negative eps": (lambda: Adam(0.1, eps=-1e-8), "eps"),
    "lr not a number": (lambda: Adam("0.1"), "lr must be a non-negative number"),
}


@pytest.mark.parametrize("case", list(HYPERPARAMETER_ERRORS))
def test_bad_hyperparameters(case):
    make, message = HYPERPARAMETER_ERRORS[case]
    with pytest.raises(IRError, match=message):
        make()


def test_base_optimizer_has_no_step():
    with pytest.raises(NotImplementedError):
        Optimizer("none").init(_params()).get_function()
