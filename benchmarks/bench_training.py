"""Training the course MLP (784-128-10, relu) on FashionMNIST: mlckit against torch.

* time per training step at batch 50 (cross entropy, Adam at lr 1e-3): ``Trainer.update`` runs
  the adjoint function (forward, loss, gradients) and the optimizer function, compiled by
  mlckit; torch runs ``zero_grad``, forward, ``cross_entropy``, ``backward`` and ``step`` of
  ``torch.optim.Adam`` on the same model. Two mlckit builds: the module as ``SetupTrainer``
  leaves it (legalized, one kernel per operator, each with the default CPU schedule) and after
  ``relax.get_pipeline("default")`` (fused kernels). Median of alternating rounds, each round
  the mean of 20 steps;
* held-out accuracy after 5 epochs over the 1,500 training images (400 held out), from Xavier
  uniform weights for mlckit and torch's default initialization (goal for mlckit: >= 75%).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from timing import median_times

import mlckit
from mlckit import relax
from mlckit.datasets import fashion_mnist_split
from mlckit.relax.training import SetupTrainer, Trainer
from mlckit.relax.training.loss import CrossEntropyLoss
from mlckit.relax.training.optimizer import Adam
from mlckit.testing.examples import MLPBackbone

BATCH = 50  # MLPBackbone takes batches of 50
EPOCHS, LR, STEPS_PER_ROUND, ROUNDS = 5, 1e-3, 20, 9


def mlckit_trainer(fused: bool) -> Trainer:
    train_mod = SetupTrainer(
        CrossEntropyLoss(),
        Adam(LR),
        [
            relax.TensorStructInfo((BATCH, 10), "float32"),
            relax.TensorStructInfo((BATCH,), "int64"),
        ],
    )(MLPBackbone)
    built = relax.get_pipeline("default")(train_mod) if fused else train_mod
    vm = relax.VirtualMachine(mlckit.build(built, "llvm"), mlckit.cpu())
    trainer = Trainer(built, vm, mlckit.cpu())
    trainer.xavier_uniform_init_params()
    return trainer


def torch_step(torch: Any) -> tuple[Any, Any]:
    """A torch model of the same shape and one training step of it."""
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    def step(x: Any, y: Any) -> Any:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return model, step


def train(step: Any, images: np.ndarray, labels: np.ndarray, convert: Any) -> None:
    rng = np.random.default_rng(0)
    for _ in range(EPOCHS):
        order = rng.permutation(len(labels))
        for start in range(0, len(labels), BATCH):
            batch = order[start : start + BATCH]
            step(*convert(images[batch], labels[batch]))


def run() -> list[dict[str, Any]]:
    try:
        import torch
    except ImportError:
        return [
            dict(name="training step (torch not installed)", value=0, unit="", goal="", ok=None)
        ]
    torch.set_num_threads(os.cpu_count() or 1)  # one thread per core, as mlckit's kernels
    train_set, test_set = fashion_mnist_split()
    images = train_set.images.reshape(-1, 784)
    labels = train_set.labels.astype("int64")
    held_out = test_set.images.reshape(-1, 784)

    np.random.seed(0)
    torch.manual_seed(0)
    trainers = {"fused": mlckit_trainer(True), "unfused": mlckit_trainer(False)}
    model, step = torch_step(torch)

    x, y = np.ascontiguousarray(images[:BATCH]), labels[:BATCH]
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def repeat(fn: Any) -> Any:
        return lambda: [fn() for _ in range(STEPS_PER_ROUND)]

    times = median_times(
        {
            "mlckit, default pipeline": repeat(lambda: trainers["fused"].update(x, y)),
            "mlckit, SetupTrainer's module": repeat(lambda: trainers["unfused"].update(x, y)),
            "torch": repeat(lambda: step(xt, yt)),
        },
        ROUNDS,
    )
    times = {name: t / STEPS_PER_ROUND for name, t in times.items()}
    rows: list[dict[str, Any]] = []
    for name, seconds in times.items():
        rows.append(
            dict(
                name=f"step at batch {BATCH}, {name}",
                value=seconds * 1e3,
                unit="ms",
                goal="",
                ok=None,
            )
        )
    for name in ("mlckit, default pipeline", "mlckit, SetupTrainer's module"):
        rows.append(
            dict(
                name=f"{name} / torch",
                value=times[name] / times["torch"],
                unit="x torch",
                goal="",
                ok=None,
            )
        )

    # Accuracy after training from fresh weights, each framework its own way.
    np.random.seed(0)
    torch.manual_seed(0)
    trainer = mlckit_trainer(True)
    train(trainer.update, images, labels, lambda a, b: (np.ascontiguousarray(a), b))
    predicted = np.concatenate(
        [trainer.predict(held_out[i : i + BATCH]).numpy().argmax(1) for i in range(0, 400, BATCH)]
    )
    mlckit_accuracy = float(np.mean(predicted == test_set.labels))
    model, step = torch_step(torch)
    train(step, images, labels, lambda a, b: (torch.from_numpy(a), torch.from_numpy(b)))
    with torch.no_grad():
        torch_accuracy = float(
            np.mean(model(torch.from_numpy(held_out)).argmax(1).numpy() == test_set.labels)
        )
    rows += [
        dict(
            name="held-out accuracy, mlckit",
            value=mlckit_accuracy,
            unit="",
            goal=">= 0.75",
            ok=mlckit_accuracy >= 0.75,
        ),
        dict(name="held-out accuracy, torch", value=torch_accuracy, unit="", goal="", ok=None),
    ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
