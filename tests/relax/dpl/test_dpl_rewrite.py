"""rewrite_call and PatternMatchingRewriter: the course's EwiseFMA rewrite with patterns."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal
from mlckit.relax.dpl import PatternMatchingRewriter, is_call_tir, is_op, rewrite_call, wildcard
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


@I.ir_module
class Before:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0


@I.ir_module
class Expected:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            gv0 = R.ewise_fma(x, y, y)
            R.output(gv0)
        return gv0


X, Y = wildcard(), wildcard()
FMA_PATTERN = is_op("relax.add")(is_op("relax.multiply")(X, Y), Y)


def to_fma(expr, matches):
    return relax.op.ewise_fma(matches[X], matches[Y], matches[Y])


def test_course_rewrite_add_of_multiply_to_ewise_fma():
    after = rewrite_call(FMA_PATTERN, to_fma, Before["main"])
    assert_structural_equal(after, Expected["main"])
    assert relax.analysis.well_formed(after)


def test_the_rewriter_works_as_a_pass_and_on_a_function():
    rewriter = PatternMatchingRewriter.from_pattern(FMA_PATTERN, to_fma)
    assert_structural_equal(rewriter(Before), Expected)
    assert_structural_equal(rewriter(Before["main"]), Expected["main"])
    seq = mlckit.ir.transform.Sequential([rewriter])
    assert_structural_equal(seq(Before), Expected)


def test_returning_the_match_leaves_the_function_unchanged():
    func = Before["main"]
    assert rewrite_call(FMA_PATTERN, lambda expr, m: expr, func) is func
    assert rewrite_call(is_op("relax.exp")(wildcard()), to_fma, func) is func


def test_matched_values_are_reused_not_recomputed():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.exp(x)
                lv1 = R.negative(lv0)
                gv = R.negative(lv1)
                R.output(gv)
            return gv

    @I.ir_module
    class Simplified:
        @R.function
        def main(x: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.exp(x)
                gv = lv0
                R.output(gv)
            return gv

    inner = wildcard()
    double_negative = is_op("relax.negative")(is_op("relax.negative")(inner))
    after = rewrite_call(double_negative, lambda expr, m: m[inner], Mod["main"])
    # The exp is referred to by its variable: it is not emitted a second time.
    assert_structural_equal(after, Simplified["main"])


def test_rewriters_combine_with_or_and_nested_results_are_normalized():
    a, b = wildcard(), wildcard()
    sub_to_add = PatternMatchingRewriter.from_pattern(
        is_op("relax.subtract")(a, b),
        lambda expr, m: relax.op.add(m[a], relax.op.negative(m[b])),
    )
    combined = PatternMatchingRewriter.from_pattern(FMA_PATTERN, to_fma) | sub_to_add

    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, y)
                lv1 = R.add(lv0, y)
                gv = R.subtract(lv1, x)
                R.output(gv)
            return gv

    @I.ir_module
    class Want:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv1 = R.ewise_fma(x, y, y)
                lv = R.negative(x)
                gv = R.add(lv1, lv)
                R.output(gv)
            return gv

    assert_structural_equal(combined(Mod), Want)


def test_a_rewriter_must_return_an_expression():
    with pytest.raises(MLCError, match="returned int, not a relax expression"):
        rewrite_call(FMA_PATTERN, lambda expr, m: 0, Before["main"])
    with pytest.raises(MLCError, match="from_pattern expects a DFPattern"):
        PatternMatchingRewriter.from_pattern("relax.add", to_fma)


@I.ir_module
class TwoRelus:
    @T.prim_func
    def relu(X: T.Buffer((3, 4), "float32"), Y: T.Buffer((3, 4), "float32")):
        for i, j in T.grid(3, 4):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((3, 4), "float32")):
        cls = TwoRelus
        with R.dataflow():
            lv0 = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((3, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((3, 4), "float32"))
            R.output(gv)
        return gv


def test_relu_of_relu_rewrite_keeps_numerics():
    once = is_call_tir("relu")
    twice = is_call_tir("relu", [once])
    after = PatternMatchingRewriter.from_pattern(twice, lambda expr, m: m[once])(TwoRelus)
    bindings = after["main"].body.blocks[0].bindings
    assert len(bindings) == 2 and bindings[1].value is bindings[0].var
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    for mod in (TwoRelus, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x).numpy(), np.maximum(x, 0))
