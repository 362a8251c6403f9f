"""Methods of relax expressions in TVMScript, as TVM's ExprWithOp has them: ``x.astype(dtype)``
is ``R.astype(x, dtype)`` in text and in decorated Python, and prints as ``R.astype``; any other
method is a ParseError at its line naming it."""

from __future__ import annotations

import pytest

from mlckit.errors import ParseError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import relax as R

# TVM's expected CategoricalCrossEntropyLoss() (tests/python/relax/test_training_loss.py), as
# TVM writes it, and the same function with the cast spelled as a call.
TVM_LOSS = """
@R.function
def categorical_cross_entropy_loss(
    predictions: R.Tensor((3, 5), "float32"), targets: R.Tensor((3, 5), "int64")
) -> R.Tensor((), "float32"):
    R.func_attr({"global_symbol": "categorical_cross_entropy_loss"})
    with R.dataflow():
        lv: R.Tensor((3, 5), "float32") = R.nn.log_softmax(predictions, axis=-1)
        gv: R.Tensor((), "float32") = R.mean(-lv * targets.astype("float32"))
        R.output(gv)
    return gv
"""
CALL_LOSS = TVM_LOSS.replace('targets.astype("float32")', 'R.astype(targets, "float32")')


def test_tvm_loss_with_the_method_equals_the_call_spelling():
    method, call = from_source(TVM_LOSS), from_source(CALL_LOSS)
    assert_structural_equal(method, call)
    # The printer keeps the call spelling, and what it prints parses back to the same function.
    text = method.script()
    assert 'R.astype(targets, dtype="float32")' in text and "targets.astype" not in text
    assert_structural_equal(from_source(text), method)


def test_decorated_python_reads_the_method_too():
    @R.function
    def method(x: R.Tensor((2, 3), "int32")):
        with R.dataflow():
            y = x.astype(dtype="float16")
            z = R.sum(y, axis=[1]).astype("float32")
            R.output(z)
        return z

    @R.function
    def call(x: R.Tensor((2, 3), "int32")):
        with R.dataflow():
            y = R.astype(x, dtype="float16")
            z = R.astype(R.sum(y, axis=[1]), "float32")
            R.output(z)
        return z

    assert_structural_equal(
        method.with_attr("global_symbol", "f"), call.with_attr("global_symbol", "f")
    )
    y_binding = method.body.blocks[0].bindings[0]
    assert y_binding.value.op.name == "relax.astype"
    assert y_binding.var.struct_info.dtype == "float16"


BODY = """@R.function
def f(x: R.Tensor((3, 4), "float32")):
    with R.dataflow():
        y = {expr}
        R.output(y)
    return y
"""

ERRORS = {
    "unknown method": ('x.cast("float16")', r"no method 'cast'; its methods are \.astype"),
    "misspelled": ('x.astyp("float16")', "did you mean 'astype'"),
    "missing dtype": ("x.astype()", r"wrong arguments to x\.astype\(dtype\)"),
    "bad dtype": ('x.astype("flaot16")', "flaot16"),
    "not called": ("x.shape", r"no method 'shape'"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_bad_methods_are_parse_errors_at_their_line(case):
    expr, phrase = ERRORS[case]
    with pytest.raises(ParseError, match=phrase) as info:
        from_source(BODY.format(expr=expr))
    assert ":4:" in str(info.value)  # the line of `y = ...`


def test_a_method_not_called_says_how_to_call_it():
    with pytest.raises(ParseError, match=r"x\.astype, not called: write x\.astype\(dtype\)"):
        from_source(BODY.format(expr="x.astype"))


def test_unknown_method_in_decorated_python_names_it():
    with pytest.raises(ParseError, match=r"x\.sqrt`: a relax expression has no method 'sqrt'"):

        @R.function
        def f(x: R.Tensor((3,), "float32")):
            y = x.sqrt()
            return y


def test_method_outside_a_dataflow_block():
    # A binding at the function's top level has the form of a declaration `n = T.var("int64")`.
    @R.function
    def f(x: R.Tensor((3,), "int32")):
        y = x.astype("float32")
        return y

    text = """@R.function
def f(x: R.Tensor((3,), "int32")):
    y = x.astype("float32")
    return y
"""
    assert_structural_equal(from_source(text), f)
    assert f.body.blocks[0].bindings[0].value.op.name == "relax.astype"
