"""Struct-info inference of relax operators: shapes (symbolic too), dtypes, and errors that
name the op and both shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from relax_helpers import assert_tensor, normalized, tensor

from mlckit import relax, tir
from mlckit.errors import StructInfoError
from mlckit.ir import Op

n = tir.Var("n", "int64")
m = tir.Var("m", "int64")


def var(name, shape, dtype="float32"):
    return relax.Var(name, tensor(shape, dtype))


def infer(call):
    return normalized(call).struct_info


# ------------------------------------------------------------------------------ registry
@pytest.mark.parametrize(
    "name",
    [
        "relax.add",
        "relax.subtract",
        "relax.multiply",
        "relax.divide",
        "relax.negative",
        "relax.matmul",
        "relax.nn.relu",
        "relax.nn.dense",
        "relax.ewise_fma",
        "relax.permute_dims",
        "relax.exp",
        "relax.sigmoid",
        "relax.tanh",
        "relax.nn.softmax",
        "relax.reshape",
        "relax.sum",
        "relax.nn.gelu",
        "relax.nn.silu",
        "relax.nn.log_softmax",
        "relax.nn.layer_norm",
        "relax.nn.conv2d",
        "relax.nn.max_pool2d",
        "relax.nn.avg_pool2d",
        "relax.nn.batch_flatten",
        "relax.argmax",
        "relax.flatten",
        "relax.concat",
        "relax.broadcast_to",
        "relax.where",
        "relax.zeros",
        "relax.ones",
        "relax.full",
        "relax.call_tir",
        "relax.call_dps_packed",
        "relax.call_pure_packed",
    ],
)
def test_ops_are_registered_with_inference(name):
    op = Op.get(name)
    assert op.name == name
    assert callable(op.get_attr("FInferStructInfo"))
    assert op.get_attr("FPurity") is True


def test_constructors_return_unnormalized_calls_with_ordered_attrs():
    x = var("x", (3, 4))
    call = relax.op.permute_dims(x, [1, 0])
    assert isinstance(call, relax.Call) and call.struct_info_ is None
    assert call.op is Op.get("relax.permute_dims")
    assert list(call.attrs.keys()) == ["axes"] and call.attrs.axes == [1, 0]
    assert Op.get("relax.permute_dims").get_attr("attr_names") == ("axes",)
    assert relax.op.matmul(x, x).attrs["out_dtype"] == "void"
    s = relax.op.sum(x, axis=1, keepdims=True)
    assert list(s.attrs.keys()) == ["axis", "keepdims"] and s.attrs.axis == [1]
    assert relax.op.nn.softmax(x).attrs.axis == -1


def test_aliases_match_tvm_spellings():
    x, w = var("x", (1, 784)), var("w", (128, 784))
    assert relax.op.dense(x, w).op is Op.get("relax.nn.dense")
    assert relax.op.nn.dense(x, w).op is Op.get("relax.nn.dense")
    assert relax.op.relu(x).op is relax.op.nn.relu(x).op is Op.get("relax.nn.relu")
    # Python operators on relax expressions build the same calls.
    assert (x + x).op is Op.get("relax.add") and (x @ w).op is Op.get("relax.matmul")


# ------------------------------------------------------------------------------ elementwise
def test_broadcasting_with_symbolic_dims():
    x = var("x", (n, 256))
    assert_tensor(infer(relax.op.add(x, var("b", (256,)))), (n, 256))
    assert_tensor(infer(relax.op.multiply(var("a", (1, 256)), x)), (n, 256))
    # n against 256: not provably different, accepted; the result can only be 256.
    assert_tensor(infer(relax.op.subtract(var("a", (n,)), var("b", (256,)))), (256,))
    assert_tensor(infer(relax.op.divide(var("a", (n, 1)), var("b", (m,)))), (n, m))
    assert_tensor(infer(relax.op.add(var("a", (n, m)), var("b", (n, m)))), (n, m))


def test_comparison_gives_bool_and_scalars_broadcast():
    x = var("x", (2, 3))
    assert_tensor(infer(relax.op.less(x, x)), (2, 3), "bool")
    c = relax.const(2.0, "float32")
    assert_tensor(infer(relax.op.multiply(x, c)), (2, 3))
    assert_tensor(infer(x * relax.PrimValue(tir.FloatImm("float32", 2.0))), (2, 3))


def test_unary_ops_keep_struct_info():
    x = var("x", (n, 10))
    for ctor in (
        relax.op.exp,
        relax.op.sigmoid,
        relax.op.tanh,
        relax.op.negative,
        relax.op.nn.relu,
        relax.op.nn.gelu,
        relax.op.erf,
    ):
        assert_tensor(infer(ctor(x)), (n, 10))
    assert_tensor(infer(relax.op.nn.softmax(x, axis=1)), (n, 10))


def test_unknown_shapes_keep_rank():
    x = relax.Var("x", relax.TensorStructInfo(None, "float32", ndim=2))
    out = infer(relax.op.add(x, var("b", (4,))))
    assert out.shape is None and out.ndim == 2 and out.dtype == "float32"


# ------------------------------------------------------------------------------ matmul/dense
def test_matmul_shapes():
    assert_tensor(infer(relax.op.matmul(var("x", (n, 784)), var("w", (784, 256)))), (n, 256))
    batched = infer(relax.op.matmul(var("a", (m, 1, 3, 4)), var("b", (5, 4, 6))))
    assert_tensor(batched, (m, 5, 3, 6))
    assert_tensor(infer(relax.op.matmul(var("v", (4,)), var("b", (4, 6)))), (6,))
    assert_tensor(infer(relax.op.matmul(var("a", (3, 4)), var("v", (4,)))), (3,))
    assert_tensor(infer(relax.op.matmul(var("u", (4,)), var("v", (4,)))), ())
    mixed = relax.op.matmul(var("a", (3, 4), "float16"), var("b", (4, 5), "float16"), "float32")
    assert_tensor(infer(mixed), (3, 5), "float32")


def test_dense_is_x_times_w_transposed():
    assert_tensor(infer(relax.op.dense(var("x", (1, 784)), var("w", (128, 784)))), (1, 128))
    assert_tensor(infer(relax.op.nn.dense(var("x", (n, 8, 16)), var("w", (4, 16)))), (n, 8, 4))


def test_ewise_fma_permute_reshape_sum():
    a = var("a", (n, 4))
    assert_tensor(infer(relax.op.ewise_fma(a, a, a)), (n, 4))
    x = var("x", (2, 3, n))
    assert_tensor(infer(relax.op.permute_dims(x)), (n, 3, 2))
    assert_tensor(infer(relax.op.permute_dims(x, [0, -1, 1])), (2, n, 3))
    assert_tensor(infer(relax.op.reshape(var("y", (2, 3, 4)), (6, -1))), (6, 4))
    assert_tensor(infer(relax.op.reshape(var("y", (2, 3, 4)), (4, 6))), (4, 6))
    assert_tensor(infer(relax.op.sum(x, axis=1)), (2, n))
    assert_tensor(infer(relax.op.sum(x, axis=[0, 2], keepdims=True)), (1, 3, 1))
    assert_tensor(infer(relax.op.sum(x)), ())
    assert_tensor(infer(relax.op.astype(x, "float16")), (2, 3, n), "float16")


# ------------------------------------------------------------------------------ call_tir & co.
def test_call_tir_struct_info():
    gv = relax.GlobalVar("linear")
    x, w = var("x", (n, 784)), var("w", (784, 256))
    single = relax.op.call_tir(gv, (x, w), out_sinfo=tensor((n, 256)))
    assert single.op is Op.get("relax.call_tir")
    assert single.args[0] is gv and isinstance(single.args[1], relax.Tuple)
    assert len(single.sinfo_args) == 1
    assert_tensor(infer(single), (n, 256))

    pair = relax.op.call_tir(gv, x, [tensor((n, 2)), tensor((3,), "int32")])
    sinfo = infer(pair)
    assert isinstance(sinfo, relax.TupleStructInfo) and len(sinfo.fields) == 2
    assert_tensor(sinfo.fields[1], (3,), "int32")

    # TVM's older spelling: a shape and dtype=.
    old = relax.call_tir(gv, (x,), (1, 128), dtype="float32")
    assert_tensor(infer(old), (1, 128))

    with_vars = relax.op.call_tir(gv, (x,), tensor((n,)), tir_vars=[n])
    assert isinstance(with_vars.args[2], relax.ShapeExpr)
    assert_tensor(infer(with_vars), (n,))


def test_call_dps_packed_and_call_pure_packed():
    x = var("x", (2, 3))
    dps = relax.op.call_dps_packed("env.linear", (x,), tensor((2, 5)))
    assert isinstance(dps.args[0], relax.ExternFunc) and dps.args[0].global_symbol == "env.linear"
    assert_tensor(infer(dps), (2, 5))
    # A string callee given to call_tir means call_dps_packed (TVM's older form).
    assert relax.call_tir("env.linear", (x,), tensor((2, 5))).op is Op.get("relax.call_dps_packed")
    pure = relax.op.call_pure_packed("env.f", x, sinfo_args=tensor((2, 3)))
    assert pure.args[0].global_symbol == "env.f" and pure.args[1] is x
    assert_tensor(infer(pure), (2, 3))


# ------------------------------------------------------------------------------ bad inputs
def _raises(call, *fragments):
    with pytest.raises(StructInfoError) as info:
        infer(call)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    return text


def test_matmul_reduction_mismatch_names_op_and_shapes():
    text = _raises(
        relax.op.matmul(var("x", (n, 784)), var("w", (256, 10))),
        "relax.matmul",
        "(n, 784)",
        "(256, 10)",
    )
    assert text == (
        "relax.matmul: the reduction dimensions differ: x has shape (n, 784) and "
        "w has shape (256, 10) (784 vs 256)"
    )


def test_matmul_batch_dims_must_broadcast():
    _raises(
        relax.op.matmul(var("a", (2, 3, 4)), var("b", (5, 4, 6))),
        "relax.matmul",
        "(2, 3, 4)",
        "(5, 4, 6)",
    )


def test_add_shapes_must_broadcast():
    _raises(
        relax.op.add(var("x", (3, 4)), var("y", (5,))), "relax.add", "(3, 4)", "(5,)", "broadcast"
    )


def test_add_dtypes_must_match():
    _raises(
        relax.op.add(var("x", (3, 4)), var("y", (3, 4), "int32")),
        "relax.add",
        "float32",
        "int32",
        "(3, 4)",
    )


@pytest.mark.parametrize(
    "axes, fragment",
    [
        ([0, 0], "not a permutation"),
        ([0], "has 1 entries"),
        ([0, 2], "out of range"),
    ],
)
def test_permute_dims_bad_axes(axes, fragment):
    _raises(relax.op.permute_dims(var("x", (3, 4)), axes), "relax.permute_dims", "(3, 4)", fragment)


def test_ewise_fma_shapes_must_match():
    _raises(
        relax.op.ewise_fma(var("a", (3, 4)), var("b", (3, 4)), var("c", (3, 5))),
        "relax.ewise_fma",
        "(3, 4)",
        "(3, 5)",
    )


def test_dense_reduction_mismatch():
    _raises(
        relax.op.dense(var("x", (1, 784)), var("w", (128, 100))),
        "relax.nn.dense",
        "(1, 784)",
        "(128, 100)",
    )


def test_float_only_ops_reject_integers():
    _raises(relax.op.exp(var("i", (3,), "int32")), "relax.exp", "(3,)", "int32")
    _raises(relax.op.erf(var("i", (3,), "int32")), "relax.erf", "floating-point", "int32")


def test_reshape_must_keep_element_count():
    _raises(relax.op.reshape(var("x", (2, 3)), (4, 2)), "relax.reshape", "(2, 3)", "(4, 2)")


def test_reduction_and_softmax_axes_in_range():
    _raises(relax.op.sum(var("x", (2, 3)), axis=2), "relax.sum", "(2, 3)", "out of range")
    _raises(relax.op.nn.softmax(var("x", (2, 3)), axis=-3), "relax.nn.softmax", "(2, 3)")


def test_call_tir_rejects_bad_out_sinfo():
    gv, x = relax.GlobalVar("f"), var("x", (2,))
    with pytest.raises(StructInfoError, match=r"relax\.call_tir: out_sinfo must be"):
        relax.op.call_tir(gv, (x,), relax.ObjectStructInfo())
    with pytest.raises(StructInfoError, match=r"relax\.call_tir.*without dtype"):
        relax.op.call_tir(gv, (x,), (2, 3))
    with pytest.raises(StructInfoError, match=r"relax\.call_tir: out_sinfo must be"):
        relax.op.call_tir(gv, (x,), "float32")
    # A hand-built call is checked when it is normalized.
    bad = relax.Call(
        Op.get("relax.call_tir"), [gv, relax.Tuple([x])], None, [relax.ShapeStructInfo(ndim=1)]
    )
    _raises(bad, "relax.call_tir", "out_sinfo", "R.Shape(ndim=1)")


def test_tuple_index_out_of_range():
    t = relax.Var("t", relax.TupleStructInfo([tensor((2,)), tensor((3,))]))
    with pytest.raises(StructInfoError, match=r"index 2 is out of range: t is a tuple of 2"):
        normalized(relax.TupleGetItem(t, 2))


def test_wrong_number_of_arguments():
    x = var("x", (2,))
    with pytest.raises(StructInfoError, match=r"relax\.add takes 2 arguments"):
        normalized(relax.Call(Op.get("relax.add"), [x]))


def test_non_tensor_argument():
    s = relax.Var("s", relax.ShapeStructInfo([2, 3]))
    _raises(relax.op.nn.relu(s), "relax.nn.relu", "R.Shape([2, 3])")


def test_constant_arguments_are_named_by_parameter():
    c = relax.const(np.zeros((5,), "float32"))
    text = _raises(relax.op.add(var("x", (3, 4)), c), "relax.add")
    assert "x2 (a Constant) has shape (5,)" in text


# ------------------------------------------------------------------------------ against numpy
_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=150, deadline=None)
@given(_shapes, _shapes)
def test_broadcasting_agrees_with_numpy(a, b):
    call = relax.op.add(var("a", a), var("b", b))
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(StructInfoError, match=r"relax\.add: the shapes cannot be broadcast"):
            infer(call)
        return
    assert_tensor(infer(call), expected)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple),
    st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple),
)
def test_matmul_agrees_with_numpy(a, b):
    call = relax.op.matmul(var("a", a), var("b", b))
    try:
        expected = np.matmul(np.zeros(a, "float32"), np.zeros(b, "float32")).shape
    except ValueError:
        with pytest.raises(StructInfoError, match=r"relax\.matmul"):
            infer(call)
        return
    assert_tensor(infer(call), expected)
