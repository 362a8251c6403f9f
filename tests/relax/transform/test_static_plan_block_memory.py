"""StaticPlanBlockMemory: tensors with disjoint lifetimes share storage; the VM runs the result."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import BuildError, VMError
from mlckit.ir import assert_structural_equal
from mlckit.relax.transform.call_tir_rewrite import CallTIRRewrite
from mlckit.relax.transform.static_plan_block_memory import (
    StaticPlanBlockMemory,
    estimate_memory_usage,
)
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.testing.examples import Module, MyModuleLegacy

RNG = np.random.default_rng(0)


@I.ir_module
class MLP:
    @T.prim_func(private=True)
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        M, N, K = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (M, K), "float32")
        W = T.match_buffer(w, (K, N), "float32")
        B = T.match_buffer(b, (N,), "float32")
        Z = T.match_buffer(z, (M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.block("Z"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[v_i, v_j] = B[v_j]
                Z[v_i, v_j] = Z[v_i, v_j] + X[v_i, v_k] * W[v_k, v_j]

    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        M, N = T.int64(), T.int64()
        X = T.match_buffer(x, (M, N), "float32")
        Y = T.match_buffer(y, (M, N), "float32")
        for i, j in T.grid(M, N):
            with T.block("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor((2, 64), dtype="float32"),
        w0: R.Tensor((64, 128), dtype="float32"),
        b0: R.Tensor((128,), dtype="float32"),
        w1: R.Tensor((128, 128), dtype="float32"),
        b1: R.Tensor((128,), dtype="float32"),
        w2: R.Tensor((128, 10), dtype="float32"),
        b2: R.Tensor((10,), dtype="float32"),
    ) -> R.Tensor((2, 10), dtype="float32"):
        cls = MLP
        lv0 = R.call_tir(cls.linear, (x, w0, b0), out_sinfo=R.Tensor((2, 128), dtype="float32"))
        lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((2, 128), dtype="float32"))
        lv2 = R.call_tir(cls.linear, (lv1, w1, b1), out_sinfo=R.Tensor((2, 128), dtype="float32"))
        lv3 = R.call_tir(cls.relu, (lv2,), out_sinfo=R.Tensor((2, 128), dtype="float32"))
        gv = R.call_tir(cls.linear, (lv3, w2, b2), out_sinfo=R.Tensor((2, 10), dtype="float32"))
        return gv


@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class MLPPlanned:
    @T.prim_func(private=True)
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        M, N, K = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (M, K), "float32")
        W = T.match_buffer(w, (K, N), "float32")
        B = T.match_buffer(b, (N,), "float32")
        Z = T.match_buffer(z, (M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.block("Z"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[v_i, v_j] = B[v_j]
                Z[v_i, v_j] = Z[v_i, v_j] + X[v_i, v_k] * W[v_k, v_j]

    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        M, N = T.int64(), T.int64()
        X = T.match_buffer(x, (M, N), "float32")
        Y = T.match_buffer(y, (M, N), "float32")
        for i, j in T.grid(M, N):
            with T.block("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor((2, 64), dtype="float32"),
        w0: R.Tensor((64, 128), dtype="float32"),
        b0: R.Tensor((128,), dtype="float32"),
        w1: R.Tensor((128, 128), dtype="float32"),
        b1: R.Tensor((128,), dtype="float32"),
        w2: R.Tensor((128, 10), dtype="float32"),
        b2: R.Tensor((10,), dtype="float32"),
    ) -> R.Tensor((2, 10), dtype="float32"):
        cls = MLPPlanned
        storage = R.memory.alloc_storage(
            R.shape([1024]), R.prim_value(0), R.str("global"), R.dtype("float32")
        )
        alloc = R.memory.alloc_tensor(
            storage, R.prim_value(0), R.shape([2, 128]), R.dtype("float32")
        )
        _ = cls.linear(x, w0, b0, alloc)
        lv0 = alloc
        storage1 = R.memory.alloc_storage(
            R.shape([1024]), R.prim_value(0), R.str("global"), R.dtype("float32")
        )
        alloc1 = R.memory.alloc_tensor(
            storage1, R.prim_value(0), R.shape([2, 128]), R.dtype("float32")
        )
        _1 = cls.relu(lv0, alloc1)
        lv1 = alloc1
        # lv0 died in relu: its storage is free again.
        alloc2 = R.memory.alloc_tensor(
            storage, R.prim_value(0), R.shape([2, 128]), R.dtype("float32")
        )
        _2 = cls.linear(lv1, w1, b1, alloc2)
        lv2 = alloc2
        alloc3 = R.memory.alloc_tensor(
            storage1, R.prim_value(0), R.shape([2, 128]), R.dtype("float32")
        )
        _3 = cls.relu(lv2, alloc3)
        lv3 = alloc3
        # The result leaves the function: it keeps memory of its own.
        alloc4 = R.builtin.alloc_tensor(R.shape([2, 10]), R.dtype("float32"), R.prim_value(0))
        _4 = cls.linear(lv3, w2, b2, alloc4)
        gv = alloc4
        return gv


def _mlp_args():
    shapes = [(2, 64), (64, 128), (128,), (128, 128), (128,), (128, 10), (10,)]
    return [RNG.standard_normal(s).astype("float32") / 8 for s in shapes]


def _numpy_mlp(x, w0, b0, w1, b1, w2, b2):
    h = np.maximum(x @ w0 + b0, 0)
    h = np.maximum(h @ w1 + b1, 0)
    return h @ w2 + b2


def _plan(mod):
    return StaticPlanBlockMemory()(CallTIRRewrite()(mod))


def test_intermediates_share_two_storages():
    planned = _plan(MLP)
    assert_structural_equal(planned, MLPPlanned)
    assert_structural_equal(mlckit.script.from_source(planned.script()), planned)


def test_memory_usage_drops_and_numerics_stay():
    rewritten = CallTIRRewrite()(MLP)
    planned = StaticPlanBlockMemory()(rewritten)
    unplanned_usage = estimate_memory_usage(rewritten)
    usage = estimate_memory_usage(planned)
    # Four (2, 128) float32 intermediates of 1 KiB each and the 80-byte result.
    assert (unplanned_usage.bytes_before, unplanned_usage.bytes_after) == (4176, 4176)
    assert (usage.bytes_before, usage.bytes_after) == (4176, 2128)
    assert usage.functions[0].allocations_after == 3
    report = str(usage)
    assert "- Function main:" in report
    assert "3 constant-size memory allocation(s) with total size 2.08 KB" in report
    assert "reduces constant memory size to 51.0%" in report

    args = _mlp_args()
    expected = _numpy_mlp(*args)
    for mod in (MLP, rewritten, planned):
        result = relax.VirtualMachine(relax.build(mod, "python"))["main"](*args)
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_generated_code_places_tensors_in_storages():
    main = relax.build(_plan(MLP), "python").source("main")
    assert "storage = aligned_empty(1024, dtype=np.uint8)" in main
    assert "alloc = storage[0:1024].view(np.float32).reshape((2, 128))" in main
    assert "alloc2 = storage[0:1024].view(np.float32).reshape((2, 128))" in main
    assert "alloc4 = aligned_empty((2, 10), dtype=np.float32)" in main
    assert "    linear(lv1, w1, b1, alloc2)\n" in main
    assert "check_storage" not in main  # every view fits, proven at build time


def test_planned_views_run_under_numba():
    args = _mlp_args()
    vm = relax.VirtualMachine(relax.build(_plan(MLP), "llvm"))
    np.testing.assert_allclose(vm["main"](*args).numpy(), _numpy_mlp(*args), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ token matching
@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class Sizes:
    @R.function
    def main(x: R.Tensor((16,), dtype="float32")) -> R.Tensor((16,), dtype="float32"):
        a = R.builtin.alloc_tensor(R.shape([16]), R.dtype("float32"), R.prim_value(0))
        _ = R.ExternFunc("f")(x, a)
        b = R.builtin.alloc_tensor(R.shape([16]), R.dtype("int32"), R.prim_value(0))
        _1 = R.ExternFunc("f")(a, b)
        c = R.builtin.alloc_tensor(R.shape([16]), R.dtype("int32"), R.prim_value(0))
        _2 = R.ExternFunc("f")(b, c)
        d = R.builtin.alloc_tensor(R.shape([32]), R.dtype("float32"), R.prim_value(0))
        _3 = R.ExternFunc("f")(c, d)
        e = R.builtin.alloc_tensor(R.shape([8]), R.dtype("int32"), R.prim_value(0))
        _4 = R.ExternFunc("f")(d, e)
        out = R.builtin.alloc_tensor(R.shape([16]), R.dtype("float32"), R.prim_value(0))
        _5 = R.ExternFunc("f")(e, out)
        return out


@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class SizesPlanned:
    @R.function
    def main(x: R.Tensor((16,), dtype="float32")) -> R.Tensor((16,), dtype="float32"):
        # a's storage grows to fit d, which reuses it once a is dead.
        storage = R.memory.alloc_storage(
            R.shape([128]), R.prim_value(0), R.str("global"), R.dtype("float32")
        )
        a = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([16]), R.dtype("float32"))
        _ = R.ExternFunc("f")(x, a)
        storage1 = R.memory.alloc_storage(
            R.shape([64]), R.prim_value(0), R.str("global"), R.dtype("int32")
        )
        b = R.memory.alloc_tensor(storage1, R.prim_value(0), R.shape([16]), R.dtype("int32"))
        _1 = R.ExternFunc("f")(a, b)
        # a is dead, but float32 storage is not shared with int32 tensors.
        storage2 = R.memory.alloc_storage(
            R.shape([64]), R.prim_value(0), R.str("global"), R.dtype("int32")
        )
        c = R.memory.alloc_tensor(storage2, R.prim_value(0), R.shape([16]), R.dtype("int32"))
        _2 = R.ExternFunc("f")(b, c)
        d = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([32]), R.dtype("float32"))
        _3 = R.ExternFunc("f")(c, d)
        # Both int32 storages are free and large enough: the first to die is taken.
        e = R.memory.alloc_tensor(storage1, R.prim_value(0), R.shape([8]), R.dtype("int32"))
        _4 = R.ExternFunc("f")(d, e)
        out = R.builtin.alloc_tensor(R.shape([16]), R.dtype("float32"), R.prim_value(0))
        _5 = R.ExternFunc("f")(e, out)
        return out


def test_tokens_match_by_dtype_and_size():
    assert_structural_equal(StaticPlanBlockMemory()(Sizes), SizesPlanned)


@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class Escapes:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")):
        a = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0))
        _ = R.ExternFunc("f")(x, a)
        b = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0))
        _1 = R.ExternFunc("f")(x, b)
        c = R.call_pure_packed("g", b, sinfo_args=R.Tensor((4,), dtype="float32"))
        t = (a, c)
        return t


def test_tensors_that_may_outlive_the_block_are_not_planned():
    # a is returned (inside a tuple); b goes to a call that might keep it.
    assert_structural_equal(StaticPlanBlockMemory()(Escapes), Escapes)


# ------------------------------------------------------------------------------ symbolic shapes
@I.ir_module
class Symbolic:
    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (n, 8), "float32")
        Y = T.match_buffer(y, (n, 8), "float32")
        for i, j in T.grid(n, 8):
            with T.block("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function
    def main(x: R.Tensor(("n", 8), dtype="float32")) -> R.Tensor(("n", 8), dtype="float32"):
        n = T.int64()
        cls = Symbolic
        lv0 = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((n, 8), dtype="float32"))
        lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((n, 8), dtype="float32"))
        lv2 = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((n, 8), dtype="float32"))
        return lv2


def test_symbolic_shapes_stay_builtin_allocations():
    rewritten = CallTIRRewrite()(Symbolic)
    planned = StaticPlanBlockMemory()(rewritten)
    assert_structural_equal(planned, rewritten)
    usage = estimate_memory_usage(planned)
    assert (usage.bytes_before, usage.bytes_after) == (0, 0)
    main = relax.build(planned, "python").source("main")
    assert "alloc = aligned_empty((n, 8), dtype=np.float32)" in main
    x = RNG.standard_normal((3, 8)).astype("float32")
    result = relax.VirtualMachine(relax.build(planned, "python"))["main"](x)
    np.testing.assert_array_equal(result.numpy(), np.maximum(x, 0))


# ------------------------------------------------------------------------------ the VM
@I.ir_module
class Killed:
    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (n, 8), "float32")
        Y = T.match_buffer(y, (n, 8), "float32")
        for i, j in T.grid(n, 8):
            with T.block("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function(pure=False)
    def main(x: R.Tensor(("n", 8), dtype="float32")) -> R.Tensor(("n", 8), dtype="float32"):
        n = T.int64()
        cls = Killed
        storage = R.memory.alloc_storage(
            R.shape([128]), R.prim_value(0), R.str("global"), R.dtype("float32")
        )
        a = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([n, 8]), R.dtype("float32"))
        _ = cls.relu(x, a)
        out = R.builtin.alloc_tensor(R.shape([n, 8]), R.dtype("float32"), R.prim_value(0))
        _1 = cls.relu(a, out)
        _2 = R.memory.kill_tensor(a)
        _3 = R.memory.kill_storage(storage)
        return out


def test_vm_runs_kills_and_checks_symbolic_views_at_run_time():
    ex = relax.build(Killed, "python")
    main = ex.source("main")
    assert "check_storage(storage, n * 32, " in main
    assert "a = storage[0:n * 32].view(np.float32).reshape((n, 8))" in main
    assert "    del a\n    del storage\n" in main
    vm = relax.VirtualMachine(ex)
    x = RNG.standard_normal((4, 8)).astype("float32")
    np.testing.assert_array_equal(vm["main"](x).numpy(), np.maximum(x, 0))
    with pytest.raises(VMError, match=r"alloc_tensor of a needs 160 bytes.*holds 128"):
        vm["main"](np.zeros((5, 8), "float32"))


@I.ir_module
class TooSmall:
    @R.function
    def main():
        storage = R.memory.alloc_storage(
            R.shape([16]), R.prim_value(0), R.str("global"), R.dtype("float32")
        )
        a = R.memory.alloc_tensor(storage, R.prim_value(8), R.shape([4]), R.dtype("float32"))
        return a


def test_a_view_past_its_storage_fails_the_build():
    with pytest.raises(BuildError, match="needs bytes 8 to 24, but the storage storage holds 16"):
        relax.build(TooSmall, "python")


# ------------------------------------------------------------------------------ the pipeline
def test_pipeline_from_dataflow_modules():
    to_non_dataflow = pytest.importorskip("mlckit.relax.transform.to_non_dataflow")
    pipeline = mlckit.ir.transform.Sequential(
        [to_non_dataflow.ToNonDataflow(), CallTIRRewrite(), StaticPlanBlockMemory()]
    )
    # Fixed shapes: the hidden tensor is planned, the result is not.
    legacy = pipeline(MyModuleLegacy)
    assert "R.memory.alloc_storage(R.shape([512])" in legacy.script()
    x = RNG.standard_normal((1, 784)).astype("float32")
    w0 = RNG.standard_normal((128, 784)).astype("float32")
    b0 = RNG.standard_normal(128).astype("float32")
    result = relax.VirtualMachine(relax.build(legacy, "python"))["main"](x, w0, b0)
    np.testing.assert_allclose(result.numpy(), np.maximum(x @ w0.T + b0, 0), rtol=1e-4)
    # A symbolic batch: nothing to plan, but the explicit allocations run.
    mlp = pipeline(Module)
    args = [RNG.standard_normal(s).astype("float32") for s in [(3, 784), (784, 256), (256,)]]
    args += [RNG.standard_normal(s).astype("float32") for s in [(256, 10), (10,)]]
    expected = relax.VirtualMachine(relax.build(Module, "python"))["main"](*args).numpy()
    result = relax.VirtualMachine(relax.build(mlp, "python"))["main"](*args)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5)
