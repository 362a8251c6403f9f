"""The course's FashionMNIST MLP (784-128-10) compiled with the default pipeline and the default
CPU schedule, against numpy.

The module from ``mlckit.demo.mlp_script()`` goes through ``relax.get_pipeline("default")``
(legalize, fuse, ...) and then ``DefaultSchedule`` (the loop-schedule rules of
``mlckit.tir.schedule.default_schedule``), is built for "llvm", and ``vm["main"]`` is timed at
batch 1 and 64 against ``relu(x @ w0.T + b0) @ w1.T + b1`` in numpy, measured in the same
run. Goals: <= 1.5x numpy at batch 1, <= 1.2x at batch 64.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import mlckit
from mlckit import relax
from mlckit.datasets import mlp_params
from mlckit.demo import mlp_script
from mlckit.script import from_source
from mlckit.tir.schedule.default_schedule import DefaultSchedule

GOALS = {1: 1.5, 64: 1.2}


def numpy_mlp(x: np.ndarray, w0: Any, b0: Any, w1: Any, b1: Any) -> np.ndarray:
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def best_times(
    fns: dict[str, Callable[[], Any]], number: int, rounds: int = 10, passes: int = 3
) -> dict[str, float]:
    """The best time per call of each function over ``passes`` x ``rounds`` runs of ``number``
    calls.

    Each function is measured on its own for a whole pass, one after the other: OpenBLAS's
    threads keep spinning for a while after a call and would slow down the kernels' threads in
    between. The passes alternate, so a slow phase of the machine (it is shared) does not fall
    on one side of the comparison only.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(passes):
        for name, fn in fns.items():
            fn()
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def run() -> list[dict[str, Any]]:
    params = mlp_params()
    weights = [params[k] for k in ("w0", "b0", "w1", "b1")]
    mod = DefaultSchedule()(relax.get_pipeline("default")(from_source(mlp_script())))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for batch, goal in GOALS.items():
        x = rng.random((batch, 784), dtype=np.float32)
        args = [x, *weights]
        result = vm["main"](*args)
        result = result.numpy() if hasattr(result, "numpy") else result
        np.testing.assert_allclose(result, numpy_mlp(*args), rtol=1e-4, atol=1e-4)
        times = best_times(
            {
                "mlckit": lambda args=args: vm["main"](*args),
                "numpy": lambda args=args: numpy_mlp(*args),
            },
            number=200 if batch == 1 else 20,
        )
        ratio = times["mlckit"] / times["numpy"]
        rows += [
            dict(
                name=f"default schedule, batch {batch}",
                value=times["mlckit"] * 1e6,
                unit="us",
                goal="",
                ok=None,
            ),
            dict(
                name=f"numpy, batch {batch}",
                value=times["numpy"] * 1e6,
                unit="us",
                goal="",
                ok=None,
            ),
            dict(
                name=f"default schedule / numpy, batch {batch}",
                value=ratio,
                unit="x",
                goal=f"<= {goal}x",
                ok=ratio <= goal,
            ),
        ]
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']:42s} {r['value']:10.3f} {r['unit']:3s} {r['goal']} {r['ok']}")
