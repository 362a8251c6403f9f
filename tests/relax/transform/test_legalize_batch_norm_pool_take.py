"""LegalizeOps of relax.nn.batch_norm, relax.nn.adaptive_avg_pool2d and relax.take, built for
"llvm" (numba) and run in the VM against numpy; and the pass pipelines on a model using them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.errors import BuildError, StructInfoError
from mlckit.relax.analysis.op_pattern import OpPatternKind as K
from mlckit.relax.transform import AnnotateTIROpPattern
from mlckit.relax.transform.legalize_ops import LegalizeOps

op = relax.op
rng = np.random.default_rng(0)


def _module(build: Callable[..., relax.Expr], *inputs: Any) -> mlckit.IRModule:
    """``main(x0, x1, ...) = build(x0, x1, ...)``; an input is an array or a struct info."""
    params = [
        relax.Var(
            f"x{i}",
            a if isinstance(a, relax.StructInfo) else relax.TensorStructInfo(a.shape, a.dtype.name),
        )
        for i, a in enumerate(inputs)
    ]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(build(*params))
        bb.emit_func_output(gv)
    return bb.get()


def _run_llvm(mod: mlckit.IRModule, *arrays: np.ndarray) -> Any:
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    return vm["main"](*arrays)


def _high_level_ops(mod: mlckit.IRModule) -> list[str]:
    main = mod["main"]
    return [
        b.value.op.name
        for block in main.body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Call)
        and isinstance(b.value.op, mlckit.ir.Op)
        and b.value.op.name != "relax.call_tir"
    ]


# ------------------------------------------------------------------------------ batch_norm
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3)], ids=["NCHW", "NC"])
def test_batch_norm_inference_matches_numpy(shape: Sequence[int]):
    x = rng.standard_normal(shape).astype("float32")
    gamma, beta, mean = (rng.standard_normal(3).astype("float32") for _ in range(3))
    var = rng.uniform(0.5, 2, 3).astype("float32")
    mod = LegalizeOps()(_module(lambda *a: op.nn.batch_norm(*a, axis=1), x, gamma, beta, mean, var))
    assert _high_level_ops(mod) == []
    out, new_mean, new_var = _run_llvm(mod, x, gamma, beta, mean, var)
    c = (1, 3) + (1,) * (len(shape) - 2)  # a channel vector broadcast along axis 1
    expected = (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-5) * gamma.reshape(c)
    np.testing.assert_allclose(out.numpy(), expected + beta.reshape(c), rtol=1e-5, atol=1e-6)
    # Inference passes the moving statistics through unchanged.
    np.testing.assert_array_equal(new_mean.numpy(), mean)
    np.testing.assert_array_equal(new_var.numpy(), var)


def test_batch_norm_legalizes_to_one_kernel_and_a_tuple():
    params = [relax.TensorStructInfo((3,), "float32")] * 4
    mod = _module(
        lambda *a: op.nn.batch_norm(*a), relax.TensorStructInfo((2, 3, 4, 4), "float32"), *params
    )
    after = LegalizeOps()(mod)
    text = after.script()
    assert "R.call_tir(cls.batch_norm, (x0, x1, x2, x3, x4)" in text
    assert "= (lv, x3, x4)" in text, text
    mlckit.ir.assert_structural_equal(mlckit.script.from_source(text), after)


def test_batch_norm_in_training_mode_is_not_legalized():
    params = [relax.TensorStructInfo((3,), "float32")] * 4
    mod = _module(
        lambda *a: op.nn.batch_norm(*a, training=True),
        relax.TensorStructInfo((2, 3), "float32"),
        *params,
    )
    with pytest.raises(BuildError, match="training=True .* only inference"):
        LegalizeOps()(mod)


# ------------------------------------------------------------------------------ adaptive pool
@pytest.mark.parametrize(
    "shape, output_size, windows",
    [
        ((2, 3, 7, 6), 1, [[(0, 7)], [(0, 6)]]),
        # 5 -> 3: the windows [0, 2), [1, 4), [3, 5) overlap and differ in length.
        ((1, 2, 5, 5), 3, [[(0, 2), (1, 4), (3, 5)]] * 2),
        ((1, 2, 4, 6), (2, 3), [[(0, 2), (2, 4)], [(0, 2), (2, 4), (4, 6)]]),
    ],
)
def test_adaptive_avg_pool2d_matches_numpy(shape, output_size, windows):
    x = rng.standard_normal(shape).astype("float32")
    mod = LegalizeOps()(_module(lambda v: op.nn.adaptive_avg_pool2d(v, output_size), x))
    assert _high_level_ops(mod) == []
    rows, cols = windows
    expected = np.array(
        [[x[:, :, r0:r1, c0:c1].mean(axis=(2, 3)) for c0, c1 in cols] for r0, r1 in rows]
    ).transpose(2, 3, 0, 1)
    np.testing.assert_allclose(_run_llvm(mod, x).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_adaptive_avg_pool2d_needs_a_static_height_and_width():
    sinfo = relax.TensorStructInfo((1, 3, tir.Var("h", "int64"), 8), "float32")
    mod = _module(lambda v: op.nn.adaptive_avg_pool2d(v, 1), sinfo)
    with pytest.raises(StructInfoError, match="static height and width"):
        LegalizeOps()(mod)


# ------------------------------------------------------------------------------ take
@pytest.mark.parametrize(
    "index_shape, index_dtype, axis",
    [((5,), "int64", 0), ((2, 3), "int32", 0), ((4,), "int32", 1), ((2, 2), "int64", -1)],
)
def test_take_matches_numpy(index_shape, index_dtype, axis):
    weight = rng.standard_normal((10, 4)).astype("float32")
    ids = rng.integers(0, weight.shape[axis], index_shape).astype(index_dtype)
    mod = LegalizeOps()(_module(lambda w, i: op.take(w, i, axis=axis), weight, ids))
    assert _high_level_ops(mod) == []
    np.testing.assert_array_equal(_run_llvm(mod, weight, ids).numpy(), np.take(weight, ids, axis))


def test_take_of_a_vector_without_axis():
    x, ids = np.arange(6, dtype="float32") * 1.5, np.array([[5, 0], [2, 2]], "int64")
    mod = LegalizeOps()(_module(lambda v, i: op.take(v, i), x, ids))
    np.testing.assert_array_equal(_run_llvm(mod, x, ids).numpy(), x[ids])


# ------------------------------------------------------------------------------ pipelines
def _small_model(*arrays: np.ndarray) -> mlckit.IRModule:
    def build(x, gamma, beta, mean, var, ids, weight):
        bn = op.nn.batch_norm(x, gamma, beta, mean, var, axis=1)
        pooled = op.nn.adaptive_avg_pool2d(op.nn.relu(relax.TupleGetItem(bn, 0)), 1)
        features = op.reshape(pooled, (2, 3))
        embedded = op.multiply(op.take(weight, ids, axis=0), relax.const(2.0, "float32"))
        return op.matmul(features, op.permute_dims(embedded))

    return _module(build, *arrays)


def test_pipelines_annotate_fuse_and_build_the_new_ops():
    x = rng.standard_normal((2, 3, 5, 5)).astype("float32")
    gamma, beta, mean = (rng.standard_normal(3).astype("float32") for _ in range(3))
    var = rng.uniform(0.5, 2, 3).astype("float32")
    ids, weight = np.array([4, 0, 9, 4], "int32"), rng.standard_normal((10, 3)).astype("float32")
    arrays = (x, gamma, beta, mean, var, ids, weight)
    normalized = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    normalized = normalized * gamma[:, None, None] + beta[:, None, None]
    features = np.maximum(normalized, 0).mean(axis=(2, 3))
    expected = features @ (weight[ids] * 2).T

    annotated = AnnotateTIROpPattern()(LegalizeOps()(_small_model(*arrays)))
    patterns = {
        gv.name_hint: K(f.attrs["op_pattern"])
        for gv, f in annotated.functions.items()
        if isinstance(f, tir.PrimFunc)
    }
    assert patterns["batch_norm"] <= K.kBroadcast
    assert patterns["take"] == K.kInjective
    assert patterns["adaptive_avg_pool2d"] in (K.kCommReduce, K.kOutEWiseFusable)
    for name in ("zero", "default"):
        mod = relax.get_pipeline(name)(_small_model(*arrays))
        fused = [gv.name_hint for gv in mod.functions if gv.name_hint.startswith("fused_")]
        # The default pipeline's FuseTransposeMatmul reads the transposed rows in place, in
        # the matmul's NT_matmul kernel.
        taken = {"zero": "fused_take_multiply_transpose", "default": "fused_take_multiply"}
        assert taken[name] in fused, fused
        # The statistics batch_norm passes through are dropped before fusion, so the
        # normalized tensor has one consumer and fuses with it.
        assert "fused_batch_norm_relu" in fused, fused
        got = _run_llvm(mod, *arrays).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
