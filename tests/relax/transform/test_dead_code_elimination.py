"""DeadCodeElimination: unreachable functions and unused dataflow bindings go."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal
from mlckit.relax.transform.dead_code_elimination import DeadCodeElimination
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


@I.ir_module
class Before:
    @T.prim_func
    def exp(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = T.exp(X[vi])

    @T.prim_func
    def unused_kernel(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = X[vi]

    @R.function(private=True)
    def only_called_by_dead_code(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Before
        with R.dataflow():
            gv = R.call_tir(cls.unused_kernel, (x,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Before
        with R.dataflow():
            gv = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Before
        with R.dataflow():
            dead = cls.only_called_by_dead_code(x)
            gv = cls.helper(x)
            R.output(gv)
        return gv


@I.ir_module
class Expected:
    @T.prim_func
    def exp(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = T.exp(X[vi])

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Expected
        with R.dataflow():
            gv = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Expected
        with R.dataflow():
            gv = cls.helper(x)
            R.output(gv)
        return gv


def test_unused_bindings_and_the_functions_only_they_called_are_removed():
    after = DeadCodeElimination()(Before)
    assert_structural_equal(after, Expected)
    x = np.linspace(-1, 1, 4).astype("float32")
    for mod in (Before, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x), rtol=1e-6)


def test_named_entry_functions_are_kept_with_what_they_call():
    after = DeadCodeElimination(["only_called_by_dead_code"])(Before)
    assert "only_called_by_dead_code" in after and "unused_kernel" in after
    assert len(after["main"].body.blocks[0].bindings) == 1


def test_unknown_entry_function_is_an_error():
    with pytest.raises(MLCError, match="entry function 'nope' is not in the module"):
        DeadCodeElimination(["nope"])(Before)


def test_nothing_dead_is_a_no_op():
    assert_structural_equal(DeadCodeElimination()(Expected), Expected)
