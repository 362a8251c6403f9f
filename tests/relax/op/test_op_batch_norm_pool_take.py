"""Struct info of relax.nn.batch_norm, relax.nn.adaptive_avg_pool2d and relax.take (the ops a
PyTorch importer needs for BatchNorm, AdaptiveAvgPool2d and Embedding), their errors, and
their TVMScript round trip."""

import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

import mlckit
from mlckit import relax
from mlckit.errors import StructInfoError
from mlckit.script import from_source

op = relax.op
nn = relax.op.nn


# ------------------------------------------------------------------------------ batch_norm
def _params(c, dtype="float32"):
    return [var(name, (c,), dtype) for name in ("g", "b", "mean", "var")]


def test_batch_norm_gives_a_tuple_of_data_mean_and_var():
    call = nn.batch_norm(var("x", (n, 3, 8, 8)), *_params(3))
    assert list(call.attrs.keys()) == [
        "axis",
        "epsilon",
        "center",
        "scale",
        "momentum",
        "training",
    ]
    assert call.attrs.axis == 1 and call.attrs.epsilon == 1e-5 and call.attrs.training is False
    sinfo = infer(call)
    assert isinstance(sinfo, relax.TupleStructInfo) and len(sinfo.fields) == 3
    assert_tensor(sinfo.fields[0], (n, 3, 8, 8))
    assert_tensor(sinfo.fields[1], (3,))
    assert_tensor(sinfo.fields[2], (3,))


def test_batch_norm_other_axes_and_symbolic_channels():
    two_d = infer(nn.batch_norm(var("x", (n, 16)), *_params(16)))
    assert_tensor(two_d.fields[0], (n, 16))
    last = infer(nn.batch_norm(var("x", (2, 5, m)), *_params(m), axis=-1))
    assert_tensor(last.fields[0], (2, 5, m))
    assert_tensor(last.fields[1], (m,))
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 4))
    assert_rank_only(infer(nn.batch_norm(unknown, *_params(3))).fields[0], 4)


def test_batch_norm_errors():
    x = var("x", (2, 3, 8, 8))
    raises(
        nn.batch_norm(x, var("g", (4,)), *_params(3)[1:]),
        "relax.nn.batch_norm",
        "g has shape (4,)",
        "x has shape (2, 3, 8, 8)",
        "C = data.shape[1] = 3",
    )
    raises(
        nn.batch_norm(x, *_params(3)[:3], var("var", (3, 1))),
        "moving_var must be 1-D",
        "var has shape (3, 1)",
    )
    raises(nn.batch_norm(x, *_params(3)[:2], *_params(3, "float16")[2:]), "dtypes differ")
    raises(nn.batch_norm(x, *_params(3), axis=4), "axis 4 is out of range")


# ------------------------------------------------------------------------------ adaptive pool
def test_adaptive_avg_pool2d_shapes():
    x = var("x", (n, 3, 7, m))
    call = nn.adaptive_avg_pool2d(x, 1)
    assert list(call.attrs.keys()) == ["output_size", "layout", "out_layout"]
    assert call.attrs.output_size == [1, 1] and call.attrs.out_layout == "NCHW"
    assert_tensor(infer(call), (n, 3, 1, 1))
    assert_tensor(infer(nn.adaptive_avg_pool2d(x, (3, 2))), (n, 3, 3, 2))
    assert nn.adaptive_avg_pool2d(x).attrs.output_size is None
    assert_tensor(infer(nn.adaptive_avg_pool2d(x)), (n, 3, 7, m))
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 4))
    assert_rank_only(infer(nn.adaptive_avg_pool2d(unknown, 2)), 4)


def test_adaptive_avg_pool2d_errors():
    name = "relax.nn.adaptive_avg_pool2d"
    raises(nn.adaptive_avg_pool2d(var("x", (3, 7, 7)), 1), name, "data must be 4-D", "(3, 7, 7)")
    raises(nn.adaptive_avg_pool2d(var("x", (1, 3, 7, 7)), 1, layout="NHWC"), 'layout="NHWC"')
    with pytest.raises(StructInfoError, match="output_size must be one integer or two"):
        nn.adaptive_avg_pool2d(var("x", (1, 3, 7, 7)), (1, 2, 3))
    with pytest.raises(StructInfoError, match="each at least 1"):
        nn.adaptive_avg_pool2d(var("x", (1, 3, 7, 7)), 0)


# ------------------------------------------------------------------------------ take
def test_take_shapes():
    w = var("w", (1000, 64))
    call = op.take(w, var("ids", (n, 7), "int64"), axis=0)
    assert list(call.attrs.keys()) == ["axis", "mode"]
    assert call.attrs.axis == 0 and call.attrs.mode == "fast"
    assert_tensor(infer(call), (n, 7, 64))
    assert_tensor(infer(op.take(w, var("ids", (5,), "int32"), axis=-1)), (1000, 5))
    assert_tensor(infer(op.take(w, relax.const(3, "int64"), axis=0)), (64,))
    assert_tensor(infer(op.take(var("v", (10,)), var("ids", (2, 3), "int32"))), (2, 3))
    assert_tensor(infer(op.take(var("v", (10,), "int32"), var("i", (4,), "int64"))), (4,), "int32")
    ranked = relax.Var("i", relax.TensorStructInfo(None, "int64", 2))
    assert_rank_only(infer(op.take(w, ranked, axis=1)), 3)


def test_take_errors():
    w = var("w", (10, 4))
    raises(
        op.take(w, var("ids", (3,), "float32"), axis=0),
        "relax.take",
        "integer dtype",
        "ids has shape (3,) and dtype float32",
    )
    raises(op.take(w, var("ids", (3,), "int64")), "axis=None needs a 1-D tensor", "(10, 4)")
    raises(op.take(w, var("ids", (3,), "int64"), axis=2), "axis 2 is out of range")
    with pytest.raises(StructInfoError, match="mode must be one of 'fast', 'clip', 'wrap'"):
        op.take(w, var("ids", (3,), "int64"), axis=0, mode="nan")


# ------------------------------------------------------------------------------ TVMScript
def test_the_new_ops_round_trip_through_tvmscript():
    x, w, ids = var("x", (n, 3, 5, 5)), var("w", (10, 3)), var("ids", (n, 2), "int32")
    g, b, mean, variance = _params(3)
    bb = relax.BlockBuilder()
    with bb.function("main", [x, g, b, mean, variance, w, ids]):
        with bb.dataflow():
            bn = bb.emit(nn.batch_norm(x, g, b, mean, variance, axis=1, epsilon=1e-3))
            y = bb.emit(relax.TupleGetItem(bn, 0))
            bb.emit(nn.adaptive_avg_pool2d(y, 3))
            bb.emit(nn.adaptive_avg_pool2d(y))
            bb.emit(op.take(w, ids, axis=0))
            gv = bb.emit_output(op.take(w, ids, axis=1, mode="clip"))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    for fragment in (
        "R.nn.batch_norm(x, g, b, mean, var, axis=1, epsilon=0.001, center=True, scale=True, "
        "momentum=0.1, training=False)",
        'R.nn.adaptive_avg_pool2d(lv1, output_size=[3, 3], layout="NCHW", out_layout="NCHW")',
        "R.nn.adaptive_avg_pool2d(lv1, output_size=None,",
        'R.take(w, ids, axis=0, mode="fast")',
        'R.take(w, ids, axis=1, mode="clip")',
    ):
        assert fragment in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)
