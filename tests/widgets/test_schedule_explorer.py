"""ScheduleExplorer driven headless: primitives from the form, errors, undo, the trace, timing."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import pytest

from mlckit import tir
from mlckit.errors import ScheduleError
from mlckit.ir.structural import assert_structural_equal
from mlckit.script import tir as T
from mlckit.testing.examples import MyModuleLegacy
from mlckit.viz.embed import embedded_svgs
from mlckit.widgets import ScheduleExplorer, ScheduleSteps
from mlckit.widgets.schedule_explorer import kept_choice

LINEAR = MyModuleLegacy["linear0"]


@T.prim_func
def tiny_add(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


def explorer() -> ScheduleExplorer:
    return ScheduleExplorer(LINEAR, measure=False)


def split_j(ex: ScheduleExplorer) -> bool:
    ex.primitive.value = "split"
    ex.loop.value = "j (Y)"
    ex.factors.value = "None, 4"
    return ex.apply_form()


def test_lists_blocks_and_loops_by_label():
    ex = explorer()
    assert ex.block.options == ("Y", "Z")
    assert ex.loop.options == ("i (Y)", "j (Y)", "k (Y)", "i (Z)", "j (Z)")


def test_applying_a_primitive_changes_the_script_and_the_trace():
    ex = explorer()
    script, trace = ex.script_view.value, ex.trace_view.value
    assert split_j(ex)
    assert ex.script_view.value != script
    assert "j_0" in ex.script_view.value and "j_1" in ex.script_view.value
    assert ex.trace_view.value != trace
    assert "sch.split(loop=l2, factors=[None, 4])" in ex.trace_view.value
    assert "sch.get_loops(block=b0)" in ex.trace_view.value
    assert "j_1" in ex.diff_view.value
    assert "for j_1 in range(4):" in ex.history.source(1)  # the generated Python
    assert "njit" in ex.source_view.value
    # The new loops can be chosen for the next step.
    assert "j_1 (Y)" in ex.loop.options
    assert not ex.undo_button.disabled


def test_the_trace_replays_to_the_function_shown():
    ex = explorer()
    split_j(ex)
    ex.primitive.value = "reorder"
    ex.loops.value = ["k (Y)", "j_0 (Y)"]
    assert ex.apply_form()
    ex.primitive.value = "reverse_compute_at"
    ex.block.value = "Z"
    ex.loop.value = "j_0 (Y)"
    assert ex.apply_form(), ex.message.value
    sch = tir.Schedule(LINEAR)
    exec(ex.trace_view.value, {"sch": sch})
    assert_structural_equal(sch.mod["main"], ex.history.current.func)


def test_an_illegal_primitive_shows_the_schedule_error_in_the_widget():
    ex = explorer()
    script = ex.script_view.value
    ex.primitive.value = "compute_inline"
    ex.block.value = "Y"  # a reduction block cannot be inlined
    assert not ex.apply_form()
    sch = tir.Schedule(LINEAR)
    with pytest.raises(ScheduleError) as expected:
        sch.compute_inline(sch.get_block("Y"))
    assert "mlckit-error" in ex.message.value
    assert html.escape(str(expected.value)) in ex.message.value
    assert "is a reduction" in ex.message.value
    assert "Traceback" not in ex.message.value
    assert ex.script_view.value == script  # nothing changed
    assert len(ex.history.steps) == 1


def test_bad_arguments_are_explained():
    ex = explorer()
    ex.primitive.value = "split"
    ex.factors.value = "four"
    assert not ex.apply_form()
    assert "factors must be positive integers or None" in ex.message.value
    ex.primitive.value = "fuse"
    ex.loops.value = []
    assert not ex.apply_form()
    assert "fuse: choose loops" in ex.message.value


def test_undo_goes_back_one_step():
    ex = explorer()
    original_script, original_trace = ex.script_view.value, ex.trace_view.value
    split_j(ex)
    assert ex.undo()
    assert ex.script_view.value == original_script
    assert ex.trace_view.value == original_trace
    assert ex.undo_button.disabled
    assert not ex.undo()
    assert "no step to undo" in ex.message.value


def test_the_form_shows_only_the_primitives_arguments():
    ex = explorer()
    ex.primitive.value = "compute_at"
    shown = {name for name, field in ex._fields.items() if field.layout.display != "none"}
    assert shown == {"block", "loop"}
    assert "producer" in ex.help.value


def test_a_replayed_trace_gives_one_step_per_primitive():
    sch = tir.Schedule(LINEAR)
    _, j, k = sch.get_loops(sch.get_block("Y"))
    j0, _ = sch.split(j, [None, 4])
    sch.reorder(k, j0)
    history = ScheduleSteps(LINEAR, trace=sch.trace, measure=False)
    assert [step.title for step in history.steps] == [
        "the function as given",
        "l4, l5 = sch.split(loop=l2, factors=[None, 4])",
        "sch.reorder(l3, l4)",
    ]
    assert history.steps[1].lines[0] == "b0 = sch.get_block(name='Y')"
    assert_structural_equal(history.current.func, sch.mod["main"])


def test_timing_on_the_python_target_charts_every_step():
    ex = ScheduleExplorer(tiny_add, target="python", number=1)
    ex.primitive.value = "split"
    ex.loop.value = "j (B)"
    ex.factors.value = "2, None"
    assert ex.apply_form()
    seconds = [step.seconds for step in ex.history.steps]
    assert all(s is not None and s > 0 for s in seconds)
    chart = ex.chart_view.value
    (svg,) = embedded_svgs(chart)
    ET.fromstring(svg)  # one valid SVG document
    assert "mlckit-error" not in chart


def test_timing_a_symbolic_shape_says_why_it_cannot():
    from mlckit.testing.examples import Module

    ex = ScheduleExplorer(Module, func_name="relu", target="python")
    assert ex.history.current.seconds is None
    assert "symbolic shape" in ex.chart_view.value


def test_the_steps_export_to_static_html():
    ex = explorer()
    split_j(ex)
    ex.primitive.value = "parallel"
    ex.loop.value = "i (Y)"
    assert ex.apply_form()
    page = ex.to_html()
    assert page.count('class="mlckit-step"') == 3
    assert "sch.parallel(loop=l1)" in page
    assert "generated Python" in page and "the trace as Python" in page


def test_the_explorer_never_changes_the_function_it_was_given():
    before = LINEAR.script()
    ex = explorer()
    split_j(ex)
    assert LINEAR.script() == before


def test_loops_are_added_from_a_dropdown_in_order_and_once():
    ex = explorer()
    ex.primitive.value = "reorder"
    assert ex.loop_choice.options == ex.loop.options
    for label in ("k (Y)", "j (Y)", "k (Y)"):
        ex.loop_choice.value = label
        ex.add_loop_button.click()
    assert list(ex.loops.value) == ["k (Y)", "j (Y)"]
    ex.clear_loops_button.click()
    assert list(ex.loops.value) == []


@pytest.mark.parametrize("primitive", ["reorder", "fuse"])
def test_a_list_of_one_loop_is_refused_with_a_message(primitive):
    ex = explorer()
    script = ex.script_view.value
    ex.primitive.value = primitive
    ex.loops.value = ["j (Y)"]
    assert not ex.apply_form()
    assert "mlckit-error" in ex.message.value
    assert f"{primitive}: choose at least 2 loops" in ex.message.value
    assert len(ex.history.steps) == 1 and ex.script_view.value == script
    # TVM itself takes a one-loop reorder (and does nothing); only the explorer refuses it.
    sch = tir.Schedule(LINEAR)
    sch.reorder(sch.get_loops(sch.get_block("Y"))[1])


def test_the_error_goes_when_the_primitive_changes_or_a_step_succeeds():
    ex = explorer()
    ex.primitive.value = "compute_inline"
    ex.block.value = "Y"
    assert not ex.apply_form()
    assert "mlckit-error" in ex.message.value
    ex.primitive.value = "split"
    assert ex.message.value == ""
    ex.primitive.value = "compute_inline"
    assert not ex.apply_form()
    assert split_j(ex)
    assert "mlckit-error" not in ex.message.value


def test_the_chosen_loop_stays_chosen_after_a_step():
    ex = explorer()
    ex.primitive.value = "parallel"
    ex.loop.value = "i (Y)"
    assert ex.apply_form(), ex.message.value
    assert ex.loop.value == "i (Y)"
    # A loop whose label changed (a block moved under it) is still the loop chosen.
    assert kept_choice("j_0 (Y)", ["i (Y)", "j_0 (Y, Z)", "j_1 (Y)"]) == "j_0 (Y, Z)"
    assert kept_choice("j (Y)", ["i (Y)", "j_0 (Y)"]) == "i (Y)"  # gone: the first
    assert kept_choice(None, []) is None


def test_code_views_scroll_instead_of_breaking_names():
    ex = explorer()
    for view in (ex.script_view, ex.diff_view, ex.source_view, ex.picture_view):
        assert view.layout.overflow == "auto" and view.layout.max_width == "100%"
    assert "white-space: pre; word-break: normal; overflow-wrap: normal" in ex.script_view.value
    split_j(ex)
    assert "word-break: normal" in ex.diff_view.value
