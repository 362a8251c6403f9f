"""Screenshots of built book pages with headless Chromium, and a check that nothing is cut off.

    python scripts/screenshot_book.py            # chapter 7, or the last chapter built
    python scripts/screenshot_book.py 2 --out ch2.png --size 1280x4000
    python scripts/screenshot_book.py --html /tmp/mybook/_build/html
    python scripts/screenshot_book.py 2 --check --out-dir /tmp/screens   # at 1400 and 420 px
    python scripts/screenshot_book.py --demo --out-dir /tmp/screens      # no book needed

``--check`` loads the page at each of ``--widths`` (a desktop and a phone), takes a screenshot
of the whole page at each, and measures it: the page must be no wider than the window; every
code block and diff must lie inside the box that shows it, or that box must scroll; every
picture must fit its output, or scroll in a frame of its own (a picture shrunk as far as it
can be and still be read). Steppers show all their steps and every ``<details>`` is opened
while measuring, so the check sees what a reader can reach. It prints what it found and exits
with status 1 if anything is wrong.

``--demo`` builds (with Jupyter Book, nothing executed) a one-page book holding a loop nest's
picture, a static ScheduleExplorer and a static PassStepper, and checks that page.

Build the book first (`make book`) for chapter pages. Needs a Chromium binary (`apt-get
install chromium`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = REPO_ROOT / "_build" / "book" / "src" / "_build" / "html"
DEMO_DIR = REPO_ROOT / "_build" / "screens-demo"
DEFAULT_CHAPTER = 7
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTHS = (1400, 420)
# A page taller than this is shot in parts of this height (one image stays easy to look at).
TILE_HEIGHT = 8000


def chapter_page(html_dir: Path, chapter: int | None) -> Path:
    """The built page of ``chapter`` (``NN_name.html``); by default chapter 7, else the last."""
    if not (html_dir / "index.html").is_file():
        sys.exit(f"error: no built book in {html_dir}: build it with `make book`")
    pages = sorted(html_dir.glob("[0-9][0-9]_*.html"))
    if not pages:
        sys.exit(f"error: the book in {html_dir} has no chapter pages (NN_name.html)")
    wanted = DEFAULT_CHAPTER if chapter is None else chapter
    for page in pages:
        if page.name.startswith(f"{wanted:02d}_"):
            return page
    if chapter is None:
        return pages[-1]
    built = ", ".join(p.stem for p in pages)
    sys.exit(f"error: chapter {chapter} is not in the built book (it has: {built})")


def browser() -> str:
    found = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if found is None:
        sys.exit("error: no Chromium found: install it (Debian: `apt-get install chromium`)")
    return found


def screenshot(page: Path, out: Path, width: int, height: int) -> None:
    """A PNG of the first ``height`` pixels of ``page`` in a window ``width`` pixels wide."""
    with Browser() as chromium:
        chromium.open(page, width)
        chromium.screenshot(out, height)


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (messages are JSON, each
    ended by a NUL byte; Chromium reads them on its file descriptor 3 and answers on 4), so no
    library is needed. The window is set by device-metrics emulation, because a headless
    window is never narrower than 500 pixels and a phone is."""

    def __init__(self) -> None:
        import fcntl

        ours_read, theirs_write = os.pipe()
        theirs_read, ours_write = os.pipe()
        # Above 4, so that moving them to 3 and 4 in the child is always a real dup2.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (theirs_read, theirs_write)]
        for fd in (theirs_read, theirs_write):
            os.close(fd)

        def pipes_as_3_and_4() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # Chromium's helper processes may still be writing to it as it is removed.
        self._profile = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
        command = [
            browser(),
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}",
        ]
        # Chromium refuses to run as root inside its sandbox.
        if os.geteuid() == 0:
            command.insert(1, "--no-sandbox")
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=pipes_as_3_and_4,
        )
        for fd in high:
            os.close(fd)
        self._reader = os.fdopen(ours_read, "rb")
        self._writer = os.fdopen(ours_write, "wb")
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.call("Page.enable")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self._writer.close()
        self._process.terminate()
        self._process.wait(timeout=30)
        self._reader.close()
        self._profile.cleanup()

    # ------------------------------------------------------------------ the protocol
    def _call(self, method: str, params: dict[str, Any], session: str | None = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._writer.write(json.dumps(message).encode("utf-8") + b"\0")
        self._writer.flush()
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    sys.exit(f"error: Chromium refused {method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._reader.read1(1 << 16)
            if not chunk:
                sys.exit("error: Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A DevTools command in the page's session; its result."""
        return self._call(method, params or {}, self._session)

    def _wait_for(self, event: str) -> None:
        while not any(e.get("method") == event for e in self._events):
            self._events.append(self._receive())
        self._events.clear()

    # ------------------------------------------------------------------ pages
    def open(self, page: Path, width: int, height: int = 1200) -> None:
        """Load ``page`` in a window ``width`` x ``height`` pixels, its scripts run."""
        self.resize(width, height)
        self._events.clear()
        self.call("Page.navigate", {"url": page.resolve().as_uri()})
        self._wait_for("Page.loadEventFired")
        # The theme's and the steppers' scripts run on load; let them finish.
        self.evaluate("new Promise(function (done) { setTimeout(done, 300); })")

    def resize(self, width: int, height: int) -> None:
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            sys.exit(f"error: the page's JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, out: Path, height: int | None = None) -> list[Path]:
        """PNGs of the page from its top, ``height`` pixels of it (all of it by default), at
        the width it was opened with: ``out`` and, for a page taller than ``TILE_HEIGHT``,
        ``out`` numbered ``-2``, ``-3``, ... for the parts below."""
        width = self.evaluate("window.innerWidth")
        if height is None:
            height = self.evaluate("document.documentElement.scrollHeight")
        out.parent.mkdir(parents=True, exist_ok=True)
        written = []
        for part, top in enumerate(range(0, height, TILE_HEIGHT), start=1):
            clip = {"x": 0, "y": top, "width": width, "height": min(TILE_HEIGHT, height - top)}
            png = self.call(
                "Page.captureScreenshot",
                {"format": "png", "clip": {**clip, "scale": 1}, "captureBeyondViewport": True},
            )["data"]
            path = out if part == 1 else out.with_name(f"{out.stem}-{part}{out.suffix}")
            path.write_bytes(base64.b64decode(png))
            written.append(path)
        return written


# ------------------------------------------------------------------------------ the check
# Run in the page: every step and <details> is shown, and each picture, code block and diff (of
# the notebook's cells, in a book) is compared with the nearest box around it that clips
# (overflow other than visible), or with the window.
_MEASURE = """(function () {
  document.querySelectorAll(".mlckit-step").forEach(function (s) { s.style.display = ""; });
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var doc = document.documentElement;
  var report = {viewport: window.innerWidth, scrollWidth: doc.scrollWidth, items: []};
  // In a book, a cell's input and output; the theme's own icons and menus are not checked.
  var cells = document.querySelector(".cell") ? [".cell_input ", ".cell_output "] : [""];
  var wanted = cells.map(function (c) {
    return ["img", "svg", "pre", "table"].map(function (t) { return c + t; }).join(", ");
  }).join(", ");
  document.querySelectorAll(wanted).forEach(function (el) {
    if (el.tagName.toLowerCase() === "svg" && el.parentElement.closest("svg")) return;
    var box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) return;
    var frame = el.parentElement;
    while (frame && frame !== document.body &&
           getComputedStyle(frame).overflowX === "visible") frame = frame.parentElement;
    var clips = frame && frame !== document.body;
    var f = clips ? frame.getBoundingClientRect() : {left: 0, right: window.innerWidth};
    var overflow = clips ? getComputedStyle(frame).overflowX : "visible";
    report.items.push({
      tag: el.tagName.toLowerCase(),
      what: (el.getAttribute("alt") || el.textContent || "").slice(0, 60),
      left: box.left, right: box.right, width: box.width,
      frame_left: f.left, frame_right: f.right,
      frame: clips ? (frame.className || frame.tagName.toLowerCase()) : "window",
      scrolls: overflow === "auto" || overflow === "scroll"
    });
  });
  return report;
})()"""


@dataclass(frozen=True)
class Item:
    """A picture, code block or diff as laid out: its box, and the box that shows it."""

    tag: str
    what: str
    left: float
    right: float
    width: float
    frame_left: float
    frame_right: float
    frame: str
    scrolls: bool

    @property
    def inside(self) -> bool:
        return self.left >= self.frame_left - 1 and self.right <= self.frame_right + 1

    @property
    def problem(self) -> str | None:
        """What is wrong with it: part of it can be neither seen nor scrolled to, or it is a
        picture wider than its output (a reader sees its left part and must find the output's
        scroll bar: a picture shrinks to its column, or scrolls in a frame of its own once it
        would be too small to read)."""
        if self.inside:
            return None
        if not self.scrolls:
            return "cut off"
        if self.tag in ("img", "svg") and "mlckit-picture" not in self.frame:
            return "wider than its output"
        return None


@dataclass(frozen=True)
class Layout:
    width: int
    viewport: int
    scroll_width: int
    items: tuple[Item, ...]

    @property
    def problems(self) -> list[str]:
        found = []
        if self.scroll_width > self.viewport + 1:
            found.append(f"the page is {self.scroll_width}px wide in a {self.viewport}px window")
        for item in self.items:
            if item.problem is not None:
                found.append(
                    f"{item.problem}: a {item.tag} ({' '.join(item.what.split())[:40]!r}) spans "
                    f"{item.left:.0f}-{item.right:.0f}px in a {item.frame!r} of "
                    f"{item.frame_left:.0f}-{item.frame_right:.0f}px"
                )
        return found

    def summary(self) -> str:
        pictures = [i for i in self.items if i.tag in ("img", "svg")]
        scrolled = [i for i in self.items if not i.inside and i.scrolls]
        return (
            f"{self.width}px: page {self.scroll_width}px wide in a {self.viewport}px window, "
            f"{len(pictures)} pictures and {len(self.items) - len(pictures)} code blocks "
            f"measured, {len(scrolled)} scroll inside their box, "
            f"{len(self.problems)} problems"
        )


def measure(chromium: Browser, page: Path, width: int) -> Layout:
    """``page`` laid out in a window ``width`` pixels wide (see ``_MEASURE``)."""
    chromium.open(page, width)
    report = chromium.evaluate(_MEASURE)
    items = tuple(Item(**item) for item in report["items"])
    return Layout(width, report["viewport"], report["scrollWidth"], items)


def check(page: Path, out_dir: Path, widths: tuple[int, ...]) -> list[str]:
    """Screenshots of ``page`` at each width (the whole page), and what is wrong at each."""
    problems = []
    with Browser() as chromium:
        for width in widths:
            out = out_dir / f"{page.stem}-{width}.png"
            chromium.open(page, width)
            shots = chromium.screenshot(out)
            layout = measure(chromium, page, width)
            print(f"{', '.join(map(str, shots))}: {layout.summary()}")
            problems += [f"{width}px: {p}" for p in layout.problems]
    return problems


# ------------------------------------------------------------------------------ the demo page
def demo_notebook() -> Any:
    """A notebook whose outputs are made here, without a kernel: a loop nest's picture, a
    ScheduleExplorer and a PassStepper as the chapters show them."""
    import nbformat
    from IPython.core.formatters import DisplayFormatter

    from mlckit import relax, tir, viz
    from mlckit.testing.examples import MyModuleLegacy
    from mlckit.widgets import PassStepper, ScheduleExplorer

    linear = MyModuleLegacy["linear0"]
    sch = tir.Schedule(linear)
    _, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("Z"), j0)
    cells = [
        ("graph", "viz.graph(MyModuleLegacy['linear0'])", viz.graph(linear)),
        (
            "ScheduleExplorer",
            "ScheduleExplorer(linear0, trace=sch.trace).static()",
            ScheduleExplorer(linear, trace=sch.trace, measure=False).static(),
        ),
        (
            "PassStepper",
            "PassStepper(MLP, [LegalizeOps(), AnnotateTIROpPattern(), FuseOps(), FuseTIR()])",
            PassStepper(
                demo_mlp(),
                [
                    relax.transform.LegalizeOps(),
                    relax.transform.AnnotateTIROpPattern(),
                    relax.transform.FuseOps(),
                    relax.transform.FuseTIR(),
                ],
            ),
        ),
    ]
    formatter = DisplayFormatter()
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Pictures and steppers"))
    for count, (title, source, value) in enumerate(cells, start=1):
        data, _ = formatter.format(value)
        nb.cells.append(nbformat.v4.new_markdown_cell(f"## {title}"))
        output = nbformat.v4.new_output("execute_result", data=data, execution_count=count)
        nb.cells.append(nbformat.v4.new_code_cell(source, execution_count=count, outputs=[output]))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return nb


def demo_mlp() -> Any:
    """The course's MLP (784 -> 128 -> 10) in high-level operators, as chapter 7 builds it."""
    from mlckit import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((128, 784), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((128,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((10, 128), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((10,), "float32"))
    op = relax.op
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(op.matmul(x, op.permute_dims(w0)))
            lv1 = bb.emit(op.nn.relu(op.add(lv0, b0)))
            lv2 = bb.emit(op.matmul(lv1, op.permute_dims(w1)))
            gv = bb.emit_output(op.add(lv2, b1))
        bb.emit_func_output(gv)
    return bb.get()


def build_demo(out: Path = DEMO_DIR) -> Path:
    """The demo page, built as a one-page Jupyter Book under ``out``; its HTML page."""
    import nbformat
    import yaml

    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    nbformat.write(demo_notebook(), src / "pictures.ipynb")
    config = {"title": "pictures", "execute": {"execute_notebooks": "off"}}
    config["sphinx"] = {"config": {"nb_ipywidgets_js": {}}}
    (src / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (src / "_toc.yml").write_text(
        yaml.safe_dump({"format": "jb-book", "root": "pictures"}), encoding="utf-8"
    )
    command = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]
    subprocess.run([*command, "build", str(src)], check=True, capture_output=True)
    return src / "_build" / "html" / "pictures.html"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapter", nargs="?", type=int, help="chapter number (default: 7)")
    parser.add_argument("--html", type=Path, default=HTML_DIR, help="the built book's HTML")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "_build" / "book" / "screenshot.png"
    )
    parser.add_argument("--size", default="1280x2400", help="window WIDTHxHEIGHT in pixels")
    parser.add_argument("--check", action="store_true", help="screenshots and layout check")
    parser.add_argument("--demo", action="store_true", help="check a demo page (implies --check)")
    parser.add_argument("--out-dir", type=Path, default=Path("/tmp/screens"))
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)), help="like 1400,420")
    args = parser.parse_args()
    if args.check or args.demo:
        try:
            widths = tuple(int(n) for n in args.widths.split(","))
        except ValueError:
            parser.error(f"--widths must be numbers separated by commas, not {args.widths!r}")
        page = build_demo() if args.demo else chapter_page(args.html, args.chapter)
        problems = check(page, args.out_dir, widths)
        for problem in problems:
            print(problem)
        sys.exit(1 if problems else 0)
    try:
        width, height = (int(n) for n in args.size.split("x"))
    except ValueError:
        parser.error(f"--size must be WIDTHxHEIGHT, like 1280x2400, not {args.size!r}")
    page = chapter_page(args.html, args.chapter)
    screenshot(page, args.out, width, height)
    print(f"{args.out} ({page.name}, {width}x{height})")


if __name__ == "__main__":
    main()
