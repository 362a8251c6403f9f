"""Relax expressions are single values: iterating one is an error that says so, never a loop
without end; a tuple-valued one unpacks into its fields."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import relax
from mlckit.errors import IRError, MLCError, StructInfoError

X = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
PAIR = relax.Var("t", relax.TupleStructInfo([X.struct_info, relax.ShapeStructInfo([2])]))
UNKNOWN = relax.Var("u")  # no struct info yet


@pytest.mark.parametrize(
    "attempt",
    [
        lambda: list(X),
        lambda: 1 in X,
        lambda: [*UNKNOWN],
        lambda: relax.TupleStructInfo(X),
        lambda: relax.TupleStructInfo(X.struct_info),
    ],
    ids=["list", "in", "unpack-unknown", "tuple-sinfo-of-expr", "tuple-sinfo-of-sinfo"],
)
def test_iterating_an_expression_is_an_error_not_an_endless_loop(attempt):
    with pytest.raises(IRError, match=r"not a sequence|expects a list of StructInfo"):
        attempt()


def test_a_tuple_of_one_expression_needs_a_list():
    with pytest.raises(
        IRError, match=r"relax.Tuple expects a list of fields.*relax.Tuple\(\[x\]\)"
    ):
        relax.Tuple(X)
    assert relax.Tuple([X]).fields == (X,)


def test_a_tuple_valued_expression_unpacks_into_its_fields():
    first, second = PAIR
    assert (first.tuple_value, first.index, second.index) == (PAIR, 0, 1)
    assert [f.index for f in PAIR] == [0, 1]
    assert list(relax.Tuple([X, X])) == [X, X]


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        (2, StructInfoError, "index 2 is out of range: t is a tuple of 2 fields"),
        (-1, StructInfoError, "index -1 is out of range"),
        ("0", IRError, "selected by an integer, got str"),
        (True, IRError, "selected by an integer, got bool"),
    ],
    ids=["past-the-end", "negative", "str", "bool"],
)
def test_a_field_index_is_checked_against_the_tuple(index, error, message):
    with pytest.raises(error, match=message):
        PAIR[index]


def test_a_field_of_a_non_tuple_is_refused_when_its_struct_info_is_known():
    with pytest.raises(StructInfoError, match="cannot take field 0 of x.*not a tuple"):
        X[0]
    assert UNKNOWN[3].index == 3  # checked when normalized, once its struct info is known


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: relax.const(300, "int8"), "300 is not exactly representable as int8"),
        (lambda: relax.const(1.5, "int32"), "1.5 is not exactly representable as int32"),
        (lambda: relax.const("a"), "takes a number, a numpy array"),
        (lambda: relax.const(1, "float"), "unknown relax.const dtype 'float'"),
        (lambda: relax.PrimStructInfo("int64", 1.5), "the value is float32, the dtype says int64"),
    ],
)
def test_constants_hold_their_values_exactly(make, message):
    # relax.const(300, "int8") used to wrap silently to 44.
    with pytest.raises(MLCError, match=message):
        make()


def test_a_scalar_struct_info_value_takes_its_dtype():
    assert relax.PrimStructInfo("int64", 1).value.dtype == "int64"
    assert relax.const(1.0, "float16").data.numpy().dtype == np.float16


@pytest.mark.parametrize(
    "make",
    [
        lambda x: relax.op.nn.softmax(x, axis="a"),
        lambda x: relax.op.nn.log_softmax(x, axis=float("nan")),
        lambda x: relax.op.argmax(x, axis=1.5),
        lambda x: relax.op.nn.layer_norm(x, x, x, axes=[1], epsilon="small"),
    ],
)
def test_scalar_attributes_are_checked(make):
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    with pytest.raises(StructInfoError, match="must be an? (integer|number), got"):
        make(x)


@pytest.mark.parametrize("call", [relax.op.call_packed, relax.op.call_pure_packed])
def test_a_packed_call_names_its_callee(call):
    # "env.log" * u (a typo for a comma) was taken as the callee, and the printed call did
    # not parse back.
    u = relax.Var("u", relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(StructInfoError, match="the callee must be a function name"):
        call("env.log" * u, u, sinfo_args=relax.ObjectStructInfo())
    made = call("env.log", u, sinfo_args=relax.ObjectStructInfo())
    assert any(isinstance(part, relax.ExternFunc) for part in (made.op, *made.args))


OPERATORS = [
    (lambda x, y: x + y, "relax.add", False),
    (lambda x, y: y + x, "relax.add", True),
    (lambda x, y: x - y, "relax.subtract", False),
    (lambda x, y: y - x, "relax.subtract", True),
    (lambda x, y: x * y, "relax.multiply", False),
    (lambda x, y: x / y, "relax.divide", False),
    (lambda x, y: y / x, "relax.divide", True),
    (lambda x, y: x // y, "relax.floor_divide", False),
    (lambda x, y: y // x, "relax.floor_divide", True),
    (lambda x, y: x**y, "relax.power", False),
    (lambda x, y: y**x, "relax.power", True),
    (lambda x, y: x < y, "relax.less", False),
    (lambda x, y: x <= y, "relax.less_equal", False),
    (lambda x, y: x > y, "relax.greater", False),
    (lambda x, y: x >= y, "relax.greater_equal", False),
    (lambda x, y: y < x, "relax.greater", False),  # Python asks x.__gt__(y)
]


@pytest.mark.parametrize("apply, op, reflected", OPERATORS)
def test_python_operators_build_relax_calls_as_tvm_does(apply, op, reflected):
    """TVM's ExprWithOp operators: an expression and a number, in either order."""
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    call = apply(x, 2.0)
    assert call.op.name == op
    assert call.args[1 if reflected else 0] is x
    assert isinstance(call.args[0 if reflected else 1], relax.PrimValue)


def test_astype_method_and_negation():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    cast = x.astype("float16")
    assert cast.op.name == "relax.astype" and cast.attrs.dtype == "float16"
    assert (-x).op.name == "relax.negative"
    assert (x @ relax.Var("w", relax.TensorStructInfo((3, 4), "float32"))).op.name == "relax.matmul"
