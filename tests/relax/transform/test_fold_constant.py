"""FoldConstant: call_tir on constants runs at compile time and becomes a constant."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import relax
from mlckit.ir import Op, assert_structural_equal
from mlckit.relax.transform.bind_params import BindParams
from mlckit.relax.transform.fold_constant import FoldConstant
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

C0 = np.arange(16, dtype="float32").reshape(4, 4)


@I.ir_module
class Module:
    @T.prim_func
    def addone(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1.0)

    @T.prim_func
    def sub(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] - B[vi, vj]

    @R.function
    def before(c0: R.Tensor((4, 4), "float32"), x: R.Tensor((4, 4), "float32")):
        cls = Module
        lv0 = R.call_tir(cls.addone, (c0,), out_sinfo=R.Tensor((4, 4), "float32"))
        with R.dataflow():
            lv1 = R.call_tir(cls.addone, (lv0,), out_sinfo=R.Tensor((4, 4), "float32"))
            lv2 = R.call_tir(cls.sub, (lv1, x), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(lv2)
        return lv2

    @R.function
    def expected(c2: R.Tensor((4, 4), "float32"), x: R.Tensor((4, 4), "float32")):
        cls = Module
        with R.dataflow():
            lv2 = R.call_tir(cls.sub, (c2, x), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(lv2)
        return lv2


def bound(name: str, params: dict[str, np.ndarray]):
    """The module with ``name`` bound to ``params``, as ``main``, the other function dropped."""
    mod = BindParams(name, params)(Module)
    mod["main"] = mod[name].with_attr("global_symbol", "main")
    mod.remove("before")
    mod.remove("expected")
    return mod


def test_call_tir_chains_on_constants_are_folded():
    before = bound("before", {"c0": C0})
    after = FoldConstant()(before)
    assert_structural_equal(after, bound("expected", {"c2": C0 + 2}))
    x = np.ones((4, 4), "float32")
    for mod in (before, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x).numpy(), C0 + 2 - x)


def test_calls_on_non_constants_are_left_alone():
    assert_structural_equal(FoldConstant()(Module), Module)


@pytest.fixture
def negative_legalizes_to_a_kernel():
    """A stand-in FLegalize for relax.negative: adds a PrimFunc and returns one call_tir."""

    @T.prim_func(private=True)
    def negative(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.float32(0.0) - A[vi, vj]

    def legalize(bb, call):
        gv = bb.add_func(negative, "negative")
        return relax.call_tir(gv, call.args, call.struct_info)

    op = Op.get("relax.negative")
    previous = op.get_attr("FLegalize")
    op.attrs["FLegalize"] = legalize
    yield
    if previous is None:
        del op.attrs["FLegalize"]
    else:
        op.attrs["FLegalize"] = previous


def test_operators_with_constant_arguments_fold_through_flegalize(
    negative_legalizes_to_a_kernel,
):
    @I.ir_module
    class Ops:
        @R.function
        def main(x: R.Tensor((4, 4), "float32"), c: R.Tensor((4, 4), "float32")):
            with R.dataflow():
                lv = R.negative(c)
                gv = R.add(x, lv)
                R.output(gv)
            outside = R.negative(c)
            return (gv, outside)

    @I.ir_module
    class Folded:
        @R.function
        def main(x: R.Tensor((4, 4), "float32"), c: R.Tensor((4, 4), "float32")):
            with R.dataflow():
                gv = R.add(x, c)
                R.output(gv)
            # Outside dataflow blocks high-level operators are not folded.
            outside = R.negative(c)
            return (gv, outside)

    before = BindParams("main", {"c": C0})(Ops)
    after = FoldConstant()(before)
    expected = BindParams("main", {"c": -C0})(Folded)
    # Both bindings of c became constants: compare the constant inside the block.
    block = after["main"].body.blocks[0]
    np.testing.assert_array_equal(block.bindings[0].value.args[1].data.numpy(), -C0)
    assert list(after.functions) == list(before.functions)  # the kernel is not added
    assert_structural_equal(block, expected["main"].body.blocks[0])


def test_a_chain_of_operators_on_constants_folds_to_one_constant():
    # Each step is legalized to a kernel of its own, in a module dropped after the call (the
    # kernels it runs are kept by function, not by id(): a gone function's id is reused).
    value, expected = relax.const(C0), C0
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            for k in range(1, 9):
                operand = np.full((4,) if k % 2 else (4, 1), k, "float32")
                value = bb.emit(relax.op.multiply(value, relax.const(operand)))
                value = bb.emit(relax.op.add(value, relax.const(float(k), "float32")))
                expected = expected * operand + k
            gv = bb.emit_output(value)
        bb.emit_func_output(gv)
    result = FoldConstant()(bb.get())["main"].body.body
    np.testing.assert_allclose(result.data.numpy(), expected, rtol=1e-6)
