"""Relax expressions are single values: iterating one is an error that says so, never a loop
without end; a tuple-valued one unpacks into its fields."""

from __future__ import annotations

import pytest

from mlckit import relax
from mlckit.errors import IRError, StructInfoError

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
