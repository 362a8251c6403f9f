"""IRExplorer: selecting a function, parameter or binding shows its struct info, script and
picture."""

from __future__ import annotations

import pytest

from mlckit.errors import MLCError
from mlckit.testing.examples import Module
from mlckit.viz import dot_program
from mlckit.viz.embed import embedded_svgs
from mlckit.widgets import IRExplorer

needs_dot = pytest.mark.skipif(dot_program() is None, reason="no Graphviz dot program")


def test_lists_functions_then_their_params_and_bindings():
    labels = [item.label.split(":")[0].split("=")[0].strip() for item in IRExplorer(Module).items]
    assert labels == [
        "main  (relax function)",
        "x",
        "w0",
        "b0",
        "w1",
        "b1",
        "lv0",
        "lv1",
        "lv2",
        "linear  (PrimFunc)",
        "relu  (PrimFunc)",
    ]


def test_selecting_a_binding_shows_its_struct_info_and_script():
    explorer = IRExplorer(Module)
    explorer.select("lv1")
    assert "lv1" in explorer.title.value
    assert (
        "(n, <span" in explorer.struct_info_view.value and "256" in explorer.struct_info_view.value
    )
    assert "relu" in explorer.script_view.value
    assert "call_tir" in explorer.script_view.value


def test_selecting_a_function_shows_its_signature():
    explorer = IRExplorer(Module)
    explorer.select("main")
    assert "Callable" in explorer.struct_info_view.value
    explorer.select("linear")
    text = explorer.struct_info_view.value
    assert "has no struct info" in text and "Buffer" in text


def test_selecting_in_the_list_updates_the_views():
    explorer = IRExplorer(Module)
    first = explorer.script_view.value
    explorer.selector.value = 1  # the parameter x
    assert explorer.script_view.value != first
    assert "784" in explorer.struct_info_view.value


@needs_dot
def test_a_binding_that_calls_a_function_is_drawn_as_that_function():
    explorer = IRExplorer(Module)
    explorer.select("lv0")
    picture = explorer.picture_view.value
    assert "calls linear" in picture
    (svg,) = embedded_svgs(picture)
    assert "block &quot;Y&quot;" in svg  # the loop nest of linear


def test_unknown_names_are_reported():
    with pytest.raises(MLCError, match="nothing called 'nope'"):
        IRExplorer(Module).select("nope")
