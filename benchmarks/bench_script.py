"""TVMScript printer and parser speed on a large Relax function.

Builds ``main`` with 2,000 bindings (alternating ``R.add`` / ``R.multiply`` on (4, 4) float32
tensors inside one dataflow block), prints it with ``mod.script()`` and parses the text back with
``mlckit.script.from_source``. Goal: printing plus parsing in under 2 seconds, so that notebooks
can show whole models after every pass without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mlckit import relax
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.script import from_source

NUM_BINDINGS = 2000
GOAL_S = 2.0


def build_chain(num_bindings: int = NUM_BINDINGS) -> IRModule:
    sinfo = relax.TensorStructInfo((4, 4), "float32")
    x = relax.Var("x", sinfo)
    y = relax.Var("y", sinfo)
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            lv = x
            for i in range(num_bindings - 1):
                op = relax.op.add if i % 2 == 0 else relax.op.multiply
                lv = bb.emit(op(lv, y))
            gv = bb.emit_output(relax.op.add(lv, x))
        bb.emit_func_output(gv)
    return bb.get()


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def run() -> list[dict[str, Any]]:
    mod = build_chain()
    print_s, text = best_of(3, mod.script)
    parse_s, parsed = best_of(3, lambda: from_source(text))
    # A fast parser that gets the program wrong would not count.
    assert_structural_equal(parsed, mod)
    total = print_s + parse_s
    label = f"{NUM_BINDINGS} bindings"
    return [
        {"name": f"print ({label})", "value": print_s, "unit": "s", "goal": "", "ok": None},
        {"name": f"parse ({label})", "value": parse_s, "unit": "s", "goal": "", "ok": None},
        {
            "name": "print + parse",
            "value": total,
            "unit": "s",
            "goal": f"< {GOAL_S:g} s",
            "ok": total < GOAL_S,
        },
        {
            "name": "script size",
            "value": len(text.splitlines()),
            "unit": "lines",
            "goal": "",
            "ok": None,
        },
    ]
