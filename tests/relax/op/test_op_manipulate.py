"""Struct info of flatten, concat and broadcast_to (and reshape/permute_dims edge cases)."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

from mlckit import relax, tir

op = relax.op


def test_flatten():
    assert_tensor(infer(op.flatten(var("x", (2, 3, 4)))), (24,))
    assert_tensor(infer(op.flatten(var("x", (n, 3)))), (n * 3,))
    assert_tensor(infer(op.flatten(relax.const(1.0, "float32"))), (1,))
    assert_rank_only(infer(op.flatten(relax.Var("x", relax.TensorStructInfo(None, "float32")))), 1)
    raises(op.flatten(relax.ShapeExpr((2,))), "relax.flatten", "expects a tensor")


def test_concat_shapes():
    x, y = var("x", (n, 3)), var("y", (n, 5))
    call = op.concat((x, y), axis=1)
    assert isinstance(call.args[0], relax.Tuple) and call.attrs.axis == 1
    assert_tensor(infer(call), (n, 8))
    assert_tensor(infer(op.concat([x, x, x], axis=-1)), (n, 9))
    assert_tensor(infer(op.concat((var("a", (n, 2)), var("b", (m, 2))))), (n + m, 2))
    assert_tensor(infer(op.concat((x, y), axis=None)), (n * 8,))
    # A tuple-valued variable works as well as a literal tuple.
    t = relax.Var("t", relax.TupleStructInfo([x.struct_info, y.struct_info]))
    assert_tensor(infer(op.concat(t, axis=1)), (n, 8))


def test_concat_errors():
    x = var("x", (2, 3))
    raises(
        op.concat((x, var("y", (4, 5))), axis=0),
        "relax.concat",
        "x has shape (2, 3)",
        "y has shape (4, 5)",
        "dimension 1: 3 vs 5",
    )
    raises(op.concat((x, var("y", (2, 3, 1)))), "same rank")
    raises(op.concat((x, var("y", (2, 3), "int32"))), "dtypes differ", "int32")
    raises(op.concat((x, x), axis=2), "axis 2 is out of range")
    raises(op.concat(x), "tuple of tensors")


def test_broadcast_to():
    x = var("x", (1, 3))
    assert_tensor(infer(op.broadcast_to(x, (4, 3))), (4, 3))
    assert_tensor(infer(op.broadcast_to(x, (n, 2, 3))), (n, 2, 3))
    assert_tensor(infer(op.broadcast_to(var("y", (n, 1)), (n, m))), (n, m))
    shape_var = relax.Var("s", relax.ShapeStructInfo(ndim=3))
    assert_rank_only(infer(op.broadcast_to(x, shape_var)), 3)
    raises(
        op.broadcast_to(var("y", (2, 3)), (4, 3)),
        "relax.broadcast_to",
        "y has shape (2, 3)",
        "(4, 3)",
        "2 vs 4",
    )
    raises(op.broadcast_to(var("y", (2, 3)), (3,)), "fewer dimensions")
    raises(op.broadcast_to(x, x), "expects a shape")


def test_reshape_with_a_symbolic_shape_and_errors():
    x = var("x", (n, 4))
    assert_tensor(infer(op.reshape(x, (2, n * 2))), (2, n * 2))
    assert_tensor(infer(op.reshape(x, (-1,))), (n * 4,))
    raises(op.reshape(var("y", (2, 3)), (4, 2)), "relax.reshape", "(2, 3)", "6 elements")
    raises(op.reshape(var("y", (2, 3)), x), "expects a shape")


@pytest.mark.parametrize("axes", [[0, 0], [0, 1, 2]])
def test_permute_dims_rejects_non_permutations(axes):
    raises(op.permute_dims(var("x", (2, 3)), axes), "relax.permute_dims", "(2, 3)")


def test_symbolic_dims_stay_int64():
    out = infer(op.concat((var("a", (n,)), var("b", (tir.IntImm("int64", 2),)))))
    assert out.shape_values[0].dtype == "int64"
