"""The static HTML stepper: its markup, and its slider working in a real (headless) browser."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mlckit import relax
from mlckit.errors import MLCError
from mlckit.widgets import PassStepper, StaticStep, StaticSteps

CHROMIUM = shutil.which("chromium")


def three_steps() -> StaticSteps:
    return StaticSteps(
        "demo",
        (
            StaticStep("one", "<p>first</p>"),
            StaticStep("two <b>", "<p>second</p>"),
            StaticStep("three", ""),
        ),
    )


def test_markup_has_a_section_per_step_and_a_slider():
    page = three_steps().to_html()
    assert page.count('class="mlckit-step"') == 3
    assert 'type="range"' in page and 'max="2"' in page
    assert 'data-title="2/3: two &lt;b&gt;"' in page  # titles are escaped, never markup
    assert "<b>" not in page.split("<p>second</p>")[0].split("data-title")[-1]


def test_the_id_depends_on_the_content_only():
    assert three_steps().element_id == three_steps().element_id
    other = StaticSteps("demo", (StaticStep("one", "<p>changed</p>"),))
    assert other.element_id != three_steps().element_id


def test_a_stepper_needs_steps_and_a_valid_start():
    with pytest.raises(ValueError, match="at least one step"):
        StaticSteps("empty", ())
    with pytest.raises(ValueError, match="start=3"):
        StaticSteps("demo", three_steps().steps, start=3)
    with pytest.raises(MLCError, match="'empty'"):  # a user-facing error names the stepper
        StaticSteps("empty", ())


class _Steps(HTMLParser):
    """Reads back, from a page the browser serialized, which steps are shown."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[int] = []
        self.hidden: list[int] = []
        self.body: dict[str, str] = {}
        self.ready = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "body":
            self.body = {k: v or "" for k, v in values.items()}
        if values.get("data-ready") == "1":
            self.ready = True
        if tag == "section" and values.get("class") == "mlckit-step":
            index = int(values["data-index"] or 0)
            hidden = "display: none" in (values.get("style") or "")
            (self.hidden if hidden else self.shown).append(index)


# Moves the slider the way a user's drag does (value, then an "input" event) and records the
# label; then presses "next". The browser then serializes the page with --dump-dom.
_DRIVER = """<script>
var root = document.querySelector(".mlckit-steps");
var slider = root.querySelector(".mlckit-steps-slider");
slider.value = 2;
slider.dispatchEvent(new Event("input"));
document.body.dataset.afterSlider = root.querySelector(".mlckit-steps-label").textContent;
root.querySelector(".mlckit-steps-next").click();
document.body.dataset.afterNext = root.querySelector(".mlckit-steps-label").textContent;
</script>"""


def dump_dom(page: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stepper.html"
        path.write_text(page, encoding="utf-8")
        result = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={Path(tmp) / 'profile'}",
                "--dump-dom",
                path.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    return result.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium for a headless browser")
def test_the_slider_changes_the_step_in_a_browser(mlp_module):
    stepper = PassStepper(mlp_module, relax.get_pipeline("zero"))
    count = len(stepper)
    page = stepper.static().page().replace("</body>", _DRIVER + "</body>")

    steps = _Steps()
    steps.feed(dump_dom(page))

    assert steps.ready  # the stepper's own script ran
    # After the slider moved to step 2 and "next" was pressed, step 3 alone is shown.
    assert steps.shown == [3]
    assert sorted(steps.hidden) == [i for i in range(count) if i != 3]
    assert steps.body["data-after-slider"] == f"3/{count}: {stepper.title(2)}"
    assert steps.body["data-after-next"] == f"4/{count}: {stepper.title(3)}"
    assert "AnnotateTIROpPattern" in steps.body["data-after-slider"]
    assert "FoldConstant" in steps.body["data-after-next"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium for a headless browser")
def test_without_moving_the_first_step_is_shown_and_the_bar_appears():
    page = three_steps().page()
    dom = dump_dom(page)
    steps = _Steps()
    steps.feed(dom)
    assert steps.shown == [0] and steps.hidden == [1, 2]
    assert 'class="mlckit-steps-bar" style="display: flex;' in dom
