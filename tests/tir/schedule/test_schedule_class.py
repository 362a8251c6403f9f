"""The schedule API is the class body of ``Schedule``: every primitive a trace can record is a
method declared there, with its parameters and a docstring, and nothing is attached to the
class from outside, so that a reader, ``help()``, an IDE or a static tool finds it there."""

import ast
import contextlib
import functools
import inspect
import pydoc
import random
import textwrap

from mlckit.errors import ScheduleError
from mlckit.testing.fuzzing import schedules as campaign
from mlckit.tir.schedule import Schedule, ScheduleState
from mlckit.tir.schedule.trace import SAMPLING_KINDS
from mlckit.widgets.schedule_explorer import PRIMITIVES


def class_body(cls: type) -> dict[str, ast.stmt]:
    """The statements of ``cls``'s class body, by the name each defines."""
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    assert isinstance(node, ast.ClassDef)
    names: dict[str, ast.stmt] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef):
            names[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            names.update((target.id, stmt) for target in stmt.targets)
        elif isinstance(stmt, ast.AnnAssign):
            names[stmt.target.id] = stmt
    return names


def is_primitive(value: object) -> bool:
    """A recorded primitive: a method the ``primitive`` decorator wrapped."""
    return inspect.isfunction(value) and inspect.unwrap(value) is not value


@functools.cache
def traced_kinds() -> frozenset[str]:
    """The instruction kinds real traces record: every step of the schedules fuzzing campaign
    applied to each of its operators (a step the schedule refuses records nothing), and the
    primitives the schedule explorer offers."""
    kinds = set(PRIMITIVES)
    for operator in campaign.OPERATORS:
        func, _, _ = campaign.reference(operator)
        for step, _weight in campaign.STEPS.values():
            for seed in range(3):
                sch = Schedule(func, seed=seed)
                with contextlib.suppress(ScheduleError):
                    step(sch, random.Random(seed))
                kinds |= {inst.kind for inst in sch.trace}
    return frozenset(kinds)


def primitive_kinds() -> set[str]:
    """Every kind a trace can record: those real traces hold and every recorded method the
    class has, wherever it came from."""
    on_class = {name for name in dir(Schedule) if is_primitive(getattr(Schedule, name))}
    return set(traced_kinds()) | on_class


def test_real_traces_record_many_kinds():
    # The campaign covers the families (loops, compute location, caching, reduction, blockize,
    # layout, sampling); if it stopped recording, the test below would check little.
    assert {"split", "compute_at", "cache_read", "rfactor", "blockize"} <= traced_kinds()
    assert {"transform_layout", "sample_perfect_tile", "sample_compute_location"} <= traced_kinds()
    assert len(traced_kinds()) >= 20


def test_every_primitive_is_a_documented_method_of_the_class_body():
    body = class_body(Schedule)
    missing = sorted(kind for kind in primitive_kinds() if kind not in body)
    assert not missing, f"not defined in the class body of Schedule: {missing}"
    for kind in primitive_kinds():
        node = body[kind]
        assert isinstance(node, ast.FunctionDef), kind
        assert ast.get_docstring(node), f"Schedule.{kind} has no docstring"
        assert is_primitive(getattr(Schedule, kind)), f"Schedule.{kind} is not recorded"


def test_each_primitive_hands_the_work_to_its_implementation():
    body = class_body(Schedule)
    for kind in primitive_kinds():
        called = {
            ast.unparse(node.func)
            for node in ast.walk(body[kind])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        assert any(name.startswith("primitives.") for name in called), (kind, called)


def test_nothing_is_attached_to_the_class_from_outside():
    for cls in (Schedule, ScheduleState):
        declared = class_body(cls)
        attached = sorted(
            name
            for name in vars(cls)
            if name not in declared and not (name.startswith("__") and name.endswith("__"))
        )
        assert not attached, f"{cls.__name__} has attributes its class body does not declare"


def test_signatures_are_the_declared_parameters():
    body = class_body(Schedule)
    for kind in primitive_kinds():
        node = body[kind]
        declared = [a.arg for a in node.args.args]
        declared += [f"*{node.args.vararg.arg}"] if node.args.vararg else []
        declared += [a.arg for a in node.args.kwonlyargs]
        shown = [
            f"*{p.name}" if p.kind is inspect.Parameter.VAR_POSITIONAL else p.name
            for p in inspect.signature(getattr(Schedule, kind)).parameters.values()
        ]
        assert shown == declared, kind


def test_help_shows_split_with_its_parameters_and_index_math():
    signature = inspect.signature(Schedule.split)
    assert list(signature.parameters) == [
        "self",
        "loop",
        "factors",
        "preserve_unit_iters",
        "disable_predication",
    ]
    assert signature.parameters["preserve_unit_iters"].default is True
    text = pydoc.render_doc(Schedule.split, renderer=pydoc.plaintext)
    assert "split(self, loop: 'LoopRV', factors:" in text
    assert "i = i_0 * 4 + i_1" in text


def test_the_sampling_primitives_are_the_ones_that_take_a_decision():
    taking = {
        kind
        for kind in primitive_kinds()
        if "decision" in inspect.signature(getattr(Schedule, kind)).parameters
    }
    assert taking == set(SAMPLING_KINDS)
