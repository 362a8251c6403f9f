"""relax.dpl patterns: what they match, through bindings, and what each part matched."""

from __future__ import annotations

import pytest

from mlckit import relax
from mlckit.relax.dpl import (
    DFPattern,
    PatternError,
    is_call_tir,
    is_const,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    make_fused_bias_activation_pattern,
    wildcard,
)
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


@I.ir_module
class Module:
    @T.prim_func
    def relu(X: T.Buffer((3, 4), "float32"), Y: T.Buffer((3, 4), "float32")):
        for i, j in T.grid(3, 4):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        cls = Module
        with R.dataflow():
            lv0 = R.multiply(x, y)
            lv1 = R.add(lv0, y)
            lv2 = R.add(lv1, R.const(1.0, "float32"))
            lv3 = R.call_tir(cls.relu, (lv2,), out_sinfo=R.Tensor((3, 4), "float32"))
            lv4 = (lv3, lv2)
            lv5 = lv4[1]
            gv = R.add(lv5, lv5)
            R.output(gv)
        return gv


FUNC = Module["main"]
VAR2VAL = relax.analysis.get_var2val(FUNC)
BOUND = {b.var.name_hint: b.value for b in FUNC.body.blocks[0].bindings}


def test_the_course_pattern_matches_through_the_binding_of_the_multiply():
    x, y = wildcard(), wildcard()
    mul = is_op("relax.multiply")(x, y)
    pattern = is_op("relax.add")(mul, y)
    assert pattern.match(BOUND["lv1"], VAR2VAL)
    # Without var2val, lv0 is only a variable, not a multiply.
    assert not pattern.match(BOUND["lv1"])
    matched = pattern.extract_matched_expr(BOUND["lv1"], VAR2VAL)
    assert matched is not None
    assert matched[pattern] is BOUND["lv1"]
    assert matched[mul] is BOUND["lv0"]
    assert matched[x] is FUNC.params[0] and matched[y] is FUNC.params[1]


def test_a_pattern_used_twice_must_match_the_same_expression():
    same = wildcard()
    twice = is_op("relax.add")(same, same)
    assert twice.match(BOUND["gv"], VAR2VAL)
    assert not twice.match(BOUND["lv1"], VAR2VAL)  # lv0 and y differ


def test_add_and_multiply_match_either_operand_order():
    mul = is_op("relax.multiply")(wildcard(), wildcard())
    assert is_op("relax.add")(is_var("y"), mul).match(BOUND["lv1"], VAR2VAL)
    assert not is_op("relax.add")(is_var("x"), mul).match(BOUND["lv1"], VAR2VAL)


def test_leaf_patterns():
    assert is_op("relax.add")(wildcard(), is_const()).match(BOUND["lv2"], VAR2VAL)
    assert not is_op("relax.add")(wildcard(), is_const()).match(BOUND["lv1"], VAR2VAL)
    assert is_op("relax.multiply")(is_var("x"), is_var()).match(BOUND["lv0"])
    assert not is_op("relax.multiply")(is_var("y"), is_var("y")).match(BOUND["lv0"])
    assert is_call_tir("relu").match(BOUND["lv3"])
    assert is_call_tir("relu", [is_op("relax.add")(wildcard(), is_const())]).match(
        BOUND["lv3"], VAR2VAL
    )
    assert not is_call_tir("linear").match(BOUND["lv3"])


def test_alternatives_and_constraints():
    add_or_mul = is_op("relax.add")(wildcard(), wildcard()) | is_op("relax.multiply")(
        wildcard(), wildcard()
    )
    assert add_or_mul.match(BOUND["lv0"]) and add_or_mul.match(BOUND["lv1"])
    assert not add_or_mul.match(BOUND["lv3"])
    assert (~is_const()).match(BOUND["lv0"])
    assert wildcard().has_dtype("float32").match(BOUND["lv0"])
    assert not wildcard().has_dtype("int32").match(BOUND["lv0"])
    assert wildcard().has_shape([3, 4]).match(BOUND["lv0"])
    assert not wildcard().has_shape([4, 3]).match(BOUND["lv0"])
    both = is_op("relax.add")(wildcard(), wildcard()) & wildcard().has_shape([3, 4])
    assert both.match(BOUND["lv1"])


def test_tuples_and_fields():
    relu = is_call_tir("relu")
    field = is_tuple_get_item(is_tuple([relu, wildcard()]), 1)
    assert field.match(BOUND["lv5"], VAR2VAL)
    assert not is_tuple_get_item(wildcard(), 0).match(BOUND["lv5"], VAR2VAL)


def test_fused_bias_activation_helper():
    pattern = make_fused_bias_activation_pattern("relax.multiply", with_bias=True)
    assert pattern.match(BOUND["lv1"], VAR2VAL)
    assert "is_op('relax.add')(is_op('relax.multiply')(wildcard(), wildcard())" in repr(pattern)


def test_bad_pattern_arguments_raise_pattern_error():
    with pytest.raises(PatternError, match="expected a pattern"):
        is_op("relax.add")(wildcard(), 3)
    assert isinstance(wildcard(), DFPattern)
