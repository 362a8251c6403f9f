"""Chapter 9, training: the gradients of a sigmoid layer by hand (reverse mode, checked against
central differences), its tangent (forward mode), and an optimizer that trains the course MLP
in one epoch.

The first two exercises differentiate the same function, the chapter's tiny graph with a
sigmoid in place of its tanh::

    loss(x, w, b) = sum(sigmoid(x @ w + b))      x (4, 3), w (3, 2), b (2,)

The gradient checker runs the answer on random inputs and compares each gradient with central
differences (``mlckit.testing.check_numerical_grads``), the test the chapter teaches; the
tangent checker moves one input at a time, so that a missing term of a rule shows as the input
whose tangent is wrong. Worked example of what the checkers read: with every input zero,
``sigmoid(0) = 1/2`` everywhere, so ``loss = 8 * 1/2 = 4`` and ``b``'s gradient is
``4 * sigmoid'(0) = 4 * 1/4 = 1`` for each of its two elements (four rows each).

The optimizer checker trains the chapter's MLP (``mlckit.testing.examples.MLPBackbone``) with
the answer for one epoch, 30 steps of 50 images from the chapter's initial weights, and reads
the loss curve to say whether the steps were too large (the loss jumps or overflows) or too
small (it falls, but not far enough) for the held-out accuracy to reach the bar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit.datasets import fashion_mnist_split
from mlckit.driver import build
from mlckit.relax.struct_info import TensorStructInfo
from mlckit.relax.training import SetupTrainer, Trainer
from mlckit.relax.training.loss import CrossEntropyLoss
from mlckit.relax.training.optimizer import Optimizer
from mlckit.relax.vm import VirtualMachine
from mlckit.runtime import cpu
from mlckit.testing import check_numerical_grads
from mlckit.testing.examples import MLPBackbone

from .core import Mismatch, exercise
from .solutions import ch9 as reference

SHAPES = {"x": (4, 3), "w": (3, 2), "b": (2,)}
# float64 inputs: the central differences are then exact to about 1e-9, far below the tolerances.
NUMERICAL = {"delta": 1e-4, "atol": 1e-6, "rtol": 1e-4}


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-z))


def layer_loss(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> float:
    """The function both exercises differentiate."""
    return float(sigmoid(x @ w + b).sum())


def layer_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Reproducible float64 inputs of the layer, uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape) for name, shape in SHAPES.items()}


def _require_function(answer: Any, signature: str) -> Callable[..., Any]:
    if not callable(answer):
        raise Mismatch(
            f"expected a function {signature}, got {type(answer).__name__}",
            "pass the function itself, without calling it",
        )
    return answer


def _numbers(returned: Any, count: int, what: str, hint: str) -> list[np.ndarray]:
    """``returned`` as ``count`` float arrays, or the Mismatch that says what came back."""
    if not isinstance(returned, (tuple, list)) or len(returned) != count:
        got = (
            f"{len(returned)} values"
            if isinstance(returned, (tuple, list))
            else type(returned).__name__
        )
        raise Mismatch(f"your function returned {got}; the exercise expects {what}", hint)
    return [np.asarray(value, dtype="float64") for value in returned]


# ------------------------------------------------------------------------ ch9.sigmoid_grads

# Shape mistakes with a reading of their own: (parameter, shape returned) -> verdict, fix.
_SHAPE_MISTAKES = {
    ("b", (4, 2)): (
        "b_adjoint has shape (4, 2), b's is (2,): b was broadcast over the 4 rows of x @ w, "
        "so each element of b was used 4 times",
        "sum the adjoint over the rows it was broadcast to: lv1_adjoint.sum(axis=0)",
    ),
    ("w", (2, 3)): (
        "w_adjoint has shape (2, 3), w's is (3, 2): a transpose is on the wrong side",
        "a gradient has its parameter's shape: for lv0 = x @ w, w_adjoint = x.T @ lv0_adjoint",
    ),
    ("x", (3, 4)): (
        "x_adjoint has shape (3, 4), x's is (4, 3): a transpose is on the wrong side",
        "a gradient has its parameter's shape: for lv0 = x @ w, x_adjoint = lv0_adjoint @ w.T",
    ),
}

# When exactly one gradient is off, the rule that gives it is the one to look at.
_ONE_WRONG = {
    "x": "the matmul's rule for its first argument: x_adjoint = lv0_adjoint @ w.T",
    "w": "the matmul's rule for its second argument: w_adjoint = x.T @ lv0_adjoint",
    "b": "each element of b is added to every row, so its adjoint is the sum (not the mean) "
    "of lv1_adjoint's rows",
}


@exercise(
    "ch9.sigmoid_grads",
    title="The gradients of a sigmoid layer, by hand",
    task="""
    Write `sigmoid_grads(x, w, b)` in numpy: it returns the gradients
    `(x_adjoint, w_adjoint, b_adjoint)` of `loss = sum(sigmoid(x @ w + b))`, with `x` of
    shape `(4, 3)`, `w` `(3, 2)` and `b` `(2,)`. It is the chapter's tiny graph with
    `sigmoid(u) = 1 / (1 + exp(-u))` in place of `tanh`: compute the forward values, then the
    adjoints backwards, binding by binding, as the chapter did by hand. The check runs your
    function on random inputs and compares each gradient with central differences
    (`check_numerical_grads`).
    """,
    hints=(
        "Only one line of the chapter's backward pass changes: the derivative of the "
        "activation. Write sigmoid' in terms of the sigmoid's own output s.",
        "sigmoid'(u) = s * (1 - s) with s = sigmoid(u). So lv1_adjoint = s * (1 - s) (times "
        "the sum's adjoint, a tensor of ones).",
        "s = 1 / (1 + np.exp(-(x @ w + b))); lv1_adjoint = s * (1 - s); then "
        "b_adjoint = lv1_adjoint.sum(axis=0), x_adjoint = lv1_adjoint @ w.T, "
        "w_adjoint = x.T @ lv1_adjoint.",
    ),
    solution=reference.sigmoid_grads,
)
def check_sigmoid_grads(answer: Any) -> None:
    function = _require_function(answer, "sigmoid_grads(x, w, b)")
    inputs = layer_inputs()
    grads = dict(
        zip(
            SHAPES,
            _numbers(
                function(*(value.copy() for value in inputs.values())),
                3,
                "three arrays, (x_adjoint, w_adjoint, b_adjoint)",
                "return x_adjoint, w_adjoint, b_adjoint (in the order of the parameters)",
            ),
        )
    )
    for name, grad in grads.items():
        if grad.shape != SHAPES[name]:
            verdict, fix = _SHAPE_MISTAKES.get(
                (name, grad.shape),
                (
                    f"{name}_adjoint has shape {grad.shape}; {name}'s is {SHAPES[name]}",
                    "a gradient has the shape of its parameter",
                ),
            )
            raise Mismatch(verdict, fix)
    wrong: dict[str, str] = {}
    for name, grad in grads.items():
        try:
            check_numerical_grads(layer_loss, inputs, {name: grad}, **NUMERICAL)
        except AssertionError as err:
            wrong[name] = str(err).split("; ", 1)[-1]
    if not wrong:
        return
    worst = next(iter(wrong.values()))
    if len(wrong) == 3:
        raise Mismatch(
            "all three gradients differ from central differences, so the mistake is in the "
            f"adjoint they share, lv1_adjoint, the sigmoid's: in x_adjoint, {worst}",
            "lv1_adjoint = lv2_adjoint * sigmoid'(lv1), where sigmoid'(u) = s * (1 - s) with "
            "s = sigmoid(u)",
        )
    names = " and ".join(f"{name}_adjoint" for name in wrong)
    if len(wrong) == 1:
        verdict, fix = f"{names} differs", _ONE_WRONG[next(iter(wrong))]
    else:
        verdict = f"{names} differ"
        fix = "they share lv0_adjoint: check the rules that lead from it to these parameters"
    raise Mismatch(f"{verdict} from central differences: {worst}", fix)


# ------------------------------------------------------------------------ ch9.sigmoid_jvp

# When the tangent is wrong only while one input moves, the term for that input is missing.
_TANGENT_TERMS = {
    "x": "the matmul's tangent has a term for each argument: lv0_dot = x_dot @ w + x @ w_dot",
    "w": "the matmul's tangent has a term for each argument: lv0_dot = x_dot @ w + x @ w_dot",
    "b": "the addition's tangent adds both tangents: lv1_dot = lv0_dot + b_dot (b_dot "
    "broadcast over the rows, as b is)",
}


@exercise(
    "ch9.sigmoid_jvp",
    title="Forward mode: the tangent of a sigmoid layer",
    task="""
    Write `sigmoid_jvp(x, w, b, x_dot, w_dot, b_dot)` in numpy: it returns the pair
    `(value, tangent)`, where `value` is `loss = sum(sigmoid(x @ w + b))` and `tangent` is how
    fast the loss changes when the inputs move in the direction `(x_dot, w_dot, b_dot)` (each
    of its input's shape): the Jacobian-vector product. Carry a `(value, tangent)` pair
    through each of the four instructions, as the chapter's `TANGENT_RULES` do for `tanh`.
    The check moves one input at a time and all of them together, and compares with the
    gradients dotted with the direction.
    """,
    hints=(
        "Each instruction gives its result's value and its tangent from its arguments' values "
        "and tangents: four pairs, lv0, lv1, lv2 and the sum.",
        "matmul: the product rule, x_dot @ w + x @ w_dot. add: lv0_dot + b_dot. sigmoid: "
        "s * (1 - s) * lv1_dot with s = sigmoid(lv1). sum: the sum of the tangent.",
        "lv0, lv0_dot = x @ w, x_dot @ w + x @ w_dot; lv1, lv1_dot = lv0 + b, lv0_dot + b_dot; "
        "s = 1 / (1 + np.exp(-lv1)); return s.sum(), (s * (1 - s) * lv1_dot).sum()",
    ),
    solution=reference.sigmoid_jvp,
)
def check_sigmoid_jvp(answer: Any) -> None:
    function = _require_function(answer, "sigmoid_jvp(x, w, b, x_dot, w_dot, b_dot)")
    inputs = layer_inputs()
    # A direction along which each input alone moves the loss by at least 0.2.
    direction = layer_inputs(seed=5)
    exact = reference.sigmoid_jvp()
    zeros = {name: np.zeros(shape) for name, shape in SHAPES.items()}

    def tangent_when(moving: tuple[str, ...]) -> tuple[float, float]:
        """The answer's and the reference's tangent when only the inputs ``moving`` move."""
        dots = [direction[n] if n in moving else zeros[n] for n in SHAPES]
        value, tangent = _numbers(
            function(*(v.copy() for v in inputs.values()), *(d.copy() for d in dots)),
            2,
            "two numbers, (value, tangent)",
            "return the loss and its tangent: return lv2.sum(), lv2_dot.sum()",
        )
        if value.shape != () or tangent.shape != ():
            raise Mismatch(
                f"your value has shape {value.shape} and your tangent {tangent.shape}; both "
                "are numbers (the loss is a sum, and so is its tangent)",
                "sum the last instruction's value and tangent",
            )
        if not np.isclose(value, layer_loss(*inputs.values()), rtol=1e-6):
            raise Mismatch(
                f"your value is {float(value):.6g}, not sum(sigmoid(x @ w + b)) = "
                f"{layer_loss(*inputs.values()):.6g}",
                "the value half of each pair is the forward computation, unchanged",
            )
        return float(tangent), float(exact(*inputs.values(), *dots)[1])

    alone = {name: tangent_when((name,)) for name in SHAPES}
    wrong = [name for name, (got, want) in alone.items() if not np.isclose(got, want, rtol=1e-6)]
    if len(wrong) == 3:
        raise Mismatch(
            "your tangent is wrong whichever input moves, so the mistake is in an instruction "
            "they all pass through: the sigmoid's or the sum's",
            "the sigmoid's tangent is s * (1 - s) * lv1_dot with s = sigmoid(lv1); the sum's "
            "is the sum of the tangent",
        )
    if wrong:
        got, want = alone[wrong[0]]
        moving = " or ".join(wrong)
        raise Mismatch(
            f"your tangent is wrong when only {moving} moves: {got:.6g}, expected {want:.6g}",
            _TANGENT_TERMS[wrong[0]],
        )
    got, want = tangent_when(tuple(SHAPES))
    if not np.isclose(got, want, rtol=1e-6):
        raise Mismatch(
            f"your tangent is right for each input moving alone but not for all together: "
            f"{got:.6g}, expected {want:.6g}",
            "the tangents of the three inputs add: compute each instruction's tangent from all "
            "of its arguments' tangents at once",
        )


# ------------------------------------------------------------------------ ch9.one_epoch

ONE_EPOCH_ACCURACY = 0.72
BATCH = 50


def train_one_epoch(optimizer: Optimizer) -> tuple[list[float], float]:
    """The losses of the 30 steps of one epoch of the chapter's MLP trained with ``optimizer``
    (the chapter's initial weights and a fixed order of the 1,500 images), and the held-out
    accuracy after it."""
    loss_args = [TensorStructInfo((BATCH, 10), "float32"), TensorStructInfo((BATCH,), "int64")]
    train_mod = SetupTrainer(CrossEntropyLoss(), optimizer, loss_args)(MLPBackbone)
    trainer = Trainer(train_mod, VirtualMachine(build(train_mod, "llvm"), cpu()), cpu())
    # The chapter's weights: numpy's global generator seeded with 0; the caller's state is kept.
    caller_state = np.random.get_state()
    np.random.seed(0)
    trainer.xaiver_uniform_init_params()
    np.random.set_state(caller_state)
    train, held_out = fashion_mnist_split()
    images, labels = train.images.reshape(-1, 784), train.labels.astype("int64")
    order = np.random.default_rng(0).permutation(len(labels))
    losses = [
        float(trainer.update(images[b], labels[b]).numpy())
        for b in (order[i : i + BATCH] for i in range(0, len(labels), BATCH))
    ]
    tests = held_out.images.reshape(-1, 784)
    scores = [trainer.predict(tests[i : i + BATCH]).numpy() for i in range(0, len(tests), BATCH)]
    return losses, float(np.mean(np.concatenate(scores).argmax(axis=1) == held_out.labels))


@exercise(
    "ch9.one_epoch",
    title="An optimizer that trains the MLP in one epoch",
    task=f"""
    The chapter trained its MLP for five epochs with `Adam(1e-3)`. Choose an optimizer from
    `relax.training.optimizer` (`SGD`, `MomentumSGD` or `Adam`) and its settings so that a
    single epoch, 30 steps of 50 images from the chapter's initial weights, reaches a
    held-out accuracy of {ONE_EPOCH_ACCURACY:.0%}. The answer is the optimizer object,
    `SGD(0.01)` for instance; the check trains the MLP with it (a few seconds) and reads the
    loss curve.
    """,
    hints=(
        "A learning rate sets the size of each step: too small and 30 steps do not get far, "
        "too large and the loss jumps instead of falling. Try a few, by factors of 10.",
        "Plain SGD takes the same step size for every weight. Momentum (MomentumSGD(lr, "
        "momentum=0.9)) keeps going in the direction of past gradients; Adam scales each "
        "weight's step by its own gradient history, which lets it take larger steps safely.",
        "Adam with a learning rate a few times the chapter's 1e-3 does it, for example "
        "Adam(5e-3); so does MomentumSGD(0.02, 0.9).",
    ),
    solution=reference.one_epoch,
)
def check_one_epoch(answer: Any) -> None:
    if isinstance(answer, type) and issubclass(answer, Optimizer):
        raise Mismatch(
            f"your answer is the class {answer.__name__}, not an optimizer",
            f"call it with its settings: {answer.__name__}(lr, ...)",
        )
    if not isinstance(answer, Optimizer):
        raise Mismatch(
            f"expected an optimizer such as SGD(0.01), got {type(answer).__name__}",
            "make one from mlckit.relax.training.optimizer: SGD, MomentumSGD or Adam",
        )
    losses, accuracy = train_one_epoch(answer)
    first, peak, last = losses[0], max(losses), float(np.mean(losses[-5:]))
    if not np.all(np.isfinite(losses)) or peak > 2 * first:
        jumped = "overflowed (inf or nan)" if not np.all(np.isfinite(losses)) else f"{peak:.3g}"
        raise Mismatch(
            f"your steps are too large: the loss went from {first:.2f} to {jumped} instead "
            f"of falling, and the held-out accuracy is {accuracy:.1%}",
            "lower the learning rate, by a factor of 10 to start with",
        )
    if accuracy < ONE_EPOCH_ACCURACY:
        raise Mismatch(
            f"the held-out accuracy after one epoch is {accuracy:.1%}, below "
            f"{ONE_EPOCH_ACCURACY:.0%}: the loss fell from {first:.2f} to {last:.2f} (the "
            "last 5 steps' mean), not far enough in 30 steps",
            "take larger steps: a larger learning rate, momentum (MomentumSGD) or Adam",
        )
