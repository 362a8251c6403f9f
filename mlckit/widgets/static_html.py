"""Steppers as self-contained HTML: every step precomputed, a slider run by plain JavaScript.

A Jupyter Book page has no kernel, so ipywidgets there are dead controls. :class:`StaticSteps`
is what a stepper becomes for such a page (and for any browser): each step's HTML (highlighted
code, diffs, pictures) is written into the page, and a few lines of JavaScript with no library
behind them show one step at a time. Without JavaScript (a page viewer that strips scripts, as
JupyterLab does for a notebook it does not trust) every step stays visible, one under the
other, each under its own heading; pictures are ``<img>`` elements with the SVG as a data URI
(:func:`picture`), which such a viewer keeps, scaled to the column.
"""

from __future__ import annotations

import hashlib
import html as htmllib
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlckit.errors import MLCError
from mlckit.viz.embed import svg_image
from mlckit.viz.style import counted

# Shared by the live widgets, so a step looks the same in a notebook and in the book.
ERROR_STYLE = (
    "border-left: 4px solid #B3261E; background: #FDECEA; color: #5F1410; padding: 6px 10px; "
    "font-family: monospace; white-space: pre-wrap"
)
NOTE_STYLE = "color: #555555; font-style: italic"

_ROOT_STYLE = (
    "border: 1px solid #DDDDDD; border-radius: 4px; padding: 8px; margin: 4px 0; "
    "font-family: sans-serif; font-size: 13px"
)
_BAR_STYLE = "display: none; align-items: center; gap: 8px; margin-bottom: 8px"
_LABEL_STYLE = "font-weight: bold; font-family: monospace"

# Written once per stepper; ``ID`` is replaced by the stepper's id. It initialises every copy
# of the stepper on the page (a notebook may show the same output twice) and marks each as
# ready, so running the script again does nothing.
_SCRIPT = """(function () {
  document.querySelectorAll('[data-mlckit-steps="ID"]').forEach(function (root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    var steps = root.querySelectorAll(".mlckit-step");
    var slider = root.querySelector(".mlckit-steps-slider");
    var label = root.querySelector(".mlckit-steps-label");
    function show(i) {
      i = Math.max(0, Math.min(steps.length - 1, i));
      slider.value = i;
      steps.forEach(function (step, k) { step.style.display = k === i ? "" : "none"; });
      label.textContent = steps[i].dataset.title;
    }
    slider.addEventListener("input", function () { show(+slider.value); });
    root.querySelector(".mlckit-steps-prev").addEventListener("click", function () {
      show(+slider.value - 1);
    });
    root.querySelector(".mlckit-steps-next").addEventListener("click", function () {
      show(+slider.value + 1);
    });
    root.querySelectorAll(".mlckit-step-heading").forEach(function (h) {
      h.style.display = "none";
    });
    root.querySelector(".mlckit-steps-bar").style.display = "flex";
    show(+slider.value);
  });
})();"""


@dataclass(frozen=True)
class StaticStep:
    """One step: a plain-text ``title`` (escaped when written) and its ``body`` as HTML."""

    title: str
    body: str


class StaticStepsError(MLCError, ValueError):
    """A :class:`StaticSteps` was built with no steps, or with ``start`` outside them."""


@dataclass(frozen=True)
class StaticSteps:
    """Steps shown one at a time by a slider and prev/next buttons, as one HTML fragment.

    ``header`` and ``footer`` (HTML) are shown above and below whichever step is current (a
    chart of all steps, say); ``start`` is the step shown first. In a notebook the object shows
    itself; ``to_html()`` gives the fragment and ``save(path)`` a complete page.
    """

    title: str
    steps: tuple[StaticStep, ...]
    header: str = ""
    footer: str = ""
    start: int = 0

    def __post_init__(self) -> None:
        if not self.steps:
            raise StaticStepsError(f"StaticSteps {self.title!r}: needs at least one step, got none")
        if not 0 <= self.start < len(self.steps):
            raise StaticStepsError(
                f"StaticSteps {self.title!r}: start={self.start} is not a step "
                f"(0 to {len(self.steps) - 1})"
            )

    @property
    def element_id(self) -> str:
        """The id that ties the script to its stepper: a hash of the content, so the same
        steps give the same page (stored notebook outputs do not change on every run)."""
        digest = hashlib.sha1(usedforsecurity=False)
        for part in (self.title, self.header, self.footer, str(self.start)):
            digest.update(part.encode("utf-8"))
        for step in self.steps:
            digest.update(step.title.encode("utf-8"))
            digest.update(step.body.encode("utf-8"))
        return "mlckit-steps-" + digest.hexdigest()[:16]

    def to_html(self) -> str:
        ident = self.element_id
        count = len(self.steps)
        sections = []
        for index, step in enumerate(self.steps):
            title = htmllib.escape(f"{index + 1}/{count}: {step.title}", quote=True)
            sections.append(
                f'<section class="mlckit-step" data-index="{index}" data-title="{title}">'
                f'<h4 class="mlckit-step-heading" style="margin: 6px 0">{title}</h4>'
                f"{step.body}</section>"
            )
        bar = (
            f'<div class="mlckit-steps-bar" style="{_BAR_STYLE}">'
            '<button type="button" class="mlckit-steps-prev">&#9664; prev</button>'
            f'<input type="range" class="mlckit-steps-slider" min="0" max="{count - 1}" '
            f'step="1" value="{self.start}" aria-label="step">'
            '<button type="button" class="mlckit-steps-next">next &#9654;</button>'
            f'<span class="mlckit-steps-label" style="{_LABEL_STYLE}"></span></div>'
        )
        heading = (
            f'<div style="font-weight: bold; margin-bottom: 4px">{htmllib.escape(self.title)}</div>'
            if self.title
            else ""
        )
        return (
            f'<div class="mlckit-steps" data-mlckit-steps="{ident}" style="{_ROOT_STYLE}">'
            f"{heading}{bar}{self.header}{''.join(sections)}{self.footer}"
            f"<script>{_SCRIPT.replace('ID', ident)}</script></div>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        # Short: a notebook saves this as the text/plain twin of the (large) HTML.
        return f"<StaticSteps {self.title!r}: {counted(len(self.steps), 'step')}>"

    def page(self) -> str:
        """A complete HTML document holding the stepper, to open in any browser."""
        title = htmllib.escape(self.title or "mlckit")
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title></head><body>{self.to_html()}</body></html>\n"
        )

    def save(self, path: str) -> None:
        """Write :meth:`page` to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.page())


def picture(
    svg: str | None, description: str, missing: str = "no picture: Graphviz's dot was not found"
) -> str:
    """An SVG document as an ``<img>`` that fits its column and survives an untrusted notebook
    (:func:`mlckit.viz.svg_image`; ``description`` becomes its alt text), or a note."""
    return note(missing) if svg is None else svg_image(svg, description)


def panel() -> Any:
    """An ipywidgets ``HTML`` view for a live widget's code or picture: no wider than the
    widget, scrolling what is wider (a long line, a large picture) instead of spilling out."""
    import ipywidgets as w

    return w.HTML(layout=w.Layout(max_width="100%", overflow="auto"))


def note(text: str) -> str:
    return f'<div style="{NOTE_STYLE}">{htmllib.escape(text)}</div>'


def error_box(text: str) -> str:
    return f'<div class="mlckit-error" style="{ERROR_STYLE}">{htmllib.escape(text)}</div>'


def details(summary: str, body: str, open_: bool = False) -> str:
    flag = " open" if open_ else ""
    return (
        f'<details{flag}><summary style="cursor: pointer">{htmllib.escape(summary)}</summary>'
        f"{body}</details>"
    )


def error_text(err: BaseException) -> str:
    """What a widget shows for an error instead of a traceback: the error's type and message,
    and for errors that are not mlckit's own (a bug in a student's pass, say) the line that
    raised it."""
    text = f"{type(err).__name__}: {err}"
    if not isinstance(err, MLCError) and err.__traceback__ is not None:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        text += f"\n  raised at {frame.filename}:{frame.lineno}, in {frame.name}"
    return text


def shown_safely(render_view: Callable[[], str]) -> str:
    """A view's HTML, or an error box saying why it could not be made: a display never
    raises, and the other views of the same step still show."""
    try:
        return render_view()
    except Exception as err:
        return error_box(error_text(err))
