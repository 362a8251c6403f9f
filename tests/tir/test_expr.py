"""PrimExpr construction: Python operators build TVM-style nodes with the right dtypes."""

import pytest

from mlckit import tir
from mlckit.errors import IRError, MLCError


def test_operators_build_nodes():
    i, n = tir.Var("i"), tir.Var("n")
    assert isinstance(i + 1, tir.Add)
    assert isinstance(i * n, tir.Mul)
    assert isinstance(i // 4, tir.FloorDiv)
    assert isinstance(i % 4, tir.FloorMod)
    assert isinstance(i < n, tir.LT) and (i < n).dtype == "bool"
    assert isinstance(1 - i, tir.Sub) and isinstance((1 - i).a, tir.IntImm)
    assert isinstance(tir.op.max(i, 0), tir.Max)


def test_literals_adopt_the_other_operand_dtype():
    n = tir.Var("n", "int64")
    expr = n * 256
    assert expr.dtype == "int64" and expr.b.dtype == "int64"
    x = tir.Var("x", "float32")
    assert (x * 2).b.dtype == "float32"
    assert (x + 1.5).dtype == "float32"


def test_mixed_widths_promote():
    a, b = tir.Var("a", "int32"), tir.Var("b", "int64")
    expr = a + b
    assert expr.dtype == "int64" and isinstance(expr.a, tir.Cast)


def test_eq_builds_a_node_but_tests_identity_as_bool():
    i, j = tir.Var("i"), tir.Var("j")
    cond = i == j
    assert isinstance(cond, tir.EQ)
    assert not bool(cond)
    assert bool(i == i)
    assert {i: 1}[i] == 1  # usable as dict keys


def test_symbolic_expression_has_no_truth_value():
    i = tir.Var("i")
    with pytest.raises(MLCError, match="no Python truth value"):
        bool(i < 3)


def test_bad_constructions_raise_irerror():
    with pytest.raises(IRError, match="unknown dtype"):
        tir.Var("x", "flaot32")
    with pytest.raises(IRError, match="does not fit"):
        tir.IntImm("int8", 300)
    b = tir.decl_buffer((4, 4), "float32", "B")
    with pytest.raises(IRError, match="2 dimensions but is indexed with 1"):
        b[tir.Var("i")]
    with pytest.raises(IRError, match="needs a float argument"):
        tir.exp(tir.Var("i"))


def test_buffer_slicing_builds_regions():
    b = tir.decl_buffer((8, 16), "float32", "B")
    i = tir.Var("i")
    region = b[i, 0:16]
    assert isinstance(region, tir.BufferRegion)
    assert region.region[0].min is i
    assert region.region[1].extent.value == 16
