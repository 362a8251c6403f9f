"""The live widgets in JupyterLab, as a student meets them: a chapter notebook opened in
JupyterLab in headless Chromium (playwright driving Debian's chromium), its cells run up to the
widget, then the widget used through the page (buttons clicked, the shown text read back).

Where chromium, playwright or JupyterLab is absent, the tests are skipped (as the static
stepper's browser test is).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
pytest.importorskip("jupyterlab")
sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium for a headless browser"
)

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
# Running a chapter up to its widget takes a few seconds alone, far more on a busy machine.
RUN_TIMEOUT_MS = 240_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on a free port, without a token, serving an empty folder; its
    settings and workspaces kept in the test's own folders."""
    home = tmp_path_factory.mktemp("jupyter")
    root = home / "notebooks"
    root.mkdir()
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        "--allow-root",
        # window.jupyterapp: the page's commands (run all cells) and the kernel's status.
        "--LabApp.expose_app_in_browser=True",
        f"--ServerApp.root_dir={root}",
    ]
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("JupyterLab did not start")
                time.sleep(0.3)
        yield url, root
    finally:
        server.terminate()
        server.wait(timeout=30)


def _chapter_until(chapter: str, marker: str, show: str, root: Path) -> str:
    """A copy of ``chapter``'s notebook, without outputs, cut after the first code cell that
    contains ``marker``, with a last cell ``show`` (the live widget); its file name."""
    notebook = json.loads((CHAPTERS / chapter).read_text())
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell = dict(cell, outputs=[], execution_count=None)
        cells.append(cell)
        if cell["cell_type"] == "code" and marker in "".join(cell["source"]):
            break
    else:
        raise AssertionError(f"{chapter} has no code cell with {marker!r}")
    last = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    cells.append(dict(last, source=show))
    (root / chapter).write_text(json.dumps(dict(notebook, cells=cells)))
    return chapter


def _open_and_run(page, url: str, name: str) -> None:
    # ?reset: a fresh workspace, without the notebook an earlier test left open.
    page.goto(f"{url}/lab/tree/{name}?reset")
    page.wait_for_function(
        "() => { const nb = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const kernel = nb && nb.sessionContext && nb.sessionContext.session"
        " && nb.sessionContext.session.kernel; return kernel && kernel.status === 'idle'; }",
        timeout=RUN_TIMEOUT_MS,
    )
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")


@pytest.fixture
def page(lab: tuple[str, Path]) -> Iterator:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


def test_a_schedule_explorer_applies_a_primitive(lab: tuple[str, Path], page) -> None:
    url, root = lab
    name = _chapter_until("02_tensorir.ipynb", "ScheduleExplorer(", "explorer", root)
    _open_and_run(page, url, name)
    apply = page.locator("button.jupyter-button", has_text="apply")
    apply.wait_for(timeout=RUN_TIMEOUT_MS)
    trace = page.locator(".widget-textarea textarea")
    steps = trace.input_value().count("sch.")
    # The explorer starts on the chapter's trace; split (its default primitive) on the first
    # loop by (None, 4) adds one step.
    apply.click()
    page.wait_for_function(
        "([count]) => [...document.querySelectorAll('.widget-textarea textarea')]"
        ".some(t => (t.value.match(/sch\\./g) || []).length > count)",
        arg=[steps],
        timeout=30_000,
    )
    assert "sch.split(" in trace.input_value().splitlines()[-1]


def test_a_pass_stepper_steps(lab: tuple[str, Path], page) -> None:
    url, root = lab
    name = _chapter_until("07_graph_optimization.ipynb", "PassStepper(", "stepper.widget", root)
    _open_and_run(page, url, name)
    # The widget's own button and title (the chapter's static stepper above has its own).
    following = page.locator("button.jupyter-button", has_text="next")
    following.wait_for(timeout=RUN_TIMEOUT_MS)
    title = page.locator(".widget-html")
    title.filter(has_text="1/5: input module").wait_for(timeout=30_000)
    following.click()
    title.filter(has_text="2/5: LegalizeOps (changed the module").wait_for(timeout=30_000)


def test_an_untrusted_chapter_keeps_its_pictures(lab: tuple[str, Path], page) -> None:
    # A notebook a student opens is untrusted: JupyterLab drops <script> and inline <svg> from
    # its saved HTML outputs. The static stepper's pictures are <img> data URIs, which stay.
    url, root = lab
    name = "07_graph_optimization.ipynb"
    shutil.copyfile(CHAPTERS / name, root / name)
    page.goto(f"{url}/lab/tree/{name}?reset")
    pictures = page.locator('.jp-OutputArea-output img[src^="data:image/svg+xml"]')
    # JupyterLab renders the cells in view (and some beyond): the first pictures are enough.
    pictures.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    # What a dropped <svg> leaves behind: its labels as a run of text.
    outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    assert "cluster_dataflow" not in outputs
