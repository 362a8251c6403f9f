"""Both generations of TVM's API work: the classic names and the newer aliases."""

from __future__ import annotations

import numpy as np

import mlckit as tvm
import mlckit.runtime.gpu  # numba.cuda support, loaded before the test below
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source


def test_python_api_aliases():
    # tvm.compile: build, after the default relax pipeline for a module with relax functions.
    assert tvm.compile.__module__ == tvm.build.__module__ == "mlckit.driver"
    assert tvm.runtime.tensor is tvm.nd.array and tvm.runtime.Tensor is tvm.nd.NDArray
    assert tvm.register_global_func is tvm.register_func
    assert tvm.tirx is tvm.tir
    assert tvm.relax.vm.build is tvm.relax.build
    assert tvm.s_tir.Schedule is tvm.tir.Schedule
    assert tvm.tir.ScheduleError is tvm.tir.schedule.ScheduleError is tvm.errors.ScheduleError
    assert tvm.nd is tvm.runtime and tvm.cuda is tvm.nd.ndarray.cuda and tvm.cpu is tvm.nd.cpu
    assert tvm.exercises.check and tvm.datasets.fashion_mnist
    # The subpackages mlckit loads on first use, for the optional packages they import.
    assert tvm.viz.graph and tvm.widgets.PassStepper and tvm.meta_schedule.tune_relax


def test_newer_tvmscript_spellings_parse_to_the_classic_ir():
    newer = from_source("""
from mlckit.script import tirx as T

@T.prim_func(s_tir=True)
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"tirx.noalias": True})
    C = T.sblock_alloc_buffer((4,), "float32")
    for i in range(4):
        with T.sblock("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + T.float32(1)
    for i in range(4):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = C[vi]
""")
    classic = from_source("""
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"tir.noalias": True})
    C = T.alloc_buffer((4,), "float32")
    for i in range(4):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + T.float32(1)
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = C[vi]
""")
    assert_structural_equal(newer, classic)
    sch = tvm.s_tir.Schedule(newer)
    assert sch.get(sch.get_sblock("C")).name_hint == "C"


def test_out_ty_is_out_sinfo():
    mod = from_source("""
@I.ir_module
class M:
    @T.prim_func(private=True)
    def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = M
        y = R.call_tir(cls.copy, (x,), out_ty=R.Tensor((4,), "float32"))
        return y
""")
    vm = tvm.relax.VirtualMachine(tvm.compile(mod, target="python"), tvm.cpu())
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(x)).numpy(), x)


def test_device_functions_stay_functions_once_the_gpu_support_loads():
    # mlckit.runtime.gpu (numba.cuda support) is loaded above: it must not shadow runtime.cuda.
    assert tvm.nd.cuda(1) == tvm.runtime.cuda(1) == tvm.cuda(1)
    assert tvm.nd.cpu() == tvm.cpu()
