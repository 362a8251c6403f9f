"""relax.build + VirtualMachine: the course's modules run and match numpy."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import BuildError, VMError
from mlckit.testing.examples import (
    Module,
    MyModule,
    MyModuleLegacy,
    MyModuleMixture,
    MyModuleWithExternCall,
)

RNG = np.random.default_rng(0)


def _mlp_weights(in_out: bool, hidden: int):
    w0 = RNG.standard_normal((784, hidden)).astype("float32") / 28
    b0 = RNG.standard_normal(hidden).astype("float32")
    w1 = RNG.standard_normal((hidden, 10)).astype("float32") / 16
    b1 = RNG.standard_normal(10).astype("float32")
    if not in_out:  # nn.Linear's (out, in) layout
        return w0.T.copy(), b0, w1.T.copy(), b1
    return w0, b0, w1, b1


def numpy_mlp(x, w0, b0, w1, b1):
    return np.maximum(x @ w0 + b0, 0) @ w1 + b1


@pytest.fixture(scope="module", params=["python", "llvm"])
def mlp_vm(request):
    return relax.VirtualMachine(relax.build(Module, target=request.param), mlckit.cpu())


def test_symbolic_batch_mlp_matches_numpy_for_several_batches(mlp_vm):
    params = _mlp_weights(in_out=True, hidden=256)
    for n in (1, 7, 64):
        x = RNG.standard_normal((n, 784)).astype("float32")
        out = mlp_vm["main"](mlckit.nd.array(x), *params)
        assert isinstance(out, mlckit.nd.NDArray) and out.shape == (n, 10)
        np.testing.assert_allclose(out.numpy(), numpy_mlp(x, *params), rtol=1e-5, atol=1e-5)


def test_wrong_inputs_raise_vm_errors(mlp_vm):
    w0, b0, w1, b1 = _mlp_weights(in_out=True, hidden=256)
    x = np.zeros((2, 784), "float32")
    with pytest.raises(VMError, match=r"main takes 5 arguments \(x, w0, b0, w1, b1\), got 4"):
        mlp_vm["main"](x, w0, b0, w1)
    with pytest.raises(VMError, match="parameter x has size 783 in dimension 1.*784"):
        mlp_vm["main"](np.zeros((2, 783), "float32"), w0, b0, w1, b1)
    with pytest.raises(VMError, match="parameter x expects dtype float32, got a float64 tensor"):
        mlp_vm["main"](np.zeros((2, 784)), w0, b0, w1, b1)
    with pytest.raises(VMError, match="parameter w0 expects a tensor of rank 2"):
        mlp_vm["main"](x, w0.reshape(-1), b0, w1, b1)
    with pytest.raises(VMError, match=r"parameter x expects a tensor, got a list of 1 float; make"):
        mlp_vm["main"]([1.0], w0, b0, w1, b1)


def test_disagreeing_symbolic_dims_raise_vm_error():
    @mlckit.script.ir_module
    class TwoInputs:
        @mlckit.script.relax.function
        def main(
            a: mlckit.script.relax.Tensor(("n", 4), "float32"),
            b: mlckit.script.relax.Tensor(("n", 4), "float32"),
        ):
            return a

    vm = relax.VirtualMachine(relax.build(TwoInputs, "python"))
    a = np.zeros((3, 4), "float32")
    assert vm["main"](a, a).shape == (3, 4)
    with pytest.raises(
        VMError, match=r"parameter b has size 5 in dimension 0.*requires n.*set to 3"
    ):
        vm["main"](a, np.zeros((5, 4), "float32"))


def test_legacy_module_runs_at_batch_one():
    w0, b0, _, _ = _mlp_weights(in_out=False, hidden=128)
    x = RNG.standard_normal((1, 784)).astype("float32")
    vm = relax.VirtualMachine(relax.build(MyModuleLegacy, "llvm"), mlckit.cpu())
    out = vm["main"](x, w0, b0).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w0.T + b0, 0), rtol=1e-5, atol=1e-5)


@pytest.fixture
def env_functions():
    @mlckit.register_func("env.linear", override=True)
    def linear(x, w, b, out):
        # Write through DLPack views: the VM passes the destination tensor itself.
        np.from_dlpack(out)[...] = np.from_dlpack(x) @ np.from_dlpack(w).T + np.from_dlpack(b)

    @mlckit.register_func("env.relu", override=True)
    def relu(x, out):
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    yield
    mlckit.runtime.remove_global_func("env.linear")
    mlckit.runtime.remove_global_func("env.relu")


@pytest.mark.parametrize(
    "module", [MyModuleWithExternCall, MyModuleMixture], ids=["extern", "mixture"]
)
def test_registered_functions_are_called_with_destination_passing(module, env_functions):
    params = _mlp_weights(in_out=False, hidden=128)
    x = RNG.standard_normal((1, 784)).astype("float32")
    vm = relax.VirtualMachine(relax.build(module, "python"), mlckit.cpu())
    out = vm["main"](x, *params).numpy()
    w0, b0, w1, b1 = params
    np.testing.assert_allclose(out, numpy_mlp(x, w0.T, b0, w1.T, b1), rtol=1e-5, atol=1e-5)


def test_missing_registered_function_is_reported():
    vm = relax.VirtualMachine(relax.build(MyModuleWithExternCall, "python"))
    params = _mlp_weights(in_out=False, hidden=128)
    with pytest.raises(mlckit.MLCError, match="no global function named 'env.linear'"):
        vm["main"](np.zeros((1, 784), "float32"), *params)


def test_bind_params_then_call_with_the_input_alone():
    w0, b0, w1, b1 = _mlp_weights(in_out=True, hidden=256)
    bound = relax.transform.BindParams("main", {"w0": w0, "b0": b0, "w1": w1, "b1": b1})(Module)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    assert [p.name_hint for p in Module["main"].params] == ["x", "w0", "b0", "w1", "b1"]
    vm = relax.VirtualMachine(relax.build(bound, "python"))
    x = RNG.standard_normal((3, 784)).astype("float32")
    np.testing.assert_allclose(
        vm["main"](x).numpy(), numpy_mlp(x, w0, b0, w1, b1), rtol=1e-5, atol=1e-5
    )
    with pytest.raises(mlckit.MLCError, match="has no parameter 'w9'"):
        relax.transform.BindParams("main", {"w9": w0})(Module)
    with pytest.raises(mlckit.MLCError, match="shape"):
        relax.transform.BindParams("main", {"w0": w1})(Module)


def test_high_level_ops_must_be_legalized_first():
    with pytest.raises(BuildError, match=r"relax\.multiply.*LegalizeOps"):
        relax.build(MyModule, "python")


def test_generated_code_reads_like_low_level_numpy():
    ex = relax.build(Module, "python")
    main = ex.source("main")
    assert "lv0 = pooled_empty(0, (n, 256), dtype=np.float32)" in main
    assert "linear(x, w0, b0, lv0)" in main
    linear = ex.source("linear")
    assert "M, K = X.shape" in linear
    assert "if k == 0:" in linear
    assert "Y[i, j] = Y[i, j] + X[i, k] * W[k, j]" in linear


def test_time_evaluator_and_profile():
    vm = relax.VirtualMachine(relax.build(Module, "python"))
    params = _mlp_weights(in_out=True, hidden=256)
    x = np.zeros((1, 784), "float32")
    result = vm.time_evaluator("main", mlckit.cpu(), number=1, repeat=2)(x, *params)
    assert len(result.results) == 2 and result.mean > 0
    report = vm.profile("main", x, *params)
    assert set(report.kernels) == {"linear", "relu"}
    assert report.kernels["linear"][0] == 2
    assert "linear" in str(report)


@mlckit.script.ir_module
class ControlFlow:
    @mlckit.script.tir.prim_func
    def double(a: mlckit.script.tir.handle, b: mlckit.script.tir.handle):
        T = mlckit.script.tir
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(2)

    @mlckit.script.relax.function
    def twice(x: mlckit.script.relax.Tensor(("n",), "float32")):
        R = mlckit.script.relax
        n = mlckit.script.tir.int64()
        cls = ControlFlow
        y = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((n,), "float32"))
        return (y, x)

    @mlckit.script.relax.function
    def main(
        x: mlckit.script.relax.Tensor(("n",), "float32"),
        flag: mlckit.script.relax.Tensor((), "bool"),
        s: mlckit.script.relax.Object,
    ):
        R = mlckit.script.relax
        cls = ControlFlow
        pair = cls.twice(x)
        doubled = pair[0]
        if flag:
            out = doubled
        else:
            out = pair[1]
        m = R.match_cast(s, R.Tensor(("m", 2), "float32"))
        scale = R.call_pure_packed("test.scale", m, sinfo_args=R.Tensor(("m", 2), "float32"))
        return (out, scale, R.const(np.float32(3.0)))


def test_calls_tuples_if_match_cast_and_pure_packed_calls():
    @mlckit.register_func("test.scale", override=True)
    def scale(t):
        return mlckit.nd.array(np.from_dlpack(t) * 10)

    vm = relax.VirtualMachine(relax.build(ControlFlow, "python"))
    x = np.arange(4, dtype="float32")
    s = np.ones((3, 2), "float32")
    out, scaled, three = vm["main"](x, np.array(True), s)
    np.testing.assert_array_equal(out.numpy(), x * 2)
    np.testing.assert_array_equal(scaled.numpy(), s * 10)
    assert float(three.numpy()) == 3.0
    out, _, _ = vm["main"](x, np.array(False), s)
    np.testing.assert_array_equal(out.numpy(), x)
    with pytest.raises(VMError, match="R.match_cast of m expects a tensor of rank 2"):
        vm["main"](x, np.array(True), np.ones(3, "float32"))
    doubled, _ = vm["twice"](x)
    np.testing.assert_array_equal(doubled.numpy(), 2 * x)


def test_vm_allocations_start_on_a_cache_line(env_functions):
    """The outputs the VM allocates reach kernels aligned, as the tuner timed them."""
    offsets = []

    @mlckit.register_func("env.relu", override=True)
    def relu(x, out):
        offsets.append(np.from_dlpack(out).ctypes.data % mlckit.runtime.ndarray.ALIGNMENT)
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    vm = relax.VirtualMachine(relax.build(MyModuleWithExternCall, "python"), mlckit.cpu())
    for _ in range(3):
        vm["main"](RNG.standard_normal((1, 784)).astype("float32"), *_mlp_weights(False, 128))
    assert offsets == [0, 0, 0]


def test_shape_arithmetic_calls_the_same_helpers_as_kernels():
    """Integer division of a dim (TVM's truncdiv) raised a NameError inside the VM."""
    n = mlckit.tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((n,), "float32"))
    with bb.function("main", [x]):
        three = mlckit.tir.IntImm("int64", 3)
        shape = bb.emit(relax.ShapeExpr([mlckit.tir.Div(n, three), mlckit.tir.Mod(n, three)]))
        bb.emit_func_output(shape)
    vm = relax.VirtualMachine(relax.build(bb.get(), "python"))
    assert vm["main"](np.zeros(7, "float32")) == (2, 1)
