"""The trace of a schedule: every primitive applied, in order, printable as Python and
replayable on a fresh schedule of the same function."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mlckit.errors import ScheduleError

from ..expr import PrimExpr, Var

if TYPE_CHECKING:
    from .schedule import Schedule

# Primitives that draw random numbers; their outputs are decisions a replay reuses.
SAMPLING_KINDS = frozenset({"sample_perfect_tile", "sample_categorical", "sample_compute_location"})


@dataclass
class Instruction:
    """One step: the primitive's name, its arguments, what it returned and, for a sampling
    step, its decision (what it drew: tile sizes, a candidate's index, a location's index)."""

    kind: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: Any
    decision: Any = None


@dataclass
class Trace:
    instructions: list[Instruction] = field(default_factory=list)

    def append(self, instruction: Instruction) -> None:
        self.instructions.append(instruction)

    def copy(self) -> Trace:
        return Trace(list(self.instructions))

    def with_decision(self, inst: Instruction, decision: Any) -> Trace:
        """A copy of the trace in which the sampling step ``inst`` decides ``decision``; apply
        it to a fresh schedule to explore a neighbour of this schedule."""
        if inst.kind not in SAMPLING_KINDS:
            raise ScheduleError(f"with_decision: {inst.kind} is not a sampling step")
        if not any(step is inst for step in self.instructions):
            raise ScheduleError("with_decision: the instruction is not in this trace")
        return Trace([replace(step, decision=decision) if step is inst else step for step in self])

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self):
        return iter(self.instructions)

    # ------------------------------------------------------------------ printing
    def as_python(self) -> list[str]:
        """The trace as Python statements on a schedule named ``sch``."""
        namer = _RVNamer()
        lines = []
        for inst in self.instructions:
            call = f"sch.{inst.kind}({_arguments(inst, namer)})"
            outputs = namer.define(inst.outputs)
            if inst.decision is not None:
                call = (
                    call[:-1] + (", " if call[-2] != "(" else "") + f"decision={inst.decision!r})"
                )
            lines.append(f"{outputs} = {call}" if outputs else call)
        return lines

    def show(self) -> None:
        print(str(self))

    def __str__(self) -> str:
        return "\n".join(self.as_python())

    # ------------------------------------------------------------------ storing
    def as_json(self) -> list[dict[str, Any]]:
        """The trace as plain JSON data (what a tuning database stores): handles and sampled
        values become ``{"rv": n}`` references to the step outputs that made them."""
        numbers: dict[int, int] = {}
        keep: list[Any] = []  # ids are only unique while the objects live

        def output(value: Any) -> Any:
            if isinstance(value, (list, tuple)):
                return [output(v) for v in value]
            if value is None or isinstance(value, bool):
                return value
            numbers[id(value)] = len(numbers)
            keep.append(value)
            return {"rv": numbers[id(value)]}

        def encode(value: Any) -> Any:
            if id(value) in numbers:
                return {"rv": numbers[id(value)]}
            if isinstance(value, (list, tuple)):
                return {type(value).__name__: [encode(v) for v in value]}
            if value is None or isinstance(value, (bool, int, float, str)):
                return value
            raise ScheduleError(
                f"a trace with {type(value).__name__} arguments ({value!r}) cannot be stored "
                "as JSON; only handles, numbers, strings and lists of them can"
            )

        steps = []
        for inst in self.instructions:
            step = {
                "kind": inst.kind,
                "args": [encode(a) for a in inst.args],
                "kwargs": {k: encode(v) for k, v in inst.kwargs.items()},
            }
            step["outputs"] = output(inst.outputs)
            if inst.decision is not None:
                step["decision"] = inst.decision
            steps.append(step)
        return steps

    @staticmethod
    def from_json(steps: list[dict[str, Any]]) -> Trace:
        """The trace :meth:`as_json` stored; apply it with :meth:`apply_to_schedule`."""
        handles: dict[int, _StoredHandle] = {}

        def decode(value: Any) -> Any:
            if isinstance(value, dict):
                if "rv" in value:
                    return handles.setdefault(value["rv"], _StoredHandle(value["rv"]))
                if "list" in value:
                    return [decode(v) for v in value["list"]]
                if "tuple" in value:
                    return tuple(decode(v) for v in value["tuple"])
                raise ScheduleError(f"not a stored trace value: {value!r}")
            if isinstance(value, list):
                return [decode(v) for v in value]
            return value

        trace = Trace()
        for step in steps:
            trace.append(
                Instruction(
                    step["kind"],
                    tuple(decode(a) for a in step["args"]),
                    {k: decode(v) for k, v in step["kwargs"].items()},
                    decode(step["outputs"]),
                    step.get("decision"),
                )
            )
        return trace

    # ------------------------------------------------------------------ replay
    def apply_to_schedule(self, sch: Schedule, remove_postproc: bool = False) -> None:
        """Apply every step to ``sch`` (a fresh schedule of the same function): handles are
        mapped to the new schedule's, and sampling steps reuse their recorded decisions."""
        mapping: dict[int, Any] = {}

        def convert(value: Any) -> Any:
            if isinstance(value, (list, tuple)):
                return type(value)(convert(v) for v in value)
            return mapping.get(id(value), value)

        for inst in self.instructions:
            kwargs = {k: convert(v) for k, v in inst.kwargs.items()}
            if inst.decision is not None:
                kwargs["decision"] = inst.decision
            result = getattr(sch, inst.kind)(*convert(inst.args), **kwargs)
            _map_outputs(inst.outputs, result, mapping)


class _StoredHandle:
    """A handle or sampled value of a trace read back from JSON: what a replay maps to the new
    schedule's own."""

    def __init__(self, number: int):
        self.number = number

    def __repr__(self) -> str:
        return f"rv{self.number}"


def _map_outputs(old: Any, new: Any, mapping: dict[int, Any]) -> None:
    if isinstance(old, (list, tuple)):
        for a, b in zip(old, new):
            _map_outputs(a, b, mapping)
    elif old is not None:
        mapping[id(old)] = new


class _RVNamer:
    """Names handles as TVM's traces do: b0 for blocks, l1 for loops, v2 for sampled values."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.alive: list[Any] = []

    def define(self, outputs: Any) -> str:
        items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        names = []
        for item in items:
            if item is None or isinstance(item, bool):
                continue
            prefix = {"BlockRV": "b", "LoopRV": "l"}.get(type(item).__name__, "v")
            name = f"{prefix}{len(self.names)}"
            self.names[id(item)] = name
            self.alive.append(item)
            names.append(name)
        if not names:
            return ""
        return ", ".join(names) + (
            "," if isinstance(outputs, (list, tuple)) and len(names) == 1 else ""
        )

    def text(self, value: Any) -> str:
        if id(value) in self.names:
            return self.names[id(value)]
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.text(v) for v in value)
            return f"[{inner}]"
        if callable(value):
            return _lambda_text(value)
        return repr(value)


def _lambda_text(func: Any) -> str:
    """An index map as the lambda a student would write, found by applying it to variables
    named after its parameters (``lambda i, j: [i // 4, j, i % 4]``)."""
    names = list(inspect.signature(func).parameters)
    try:
        results = func(*(Var(name, "int32") for name in names))
    except Exception:  # not an index map: fall back to its repr
        return repr(func)
    if not isinstance(results, (list, tuple)):
        results = [results]
    if not all(isinstance(r, PrimExpr) for r in results):
        return repr(func)
    body = ", ".join(r.script() for r in results)
    return f"lambda {', '.join(names)}: [{body}]"


# The signature of each primitive's Schedule method, by kind: its ``@primitive`` decorator
# registers it when schedule.py is imported (which imports this module to record traces).
PRIMITIVE_SIGNATURES: dict[str, inspect.Signature] = {}


def _arguments(inst: Instruction, namer: _RVNamer) -> str:
    """The arguments of a step as the call prints them, named after the parameters of the
    Schedule method of its kind."""
    params = list(PRIMITIVE_SIGNATURES[inst.kind].parameters.values())
    parts = []
    for i, param in enumerate(params[1 : len(inst.args) + 1]):
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            # Variadic handles print positionally, as TVM's do: sch.fuse(l1, l2)
            parts += [namer.text(value) for value in inst.args[i:]]
            break
        parts.append(f"{param.name}={namer.text(inst.args[i])}")
    parts += [f"{k}={namer.text(v)}" for k, v in inst.kwargs.items() if v is not None]
    return ", ".join(parts)
