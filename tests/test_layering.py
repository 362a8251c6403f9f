"""The pipeline's import order holds: a stage never imports the stages to its right."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("mlckit.ir", ["mlckit.tir", "mlckit.relax", "mlckit.script"]),
        ("mlckit.arith", ["mlckit.relax", "mlckit.script"]),
        ("mlckit.tir", ["mlckit.relax", "mlckit.script"]),
        ("mlckit.relax", ["mlckit.script"]),
        ("mlckit", ["graphviz", "ipywidgets", "matplotlib", "mlckit.viz", "mlckit.widgets"]),
        ("mlckit.script", ["graphviz", "ipywidgets", "matplotlib"]),
    ],
)
def test_import_does_not_reach_later_stages(module, forbidden):
    code = (
        f"import sys, {module}\n"
        f"bad = [m for m in {forbidden!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing {module} imported {out.stdout.strip()}"
