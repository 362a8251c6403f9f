"""Chapter 7's exercises: each reference solution passes; typical wrong answers fail with the
message and hint meant for them; answers of the wrong kind never raise."""

from __future__ import annotations

import pytest
from replies import assert_verdict

import mlckit as tvm
from mlckit import relax
from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.solutions import ch7 as reference

MULTIPLY = tvm.ir.Op.get("relax.multiply")
RELU = tvm.ir.Op.get("relax.nn.relu")
ADD = tvm.ir.Op.get("relax.add")


def test_the_chapter_has_three_exercises_with_graded_hints():
    names = [e.name for e in exercises(7)]
    assert names == ["ch7.mul_by_two", "ch7.fuse_add_relu", "ch7.lower_and_fuse"]
    for name in names:
        assert "last hint" in str(hint(name, 3))
        assert solution(name)._repr_markdown_().startswith("```python\ndef ")


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("ch7.mul_by_two", reference.mul_by_two()),
        ("ch7.fuse_add_relu", reference.fuse_add_relu()),
        ("ch7.lower_and_fuse", reference.lower_and_fuse()),
    ],
)
def test_each_reference_solution_passes(name, answer):
    result = check(name, answer)
    assert result.passed, str(result)


# ------------------------------------------------------------------------ ch7.mul_by_two
def mul_rewriter(replace):
    """A mutator rewriting each multiply for which ``replace(a, c)`` gives a new call."""

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op != MULTIPLY:
                return call
            return replace(*call.args) or call

    return Rewriter


def is_constant(c, value=None):
    return isinstance(c, relax.Constant) and (value is None or float(c.data.numpy()) == value)


@pytest.mark.parametrize(
    ("replace", "message", "hint_text"),
    [
        (lambda a, c: None, "still multiplies by the constant 2: `lv0 = ", "look at call.op"),
        (
            lambda a, c: relax.op.add(a, a) if is_constant(c) else None,
            "rewrote the multiply by the constant 3 too",
            "check the constant's value",
        ),
        (
            lambda a, c: relax.op.add(a, a),
            "you rewrote every multiply",
            "its value is 2",
        ),
        (
            lambda a, c: relax.op.add(a, c) if is_constant(c, 2.0) else None,
            "0 additions of a value to itself",
            "relax.op.add(a, a)",
        ),
    ],
)
def test_wrong_rewrites_are_named(replace, message, hint_text):
    result = check("ch7.mul_by_two", mul_rewriter(replace))
    assert not result.passed
    assert_verdict(result, message)
    assert hint_text in result.hint
    assert result.diff.text.startswith("--- yours\n+++ expected")


def test_a_rewrite_that_computes_something_else_fails_on_numerics():
    result = check(
        "ch7.mul_by_two",
        mul_rewriter(
            lambda a, c: relax.op.add(a, relax.op.add(a, a)) if is_constant(c, 2.0) else None
        ),
    )
    # Two multiplies by 2 became a + (a + a): the self-additions are there, the values are not.
    assert_verdict(result, "every element of main's result is wrong")


def test_answers_that_are_not_mutators_are_reported():
    assert "expected your mutator class, got int" in check("ch7.mul_by_two", 42).message
    assert "got function" in check("ch7.mul_by_two", lambda call: call).message


# ------------------------------------------------------------------------ ch7.fuse_add_relu
def add_relu_pass(*, match=True, primitive=True, cleanup=True, needs_add=True):
    """The reference fusor with one of the usual mistakes switched on."""

    @relax.expr_functor.mutator
    class Fusor(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__()
            self.mod_ = mod

        def transform(self):
            for global_var, func in self.mod_.functions.items():
                updated = self.visit_expr(func)
                if cleanup:
                    updated = relax.analysis.remove_all_unused(updated)
                self.builder_.update_func(global_var, updated)
            return self.builder_.get()

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if not match or call.op != RELU:
                return call
            value = self.lookup_binding(call.args[0])
            if needs_add and value.op != ADD:
                return call
            a, b = value.args
            pa, pb = relax.Var("a", a.struct_info), relax.Var("b", b.struct_info)
            bb = relax.BlockBuilder()
            with bb.function("fused_add_relu", [pa, pb]):
                with bb.dataflow():
                    lv = bb.emit(relax.op.add(pa, pb))
                    gv = bb.emit_output(relax.op.nn.relu(lv))
                bb.emit_func_output(gv)
            fn = bb.get()["fused_add_relu"]
            if primitive:
                fn = fn.with_attr("Primitive", 1)
            return relax.Call(self.builder_.add_func(fn, "fused_add_relu"), [a, b], None, None)

    @tvm.ir.transform.module_pass(opt_level=0, name="FuseAddRelu")
    class FuseAddReluPass:
        def transform_module(self, mod, ctx):
            return Fusor(mod).transform()

    return FuseAddReluPass


def test_a_fusor_with_no_mistake_passes():
    assert check("ch7.fuse_add_relu", add_relu_pass()()).passed


@pytest.mark.parametrize(
    ("mistake", "message", "hint_text"),
    [
        ({"match": False}, "main still computes a relu of an add: `lv1 = ", "lookup_binding"),
        ({"primitive": False}, "has no Primitive attribute", "with_attr('Primitive', 1)"),
        ({"cleanup": False}, "which nothing uses any more", "remove_all_unused"),
        ({"needs_add": False}, "lv2 is a multiply, not an add", "call of relax.add"),
    ],
)
def test_fusion_mistakes_are_named(mistake, message, hint_text):
    result = check("ch7.fuse_add_relu", add_relu_pass(**mistake)())
    assert not result.passed
    assert_verdict(result, message)
    assert hint_text in result.hint


def test_the_pass_class_instead_of_the_pass_says_call_it():
    result = check("ch7.fuse_add_relu", add_relu_pass())
    assert result.message == "your answer is FuseAddReluPass, which makes a pass, not a pass itself"
    assert result.hint == "call it: FuseAddReluPass()"


def test_the_mutator_instead_of_the_pass_says_wrap_it():
    @relax.expr_functor.mutator
    class Fusor(relax.PyExprMutator):
        pass

    for answer in (Fusor, Fusor()):
        result = check("ch7.fuse_add_relu", answer)
        assert result.message == "your answer is a mutator, not a pass"
        assert "module_pass" in result.hint


# ------------------------------------------------------------------------ ch7.lower_and_fuse
T = relax.transform


def test_the_automatic_pipeline_keeps_the_grouping_and_passes_too():
    pipeline = [T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FuseOps(), T.FuseTIR()]
    assert check("ch7.lower_and_fuse", pipeline).passed
    assert check("ch7.lower_and_fuse", tvm.ir.transform.Sequential(reference.lower_and_fuse()))


@pytest.mark.parametrize(
    ("passes", "message", "hint_text"),
    [
        ([], "are still relax functions marked Primitive", "FuseTIR turns each"),
        ([T.LegalizeOps()], "are still relax functions marked Primitive", "FuseTIR turns each"),
        ([T.FuseTIR()], "raised MLCError: FuseTIR: cannot fuse", "must be lowered before"),
        ([T.LegalizeOps], "is LegalizeOps, which makes a pass", "call it: LegalizeOps()"),
        (["LegalizeOps"], "has type str, not a pass", "relax.transform.LegalizeOps()"),
    ],
)
def test_pipeline_mistakes_are_named(passes, message, hint_text):
    result = check("ch7.lower_and_fuse", passes)
    assert not result.passed
    assert_verdict(result, message)
    assert hint_text in result.hint


def test_the_hand_written_lowering_is_refused():
    @tvm.ir.transform.module_pass(opt_level=0, name="LowerToTensorIR")
    def lower(mod, ctx):
        return T.LegalizeOps()(mod)

    result = check("ch7.lower_and_fuse", [lower, T.FuseTIR()])
    assert_verdict(result, "uses the hand-written LowerToTensorIR")


def test_a_pipeline_that_leaves_an_operator_in_main_names_it():
    @tvm.ir.transform.module_pass(opt_level=0, name="FuseTIROnly")
    def fuse_inside(mod, ctx):
        # Lower only the Primitive functions, then fuse them: main keeps R.nn.relu.
        lowered = T.LegalizeOps()(mod)
        lowered["main"] = mod["main"]
        return T.FuseTIR()(lowered)

    result = check("ch7.lower_and_fuse", fuse_inside)
    assert_verdict(result, "main still calls relax.nn.relu")
    assert "LegalizeOps lowers" in result.hint
