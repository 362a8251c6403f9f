"""Timing shared by the benchmarks (``bench_*.py`` import it; run them from this folder or
through ``run.py``, which both put it on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """The best time of each function over ``rounds`` rounds that call them in turn, so that a
    slow phase of the (shared) machine falls on all of them alike. Each is called once first
    (compilation, caches)."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
