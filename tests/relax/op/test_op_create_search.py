"""Struct info of zeros/ones/full (and their _like forms), argmax and where."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

import mlckit
from mlckit import relax
from mlckit.errors import MLCError
from mlckit.script import from_source

op = relax.op


# ------------------------------------------------------------------------------ creation
@pytest.mark.parametrize("ctor", [op.zeros, op.ones])
def test_zeros_ones(ctor):
    call = ctor((n, 4), "float32")
    assert isinstance(call.args[0], relax.ShapeExpr) and call.attrs.dtype == "float32"
    assert_tensor(infer(call), (n, 4))
    assert_tensor(infer(ctor(relax.ShapeExpr((2,)), "int32")), (2,), "int32")
    assert_rank_only(
        infer(ctor(relax.Var("s", relax.ShapeStructInfo(ndim=2)), "float16")), 2, "float16"
    )
    raises(ctor(var("x", (2,)), "float32"), ctor((1,), "float32").op.name, "expects a shape")
    with pytest.raises(MLCError):
        ctor((2,), "floaty")


def test_full():
    call = op.full((n, 2), 1.5)
    assert call.attrs.dtype == "void"
    assert_tensor(infer(call), (n, 2))
    assert_tensor(infer(op.full((3,), 7, "int32")), (3,), "int32")
    # An explicit dtype converts the fill value.
    assert_tensor(infer(op.full((3,), relax.const(2, "int32"), "float32")), (3,), "float32")
    raises(op.full((3,), var("v", (2,))), "relax.full", "scalar", "v has shape (2,)")


@pytest.mark.parametrize("ctor", [op.zeros_like, op.ones_like])
def test_zeros_ones_like_take_the_shape_and_by_default_the_dtype(ctor):
    x = var("x", (n, 4), "float16")
    call = ctor(x)
    assert call.attrs.dtype == "void"
    assert_tensor(infer(call), (n, 4), "float16")
    assert_tensor(infer(ctor(x, "int32")), (n, 4), "int32")
    assert_rank_only(
        infer(ctor(relax.Var("u", relax.TensorStructInfo(None, "int8", 3)))), 3, "int8"
    )
    raises(ctor(relax.ShapeExpr((2,))), call.op.name, "expects a tensor")
    with pytest.raises(MLCError):
        ctor(x, "floaty")


def test_full_like():
    x = var("x", (n, 2), "float16")
    assert_tensor(infer(op.full_like(x, 1.5)), (n, 2), "float16")
    assert_tensor(infer(op.full_like(x, relax.const(2, "int32"), "int64")), (n, 2), "int64")
    raises(op.full_like(x, var("v", (2,))), "relax.full_like", "scalar", "v has shape (2,)")


def test_like_ops_round_trip_through_tvmscript():
    x = var("x", (n, 2))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            z = bb.emit(op.zeros_like(x))
            o = bb.emit(op.ones_like(x, "int32"))
            gv = bb.emit_output(relax.Tuple([z, o, op.full_like(x, 3.0)]))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert 'R.zeros_like(x, dtype="void")' in text and 'R.ones_like(x, dtype="int32")' in text
    mlckit.ir.assert_structural_equal(from_source(text), mod)


# ------------------------------------------------------------------------------ argmax
@pytest.mark.parametrize("ctor", [op.argmax])
def test_arg_reductions(ctor):
    x = var("x", (n, 10, m))
    call = ctor(x, axis=1)
    assert list(call.attrs.keys()) == ["axis", "keepdims"] and call.attrs.axis == 1
    assert_tensor(infer(call), (n, m), "int64")
    assert_tensor(infer(ctor(x, axis=-1, keepdims=True)), (n, 10, 1), "int64")
    assert_tensor(infer(ctor(x)), (), "int64")
    assert_tensor(infer(ctor(x, keepdims=True)), (1, 1, 1), "int64")
    unknown = relax.Var("u", relax.TensorStructInfo(None, "float32", 3))
    assert_rank_only(infer(ctor(unknown, axis=0)), 2, "int64")
    raises(ctor(x, axis=3), ctor(x).op.name, "axis 3 is out of range", "(n, 10, m)")


# ------------------------------------------------------------------------------ where
def test_where_broadcasts_all_three():
    c = var("c", (n, 1), "bool")
    assert_tensor(infer(op.where(c, var("a", (1, 4)), var("b", (4,)))), (n, 4))
    assert_tensor(
        infer(op.where(var("c", (2, 3), "bool"), var("a", (2, 3)), relax.const(0.0, "float32"))),
        (2, 3),
    )
    assert_tensor(
        infer(op.where(c, var("a", (n, m), "int32"), var("b", (m,), "int32"))), (n, m), "int32"
    )


def test_where_errors():
    c = var("c", (2, 3), "bool")
    raises(
        op.where(c, var("a", (4, 3)), var("b", (3,))),
        "relax.where",
        "c has shape (2, 3)",
        "a has shape (4, 3)",
    )
    raises(op.where(var("c", (2, 3)), var("a", (2, 3)), var("b", (2, 3))), "bool", "float32")
    raises(op.where(c, var("a", (2, 3)), var("b", (2, 3), "int32")), "dtypes differ")
