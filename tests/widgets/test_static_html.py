"""The static HTML stepper: its markup, and its slider working in a real (headless) browser."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mlckit import relax, viz
from mlckit.errors import MLCError
from mlckit.testing.examples import MyModuleLegacy
from mlckit.viz import dot_program
from mlckit.viz.embed import MIN_SCALE, embedded_svgs, svg_image, svg_size
from mlckit.widgets import PassStepper, ScheduleExplorer, StaticStep, StaticSteps

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


# ------------------------------------------------------------------------------ pictures
class _Pictures(HTMLParser):
    """The pictures of an HTML fragment: each <img> with its attributes and its parent's."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[dict[str, str], dict[str, str]]] = []
        self.inline_svgs = 0
        self._open: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append((values, self._open[-1] if self._open else {}))
            return
        if tag == "svg":
            self.inline_svgs += 1
        self._open.append(values)

    def handle_endtag(self, tag: str) -> None:
        if tag != "img" and self._open:
            self._open.pop()


def styles(values: dict[str, str]) -> dict[str, str]:
    pairs = (part.split(":", 1) for part in values.get("style", "").split(";") if ":" in part)
    return {key.strip(): value.strip() for key, value in pairs}


def explored_linear() -> ScheduleExplorer:
    from mlckit import tir

    sch = tir.Schedule(MyModuleLegacy["linear0"])
    _, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("Z"), j0)
    return ScheduleExplorer(MyModuleLegacy["linear0"], trace=sch.trace, measure=False)


@pytest.mark.skipif(dot_program() is None, reason="needs a Graphviz dot program")
def test_every_picture_is_an_image_that_scales_to_its_column(mlp_module):
    pages = {
        "PassStepper": PassStepper(mlp_module, relax.get_pipeline("zero")).to_html(),
        "ScheduleExplorer": explored_linear().to_html(),
        "viz.graph": viz.graph(MyModuleLegacy["linear0"])._repr_mimebundle_()["text/html"],
        "a module": MyModuleLegacy._repr_mimebundle_()["text/html"],
    }
    for name, page in pages.items():
        pictures = _Pictures()
        pictures.feed(page)
        # JupyterLab drops inline <svg> from a notebook it does not trust, and keeps <img>.
        assert pictures.inline_svgs == 0, name
        assert pictures.images, name
        for image, frame in pictures.images:
            assert image["src"].startswith("data:image/svg+xml;base64,"), name
            assert image["alt"], name
            style = styles(image)
            assert style["max-width"] == "100%" and style["height"] == "auto", name
            assert "width" not in style  # no fixed width: the SVG's own, scaled down
            (svg,) = embedded_svgs(f'<img src="{image["src"]}"')
            width, _ = svg_size(svg)
            # Shrunk to at most MIN_SCALE before its frame scrolls instead.
            assert style["min-width"] == f"{round(width * MIN_SCALE)}px", name
            assert 'viewBox="' in svg
            assert styles(frame)["overflow-x"] == "auto", name


@pytest.mark.skipif(dot_program() is None, reason="needs a Graphviz dot program")
def test_pictures_are_the_same_html_every_time():
    assert explored_linear().to_html() == explored_linear().to_html()


def test_a_picture_carries_its_labels_in_its_alt_text():
    svg = (
        '<svg width="300pt" height="30pt" viewBox="0 0 300 30"><text>block &quot;Y&quot;</text>'
        "<text>for <tspan>i</tspan> in range(4)</text><text>block &quot;Y&quot;</text></svg>"
    )
    page = svg_image(svg, "loop nest")
    assert 'alt="loop nest: block &quot;Y&quot; for i in range(4)"' in page
    assert "min-width: 240px" in page  # 300pt = 400px, at 60%
    assert embedded_svgs(page) == [svg]


def _screenshot_book():
    """scripts/screenshot_book.py as a module: its headless browser and layout check."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "screenshot_book.py"
    spec = importlib.util.spec_from_file_location("screenshot_book", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium for a headless browser")
@pytest.mark.skipif(dot_program() is None, reason="needs a Graphviz dot program")
def test_nothing_is_cut_off_on_a_desktop_or_a_phone(mlp_module, tmp_path):
    screens = _screenshot_book()
    # A book's column: about 780 pixels, less on a phone.
    column = '<main style="max-width: 780px; margin: 0 auto; padding: 0 12px">{}</main>'
    body = column.format(
        viz.graph(MyModuleLegacy["linear0"])._repr_mimebundle_()["text/html"]
        + explored_linear().to_html()
        + PassStepper(mlp_module, relax.get_pipeline("zero")).to_html()
    )
    page = tmp_path / "pictures.html"
    page.write_text(f'<!DOCTYPE html><html><body style="margin: 0">{body}</body></html>')
    with screens.Browser() as chromium:
        wide = screens.measure(chromium, page, 1400)
        narrow = screens.measure(chromium, page, 420)
    assert wide.viewport == 1400 and narrow.viewport == 420
    assert wide.problems == [] and narrow.problems == []
    wide_pictures = [item for item in wide.items if item.tag == "img"]
    assert len(wide_pictures) > 10  # every step's picture was measured
    assert all(item.inside for item in wide_pictures)  # all whole, none scrolls at 1400px
    # On a phone the widest pictures scroll in their frames rather than shrink past reading.
    assert any(not item.inside and item.scrolls for item in narrow.items if item.tag == "img")
