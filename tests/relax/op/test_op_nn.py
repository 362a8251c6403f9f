"""Struct info of the relax.op.nn operators: softmax, layer_norm, conv2d, pooling,
batch_flatten, linear; static and symbolic shapes, and errors naming the op and the shapes."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

from mlckit import relax
from mlckit.errors import StructInfoError
from mlckit.ir import Op

nn = relax.op.nn


# ------------------------------------------------------------------------------ softmax
@pytest.mark.parametrize("ctor", [nn.softmax, nn.log_softmax])
def test_softmax_family_keeps_shape(ctor):
    assert_tensor(infer(ctor(var("x", (n, 10)))), (n, 10))
    assert_tensor(infer(ctor(var("x", (2, 3)), axis=0)), (2, 3))
    assert ctor(var("x", (2, 3))).attrs.axis == -1


@pytest.mark.parametrize("ctor", [nn.softmax, nn.log_softmax])
def test_softmax_family_errors(ctor):
    name = ctor(var("x", (2,))).op.name
    raises(ctor(var("x", (n, 10)), axis=2), name, "axis 2 is out of range", "(n, 10)")
    raises(ctor(var("x", (3,), "int32")), name, "floating-point", "int32")


# ------------------------------------------------------------------------------ layer_norm
def test_layer_norm_shapes_and_attrs():
    x = var("x", (n, 4, 8))
    call = nn.layer_norm(x, var("g", (8,)), var("b", (8,)), axes=-1)
    assert list(call.attrs.keys()) == ["axes", "epsilon", "center", "scale"]
    assert call.attrs.axes == [-1] and call.attrs.epsilon == 1e-5
    assert_tensor(infer(call), (n, 4, 8))
    two = nn.layer_norm(x, var("g", (4, 8)), var("b", (4, 8)), axes=[1, 2], epsilon=1e-6)
    assert_tensor(infer(two), (n, 4, 8))
    sym = nn.layer_norm(var("y", (2, m)), var("g", (m,)), var("b", (m,)), axes=[1])
    assert_tensor(infer(sym), (2, m))


def test_layer_norm_errors():
    x = var("x", (n, 4, 8))
    raises(
        nn.layer_norm(x, var("g", (4,)), var("b", (8,)), axes=-1),
        "relax.nn.layer_norm",
        "g has shape (4,)",
        "(n, 4, 8)",
    )
    raises(
        nn.layer_norm(x, var("g", (4, 8)), var("b", (4, 8)), axes=-1),
        "relax.nn.layer_norm",
        "needs 1 dimension",
    )
    raises(nn.layer_norm(x, var("g", (8,)), var("b", (8,)), axes=3), "axis 3 is out of range")
    raises(
        nn.layer_norm(x, var("g", (8,), "float16"), var("b", (8,)), axes=-1),
        "dtypes differ",
        "float16",
    )


# ------------------------------------------------------------------------------ conv2d
def test_conv2d_output_shape():
    x, w = var("x", (2, 3, 32, 32)), var("w", (16, 3, 5, 5))
    call = nn.conv2d(x, w)
    assert call.attrs.strides == [1, 1] and call.attrs.padding == [0, 0, 0, 0]
    assert call.attrs.out_layout == "NCHW" and call.attrs.out_dtype == "void"
    assert_tensor(infer(call), (2, 16, 28, 28))
    assert_tensor(infer(nn.conv2d(x, w, strides=2, padding=2)), (2, 16, 16, 16))
    # padding (top, left, bottom, right) and dilation 2: a 5x5 kernel spans 9 positions.
    asym = nn.conv2d(x, w, padding=(1, 0, 2, 0), dilation=2)
    assert_tensor(infer(asym), (2, 16, 27, 24))
    grouped = nn.conv2d(var("x", (1, 8, 6, 6)), var("w", (4, 2, 3, 3)), groups=4)
    assert_tensor(infer(grouped), (1, 4, 4, 4))
    mixed = nn.conv2d(
        var("x", (1, 3, 4, 4), "float16"), var("w", (2, 3, 1, 1), "float16"), out_dtype="float32"
    )
    assert_tensor(infer(mixed), (1, 2, 4, 4), "float32")


def test_conv2d_symbolic_shapes():
    h = relax.Var("x", relax.TensorStructInfo((n, 3, m, m), "float32"))
    out = infer(nn.conv2d(h, var("w", (8, 3, 3, 3)), padding=1))
    assert_tensor(out, (n, 8, m, m))
    out = infer(nn.conv2d(h, var("w", (8, 3, 3, 3)), strides=2))
    assert out.shape_values[2].dtype == "int64"
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 4))
    assert_rank_only(infer(nn.conv2d(unknown, var("w", (8, 3, 3, 3)))), 4)


def test_conv2d_errors():
    x = var("x", (2, 3, 8, 8))
    raises(
        nn.conv2d(x, var("w", (4, 5, 3, 3))),
        "relax.nn.conv2d",
        "input channels differ",
        "x has shape (2, 3, 8, 8)",
        "w has shape (4, 5, 3, 3)",
    )
    raises(nn.conv2d(var("x", (2, 3, 8)), var("w", (4, 3, 3, 3))), "data must be 4-D")
    raises(nn.conv2d(x, var("w", (4, 3, 9, 9))), "does not fit", "x has shape (2, 3, 8, 8)")
    raises(nn.conv2d(x, var("w", (4, 3, 3, 3)), data_layout="NHWC"), 'data_layout="NHWC"', "NCHW")
    raises(nn.conv2d(x, var("w", (4, 3, 3, 3)), kernel_layout="HWIO"), "OIHW")
    with pytest.raises(StructInfoError, match="padding must be"):
        nn.conv2d(x, var("w", (4, 3, 3, 3)), padding=(1, 2, 3))
    with pytest.raises(StructInfoError, match="strides must be"):
        nn.conv2d(x, var("w", (4, 3, 3, 3)), strides=0)


def test_conv2d_group_divisibility():
    raises(
        nn.conv2d(var("x", (1, 6, 4, 4)), var("w", (4, 2, 1, 1)), groups=3),
        "not divisible by groups=3",
    )


# ------------------------------------------------------------------------------ pooling
@pytest.mark.parametrize("ctor", [nn.max_pool2d, nn.avg_pool2d])
def test_pool2d_shapes(ctor):
    x = var("x", (1, 4, 7, 7))
    call = ctor(x, pool_size=2, strides=2)
    assert list(call.attrs.keys()) == [
        "pool_size",
        "strides",
        "dilation",
        "padding",
        "ceil_mode",
        "count_include_pad",
        "layout",
        "out_layout",
    ]
    assert_tensor(infer(call), (1, 4, 3, 3))
    assert_tensor(infer(ctor(x, pool_size=2, strides=2, ceil_mode=True)), (1, 4, 4, 4))
    assert_tensor(infer(ctor(x, pool_size=3, padding=1)), (1, 4, 7, 7))
    sym = var("y", (n, 2, m, 8))
    assert_tensor(infer(ctor(sym, pool_size=(1, 2), strides=(1, 2))), (n, 2, m, 4))


@pytest.mark.parametrize("ctor", [nn.max_pool2d, nn.avg_pool2d])
def test_pool2d_errors(ctor):
    name = ctor(var("x", (1, 1, 1, 1))).op.name
    raises(ctor(var("x", (1, 4, 2, 2)), pool_size=3), name, "does not fit", "(1, 4, 2, 2)")
    raises(ctor(var("x", (4, 2, 2)), pool_size=1), name, "data must be 4-D", "(4, 2, 2)")
    raises(ctor(var("x", (1, 4, 2, 2)), layout="NHWC"), 'layout="NHWC"')


# ------------------------------------------------------------------------------ batch_flatten
def test_batch_flatten():
    assert_tensor(infer(nn.batch_flatten(var("x", (n, 3, 4, 5)))), (n, 60))
    assert_tensor(infer(nn.batch_flatten(var("x", (2, m, 3)))), (2, m * 3))
    assert_tensor(infer(nn.batch_flatten(var("x", (7,)))), (7, 1))
    raises(nn.batch_flatten(relax.const(1.0, "float32")), "relax.nn.batch_flatten", "batch")


# ------------------------------------------------------------------------------ linear
def test_linear_is_matmul_of_transposed_weight_plus_bias():
    x, w, b = var("x", (n, 784)), var("w", (128, 784)), var("b", (128,))
    call = nn.linear(x, w, b)
    assert call.op is Op.get("relax.add")
    assert call.args[0].op is Op.get("relax.matmul")
    assert call.args[0].args[1].op is Op.get("relax.permute_dims")
    assert relax.op.linear is nn.linear
    assert_tensor(infer(call), (n, 128))
    assert_tensor(infer(nn.linear(x, w)), (n, 128))
    raises(nn.linear(x, var("w", (128, 10))), "relax.matmul", "(n, 784)", "(10, 128)")


# ------------------------------------------------------------------------------ activations
@pytest.mark.parametrize("ctor", [nn.relu, nn.gelu, nn.silu])
def test_activations_keep_struct_info(ctor):
    assert_tensor(infer(ctor(var("x", (n, 3)))), (n, 3))
    assert_rank_only(infer(ctor(relax.Var("x", relax.TensorStructInfo(None, "float32", 2)))), 2)


@pytest.mark.parametrize("ctor", [nn.gelu, nn.silu])
def test_float_activations_reject_integers(ctor):
    raises(ctor(var("x", (2,), "int32")), ctor(var("x", (1,))).op.name, "floating-point")
