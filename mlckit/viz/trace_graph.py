"""A schedule's trace as a chain of steps, each the Python line that replays it.

Lookups (``get_block``, ``get_loops``) are white, transformations blue, sampling steps yellow
with their decision; a dotted edge joins a step to an earlier, non-adjacent step whose handle
it uses (``split`` of a loop that ``get_loops`` returned three steps before).
"""

from __future__ import annotations

from typing import Any

from mlckit.tir.schedule.schedule import BlockRV, LoopRV
from mlckit.tir.schedule.trace import Trace

from . import style
from .picture import Picture


def trace_picture(trace: Trace, *, rankdir: str = "TB") -> Picture:
    pic = Picture({"rankdir": rankdir, "nodesep": "0.25", "ranksep": "0.3"})
    previous = pic.node(
        pic.new_id("step", "start"),
        style.html_label([style.code("sch = tir.Schedule(mod)")]),
        shape="box",
        style="rounded,filled",
        fillcolor=style.PALE_GREY,
    )
    producer: dict[int, str] = {}
    for index, (inst, line) in enumerate(zip(trace.instructions, trace.as_python())):
        if inst.decision is not None:
            fill = style.LIGHT_YELLOW
        elif inst.kind.startswith("get_"):
            fill = style.WHITE
        else:
            fill = style.LIGHT_CYAN
        lines = [style.bold(inst.kind), style.code(style.clip(line, 72))]
        node_id = pic.node(
            pic.new_id("step", str(index)),
            style.html_label(lines),
            shape="box",
            style="rounded,filled",
            fillcolor=fill,
        )
        pic.edge(previous, node_id)
        handles = _handles([*inst.args, *inst.kwargs.values()])
        for used in dict.fromkeys(producer[id(h)] for h in handles if id(h) in producer):
            if used != previous:
                pic.edge(used, node_id, style="dotted", constraint="false", arrowhead="open")
        for output in _handles([inst.outputs]):
            producer[id(output)] = node_id
        previous = node_id
    return pic


def _handles(values: list[Any]) -> list[Any]:
    """The handles among (nested lists of) values, flattened."""
    found: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            found += _handles(list(value))
        elif isinstance(value, (BlockRV, LoopRV)):
            found.append(value)
    return found
