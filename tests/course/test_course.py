"""The MLC course's notebooks run with mlckit as the course wrote them (see README.md here).

Each notebook's cells run in order in one namespace, the way Jupyter runs them: every top-level
statement of a cell is compiled on its own, with the ``from __future__`` imports of earlier
statements in force (the course puts ``from __future__ import annotations`` after other imports
in a cell, which IPython accepts and a plain ``compile`` of the whole cell does not), and each
cell's source is registered with ``linecache`` so TVMScript's decorators can read it back.
"""

from __future__ import annotations

import ast
import codeop
import contextlib
import io
import linecache
import os
import re
import traceback
from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from mlckit.errors import BuildError

NOTEBOOKS = Path(__file__).parent / "notebooks"
DATASETS = Path(__file__).parents[2] / "datasets"
WEIGHT_FILES = ("fasionmnist_mlp_params.pkl", "fasionmnist_mlp_assignment_params.pkl")
CELL_MARK = re.compile(r"^# %% \[cell (\d+)\]\n", re.M)

# Cells the course runs to show an error: (notebook, cell) -> the error and words it must say.
EXPECTED_ERRORS: dict[tuple[str, int], tuple[type[Exception], str]] = {
    # The course builds the same schedule for OpenCL "to show the code for other GPUs".
    ("ch07_gpu_part1", 13): (BuildError, "unknown target 'opencl'"),
}


def every_model_predicts_as_numpy(namespace: dict, printed: str) -> None:
    """The notebook builds the course's MLP one or more ways (low-level numpy, call_tir,
    externs, tuned kernels, ...) and prints each one's prediction for the image ``img``: each
    must be the class the weights ``mlp_params`` give in numpy."""
    params = namespace["mlp_params"]
    x = np.asarray(namespace["img"]).reshape(1, 784)
    logits = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    expected = namespace["class_names"][int(logits.argmax())]
    predictions = re.findall(r"^(.*) Prediction: (.*)$", printed, re.M)
    assert predictions, printed
    assert all(label == expected for _, label in predictions), (expected, predictions)


def the_product_is_right(a: str, b: str, c: str):
    """``c`` holds ``a @ b`` after the notebook's last kernel ran (the course prints only
    its speed)."""

    def check(namespace: dict, printed: str) -> None:
        def host(name):
            value = namespace[name]
            return value.numpy() if hasattr(value, "numpy") else value

        np.testing.assert_allclose(host(c), host(a) @ host(b), rtol=1e-4, atol=1e-4)

    return check


# What a notebook computes, checked after its cells ran, where the course only prints it.
RESULTS: dict[str, Callable[[dict, str], None]] = {
    "ch02_tensor_program_abstraction": the_product_is_right("a", "b", "c"),
    "ch04_end_to_end": every_model_predicts_as_numpy,
    "ch05_automatic_optimization": every_model_predicts_as_numpy,
    "ch06_integration": every_model_predicts_as_numpy,
    "ch07_gpu_part1": the_product_is_right("A_np", "B_np", "C_nd"),
    "ch09_graph_optimization": every_model_predicts_as_numpy,
}


# With MLCKIT_COURSE_SIZES=1 the notebooks run at the course's own sizes: each line marked
# "# [size] <the course's line>" is put back as the course wrote it (for a machine with a GPU).
COURSE_SIZES = os.environ.get("MLCKIT_COURSE_SIZES") == "1"
SIZE_MARK = re.compile(r"^(?P<indent>\s*)(?P<code>.*?)  # \[size\] (?P<course>.*)$", re.M)


def cells(path: Path, course_sizes: bool = False) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    if course_sizes:
        text = SIZE_MARK.sub(lambda m: m["indent"] + m["course"], text)
    parts = CELL_MARK.split(text)
    return [(int(parts[i]), parts[i + 1]) for i in range(1, len(parts), 2)]


def run_cell(source: str, filename: str, namespace: dict, compiler: codeop.Compile) -> None:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    for statement in ast.parse(source, filename).body:
        exec(compiler(ast.Module([statement], []), filename, "exec"), namespace)


@pytest.fixture
def scratch_dir(tmp_path, monkeypatch):
    for name in WEIGHT_FILES:
        (tmp_path / name).symlink_to(DATASETS / name)
    monkeypatch.chdir(tmp_path)
    matplotlib.use("Agg")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("notebook", sorted(p.stem for p in NOTEBOOKS.glob("*.py")))
def test_course_notebook_runs(notebook: str, scratch_dir: Path) -> None:
    import matplotlib.pyplot as plt

    import mlckit

    namespace: dict = {"__name__": "__main__", "mlckit": mlckit}
    compiler = codeop.Compile()
    printed = io.StringIO()
    try:
        for number, source in cells(NOTEBOOKS / f"{notebook}.py", COURSE_SIZES):
            filename = f"<{notebook} cell {number}>"
            expected = EXPECTED_ERRORS.get((notebook, number))
            with contextlib.redirect_stdout(printed):
                if expected is not None:
                    error, words = expected
                    with pytest.raises(error, match=re.escape(words)):
                        run_cell(source, filename, namespace, compiler)
                    continue
                try:
                    run_cell(source, filename, namespace, compiler)
                except Exception:
                    pytest.fail(
                        f"{notebook}, cell {number} failed:\n{source.strip()}\n\n"
                        f"{traceback.format_exc(limit=-8)}",
                        pytrace=False,
                    )
    finally:
        plt.close("all")
    if notebook in RESULTS:
        RESULTS[notebook](namespace, printed.getvalue())


def test_every_expected_error_and_check_names_a_notebook_cell() -> None:
    for notebook, number in EXPECTED_ERRORS:
        assert number in dict(cells(NOTEBOOKS / f"{notebook}.py")), (notebook, number)
    assert all((NOTEBOOKS / f"{notebook}.py").is_file() for notebook in RESULTS)


def test_each_size_edit_keeps_the_course_line_it_replaces() -> None:
    for path in NOTEBOOKS.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert text.count("# [size]") == len(SIZE_MARK.findall(text)), path.name
        restored = "".join(source for _, source in cells(path, course_sizes=True))
        assert "[size]" not in restored
        ast.parse(restored, path.name)


def test_only_marked_edits_touch_tvm_or_the_network() -> None:
    """The files keep the course's text: the network and torchvision appear only on marked
    lines, and no line imports tvm itself."""
    for path in NOTEBOOKS.glob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("#", 1)[0]
            assert not re.search(r"\b(import tvm|from tvm\b)", code), (path.name, line)
            if re.search(r"wget|pip install|torchvision", line):
                assert re.search(r"# \[(shell|data)\]", line), (path.name, line)
