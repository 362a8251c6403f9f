"""Saving and loading IR as JSON (``mlckit.ir.save_json`` / ``load_json``) and pickling it.

The module is bench_script's: ``main`` with 2,000 bindings (alternating ``R.add`` /
``R.multiply`` on (4, 4) float32 tensors in one dataflow block). Each time is the best of 5;
the loaded module must be structurally equal to the saved one and save to the same text.
Goal: save plus load well under a second (a module crosses a process boundary through
``pickle`` this way, and a course hands IR out as files).

Then the shipped model: the course MLP (``mlp_script`` through ``relax.get_pipeline
("default")``, weights bound) exported with ``Executable.export_library``, and, in a new
process, ``mlckit.runtime.load_module`` + ``relax.VirtualMachine`` + the first call at batch 1
(checked against the exporting process's output). As in bench_mlp, the time is taken after
numba's once-per-process costs (``import numba`` and the registries its first compiled function
loads), which are reported on a row of their own, as is ``import mlckit``. With a warm kernel
cache (best of 3 processes; goal <= 0.5 s) numba loads the kernels' machine code; with a cold
one (an empty cache, reported only) it compiles them. The sum of the warm process's rows is what a
script that loads the model and answers once takes, on top of Python's own start.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from bench_script import NUM_BINDINGS, best_of, build_chain

import mlckit
from mlckit import relax
from mlckit.datasets import mlp_params
from mlckit.demo import mlp_script
from mlckit.ir import assert_structural_equal, load_json, save_json
from mlckit.script import from_source

GOAL_S = 0.5
LOAD_GOAL_S = 0.5

LOAD_IN_FRESH_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import mlckit
from mlckit import relax
t1 = time.perf_counter()
import numba
numba.njit("int64()")(lambda: 0)  # numba's start-up, paid by any first compiled function
t2 = time.perf_counter()
lib = mlckit.runtime.load_module(sys.argv[1])
y = relax.VirtualMachine(lib, mlckit.cpu())["main"](np.load(sys.argv[2])).numpy()
t3 = time.perf_counter()
np.save(sys.argv[3], y)
print(json.dumps({"mlckit": t1 - t0, "numba": t2 - t1, "load": t3 - t2}))
"""


def run() -> list[dict[str, Any]]:
    mod = build_chain()
    save_s, text = best_of(5, lambda: save_json(mod))
    load_s, loaded = best_of(5, lambda: load_json(text))
    # A fast loader that gets the program wrong would not count.
    assert_structural_equal(loaded, mod)
    assert save_json(loaded) == text
    pickle_s, _ = best_of(5, lambda: pickle.loads(pickle.dumps(mod)))
    label = f"{NUM_BINDINGS} bindings"
    total = save_s + load_s
    return [
        {"name": f"save_json ({label})", "value": save_s, "unit": "s", "goal": "", "ok": None},
        {"name": f"load_json ({label})", "value": load_s, "unit": "s", "goal": "", "ok": None},
        {
            "name": "save + load",
            "value": total,
            "unit": "s",
            "goal": f"< {GOAL_S:g} s",
            "ok": total < GOAL_S,
        },
        {"name": "pickle round trip", "value": pickle_s, "unit": "s", "goal": "", "ok": None},
        {"name": "text size", "value": len(text) / 1e6, "unit": "MB", "goal": "", "ok": None},
        *shipped_mlp_rows(),
    ]


def shipped_mlp_rows() -> list[dict[str, Any]]:
    mod = relax.transform.BindParams("main", mlp_params())(from_source(mlp_script()))
    exe = relax.build(mod, "llvm", relax_pipeline="default")
    x = np.random.default_rng(0).random((1, 784), dtype=np.float32)
    expected = relax.VirtualMachine(exe, mlckit.cpu())["main"](x).numpy()
    with tempfile.TemporaryDirectory() as work:
        library, inputs = Path(work, "mlp.mlckit"), Path(work, "x.npy")
        exe.export_library(library)
        size_mb = library.stat().st_size / 1e6
        np.save(inputs, x)

        def fresh_load(cache: str) -> dict[str, float]:
            env = dict(os.environ, MLCKIT_CACHE_DIR=cache)
            env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
            outputs = Path(work, "y.npy")
            out = subprocess.run(
                [sys.executable, "-c", LOAD_IN_FRESH_PROCESS, library, inputs, outputs],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            # A fast loader that computes something else would not count.
            np.testing.assert_array_equal(np.load(outputs), expected)
            return json.loads(out.stdout.strip().splitlines()[-1])

        with tempfile.TemporaryDirectory() as cache:
            cold = fresh_load(cache)
            warm = min((fresh_load(cache) for _ in range(3)), key=lambda t: t["load"])
    return [
        row("import mlckit, new process", warm["mlckit"]),
        row("numba import + start-up, new process", warm["numba"]),
        row(
            "exported MLP: load + first call, warm cache",
            warm["load"],
            f"<= {LOAD_GOAL_S:g} s",
            warm["load"] <= LOAD_GOAL_S,
        ),
        row("exported MLP: load + first call, cold cache", cold["load"]),
        row("exported MLP: imports + load + first call, warm", sum(warm.values())),
        {"name": "exported MLP file size", "value": size_mb, "unit": "MB", "goal": "", "ok": None},
    ]


def row(name: str, seconds: float, goal: str = "", ok: bool | None = None) -> dict[str, Any]:
    return {"name": name, "value": seconds, "unit": "s", "goal": goal, "ok": ok}


if __name__ == "__main__":
    for row in run():
        print(row)
