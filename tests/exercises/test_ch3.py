"""Chapter 3's exercises: each reference solution passes, typical wrong answers fail with the
intended message, and answers of the wrong kind never raise."""

from __future__ import annotations

import numpy as np
import pytest
from replies import assert_verdict

from mlckit import relax, runtime, topi
from mlckit.datasets import cnn_params, cnn_reference
from mlckit.exercises import check, exercises, hint, solution
from mlckit.exercises.ch3 import cnn_reference_stages
from mlckit.exercises.solutions import ch3 as solutions
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.testing.examples import MyModuleMixture


# ------------------------------------------------------------------ ch3.call_tir_numpy
def test_call_tir_numpy_reference_passes():
    assert check("ch3.call_tir_numpy", solutions.call_tir_numpy())


def forgets_the_output(prim_func, inputs, shape, dtype):
    return prim_func(*inputs)


def default_dtype(prim_func, inputs, shape, dtype):
    res = np.empty(shape)
    prim_func(*inputs, res)
    return res


def returns_nothing(prim_func, inputs, shape, dtype):
    res = np.empty(shape, dtype=dtype)
    prim_func(*inputs, res)


def output_first(prim_func, inputs, shape, dtype):
    res = np.empty(shape, dtype=dtype)
    prim_func(res, *inputs)
    return res


def tuple_not_unpacked(prim_func, inputs, shape, dtype):
    res = np.empty(shape, dtype=dtype)
    prim_func(inputs, res)
    return res


@pytest.mark.parametrize(
    ("answer", "message", "hint"),
    [
        (forgets_the_output, "with the inputs only", "pass it after the inputs"),
        (default_dtype, "dtype float64", "np.empty(shape, dtype=dtype)"),
        (returns_nothing, "returns None", "return the array you allocated"),
        (output_first, "passed the output first", "prim_func(*inputs, out)"),
        (tuple_not_unpacked, "tuple of inputs", "unpack it"),
    ],
)
def test_call_tir_numpy_typical_mistakes(answer, message, hint):
    result = check("ch3.call_tir_numpy", answer)
    assert not result
    assert_verdict(result, message)
    assert hint in result.hint


def test_call_tir_numpy_wrong_kind_never_raises():
    result = check("ch3.call_tir_numpy", 42)
    assert_verdict(result, "expected a function")
    crashing = check("ch3.call_tir_numpy", lambda prim_func, inputs, shape, dtype: 1 / 0)
    assert not crashing and "ZeroDivisionError" in crashing.message


# ------------------------------------------------------------------ ch3.any_batch
@pytest.fixture
def env_functions():
    """env.linear / env.relu as the chapter registers them, restored afterwards."""
    saved = {name: runtime.get_global_func(name, True) for name in ("env.linear", "env.relu")}

    def linear(x, w, b, out):
        np.from_dlpack(out)[:] = np.from_dlpack(x) @ np.from_dlpack(w).T + np.from_dlpack(b)

    def relu(x, out):
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    runtime.register_func("env.linear", linear, override=True)
    runtime.register_func("env.relu", relu, override=True)
    yield
    for name, func in saved.items():
        if func is None:
            runtime.remove_global_func(name)
        else:
            runtime.register_func(name, func, override=True)


def test_any_batch_reference_passes(env_functions):
    result = check("ch3.any_batch", solutions.any_batch())
    assert result, str(result)


def test_any_batch_fixed_module_is_told_about_x(env_functions):
    result = check("ch3.any_batch", MyModuleMixture)
    assert not result
    assert_verdict(result, "x has the fixed shape (1, 784)")
    assert '"n"' in result.hint


@I.ir_module
class FixedOutSinfo:
    @R.function
    def main(
        x: R.Tensor(("n", 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed(
                "env.linear", (x, w0, b0), out_sinfo=R.Tensor((n, 128), "float32")
            )
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
            out = R.call_dps_packed(
                "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((1, 10), "float32")
            )
            R.output(out)
        return out


def test_any_batch_fixed_out_sinfo_names_the_binding(env_functions):
    result = check("ch3.any_batch", FixedOutSinfo)
    assert not result
    assert_verdict(result, '`lv1 = call_dps_packed("env.relu")` has shape (1, 128)')
    assert_verdict(result, "it is (n, 128)")
    assert "out_sinfo=R.Tensor((n, 128)" in result.hint


@I.ir_module
class FixedPrimFunc:
    @T.prim_func
    def linear0(
        X: T.Buffer((1, 784), "float32"),
        W: T.Buffer((128, 784), "float32"),
        B: T.Buffer((128,), "float32"),
        Z: T.Buffer((1, 128), "float32"),
    ):
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Z"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[vi, vj] = B[vj]
                Z[vi, vj] = Z[vi, vj] + X[vi, vk] * W[vj, vk]

    @R.function
    def main(
        x: R.Tensor(("n", 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        n = T.int64()
        cls = FixedPrimFunc
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((n, 128), "float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((n, 128), "float32"))
            out = R.call_dps_packed(
                "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((n, 10), "float32")
            )
            R.output(out)
        return out


def test_any_batch_fixed_prim_func_names_its_buffer(env_functions):
    result = check("ch3.any_batch", FixedPrimFunc)
    assert not result
    assert_verdict(result, "linear0's buffer X has the fixed shape (1, 784)")
    assert "T.match_buffer" in result.hint


def test_any_batch_missing_extern_function_is_explained(env_functions):
    runtime.remove_global_func("env.relu")
    result = check("ch3.any_batch", solutions.any_batch())
    assert not result
    assert_verdict(result, "main failed on a batch of 1")
    assert "env.relu" in result.message


def test_any_batch_wrong_kind_never_raises():
    assert "expected an IRModule" in check("ch3.any_batch", "MyModule").message
    func = MyModuleMixture["main"]
    assert "the answer is the IRModule" in check("ch3.any_batch", func).message


# ------------------------------------------------------------------ ch3.cnn
def build_cnn(
    *,
    padding: int = 0,
    pool_stride: int = 2,
    relu_after_conv: bool = True,
    softmax: bool = True,
    steps: int = 9,
    weights_as_params: tuple[str, ...] = (),
) -> relax.BlockBuilder:
    """The CNN as a student builds it: its first ``steps`` steps, with one of the usual
    mistakes switched on."""
    p = cnn_params()
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32"))
    extra = {
        n: relax.Var(n, relax.TensorStructInfo(p[n].shape, "float32")) for n in weights_as_params
    }

    def weight(name):
        return extra[name] if name in extra else relax.const(p[name])

    bias = relax.const(p["conv2d_bias"].reshape(1, 32, 1, 1))
    layers = [
        lambda h: bb.emit_te(topi.nn.conv2d_nchw, h, weight("conv2d_weight"), 1, padding, 1),
        lambda h: bb.emit_te(topi.add, h, bias),
        lambda h: bb.emit_te(topi.nn.relu, h) if relu_after_conv else h,
        lambda h: bb.emit_te(topi.nn.max_pool2d, h, kernel=2, stride=pool_stride),
        lambda h: bb.emit_te(topi.nn.flatten, h),
        lambda h: bb.emit_te(topi.nn.dense, h, weight("linear0_weight"), weight("linear0_bias")),
        lambda h: bb.emit_te(topi.nn.relu, h),
        lambda h: bb.emit_te(topi.nn.dense, h, weight("linear1_weight"), weight("linear1_bias")),
        lambda h: bb.emit_te(topi.nn.softmax, h) if softmax else h,
    ]
    with bb.function("main", [x, *extra.values()]):
        with bb.dataflow():
            h = x
            for layer in layers[:steps]:
                h = layer(h)
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    return bb


def test_cnn_reference_passes():
    result = check("ch3.cnn", solutions.cnn())
    assert result, str(result)


def test_cnn_weights_as_named_parameters_pass():
    names = ("conv2d_weight", "linear0_weight", "linear0_bias")
    assert check("ch3.cnn", build_cnn(weights_as_params=names).get())


def test_cnn_numpy_reference_agrees_with_the_solution():
    # The checker's numpy CNN is what the answers are held to: check it against the build.
    from mlckit.datasets import fashion_mnist

    images = fashion_mnist("sprite900", dtype="float32").images[:2, None]
    ex = relax.build(solutions.cnn(), target="llvm")
    vm = relax.VirtualMachine(ex)
    got = np.concatenate([vm["main"](image[None]).numpy() for image in images])
    stages = cnn_reference_stages(images, cnn_params())
    np.testing.assert_allclose(got, stages["softmax"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(stages["linear1"], cnn_reference(images[:, 0]), rtol=1e-4, atol=1e-4)
    assert stages["flatten"].shape == (2, 5408)


@pytest.mark.parametrize(
    ("options", "message", "hint"),
    [
        (
            {"steps": 1},
            "main returns shape (1, 32, 26, 26), the shape after the CNN's conv2d 3x3",
            "emit the remaining steps",
        ),
        (
            {"pool_stride": 1, "steps": 4},
            "`lv3 = call_tir(max_pool2d)` has shape (1, 32, 25, 25)",
            "max over 2x2 windows with stride 2",
        ),
        (
            {"padding": 1, "steps": 3},
            "`lv = call_tir(conv2d_nchw)` has shape (1, 32, 28, 28)",
            "padding 0",
        ),
        ({"softmax": False}, "returns linear1's output (the logits)", "topi.nn.softmax"),
        (
            {"relu_after_conv": False},
            "the first value that differs from the reference CNN is `lv2` (kernel max_pool2d",
            "after relu",
        ),
    ],
)
def test_cnn_typical_mistakes(options, message, hint):
    result = check("ch3.cnn", build_cnn(**options).get())
    assert not result
    assert_verdict(result, message)
    assert hint in result.hint, result.hint


def test_cnn_wrong_kind_never_raises():
    assert "bb.get()" in check("ch3.cnn", build_cnn()).hint
    assert "expected an IRModule" in check("ch3.cnn", None).message
    unknown = check("ch3.cnn", build_cnn(weights_as_params=("conv2d_weight",)).get())
    assert unknown  # a known name is accepted ...
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((32, 1, 3, 3), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(bb.call_te(topi.nn.conv2d_nchw, x, w, 1, 0, 1))
        bb.emit_func_output(out)
    result = check("ch3.cnn", bb.get())  # ... an unknown one is named
    assert_verdict(result, "main takes parameters w besides the image")


def test_cnn_wrong_image_shape_is_named():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.call_te(topi.nn.relu, x))
        bb.emit_func_output(out)
    result = check("ch3.cnn", bb.get())
    assert_verdict(result, "the image is R.Tensor((1, 1, 28, 28)")


def test_every_exercise_has_graded_hints_and_a_solution():
    names = [e.name for e in exercises(3)]
    assert names == ["ch3.call_tir_numpy", "ch3.any_batch", "ch3.cnn"]
    for name in names:
        assert "Hint 1" in str(hint(name, 1)) and "last hint" in str(hint(name, 3))
    assert "bb.emit_te(topi.nn.conv2d_nchw" in str(solution("ch3.cnn"))
    assert "T.match_buffer(x, (n, 784)" in str(solution("ch3.any_batch"))


def test_cnn_main_without_parameters_is_named():
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            out = bb.emit_output(relax.const(np.zeros((1, 10), "float32")))
        bb.emit_func_output(out)
    result = check("ch3.cnn", bb.get())
    assert_verdict(result, "main takes no parameters")
