"""PassStepper: its steps, the live widget driven headless, and its static HTML."""

from __future__ import annotations

import pytest

from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir.structural import structural_equal
from mlckit.ir.transform import PassContext, Sequential, module_pass
from mlckit.viz import dot_program
from mlckit.viz.embed import embedded_svgs
from mlckit.widgets import PassStepper

ZERO = [
    "LegalizeOps",
    "AnnotateTIROpPattern",
    "FoldConstant",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "FuseOps",
    "FuseTIR",
]


@module_pass(opt_level=0, name="Explode")
def explode(mod, ctx):
    raise ValueError("my pass went wrong")


@module_pass(opt_level=0)
def drop_nothing(mod, ctx):
    return mod


def test_steps_follow_the_pipeline(mlp_module):
    stepper = PassStepper(mlp_module, relax.get_pipeline("zero"))
    assert stepper.names == ["input", *ZERO]
    assert stepper.steps[0].after is mlp_module
    for previous, step in zip(stepper.steps, stepper.steps[1:]):
        assert step.before is previous.after
    expected = relax.get_pipeline("zero")(mlp_module)
    assert structural_equal(stepper.steps[-1].after, expected)
    legalize = stepper.steps[1]
    assert legalize.changed and "R.call_tir" in legalize.after.script()


def test_a_list_with_user_passes_and_nested_sequentials(mlp_module):
    passes = [relax.transform.LegalizeOps(), Sequential([drop_nothing]), relax.transform.FuseOps()]
    stepper = PassStepper(mlp_module, passes)
    assert stepper.names == ["input", "LegalizeOps", "drop_nothing", "FuseOps"]
    assert not stepper.steps[2].changed
    assert "no change" in stepper.title(2)


def test_a_sequential_skips_what_the_context_disables(mlp_module):
    with PassContext(disabled_pass=["FoldConstant"]):
        stepper = PassStepper(mlp_module, relax.get_pipeline("zero"))
    assert "FoldConstant" not in stepper.names
    assert len(stepper) == len(ZERO)


def test_moving_the_slider_changes_pass_name_and_diff(mlp_module):
    view = PassStepper(mlp_module, relax.get_pipeline("zero"), pictures=False).widget
    assert "input module" in view.title.value
    first_diff = view.diff_view.value

    view.slider.value = 1
    assert "LegalizeOps" in view.title.value
    assert view.diff_view.value != first_diff
    assert "call_tir" in view.diff_view.value  # the added lines of the diff
    legalize_diff = view.diff_view.value

    view.slider.value = ZERO.index("FuseOps") + 1
    assert "FuseOps" in view.title.value
    assert view.diff_view.value != legalize_diff
    assert "fused" in view.diff_view.value


def test_prev_and_next_buttons_move_the_slider(mlp_module):
    view = PassStepper(mlp_module, relax.get_pipeline("zero"), pictures=False).widget
    assert view.prev_button.disabled
    view.next_button.click()
    view.next_button.click()
    assert view.slider.value == 2
    assert "AnnotateTIROpPattern" in view.title.value
    view.prev_button.click()
    assert view.slider.value == 1
    view.slider.value = view.slider.max
    assert view.next_button.disabled
    view.next_button.click()
    assert view.slider.value == view.slider.max


def test_a_pass_that_raises_shows_its_error_in_the_widget(mlp_module):
    passes = [relax.transform.LegalizeOps(), explode, relax.transform.FuseOps()]
    stepper = PassStepper(mlp_module, passes)
    # The pipeline stops at the failing pass: nothing after it ran.
    assert stepper.names == ["input", "LegalizeOps", "Explode"]
    view = stepper.widget
    view.slider.value = 2
    assert "Explode raised an error" in view.title.value
    assert "ValueError: my pass went wrong" in view.diff_view.value
    assert "test_pass_stepper.py" in view.diff_view.value  # where the student's pass raised
    assert "Traceback" not in view.diff_view.value
    assert "mlckit-error" in stepper.to_html()


def test_pictures_show_the_relax_function_with_changes_outlined(mlp_module):
    if dot_program() is None:
        pytest.skip("no Graphviz dot program")
    stepper = PassStepper(mlp_module, [relax.transform.LegalizeOps()])
    (first,) = embedded_svgs(stepper.picture_html(0))
    (legalized,) = embedded_svgs(stepper.picture_html(1))
    assert "matmul" in first
    assert "call_tir" in legalized
    assert 'stroke-width="3"' in legalized  # what LegalizeOps made is outlined
    assert 'alt="picture of main after LegalizeOps' in stepper.picture_html(1)


def test_static_html_holds_every_step(mlp_module):
    stepper = PassStepper(mlp_module, relax.get_pipeline("zero"), pictures=False)
    page = stepper._repr_html_()
    assert page == stepper.to_html()
    assert page.count('class="mlckit-step"') == len(ZERO) + 1
    assert f'max="{len(ZERO)}"' in page and "<script>" in page
    for name in ZERO:
        assert f"{name} (" in page


def test_steps_through_passes_only(mlp_module):
    with pytest.raises(MLCError, match="module_pass"):
        PassStepper(mlp_module, [lambda mod: mod])
    with pytest.raises(MLCError, match="IRModule"):
        PassStepper(mlp_module["main"], [])
