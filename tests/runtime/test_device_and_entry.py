"""TVM's device constructor and a module's entry function, as the course calls them."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit as tvm
from mlckit.errors import MLCError
from mlckit.script import from_source

TWO_FUNCTIONS = """
@I.ir_module
class M:
    @T.prim_func
    def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(1)

    @T.prim_func
    def twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(2)
"""


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        (("cpu",), tvm.cpu(0)),
        (("llvm", 0), tvm.cpu(0)),
        (("llvm --num-cores=1",), tvm.cpu(0)),
        (("cuda", 1), tvm.cuda(1)),
        (("gpu",), tvm.cuda(0)),
        ((1,), tvm.cpu(0)),
        ((2, 3), tvm.cuda(3)),
    ],
)
def test_device_spellings(spelling, expected):
    assert tvm.device(*spelling) == expected


@pytest.mark.parametrize(
    ("spelling", "words"), [(("opencl",), "CPUs and NVIDIA GPUs"), (("cpu", -1), "int >= 0")]
)
def test_device_refuses(spelling, words):
    with pytest.raises(MLCError, match=words):
        tvm.device(*spelling)


def test_calling_a_module_runs_main():
    lib = tvm.build(from_source(TWO_FUNCTIONS), "llvm")
    a, b = tvm.nd.array(np.arange(4, dtype="float32")), tvm.nd.empty((4,), "float32")
    assert lib.entry_name == "main"
    lib(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(4) + 1)
    assert lib.time_evaluator(lib.entry_name, tvm.cpu(), number=1)(a, b).mean > 0


def test_a_module_without_main_names_its_functions():
    mod = from_source(TWO_FUNCTIONS)
    lib = tvm.build(tvm.IRModule({"twice": mod["twice"], "once": mod["main"]}), "llvm")
    with pytest.raises(MLCError, match="no entry function"):
        lib.entry_name


def test_a_cpu_build_imports_no_device_module():
    lib = tvm.build(from_source(TWO_FUNCTIONS), "llvm")
    assert lib.imported_modules == []
    assert lib.type_key == "llvm"


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
def test_a_cuda_build_shows_its_kernels_through_its_device_module():
    sch = tvm.tir.Schedule(from_source(TWO_FUNCTIONS)["main"])
    sch.bind(sch.get_loops("B")[0], "threadIdx.x")
    (device_module,) = tvm.build(sch.mod, "cuda").imported_modules
    assert device_module.type_key == "cuda"
    assert "@cuda.jit" in device_module.get_source()
