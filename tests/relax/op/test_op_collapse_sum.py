"""collapse_sum_to / collapse_sum_like: struct info (static, symbolic, rank-only), the errors
for a shape the data does not broadcast from, and the TVMScript round trip. Their numerics
after LegalizeOps are cases of tests/relax/transform/test_legalize_ops.py."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

import mlckit
from mlckit import relax
from mlckit.relax.utils import format_shape
from mlckit.script import from_source

op = relax.op


@pytest.mark.parametrize(
    ("data", "target"),
    [
        ((4, 3), (1, 3)),
        ((4, 3), (3,)),
        ((2, 4, 3), (4, 1)),
        ((2, 4, 3), ()),
        ((4, 3), (4, 3)),
        ((n, 3), (1, 3)),
        ((n, m), (m,)),
        ((n, m), (n, 1)),
        ((2, n, 3), (n, 3)),
    ],
)
def test_the_result_has_the_target_shape_and_the_data_dtype(data, target):
    x = var("x", data, "float16")
    assert_tensor(infer(op.collapse_sum_to(x, target)), target, "float16")
    # collapse_sum_like takes the shape of a tensor (its dtype does not matter).
    assert_tensor(infer(op.collapse_sum_like(x, var("t", target, "int32"))), target, "float16")


def test_unknown_dims_keep_the_rank_and_unknown_data_is_not_checked():
    x = var("x", (4, 3))
    shape = relax.Var("s", relax.ShapeStructInfo(ndim=2))
    assert_rank_only(infer(op.collapse_sum_to(x, shape)), 2)
    assert_rank_only(infer(op.collapse_sum_like(x, var("t", None, "float32"))), -1)
    unknown = relax.Var("u", relax.TensorStructInfo(None, "float32", 2))
    assert_tensor(infer(op.collapse_sum_to(unknown, (7, 1))), (7, 1))


@pytest.mark.parametrize(
    ("data", "target", "why"),
    [
        ((4, 3), (2, 3), "dimension 4 vs 2"),
        ((4, 3), (4,), "dimension 3 vs 4"),
        ((1, 3), (4, 3), "dimension 1 vs 4"),
        ((4, 3), (1, 4, 3), "3 dimensions, the data only 2"),
        ((n, 3), (n + 1, 3), "dimension n vs n + 1"),
        ((n, 3), (m, 3), "dimension n vs m are not provably equal; R.match_cast"),
        ((1, 3), (n, 3), "dimension 1 vs n are not provably equal"),
    ],
)
def test_a_shape_the_data_does_not_broadcast_from_names_both_shapes(data, target, why):
    x = var("x", data)
    text = raises(op.collapse_sum_to(x, target), "relax.collapse_sum_to", why)
    assert f"x has shape {format_shape(data)}, which does not broadcast from the shape " in text
    assert f"from the shape {format_shape(target)}, so it cannot be summed down" in text
    raises(op.collapse_sum_like(x, var("t", target)), "relax.collapse_sum_like", why)


def test_wrong_argument_kinds():
    x = var("x", (4, 3))
    raises(op.collapse_sum_to(x, x), "relax.collapse_sum_to", "expects a shape")
    raises(op.collapse_sum_to(relax.ShapeExpr((4, 3)), (3,)), "expects a tensor")
    raises(op.collapse_sum_like(x, relax.ShapeExpr((3,))), "relax.collapse_sum_like", "tensor")


def test_round_trip_through_tvmscript():
    x, b = var("x", (n, 4, 3)), var("b", (4, 1))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, b]):
        with bb.dataflow():
            s = bb.emit(op.collapse_sum_to(x, (4, 1)))
            gv = bb.emit_output(op.add(s, op.collapse_sum_like(x, b)))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert "R.collapse_sum_to(x, R.shape([4, 1]))" in text, text
    assert "R.collapse_sum_like(x, b)" in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)
