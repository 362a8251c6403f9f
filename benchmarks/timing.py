"""Timing shared by the benchmarks (``bench_*.py`` import it; run them from this folder or
through ``run.py``, which both put it on ``sys.path``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from mlckit.meta_schedule import Runner
from mlckit.runtime.module import time_function

# How one turn of a function is timed: it takes the function and returns seconds per call.
Measure = Callable[[Callable[[], Any]], float]


def one_call(fn: Callable[[], Any]) -> float:
    """One call, timed: between two calls of the same function, the others have run."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def as_the_runner_does(fn: Callable[[], Any]) -> float:
    """A call to warm up, then the mean of back-to-back calls, as a default
    ``meta_schedule.Runner`` times one repeat of a candidate: the measure the searches rank
    programs by."""
    runner = Runner()  # its settings only: the worker pool starts on first use
    return time_function(fn, runner.number, 1, runner.min_repeat_ms)().results[0]


def calls_lasting(min_ms: float) -> Measure:
    """A call to warm up, then the mean of back-to-back calls lasting ``min_ms`` or more (TVM's
    evaluator with ``min_repeat_ms``): a 20 us model is timed over a thousand calls, a 100 ms one
    over one, so that turns of both last about as long."""
    return lambda fn: time_function(fn, 1, 1, min_ms)().results[0]


def alternating_times(
    fns: dict[str, Callable[[], Any]], rounds: int, measure: Measure = one_call
) -> dict[str, list[float]]:
    """The time of each turn of each function over ``rounds`` rounds that take them in turn,
    so that a slow phase of the (shared) machine falls on all of them alike. Each is called
    once first (compilation, caches)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(measure(fn))
    return times


def best_times(
    fns: dict[str, Callable[[], Any]], rounds: int, measure: Measure = one_call
) -> dict[str, float]:
    """The best time of each function over ``rounds`` alternating rounds."""
    return {name: min(times) for name, times in alternating_times(fns, rounds, measure).items()}


def median_times(
    fns: dict[str, Callable[[], Any]], rounds: int, measure: Measure = one_call
) -> dict[str, float]:
    """The median time of each function over ``rounds`` alternating rounds: for comparing
    programs whose times spread widely (parallel kernels on a shared machine), where the best
    of many calls says more about luck than about the program."""
    return {
        name: statistics.median(times)
        for name, times in alternating_times(fns, rounds, measure).items()
    }
