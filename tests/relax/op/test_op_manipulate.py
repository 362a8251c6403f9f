"""Struct info of flatten, concat, split, broadcast_to, expand_dims and squeeze (and reshape/permute_dims
edge cases)."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

import mlckit
from mlckit import relax, tir
from mlckit.errors import StructInfoError
from mlckit.script import from_source

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


@pytest.mark.parametrize(
    ("axis", "shape"),
    [
        (0, (1, n, 3)),
        (-1, (n, 3, 1)),
        ([0, 2], (1, n, 1, 3)),
        ([-1, 1], (n, 1, 3, 1)),
        ([], (n, 3)),
    ],
)
def test_expand_dims_inserts_axes_of_size_one_at_result_positions(axis, shape):
    assert_tensor(infer(op.expand_dims(var("x", (n, 3)), axis)), shape)


def test_expand_dims_unknown_dims_and_errors():
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 2))
    assert_rank_only(infer(op.expand_dims(unknown, [0, 1])), 4)
    assert_rank_only(infer(op.expand_dims(var("y", None), 0)), -1)
    raises(op.expand_dims(var("x", (2, 3)), 3), "relax.expand_dims", "out of range", "(2, 3)")
    raises(op.expand_dims(var("x", (2, 3)), [0, -4]), "names an axis twice", "x has shape (2, 3)")


def test_squeeze_removes_axes_of_size_one():
    x = var("x", (1, n, 1, 3))
    assert_tensor(infer(op.squeeze(x, [0, 2])), (n, 3))
    assert_tensor(infer(op.squeeze(x, -2)), (1, n, 3))
    assert_tensor(infer(op.squeeze(var("y", (1, 4, 1)))), (4,))
    # With axis=None a symbolic dim might be 1: only the rank-unknown result is sure.
    assert_rank_only(infer(op.squeeze(x)), -1)
    # A symbolic dim named by axis is taken to be 1.
    assert_tensor(infer(op.squeeze(x, 1)), (1, 1, 3))
    unknown = relax.Var("u", relax.TensorStructInfo(None, "float32", 3))
    assert_rank_only(infer(op.squeeze(unknown, [0])), 2)


def test_squeeze_errors():
    x = var("x", (1, 4, 1))
    raises(op.squeeze(x, 1), "relax.squeeze", "x has shape (1, 4, 1), whose axis 1 has size 4")
    raises(op.squeeze(x, 3), "out of range")
    raises(op.squeeze(x, [0, -3]), "names an axis twice")


def test_expand_dims_and_squeeze_round_trip_through_tvmscript():
    x = var("x", (n, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            e = bb.emit(op.expand_dims(x, [0, -1]))
            gv = bb.emit_output(op.squeeze(op.squeeze(e, [0]), None))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert "R.expand_dims(x, axis=[0, -1])" in text and "R.squeeze(lv, axis=[0])" in text, text
    assert "axis=None" in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)


@pytest.mark.parametrize(
    ("parts", "axis", "sizes"),
    [
        (3, 1, [4, 4, 2]),
        (2, -1, [5, 5]),
        ([2, 5], 1, [2, 3, 5]),
        ([4, 2, 12], 1, [4, 0, 8, 0]),  # numpy's slices: a cut before an earlier one is empty
        (1, 1, [10]),
        ([], 1, [10]),
    ],
)
def test_split_gives_a_tuple_of_parts(parts, axis, sizes):
    out = infer(op.split(var("x", (n, 10)), parts, axis))
    assert isinstance(out, relax.TupleStructInfo) and len(out.fields) == len(sizes)
    for field, size in zip(out.fields, sizes):
        assert_tensor(field, (n, size))


def test_split_along_a_symbolic_axis_and_unknown_shapes():
    first, last = infer(op.split(var("x", (n, 3)), 2)).fields
    assert_tensor(first, ((n + 1) // 2, 3))
    assert_tensor(last, (n - (n + 1) // 2, 3))
    head, tail = infer(op.split(var("x", (n, 3)), [2])).fields
    assert_tensor(head, (2, 3)) and assert_tensor(tail, (n - 2, 3))
    unknown = relax.Var("u", relax.TensorStructInfo(None, "float32", 2))
    for field in infer(op.split(unknown, 3, axis=1)).fields:
        assert_rank_only(field, 2)


def test_split_errors():
    x = var("x", (4, 6))
    raises(op.split(x, 2, axis=2), "relax.split", "axis 2 is out of range", "(4, 6)")
    with pytest.raises(StructInfoError, match="number of sections must be positive, got 0"):
        op.split(x, 0)
    with pytest.raises(StructInfoError, match="indices_or_sections must be a list of integers"):
        op.split(x, [1.5])


def test_split_round_trips_through_tvmscript():
    x = var("x", (n, 10))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, [2, 5], axis=-1))
            gv = bb.emit_output(op.concat(parts, axis=1))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert "R.split(x, indices_or_sections=[2, 5], axis=-1)" in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)
