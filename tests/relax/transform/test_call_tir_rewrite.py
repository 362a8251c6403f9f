"""CallTIRRewrite: call_tir / call_dps_packed become explicit allocations + direct calls; the
builtin/memory ops print, parse and infer struct info."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import StructInfoError
from mlckit.ir import Op, assert_structural_equal
from mlckit.relax.op import memory
from mlckit.relax.struct_info import ObjectStructInfo, TensorStructInfo, TupleStructInfo
from mlckit.relax.transform.call_tir_rewrite import CallTIRRewrite
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.testing.examples import Module


@I.ir_module
class Before:
    @T.prim_func
    def relu(X: T.Buffer((4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        cls = Before
        lv0 = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((4, 8), dtype="float32"))
        lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((4, 8), dtype="float32"))
        return lv1


@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class Expected:
    @T.prim_func
    def relu(X: T.Buffer((4, 8), "float32"), Y: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        cls = Expected
        alloc = R.builtin.alloc_tensor(R.shape([4, 8]), R.dtype("float32"), R.prim_value(0))
        _ = cls.relu(x, alloc)
        lv0 = alloc
        alloc1 = R.builtin.alloc_tensor(R.shape([4, 8]), R.dtype("float32"), R.prim_value(0))
        _1 = cls.relu(lv0, alloc1)
        lv1 = alloc1
        return lv1


def test_call_tir_becomes_alloc_tensor_and_a_direct_kernel_call():
    after = CallTIRRewrite()(Before)
    assert_structural_equal(after, Expected)
    # The printed result parses back to the same module.
    assert_structural_equal(mlckit.script.from_source(after.script()), after)
    assert 'R.builtin.alloc_tensor(R.shape([4, 8]), R.dtype("float32")' in after.script()


@I.ir_module
class PackedBefore:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")):
        lv = R.call_dps_packed(
            "test.split_signs",
            (x,),
            out_sinfo=[R.Tensor((2, 3), dtype="float32"), R.Tensor((2, 3), dtype="float32")],
        )
        return lv


@I.ir_module(check_well_formed=False)  # lowered: kernel calls are impure
class PackedExpected:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")):
        alloc = R.builtin.alloc_tensor(R.shape([2, 3]), R.dtype("float32"), R.prim_value(0))
        alloc1 = R.builtin.alloc_tensor(R.shape([2, 3]), R.dtype("float32"), R.prim_value(0))
        _ = R.ExternFunc("test.split_signs")(x, alloc, alloc1)
        lv = (alloc, alloc1)
        return lv


@pytest.fixture
def split_signs():
    @mlckit.register_func("test.split_signs", override=True)
    def split(x, positive, negative):
        # Write through DLPack views: the VM passes the destination tensors themselves.
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(positive))
        np.minimum(np.from_dlpack(x), 0, out=np.from_dlpack(negative))

    yield
    mlckit.runtime.remove_global_func("test.split_signs")


def test_call_dps_packed_with_two_outputs(split_signs):
    after = CallTIRRewrite()(PackedBefore)
    assert_structural_equal(after, PackedExpected)
    x = np.array([[1, -2, 3], [-4, 5, -6]], dtype="float32")
    pos, neg = relax.VirtualMachine(relax.build(after, "python"))["main"](x)
    np.testing.assert_array_equal(pos.numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(neg.numpy(), np.minimum(x, 0))


def test_rewritten_module_runs_and_reads_like_low_level_numpy():
    after = CallTIRRewrite()(Before)
    main = relax.build(after, "python").source("main")
    assert "alloc = aligned_empty((4, 8), dtype=np.float32)\n    relu(x, alloc)\n" in main
    x = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    result = relax.VirtualMachine(relax.build(after, "python"))["main"](x)
    np.testing.assert_array_equal(result.numpy(), np.maximum(x, 0))


def test_dataflow_blocks_are_refused():
    with pytest.raises(mlckit.MLCError, match=r"lv0 = R\.call_tir.*ToNonDataflow"):
        CallTIRRewrite()(Module)


# ------------------------------------------------------------------------------ the ops
def test_memory_ops_struct_info_and_purity():
    bb = relax.BlockBuilder()
    tensor = bb.normalize(memory.builtin.alloc_tensor((4, 8), "float32", 0))
    assert isinstance(tensor.struct_info_, TensorStructInfo)
    assert tensor.struct_info_.dtype == "float32" and tensor.struct_info_.ndim == 2
    storage = relax.Var("storage", ObjectStructInfo())
    assert isinstance(bb.normalize(memory.alloc_storage((128,), 0)).struct_info_, ObjectStructInfo)
    view = bb.normalize(memory.alloc_tensor(storage, 0, (4, 8), "float32"))
    assert view.struct_info_.shape.values[1].value == 8
    kill = bb.normalize(memory.kill_storage(storage))
    assert isinstance(kill.struct_info_, TupleStructInfo) and not kill.struct_info_.fields
    # As in TVM: allocating has no visible effect, freeing does.
    assert Op.get("relax.builtin.alloc_tensor").get_attr("FPurity") is True
    assert Op.get("relax.memory.kill_tensor").get_attr("FPurity") is False


def test_memory_op_errors_name_the_op_and_the_argument():
    bb = relax.BlockBuilder()
    x = relax.Var("x", TensorStructInfo((4, 8), "float32"))
    with pytest.raises(StructInfoError, match=r"relax\.builtin\.alloc_tensor: argument 0 .*x is"):
        bb.normalize(memory.builtin.alloc_tensor(x, "float32", 0))
    with pytest.raises(StructInfoError, match=r"relax\.memory\.alloc_tensor: .*storage made by"):
        bb.normalize(memory.alloc_tensor(x, 0, (4, 8), "float32"))
    with pytest.raises(StructInfoError, match="1-d shape holding the number of bytes"):
        bb.normalize(memory.alloc_storage((4, 8), 0))
    with pytest.raises(mlckit.MLCError, match="unknown dtype"):
        memory.builtin.alloc_tensor((4, 8), "float33", 0)
