"""relax.normalize: struct info for every kind of expression, filled bottom-up."""

import numpy as np
import pytest
from relax_helpers import assert_tensor, tensor

from mlckit import relax, tir
from mlckit.errors import MLCError, StructInfoError

n = tir.Var("n", "int64")


def test_call_gets_struct_info_in_place_and_is_returned_unchanged():
    x = relax.Var("x", tensor((n, 4)))
    call = relax.op.exp(x)
    out = relax.normalize(call)
    assert out is call
    assert_tensor(call.struct_info, (n, 4))
    assert relax.normalize(call) is call  # already normalized: nothing to do


def test_nested_calls_without_a_builder_are_inferred_not_bound():
    x = relax.Var("x", tensor((2, 3)))
    call = relax.op.nn.relu(relax.op.add(x, x))
    relax.normalize(call)
    assert_tensor(call.args[0].struct_info, (2, 3))
    assert_tensor(call.struct_info, (2, 3))


def test_leaves_tuples_and_tuple_items():
    x = relax.Var("x", tensor((2, 3)))
    assert_tensor(relax.normalize(relax.const(np.ones((4,), "float32"))).struct_info, (4,))
    assert isinstance(relax.normalize(relax.ShapeExpr([n, 4])).struct_info, relax.ShapeStructInfo)
    assert isinstance(relax.normalize(relax.PrimValue(3)).struct_info, relax.PrimStructInfo)
    t = relax.Tuple([x, relax.op.exp(x)])
    assert t.struct_info_ is None
    relax.normalize(t)
    assert isinstance(t.struct_info, relax.TupleStructInfo)
    item = relax.normalize(relax.TupleGetItem(t, 1))
    assert_tensor(item.struct_info, (2, 3))
    with pytest.raises(StructInfoError, match="not a tuple"):
        relax.normalize(relax.TupleGetItem(x, 0))


def test_if_joins_its_branches():
    cond = relax.Var("c", relax.TensorStructInfo((), "bool"))
    a = relax.Var("a", tensor((n, 4)))
    b = relax.Var("b", tensor((n, 5)))
    same = relax.normalize(relax.If(cond, relax.SeqExpr([], a), relax.SeqExpr([], a)))
    assert_tensor(same.struct_info, (n, 4))
    joined = relax.normalize(relax.If(cond, relax.SeqExpr([], a), relax.SeqExpr([], b)))
    assert joined.struct_info.shape is None and joined.struct_info.ndim == 2
    with pytest.raises(StructInfoError, match="condition must be a scalar"):
        relax.normalize(relax.If(a, relax.SeqExpr([], a), relax.SeqExpr([], a)))


def test_seq_expr_binds_and_function():
    x = relax.Var("x", tensor((2, 3)))
    lv = relax.Var("lv")  # no struct info yet: taken from the bound value
    value = relax.op.exp(x)
    seq = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(lv, value)])], lv)
    assert seq.struct_info_ is None
    relax.normalize(seq)
    assert_tensor(lv.struct_info, (2, 3))
    assert_tensor(seq.struct_info, (2, 3))
    func = relax.Function([x], seq, tensor((2, 3)))
    assert relax.normalize(func) is func
    assert isinstance(func.struct_info, relax.FuncStructInfo)


def test_opaque_callees_use_sinfo_args():
    x = relax.Var("x", tensor((2,)))
    call = relax.op.call_packed("env.f", x, sinfo_args=tensor((7,)))
    assert_tensor(relax.normalize(call).struct_info, (7,))
    untyped = relax.Call(relax.ExternFunc("env.g"), [x])
    assert isinstance(relax.normalize(untyped).struct_info, relax.ObjectStructInfo)
    with pytest.raises(StructInfoError, match="x is not a function"):
        relax.normalize(relax.Call(x, [x]))


def test_missing_struct_info_is_a_clear_error():
    with pytest.raises(MLCError, match="variable 'y' has no struct info"):
        relax.normalize(relax.op.exp(relax.Var("y")))


def test_block_builder_normalize_binds_nested_calls_inside_a_block():
    x = relax.Var("x", tensor((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        out = bb.normalize(relax.op.nn.relu(relax.op.exp(x)))
        # the inner call became a binding; the outer call now reads its variable
        assert isinstance(out.args[0], relax.Var)
        assert bb.lookup_binding(out.args[0]).op.name == "relax.exp"
        bb.emit_func_output(bb.emit(out))
