"""PassStepper: walk through a pipeline one pass at a time.

    stepper = PassStepper(mod, relax.get_pipeline("zero"))
    stepper            # in a notebook or a book page: the static stepper (works without kernel)
    stepper.widget     # the ipywidgets version, for a live kernel

Every pass runs once, when the stepper is made, under the current PassContext. Step 0 is the
module as given; step k is the module after the k-th pass, shown as its name, the difference of
its TVMScript from the step before, and the picture (the relax function ``function`` when the
module has it, otherwise the module's call graph) with what the pass added outlined. A pass that
raises ends the steps with a step showing its error.
"""

from __future__ import annotations

import functools
import html as htmllib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import ipywidgets as w

from mlckit import viz
from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_equal
from mlckit.ir.transform import Pass, PassContext, Sequential
from mlckit.relax.expr import Function
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


@dataclass(frozen=True)
class PassStep:
    """One step: the pass ``name`` (``"input"`` for the module as given), the module before
    and after it, the seconds it took, and the error it raised (``after`` is then None)."""

    name: str
    before: IRModule | None
    after: IRModule | None
    seconds: float = 0.0
    error: str | None = None

    @functools.cached_property
    def changed(self) -> bool:
        if self.before is None or self.after is None:
            return False
        return not structural_equal(self.before, self.after)


def flatten_passes(passes: Pass | Iterable[Pass]) -> list[Pass]:
    """The passes a pipeline runs, in order: a Sequential's own passes (recursively), less those
    the current PassContext disables, as ``Sequential`` itself would skip them."""
    if isinstance(passes, Sequential):
        ctx = PassContext.current()
        return [q for p in passes.passes if ctx.pass_enabled(p.info) for q in flatten_passes(p)]
    if isinstance(passes, Pass):
        return [passes]
    if isinstance(passes, Iterable) and not isinstance(passes, (str, bytes)):
        return [q for p in passes for q in flatten_passes(p)]
    raise MLCError(
        f"PassStepper steps through passes (a Pass, a Sequential or a list of them), not "
        f"{type(passes).__name__}; make a function into a pass with @module_pass(opt_level=0)"
    )


def run_passes(mod: IRModule, passes: Pass | Iterable[Pass]) -> list[PassStep]:
    """Step 0 (``mod``) and one step per pass; a pass that raises gives the last step."""
    if not isinstance(mod, IRModule):
        raise MLCError(f"PassStepper takes an IRModule, not {type(mod).__name__}")
    steps = [PassStep("input", None, mod)]
    for p in flatten_passes(passes):
        start = time.perf_counter()
        try:
            after = p(mod)
        except Exception as err:  # a student's pass may raise anything; the widget shows it
            steps.append(
                PassStep(p.info.name, mod, None, time.perf_counter() - start, error_text(err))
            )
            break
        steps.append(PassStep(p.info.name, mod, after, time.perf_counter() - start))
        mod = after
    return steps


class PassStepper:
    """The steps of running ``passes`` (a Pass, a Sequential, or a list) on ``mod``.

    ``function`` names the relax function to draw (the module's call graph is drawn when there
    is none by that name); ``pictures=False`` leaves pictures out.
    """

    def __init__(
        self,
        mod: IRModule,
        passes: Pass | Iterable[Pass],
        *,
        function: str | None = "main",
        pictures: bool = True,
    ):
        self.steps = run_passes(mod, passes)
        self.function = function
        self.pictures = pictures
        self._views: dict[tuple[str, int], str] = {}

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def names(self) -> list[str]:
        return [step.name for step in self.steps]

    # ------------------------------------------------------------------ views of one step
    def title(self, index: int) -> str:
        step = self.steps[index]
        if index == 0:
            return "input module"
        if step.error is not None:
            return f"{step.name} raised an error"
        change = "changed the module" if step.changed else "no change"
        return f"{step.name} ({change}, {step.seconds * 1e3:.1f} ms)"

    def diff_html(self, index: int) -> str:
        return self._cached("diff", index, self._diff_html)

    def _diff_html(self, index: int) -> str:
        step = self.steps[index]
        if step.error is not None:
            return error_box(step.error)
        if step.before is None:
            return note("the module before any pass; move the slider to see each pass's change")
        previous = self.steps[index - 1].name
        return shown_safely(
            lambda: viz.diff(step.before, step.after, names=(previous, step.name)).html()
        )

    def picture_html(self, index: int) -> str:
        return self._cached("picture", index, self._picture_html)

    def _picture_html(self, index: int) -> str:
        step = self.steps[index]
        if not self.pictures:
            return note("pictures are off (pictures=False)")
        if step.after is None:
            return note("no picture: the pass did not finish")

        def draw() -> str:
            options = self._picture_options(step.after, step.before)
            drawn = options.get("function", "the module")
            if step.before is None:
                return picture(viz.svg(step.after, **options), f"picture of {drawn}")
            data = render(viz.graph_diff(step.before, step.after, **options), "svg")
            svg = None if data is None else data.decode("utf-8")
            return picture(svg, f"picture of {drawn} after {step.name}, its changes outlined")

        return shown_safely(draw)

    def script_html(self, index: int) -> str:
        return self._cached("script", index, self._script_html)

    def _script_html(self, index: int) -> str:
        step = self.steps[index]
        if step.after is None:
            return note("no module: the pass did not finish")
        return shown_safely(lambda: viz.html(step.after))

    def _cached(self, view: str, index: int, make: Callable[[int], str]) -> str:
        # Steps never change, so each view of each step is rendered at most once.
        key = (view, index)
        if key not in self._views:
            self._views[key] = make(index)
        return self._views[key]

    def _picture_options(self, after: IRModule, before: IRModule | None) -> dict[str, Any]:
        # Both steps must be drawn the same way for the picture diff to line their nodes up.
        mods = [after] if before is None else [before, after]
        name = self.function
        if name is not None and all(name in m and isinstance(m[name], Function) for m in mods):
            return {"function": name}
        return {}

    # ------------------------------------------------------------------ the two versions
    @functools.cached_property
    def widget(self) -> PassStepperWidget:
        """The live ipywidgets stepper."""
        return PassStepperWidget(self)

    def static(self) -> StaticSteps:
        """Every step precomputed into one HTML stepper that needs no kernel."""
        steps = []
        for index in range(len(self.steps)):
            body = self.diff_html(index) + self.picture_html(index)
            if self.steps[index].after is not None:
                body += details("TVMScript after this step", self.script_html(index))
            steps.append(StaticStep(self.title(index), body))
        return StaticSteps("PassStepper", tuple(steps))

    def to_html(self) -> str:
        return self.static().to_html()

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        return f"<PassStepper: {' -> '.join(self.names)}>"


class PassStepperWidget(w.VBox):
    """A slider and prev/next buttons over a :class:`PassStepper`'s steps; the current step's
    title, diff, picture and TVMScript below (tabs)."""

    def __init__(self, stepper: PassStepper):
        self.stepper = stepper
        last = len(stepper.steps) - 1
        self.slider = w.IntSlider(value=0, min=0, max=last, description="step")
        self.prev_button = w.Button(description="prev", icon="arrow-left")
        self.next_button = w.Button(description="next", icon="arrow-right")
        self.title = w.HTML()
        self.diff_view = panel()
        self.picture_view = panel()
        self.script_view = panel()
        tabs = w.Tab(children=[self.diff_view, self.picture_view, self.script_view])
        for index, name in enumerate(["diff", "picture", "TVMScript"]):
            tabs.set_title(index, name)
        self.tabs = tabs
        self.prev_button.on_click(lambda _: self._move(-1))
        self.next_button.on_click(lambda _: self._move(+1))
        self.slider.observe(lambda change: self.show_step(change["new"]), names="value")
        super().__init__(
            [w.HBox([self.prev_button, self.slider, self.next_button]), self.title, tabs]
        )
        self.show_step(0)

    def _move(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, 0), self.slider.max)

    def show_step(self, index: int) -> None:
        stepper = self.stepper
        total = len(stepper.steps)
        self.title.value = (
            f"<b>{htmllib.escape(f'{index + 1}/{total}: {stepper.title(index)}')}</b>"
        )
        self.diff_view.value = stepper.diff_html(index)
        self.picture_view.value = stepper.picture_html(index)
        self.script_view.value = stepper.script_html(index)
        self.prev_button.disabled = index == 0
        self.next_button.disabled = index == total - 1
