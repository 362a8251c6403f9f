"""Highlighted TVMScript, script diffs and the notebook display hook."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from mlckit import relax
from mlckit.testing.examples import Module, MyModule

viz = pytest.importorskip("mlckit.viz")

KEYWORD = '<span style="color: #008000; font-weight: bold">def</span>'


def test_html_is_highlighted_tvmscript():
    page = viz.html(MyModule)
    assert KEYWORD in page
    assert '<span style="color: #00F">main</span>' in page  # the function's name
    # A string (pygments escapes its quotes in some versions and not in others).
    assert re.search(r'<span style="color: #BA2121">(&quot;|")float32(&quot;|")</span>', page)
    assert "<details" not in page


def test_long_modules_fold_per_function():
    page = viz.html(Module, collapse_after=10)
    assert page.count("<details") == 3
    assert "<details open>" in page  # the relax function
    assert "@T.prim_func linear" in page and "@R.function main" in page
    folded = viz.html("x = 1\n" * 20, collapse_after=10)
    assert "TVMScript, 20 lines" in folded


def test_diff_text_and_html():
    after = relax.get_pipeline("default")(Module)
    result = viz.diff(Module, after)
    assert result.changed
    assert result.text.startswith("--- before\n+++ after")
    assert any(
        line.startswith("+") and "fused_linear_relu" in line for line in result.text.splitlines()
    )
    assert any(line.startswith("-") and "call_tir" in line for line in result.text.splitlines())
    unified = result.html()
    assert viz.text.ADDED in unified and viz.text.REMOVED in unified and KEYWORD in unified
    side = result.html(side_by_side=True)
    assert side.count("<tr>") > 0 and viz.text.ADDED in side
    assert not viz.diff(Module, Module).changed
    assert "(no difference)" in viz.diff("a", "a").html()


def test_mimebundle_views():
    bundle = Module._repr_mimebundle_()
    assert bundle["text/plain"] == repr(Module)
    assert KEYWORD in bundle["text/html"]
    if viz.dot_program() is not None:
        ET.fromstring(bundle["image/svg+xml"])
        assert "picture" in bundle["text/html"]
    only_text = Module._repr_mimebundle_(include=["text/plain"])
    assert set(only_text) == {"text/plain"}
    no_svg = Module._repr_mimebundle_(exclude=["image/svg+xml"])
    assert "image/svg+xml" not in no_svg and "text/html" in no_svg
