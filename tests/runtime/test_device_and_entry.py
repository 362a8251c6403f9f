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
    # Renamed with its global_symbol too: that is the name a build gives it.
    once = mod["main"].with_attr("global_symbol", "once")
    lib = tvm.build(tvm.IRModule({"twice": mod["twice"], "once": once}), "llvm")
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


SCALE_TRANSPOSE = """
@T.prim_func
def scale_transpose(A: T.Buffer((2, 3), "float32"), B: T.Buffer((3, 2), "float32")):
    T.func_attr({"global_symbol": "scale_transpose", "tir.noalias": True})
    for i, j in T.grid(3, 2):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] * T.float32(2)
"""


def test_a_built_function_is_named_by_its_global_symbol():
    # As in TVM: a schedule's module holds the function as "main", the build names it by its
    # global_symbol; the module's own name still answers.
    sch = tvm.tir.Schedule(from_source(SCALE_TRANSPOSE))
    lib = tvm.build(sch.mod)
    assert lib.function_names() == ["scale_transpose"]
    a = np.arange(6, dtype="float32").reshape(2, 3)
    for name in ("scale_transpose", "main"):
        b = np.zeros((3, 2), "float32")
        lib[name](a, b)
        np.testing.assert_array_equal(b, a.T * 2)
    assert "main" in lib and lib.source("main") == lib.source("scale_transpose")


def test_two_functions_with_one_global_symbol_are_refused():
    func = from_source(SCALE_TRANSPOSE)
    mod = tvm.IRModule({"main": func, "other": func})
    with pytest.raises(
        tvm.BuildError, match="'main' and 'other' .* global_symbol 'scale_transpose'"
    ):
        tvm.build(mod)
