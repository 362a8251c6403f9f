"""Saving and loading IR as JSON (``mlckit.ir.save_json`` / ``load_json``) and pickling it.

The module is bench_script's: ``main`` with 2,000 bindings (alternating ``R.add`` /
``R.multiply`` on (4, 4) float32 tensors in one dataflow block). Each time is the best of 5;
the loaded module must be structurally equal to the saved one and save to the same text.
Goal: save plus load well under a second (a module crosses a process boundary through
``pickle`` this way, and a course hands IR out as files).
"""

from __future__ import annotations

import pickle
from typing import Any

from bench_script import NUM_BINDINGS, best_of, build_chain

from mlckit.ir import assert_structural_equal, load_json, save_json

GOAL_S = 0.5


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
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
