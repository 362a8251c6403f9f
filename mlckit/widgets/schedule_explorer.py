"""ScheduleExplorer: apply schedule primitives by hand and watch the loop nest and its speed.

    explorer = ScheduleExplorer(MyModule["mm_relu"])   # a live widget in a notebook
    explorer.static()                                  # the steps so far, as a static stepper

Pick a primitive, the block or loop it works on and its arguments, press *apply*: the explorer
shows the new TVMScript, its difference from the step before, the Python that the function
compiles to, the loop nest's picture, and a bar chart of the measured run time of every step.
*undo* drops the last step. The trace box holds the steps as Python to copy into a notebook.

:class:`ScheduleSteps` is the same history without the widget: the explorer's model, and what
``static()`` renders.
"""

from __future__ import annotations

import ast
import html as htmllib
import io
from dataclasses import dataclass
from typing import Any

import ipywidgets as w
import numpy as np

import mlckit
from mlckit import viz
from mlckit.backend import kernel_source
from mlckit.errors import MLCError, ScheduleError
from mlckit.ir.module import IRModule
from mlckit.ir.name_supply import sanitize
from mlckit.target import Target
from mlckit.tir import stmt as S
from mlckit.tir.expr import IntImm, PrimExpr
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import BlockRV, LoopRV, Schedule
from mlckit.tir.schedule.trace import Trace
from mlckit.tir.stmt_functor import pre_order_visit
from mlckit.viz.dot import render

from .static_html import (
    StaticStep,
    StaticSteps,
    details,
    error_box,
    error_text,
    note,
    panel,
    picture,
    shown_safely,
)


# ------------------------------------------------------------------------------ primitives
@dataclass(frozen=True)
class PrimitiveForm:
    """Which arguments a primitive takes, in call order, and a line of help. The arguments are
    ``block`` (a block's name), ``loop`` (a loop's label), ``loops`` (several labels, in order),
    ``factors`` (``"None, 4"``), ``buffer_index`` and ``factor_axis`` (ints), ``scope``.
    ``min_loops`` is how many ``loops`` make sense: TVM takes a reorder or a fuse of one loop
    and does nothing, which in the explorer is a mistake in the list of loops."""

    arguments: tuple[str, ...]
    help: str
    min_loops: int = 0


PRIMITIVES: dict[str, PrimitiveForm] = {
    "split": PrimitiveForm(
        ("loop", "factors"),
        "split a loop into nested loops; factors multiply to its extent, one may be None",
    ),
    "fuse": PrimitiveForm(
        ("loops",), "fuse directly nested loops (outermost first) into one", min_loops=2
    ),
    "reorder": PrimitiveForm(
        ("loops",), "put the chosen loops in this order, outermost first", min_loops=2
    ),
    "parallel": PrimitiveForm(("loop",), "run the iterations of a loop on all CPU cores"),
    "vectorize": PrimitiveForm(("loop",), "mark an innermost loop for SIMD instructions"),
    "unroll": PrimitiveForm(("loop",), "write out every iteration of a loop"),
    "compute_at": PrimitiveForm(
        ("block", "loop"), "move a producer block under a loop of its consumer"
    ),
    "reverse_compute_at": PrimitiveForm(
        ("block", "loop"), "move a consumer block under a loop of its producer"
    ),
    "compute_inline": PrimitiveForm(
        ("block",), "substitute a block's value into the blocks that read it"
    ),
    "reverse_compute_inline": PrimitiveForm(
        ("block",), "fold a block into the block that produces its input"
    ),
    "decompose_reduction": PrimitiveForm(
        ("block", "loop"), "move a reduction's init out to its own block above the loop"
    ),
    "cache_read": PrimitiveForm(
        ("block", "buffer_index", "scope"), "copy the block's read buffer (by index) first"
    ),
    "cache_write": PrimitiveForm(
        ("block", "buffer_index", "scope"), "write to a cache buffer, copied out afterwards"
    ),
    "rfactor": PrimitiveForm(
        ("loop", "factor_axis"), "turn a reduction loop into a data-parallel one plus a sum"
    ),
    "blockize": PrimitiveForm(("loop",), "wrap the loops below this one in a new block"),
}

# Steps that only look something up: a replayed trace folds them into the next primitive's step.
_QUERIES = frozenset(
    {"get_block", "get_sblock", "get_loops", "get_child_blocks", "get_producers", "get_consumers"}
)


def parse_factors(text: str) -> list[int | None]:
    """``"None, 4"`` -> ``[None, 4]``: split's factors as a student types them."""
    try:
        value = ast.literal_eval(f"[{text}]")
    except (ValueError, SyntaxError):
        value = None
    if not value or not all(v is None or (isinstance(v, int) and v > 0) for v in value):
        raise ScheduleError(
            f"split: factors must be positive integers or None, separated by commas "
            f"(like None, 4), not {text!r}"
        )
    return value


# ------------------------------------------------------------------------------ the model
@dataclass(frozen=True)
class ScheduleStep:
    """The schedule after a step, the trace lines the step added, and its run time (None, with
    ``timing_note`` saying why, when it was not measured)."""

    schedule: Schedule
    lines: tuple[str, ...]
    seconds: float | None
    timing_note: str = ""

    @property
    def func(self) -> PrimFunc:
        return self.schedule.func

    @property
    def title(self) -> str:
        return self.lines[-1] if self.lines else "the function as given"


class ScheduleSteps:
    """A history of schedule steps on one PrimFunc; :class:`ScheduleExplorer` is its widget.

    ``func`` is a PrimFunc, or an IRModule with ``func_name`` choosing its PrimFunc. ``trace``
    (``sch.trace`` of a schedule of the same function) is replayed as the first steps. With
    ``measure=True`` every step is compiled for ``target`` and timed (``number`` runs) on random
    inputs of the function's buffer shapes.
    """

    def __init__(
        self,
        func: PrimFunc | IRModule,
        *,
        func_name: str | None = None,
        trace: Trace | None = None,
        target: str = "llvm",
        measure: bool = True,
        number: int = 3,
    ):
        start = Schedule(func)
        if func_name is not None:
            start.work_on(func_name)
        self.target = target
        self.measure = measure
        self.number = number
        self._start = start
        self._inputs: list[np.ndarray] | None = None
        self.steps: list[ScheduleStep] = [self._step(start.copy(), ())]
        if trace is not None:
            self._replay(trace)

    # ------------------------------------------------------------------ what there is
    @property
    def current(self) -> ScheduleStep:
        return self.steps[-1]

    def block_names(self) -> list[str]:
        return [r.block.name_hint for r in Schedule.walk_blocks(self.current.func.body)]

    def loops(self) -> dict[str, S.For]:
        """Every loop of the current function by its label: the loop variable's name and the
        blocks under the loop (``"j (Y, Z)"``), numbered if that still repeats."""
        found: list[S.For] = []

        def visit(node: Any) -> bool:
            if isinstance(node, PrimExpr):
                return False  # loops hold no loops in their expressions
            if isinstance(node, S.For):
                found.append(node)
            return True

        pre_order_visit(self.current.func.body, visit)
        labels: dict[str, S.For] = {}
        for loop in found:
            blocks = ", ".join(r.block.name_hint for r in Schedule.walk_blocks(loop.body))
            label = f"{loop.loop_var.name_hint} ({blocks})"
            count = 2
            while label in labels:
                label = f"{loop.loop_var.name_hint} ({blocks}) #{count}"
                count += 1
            labels[label] = loop
        return labels

    # ------------------------------------------------------------------ changing it
    def apply(self, primitive: str, **arguments: Any) -> ScheduleStep:
        """Apply ``primitive`` to the current step, giving its arguments by name as in
        :data:`PRIMITIVES` (``apply("split", loop="j (Y)", factors="None, 4")``). A primitive
        that fails raises its ScheduleError and leaves the history as it was."""
        form = PRIMITIVES.get(primitive)
        if form is None:
            raise ScheduleError(
                f"the explorer offers {', '.join(PRIMITIVES)}; {primitive!r} is not one of them"
            )
        missing = [name for name in form.arguments if _empty(arguments.get(name))]
        if missing:
            raise ScheduleError(f"{primitive}: choose {' and '.join(missing)}")
        sch = self.current.schedule.copy()
        before = len(sch.trace)
        values: list[Any] = []
        for name in form.arguments:
            value = arguments[name]
            if name == "block":
                values.append(self._block_rv(sch, value))
            elif name == "loop":
                values.append(self._loop_rv(sch, self._loop_named(value, primitive)))
            elif name == "loops":
                names = [value] if isinstance(value, str) else list(value)
                if len(names) < form.min_loops:
                    raise ScheduleError(
                        f"{primitive}: choose at least {form.min_loops} loops, in order "
                        f"(chosen: {', '.join(names)}); a {primitive} of one loop changes nothing"
                    )
                values += [self._loop_rv(sch, self._loop_named(n, primitive)) for n in names]
            elif name == "factors":
                values.append(parse_factors(value) if isinstance(value, str) else list(value))
            elif name in ("buffer_index", "factor_axis"):
                values.append(int(value))
            else:
                values.append(str(value))
        getattr(sch, primitive)(*values)
        step = self._step(sch, tuple(sch.trace.as_python()[before:]))
        self.steps.append(step)
        return step

    def undo(self) -> ScheduleStep:
        """Drop the last step (the function as given stays); return the step now current."""
        if len(self.steps) == 1:
            raise ScheduleError("undo: there is no step to undo")
        self.steps.pop()
        return self.current

    def _replay(self, trace: Trace) -> None:
        done = 0
        for end, inst in enumerate(trace.instructions, start=1):
            if inst.kind in _QUERIES and end < len(trace.instructions):
                continue
            sch = self._start.copy()
            Trace(trace.instructions[:end]).apply_to_schedule(sch)
            self.steps.append(self._step(sch, tuple(sch.trace.as_python()[done:end])))
            done = end

    def _loop_named(self, label: str, primitive: str) -> S.For:
        loops = self.loops()
        if label in loops:
            return loops[label]
        # A loop name alone is enough while it names one loop.
        matches = [loop for key, loop in loops.items() if key.split(" (")[0] == label]
        if len(matches) == 1:
            return matches[0]
        raise ScheduleError(
            f"{primitive}: no single loop {label!r}; the loops are {', '.join(loops)}"
        )

    # Handles come from get_block/get_loops, so that the trace reads as code a student can run;
    # handles that earlier steps already made are reused to keep the trace short.
    @staticmethod
    def _known(sch: Schedule) -> list[Any]:
        found: list[Any] = []
        for inst in sch.trace:
            outputs = inst.outputs if isinstance(inst.outputs, (list, tuple)) else [inst.outputs]
            found += [o for o in outputs if isinstance(o, (BlockRV, LoopRV))]
        return found

    def _block_rv(self, sch: Schedule, name: str) -> BlockRV:
        for rv in reversed(self._known(sch)):
            if isinstance(rv, BlockRV) and rv.name == name:
                return rv
        return sch.get_block(name)

    def _loop_rv(self, sch: Schedule, loop: S.For) -> LoopRV:
        for rv in reversed(self._known(sch)):
            if isinstance(rv, LoopRV) and rv.loop_var is loop.loop_var:
                return rv
        for realize in Schedule.walk_blocks(loop.body):
            if any(above is loop for above in sch.loops_above(realize)):
                block = self._block_rv(sch, realize.block.name_hint)
                for rv in sch.get_loops(block):
                    if rv.loop_var is loop.loop_var:
                        return rv
        raise ScheduleError(f"the loop {loop.loop_var.name_hint!r} has no block under it")

    # ------------------------------------------------------------------ timing
    def _step(self, sch: Schedule, lines: tuple[str, ...]) -> ScheduleStep:
        if not self.measure:
            return ScheduleStep(sch, lines, None, "timing is off (measure=False)")
        try:
            return ScheduleStep(sch, lines, self._time(sch))
        except Exception as err:  # a build that fails is shown, not raised
            return ScheduleStep(sch, lines, None, error_text(err))

    def _time(self, sch: Schedule) -> float:
        if self._inputs is None:
            self._inputs = random_inputs(sch.func)
        lib = mlckit.build(IRModule({sch.func_name: sch.func}), self.target)
        evaluator = lib.time_evaluator(sch.func_name, mlckit.cpu(), number=self.number)
        return evaluator(*[a.copy() for a in self._inputs]).mean

    # ------------------------------------------------------------------ views of one step
    def script_html(self, index: int) -> str:
        return viz.html(self.steps[index].func)

    def diff_html(self, index: int) -> str:
        if index == 0:
            return note("the function as given; each step shows what it changed")
        return viz.diff(self.steps[index - 1].func, self.steps[index].func).html()

    def source(self, index: int) -> str:
        sch = self.steps[index].schedule
        return kernel_source(sch.func, sanitize(sch.func_name), Target(self.target))[0]

    def source_html(self, index: int) -> str:
        return viz.html(self.source(index))

    def picture_html(self, index: int) -> str:
        func = self.steps[index].func
        if index == 0:
            return picture(viz.svg(func), "loop nest as given")
        data = render(viz.graph_diff(self.steps[index - 1].func, func), "svg")
        svg = None if data is None else data.decode("utf-8")
        return picture(svg, f"loop nest after {self.steps[index].title}, its changes outlined")

    def trace_text(self) -> str:
        lines = self.current.schedule.trace.as_python()
        header = "# sch = tir.Schedule(func), func being the PrimFunc the explorer started from"
        return "\n".join([header, *lines])

    def chart_html(self, current: int | None = None) -> str:
        if not self.measure:
            return note("timing is off (measure=False)")
        return picture(time_chart_svg(self.steps, current), "run time of every step (bar chart)")

    def static(self) -> StaticSteps:
        """The steps as a stepper that needs no kernel (highlighted code and pictures inline)."""
        steps = []
        for index, step in enumerate(self.steps):
            body = (
                shown_safely(lambda i=index: self.diff_html(i))
                + shown_safely(lambda i=index: self.picture_html(i))
                + details("TVMScript", shown_safely(lambda i=index: self.script_html(i)))
                + details("generated Python", shown_safely(lambda i=index: self.source_html(i)))
            )
            if step.seconds is None and self.measure:
                body += error_box(f"not timed: {step.timing_note}")
            steps.append(StaticStep(step.title, body))
        footer = details(
            "run time of every step", shown_safely(self.chart_html), open_=self.measure
        )
        footer += details("the trace as Python", viz.html(self.trace_text()))
        return StaticSteps("ScheduleExplorer", tuple(steps), footer=footer)

    def to_html(self) -> str:
        return self.static().to_html()


def _empty(value: Any) -> bool:
    # 0 is a buffer index, not a missing one.
    return value is None or (isinstance(value, (str, list, tuple)) and len(value) == 0)


def random_inputs(func: PrimFunc) -> list[np.ndarray]:
    """Arrays for every buffer parameter of ``func`` (fixed seed), to time it on."""
    rng = np.random.default_rng(0)
    arrays = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            raise MLCError(f"cannot time a function with a scalar parameter ({param.name_hint})")
        if not all(isinstance(d, IntImm) for d in buffer.shape):
            raise MLCError(f"cannot time a function with a symbolic shape ({buffer.name})")
        shape = tuple(d.value for d in buffer.shape)
        if "float" in buffer.dtype:
            arrays.append(rng.standard_normal(shape).astype(buffer.dtype))
        else:
            arrays.append(rng.integers(0, 8, shape).astype(buffer.dtype))
    return arrays


def time_chart_svg(steps: list[ScheduleStep], current: int | None = None) -> str:
    """A bar chart (SVG) of the milliseconds per run of each step; ``current`` is highlighted."""
    import matplotlib
    from matplotlib.figure import Figure

    count = len(steps)
    labels = [f"{i}: {_primitive_of(step)}" for i, step in enumerate(steps)]
    values = [(s.seconds or 0.0) * 1e3 for s in steps]
    colours = ["#1F77B4" if i != current else "#FF7F0E" for i in range(count)]
    # Figure without pyplot: no global state, no GUI backend, works under Agg and anywhere.
    fig = Figure(figsize=(max(4.0, 0.7 * count + 1.5), 2.8))
    ax = fig.add_subplot()
    ax.bar(range(count), values, color=colours)
    for i, step in enumerate(steps):
        if step.seconds is None:
            ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8, color="#888888")
    ax.set_xticks(range(count), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ms per run")
    ax.set_title("run time per step", fontsize=10)
    fig.tight_layout()
    out = io.StringIO()
    # A fixed salt gives the same SVG ids every run, so saved outputs do not churn.
    with matplotlib.rc_context({"svg.hashsalt": "mlckit"}):
        fig.savefig(out, format="svg")
    return out.getvalue()


def kept_choice(chosen: str | None, options: list[str]) -> str | None:
    """What a dropdown shows after a step: the ``chosen`` label if it is still an option, else
    the one option for the same loop (``"j_0 (Y)"`` became ``"j_0 (Y, Z)"`` when a block moved
    under it), else the first option."""
    if chosen in options:
        return chosen
    if chosen is not None:
        same = [o for o in options if o.split(" (")[0] == chosen.split(" (")[0]]
        if len(same) == 1:
            return same[0]
    return options[0] if options else None


def _primitive_of(step: ScheduleStep) -> str:
    if not step.lines:
        return "start"
    line = step.lines[-1]
    call = line.split("= ", 1)[-1]
    return call.removeprefix("sch.").split("(")[0]


# ------------------------------------------------------------------------------ the widget
_SMALL_BUTTON = {"width": "6em"}


class ScheduleExplorer(w.VBox):
    """The live explorer (see the module doc); takes what :class:`ScheduleSteps` takes.

    Its controls are attributes, so a test or a notebook can drive it: ``primitive``, ``block``,
    ``loop``, ``loops`` (filled by choosing in ``loop_choice`` and pressing ``add_loop_button``),
    ``factors``, ``buffer_index``, ``scope``, ``factor_axis``, ``apply_button``,
    ``undo_button``; ``message`` shows what happened (an error included, until the next apply
    or another primitive), and ``script_view``, ``diff_view``, ``source_view``,
    ``picture_view``, ``chart_view`` and ``trace_view`` show the current step.
    """

    def __init__(self, func: PrimFunc | IRModule, **options: Any):
        self.history = ScheduleSteps(func, **options)
        self.primitive = w.Dropdown(
            options=list(PRIMITIVES), value="split", description="primitive"
        )
        self.block = w.Dropdown(description="block")
        self.loop = w.Dropdown(description="loop")
        # Typing into a TagsInput adds a loop on Tab but not on Enter inside JupyterLab, so a
        # list typed with Enter silently held one loop: loops are added from a dropdown.
        self.loops = w.TagsInput(allow_duplicates=False)
        self.loop_choice = w.Dropdown(layout=w.Layout(width="16em"))
        self.add_loop_button = w.Button(description="add", icon="plus", layout=_SMALL_BUTTON)
        self.clear_loops_button = w.Button(description="clear", layout=_SMALL_BUTTON)
        self.factors = w.Text(value="None, 4", description="factors")
        self.buffer_index = w.BoundedIntText(value=0, min=0, max=64, description="buffer index")
        self.scope = w.Text(value="global", description="scope")
        self.factor_axis = w.BoundedIntText(value=0, min=0, max=64, description="factor axis")
        self.help = w.HTML()
        self.apply_button = w.Button(description="apply", button_style="primary")
        self.undo_button = w.Button(description="undo", icon="undo")
        self.message = w.HTML()
        self.script_view = panel()
        self.diff_view = panel()
        self.source_view = panel()
        self.picture_view = panel()
        self.chart_view = panel()
        self.trace_view = w.Textarea(layout=w.Layout(width="100%", height="10em"))
        self._fields: dict[str, w.Widget] = {
            "block": self.block,
            "loop": self.loop,
            "loops": w.VBox(
                [
                    w.Label("loops, outermost first: choose one, press add, and again"),
                    w.HBox([self.loop_choice, self.add_loop_button, self.clear_loops_button]),
                    self.loops,
                ]
            ),
            "factors": self.factors,
            "buffer_index": self.buffer_index,
            "scope": self.scope,
            "factor_axis": self.factor_axis,
        }
        self.tabs = w.Tab(
            children=[
                self.script_view,
                self.diff_view,
                self.source_view,
                self.picture_view,
                self.chart_view,
            ]
        )
        names = ["TVMScript", "diff", "generated Python", "picture", "run time"]
        for index, name in enumerate(names):
            self.tabs.set_title(index, name)
        self.primitive.observe(lambda _: self._show_form(), names="value")
        self.apply_button.on_click(lambda _: self.apply_form())
        self.undo_button.on_click(lambda _: self.undo())
        self.add_loop_button.on_click(lambda _: self.add_loop())
        self.clear_loops_button.on_click(lambda _: setattr(self.loops, "value", []))
        super().__init__(
            [
                w.HBox([self.primitive, self.help]),
                w.HBox(list(self._fields.values())),
                w.HBox([self.apply_button, self.undo_button, self.message]),
                self.tabs,
                w.Label("the trace so far, as Python:"),
                self.trace_view,
            ]
        )
        self._refresh()
        self._show_form()

    # ------------------------------------------------------------------ actions
    def apply_form(self) -> bool:
        """Apply the primitive the form describes; False (and the error shown) if it failed."""
        form = PRIMITIVES[self.primitive.value]
        arguments = {name: self._value(name) for name in form.arguments}
        try:
            step = self.history.apply(self.primitive.value, **arguments)
        except Exception as err:  # shown in the widget: a student's mistake is not a crash
            self._say(error_box(str(err) if isinstance(err, MLCError) else error_text(err)))
            return False
        self._refresh()
        self._say(f"<code>{htmllib.escape(step.title)}</code>")
        return True

    def add_loop(self) -> None:
        """Append the loop chosen in ``loop_choice`` to ``loops`` (once)."""
        chosen = self.loop_choice.value
        if chosen is not None and chosen not in self.loops.value:
            self.loops.value = [*self.loops.value, chosen]

    def undo(self) -> bool:
        try:
            self.history.undo()
        except ScheduleError as err:
            self._say(error_box(str(err)))
            return False
        self._refresh()
        self._say("undone")
        return True

    def static(self) -> StaticSteps:
        """The steps so far as a stepper that works without a kernel."""
        return self.history.static()

    def to_html(self) -> str:
        return self.history.to_html()

    # ------------------------------------------------------------------ display
    def _value(self, name: str) -> Any:
        if name == "loops":
            return list(self.loops.value)
        return self._fields[name].value  # type: ignore[attr-defined]

    def _say(self, html: str) -> None:
        self.message.value = html

    def _show_form(self) -> None:
        form = PRIMITIVES[self.primitive.value]
        for name, field in self._fields.items():
            field.layout.display = "" if name in form.arguments else "none"
        self.help.value = f'<span style="color: #555555">{htmllib.escape(form.help)}</span>'
        self._say("")  # what the last primitive said is not about this one

    def _refresh(self) -> None:
        history = self.history
        index = len(history.steps) - 1
        blocks = history.block_names()
        labels = list(history.loops())
        # Keep the student's choices where the step left them in place. Options and value go
        # to the browser as one message, which then shows the kept choice, not the first.
        for dropdown, options in (
            (self.block, blocks),
            (self.loop, labels),
            (self.loop_choice, labels),
        ):
            with dropdown.hold_sync():
                chosen = dropdown.value
                dropdown.options = options
                dropdown.value = kept_choice(chosen, options)
        self.loops.allowed_tags = labels
        self.loops.value = [label for label in self.loops.value if label in labels]
        self.undo_button.disabled = index == 0
        self.script_view.value = shown_safely(lambda: history.script_html(index))
        self.diff_view.value = shown_safely(lambda: history.diff_html(index))
        self.source_view.value = shown_safely(lambda: history.source_html(index))
        self.picture_view.value = shown_safely(lambda: history.picture_html(index))
        chart = shown_safely(lambda: history.chart_html(index))
        step = history.current
        if step.seconds is None and history.measure:
            chart += error_box(f"this step was not timed: {step.timing_note}")
        self.chart_view.value = chart
        self.trace_view.value = history.trace_text()
