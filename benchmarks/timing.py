"""Timing shared by the benchmarks (``bench_*.py`` import it; run them from this folder or
through ``run.py``, which both put it on ``sys.path``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def alternating_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """The time of each call of each function over ``rounds`` rounds that call them in turn,
    so that a slow phase of the (shared) machine falls on all of them alike. Each is called
    once first (compilation, caches)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def best_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """The best time of each function over ``rounds`` alternating rounds."""
    return {name: min(times) for name, times in alternating_times(fns, rounds).items()}


def median_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """The median time of each function over ``rounds`` alternating rounds: for comparing
    programs whose times spread widely (parallel kernels on a shared machine), where the best
    of many calls says more about luck than about the program."""
    return {
        name: statistics.median(times) for name, times in alternating_times(fns, rounds).items()
    }
