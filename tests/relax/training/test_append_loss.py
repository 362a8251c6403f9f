"""relax.training.AppendLoss: a loss inlined after a backbone, checked on Apache TVM's cases
(one output, several outputs, extra loss parameters, states) and its refusals."""

from __future__ import annotations

import pytest

from mlckit.errors import TransformError
from mlckit.ir import assert_structural_equal
from mlckit.relax.training import AppendLoss
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R


def _round_trips(mod):
    assert_structural_equal(from_source(mod.script()), mod)


def test_one_output():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x + y
                R.output(gv0)
            return gv0

    @R.function
    def loss(arg1: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv0 = R.sum(arg1)
            R.output(gv0)
        return gv0

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = R.add(x, y)
                R.output(gv0)
            return gv0

        @R.function
        def main_loss(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tensor(
            (), "float32"
        ):
            with R.dataflow():
                gv0 = R.add(x, y)  # a dataflow variable now: only the loss reads it
                gv0_1 = R.sum(gv0)
                R.output(gv0_1)
            return gv0_1

    after = AppendLoss("main", loss)(Before)
    assert_structural_equal(after, Expected)
    assert "main_loss" not in Before  # the pass leaves its input alone
    _round_trips(after)


def test_several_backbone_outputs_feed_the_loss():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = R.sum(x)
                gv1 = R.sum(y)
                R.output(gv0, gv1)
            return gv0, gv1

    @R.function
    def loss(arg1: R.Tensor((), "float32"), arg2: R.Tensor((), "float32")):
        with R.dataflow():
            gv0 = R.add(arg1, arg2)
            R.output(gv0)
        return gv0

    @R.function
    def main_loss(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv0 = R.sum(x)
            gv1 = R.sum(y)
            gv0_1 = R.add(gv0, gv1)
            R.output(gv0_1)
        return gv0_1

    after = AppendLoss("main", loss, 2)(Before)
    assert_structural_equal(after["main_loss"], main_loss.with_attr("global_symbol", "main_loss"))


def test_extra_loss_parameters_and_other_outputs():
    """The loss's third parameter becomes the new function's; the backbone's third output
    (a state) follows the loss in the result."""

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = R.sum(x)
                gv1 = R.add(x, x)
                gv2 = x
                R.output(gv0, gv1, gv2)
            return gv0, gv1, gv2

    @R.function
    def loss(
        arg1: R.Tensor((), "float32"),
        arg2: R.Tensor((3, 3), "float32"),
        arg3: R.Tensor((3, 3), "float32"),
    ):
        with R.dataflow():
            gv0 = R.add(arg2, arg3)
            gv1 = R.sum(gv0)
            R.output(gv1)
        return gv1

    @R.function
    def main_loss(x: R.Tensor((3, 3), "float32"), arg3: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv0 = R.sum(x)
            gv1 = R.add(x, x)
            gv2 = x
            gv0_1 = R.add(gv1, arg3)
            gv1_1 = R.sum(gv0_1)
            R.output(gv2, gv1_1)
        return gv1_1, gv2

    after = AppendLoss("main", loss, 2, new_func_name="scored")(Before)
    assert_structural_equal(after["scored"], main_loss.with_attr("global_symbol", "scored"))
    _round_trips(after)


@R.function
def _sum_loss(arg: R.Tensor((3, 3), "float32")):
    with R.dataflow():
        gv = R.sum(arg)
        R.output(gv)
    return gv


def test_refuses_mismatched_struct_info():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = R.sum(x)
                R.output(gv0)
            return gv0

    @R.function
    def loss(arg1: R.Tensor((), "float64")):
        with R.dataflow():
            gv0 = R.add(arg1, arg1)
            R.output(gv0)
        return gv0

    with pytest.raises(TransformError, match=r"return value 0 \(gv0\).*float32.*arg1.*float64"):
        AppendLoss("main", loss)(Module)


def test_refuses_too_few_outputs_and_nested_tuples():
    @I.ir_module
    class One:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = R.add(x, x)
                R.output(gv0)
            return gv0

    with pytest.raises(TransformError, match="backbone has 1 return values, fewer than"):
        AppendLoss("main", _sum_loss, 2)(One)

    @I.ir_module
    class Nested:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x
                gv1 = R.add(x, x)
                R.output(gv0, gv1)
            return gv0, (gv1, gv0)

    with pytest.raises(TransformError, match="a variable or a tuple of variables"):
        AppendLoss("main", _sum_loss)(Nested)


def test_refuses_functions_of_several_blocks():
    @I.ir_module
    class TwoBlocks:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x
                R.output(gv0)
            gv1 = gv0
            return gv1

    with pytest.raises(TransformError, match="backbone must consist of exactly one dataflow"):
        AppendLoss("main", _sum_loss)(TwoBlocks)

    @R.function
    def loss_two_blocks(arg: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv = R.sum(arg)
            R.output(gv)
        gv1 = gv
        return gv1

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x
                R.output(gv0)
            return gv0

    with pytest.raises(TransformError, match="loss function must consist of exactly one"):
        AppendLoss("main", loss_two_blocks)(Module)


def test_refuses_a_loss_that_is_not_a_scalar():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x
                R.output(gv0)
            return gv0

    @R.function
    def not_scalar(arg1: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv0 = arg1
            R.output(gv0)
        return gv0

    @R.function
    def a_tuple(arg1: R.Tensor((3, 3), "float32")):
        with R.dataflow():
            gv0 = R.sum(arg1)
            gv1 = gv0 + gv0
            R.output(gv0, gv1)
        return gv0, gv1

    for loss in (not_scalar, a_tuple):
        with pytest.raises(TransformError, match="must return one 0-d tensor variable"):
            AppendLoss("main", loss)(Module)


def test_refuses_unknown_function_and_non_function_loss():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv0 = x
                R.output(gv0)
            return gv0

    with pytest.raises(TransformError, match="no relax function named 'predict'.*main"):
        AppendLoss("predict", _sum_loss)(Module)
    with pytest.raises(TransformError, match="the loss must be a relax.Function"):
        AppendLoss("main", "mse")(Module)  # type: ignore[arg-type]
