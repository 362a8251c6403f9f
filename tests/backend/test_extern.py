"""Kernels that call external functions: ``T.call_extern`` on a strided region matched in a
block, calling a registered Python function (compiled into the kernel by numba) or a C function
compiled from source with the system's compiler; and the errors when either is missing."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import tir
from mlckit.backend import kernel_source
from mlckit.backend.extern import find_compiler
from mlckit.contrib import clang
from mlckit.errors import BuildError
from mlckit.script import tir as T
from mlckit.target import Target


def _have_compiler() -> bool:
    try:
        find_compiler()
    except BuildError:
        return False
    return True


needs_compiler = pytest.mark.skipif(not _have_compiler(), reason="no C++ compiler installed")


@tir.op.register_extern("test_scale_tile", override=True)
def scale_tile(x, by):
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            x[i, j] *= by
    return 0


SCALE_TILE_C = """
extern "C" int test_scale_tile(float* x, int stride, float by) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) x[i * stride + j] *= by;
  return 0;
}
"""


def _tiles(pragma: dict | None, python_args: bool):
    """A function scaling each 4x2 tile of an 8x8 buffer (the left half of each 4x4 tile) by 3
    through the extern test_scale_tile, given the tile as a strided view."""

    @T.prim_func
    def scale_tiles(A: T.Buffer((8, 8), "float32")):
        for i in T.serial(2, annotations=pragma):
            for j in range(2):
                with T.block("tile"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    s = T.int32()
                    X = T.match_buffer(
                        A[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 2],
                        (4, 2),
                        "float32",
                        strides=[s, 1],
                    )
                    if python_args:
                        T.evaluate(
                            T.call_extern("int32", "test_scale_tile", X.access_ptr("rw"), 3.0)
                        )
                    else:
                        T.evaluate(
                            T.call_extern(
                                "int32", "test_scale_tile", X.access_ptr("rw"), s, T.float32(3)
                            )
                        )

    return scale_tiles


def _expected(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    for i in range(2):
        for j in range(2):
            out[i * 4 : i * 4 + 4, j * 4 : j * 4 + 2] *= 3
    return out


def _run(func, target: str) -> np.ndarray:
    a = np.arange(64, dtype="float32").reshape(8, 8)
    arr = mlckit.nd.array(a)
    mlckit.build(func, target=target)["scale_tiles"](arr)
    np.testing.assert_allclose(arr.numpy(), _expected(a))
    return arr.numpy()


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_python_extern_on_a_strided_region(target):
    _run(_tiles(None, python_args=True), target)


@needs_compiler
@pytest.mark.parametrize("target", ["python", "llvm"])
def test_c_extern_on_a_strided_region(target):
    func = _tiles({"pragma_import_llvm": clang.create_llvm(SCALE_TILE_C)}, python_args=False)
    _run(func, target)


@needs_compiler
def test_c_extern_source_reads_well():
    func = _tiles({"pragma_import_llvm": clang.create_llvm(SCALE_TILE_C)}, python_args=False)
    source = kernel_source(func, "scale_tiles", Target("llvm"))[0]
    assert "s = X.strides[0] // X.itemsize" in source
    assert "test_scale_tile(X.ctypes.data, s, np.float32(3.0))" in source
    assert "cache=False" in source


def test_missing_extern_names_the_registered_ones():
    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        T.evaluate(T.call_extern("int32", "no_such_extern", A.access_ptr("r")))

    with pytest.raises(BuildError) as info:
        mlckit.build(f, target="llvm")
    message = str(info.value)
    assert "no extern function named 'no_such_extern'" in message
    assert "'test_scale_tile'" in message
    assert "no C library is attached" in message


@needs_compiler
def test_c_library_without_the_symbol():
    code = clang.create_llvm('extern "C" int other(int x) { return x; }')

    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        for i in T.serial(1, annotations={"pragma_import_llvm": code}):
            T.evaluate(T.call_extern("int32", "test_missing_in_c", A.access_ptr("r"), i))

    with pytest.raises(BuildError, match='do not export it \\(a C\\+\\+ function needs extern "C"'):
        mlckit.build(f, target="llvm")


def test_missing_compiler_on_the_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(BuildError) as info:
        clang.create_llvm('extern "C" int f() { return 1; } // ' + str(tmp_path))
    message = str(info.value)
    assert "no C++ compiler found" in message and "g++, clang++, c++" in message
    assert "register_extern" in message


def test_missing_named_compiler():
    with pytest.raises(BuildError, match="looked for no-such-cc on the PATH"):
        clang.create_llvm('extern "C" int f() { return 2; }', cc="no-such-cc")


@needs_compiler
def test_code_that_does_not_compile():
    with pytest.raises(BuildError, match="could not compile the extern's source"):
        clang.create_llvm("this is not C++")


def test_python_extern_refuses_a_pointer_offset():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32")):
        T.evaluate(T.call_extern("int32", "test_scale_tile", A.access_ptr("rw", offset=4), 2.0))

    with pytest.raises(BuildError, match="a Python extern takes A's array"):
        mlckit.build(f, target="python")


def test_extern_on_the_gpu_is_refused():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32")):
        for _i in T.thread_binding(1, thread="threadIdx.x"):
            T.evaluate(T.call_extern("int32", "test_scale_tile", A.access_ptr("rw"), 2.0))

    with pytest.raises(BuildError, match="external functions are called from CPU kernels"):
        mlckit.build(f, target="cuda")


def test_symbolic_strides_of_a_parameter_are_read_off_its_array():
    @T.prim_func
    def f(a: T.handle, b: T.handle):
        s = T.int32()
        A = T.match_buffer(a, (4, 4), "float32", strides=[s, 1])
        B = T.match_buffer(b, (1,), "int32")
        with T.block("root"):
            B[0] = s

    out = mlckit.nd.array(np.zeros(1, "int32"))
    mlckit.build(f, target="llvm")["f"](mlckit.nd.array(np.zeros((4, 4), "float32")), out)
    assert out.numpy()[0] == 4
