"""A compiled kernel refuses arguments its loops would misread, with an MLCError."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit.errors import VMError
from mlckit.script import tir as T


@T.prim_func
def add_one(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func
def add_rows(a: T.handle, b: T.handle, c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 4), "float32")
    B = T.match_buffer(b, (n, 4), "float32")
    C = T.match_buffer(c, (n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_wrong_static_shape_is_refused(target):
    lib = mlckit.build(add_one, target)
    out = np.zeros((4, 4), "float32")
    with pytest.raises(
        VMError,
        match=r"add_one: argument 0 \(A\) expects shape \(4, 4\), got a float32 tensor of shape \(3, 4\)",
    ):
        lib["add_one"](np.zeros((3, 4), "float32"), out)
    assert not out.any()  # nothing was written
    lib["add_one"](np.ones((4, 4), "float32"), out)
    np.testing.assert_array_equal(out, 2)


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_symbolic_dims_must_agree_across_arguments(target):
    lib = mlckit.build(add_rows, target)
    a, b = np.ones((3, 4), "float32"), np.ones((3, 4), "float32")
    with pytest.raises(VMError, match=r"add_rows: C must have shape \(n, 4\)"):
        lib["add_rows"](a, b, np.zeros((2, 4), "float32"))
    c = np.zeros((3, 4), "float32")
    lib["add_rows"](a, b, c)
    np.testing.assert_array_equal(c, 2)
    assert "if B.shape != (n, 4):" in lib.source("add_rows")


@T.prim_func
def scale_to_int(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32"), k: T.int32):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.Cast("int32", A[vi]) * k


TARGETS = ["python", "llvm", "cuda"]  # cuda: numba's simulator on a machine without a GPU


def _build(func, target, block):
    """``func`` compiled for ``target``; for cuda, the outer loop of ``block`` bound to the
    GPU's threads."""
    if target != "cuda":
        return mlckit.build(func, target)
    sch = mlckit.tir.Schedule(func)
    sch.bind(sch.get_loops(sch.get_block(block))[0], "threadIdx.x")
    return mlckit.build(sch.mod["main"], "cuda")


@pytest.fixture(scope="module", params=TARGETS)
def scale_lib(request):
    return _build(scale_to_int, request.param, "B")


def _a():
    return np.array([1.5, 2.5, -1.5, 4.0], "float32")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((_a(), np.zeros(4, "float32"), 2), r"argument 1 \(B\) expects dtype int32, got a float32"),
        (
            (_a().astype("float64"), np.zeros(4, "int32"), 2),
            r"argument 0 \(A\) expects dtype float32",
        ),
        (
            (_a().reshape(2, 2), np.zeros(4, "int32"), 2),
            r"argument 0 \(A\) expects a tensor of rank 1",
        ),
        (
            ([1.0, 2.0, 3.0, 4.0], np.zeros(4, "int32"), 2),
            r"got a list of 4 floats; make it one with mlckit.nd.array",
        ),
        ((None, np.zeros(4, "int32"), 2), r"argument 0 \(A\) expects a float32 tensor, got None"),
        (
            (_a(), np.zeros(4, "int32"), 2.5),
            r"argument 2 \(k\) expects an int32 scalar, got a float \(2.5\)",
        ),
        (
            (_a(), np.zeros(4, "int32"), True),
            r"argument 2 \(k\) expects an int32 scalar, got a bool",
        ),
        ((_a(), np.zeros(4, "int32")), r"scale_to_int takes 3 arguments \(A, B, k\), got 2"),
        ((_a(), np.zeros(4, "int32"), 2**31), r"\(k\) .*2147483648\), outside the range of int32"),
    ],
    ids=[
        "output-dtype",
        "input-dtype",
        "rank",
        "list",
        "none",
        "float-scalar",
        "bool-scalar",
        "count",
        "int-range",
    ],
)
def test_every_target_checks_kind_rank_dtype_and_count_alike(scale_lib, args, message):
    """The python target wrote truncated floats into an int32 output where llvm refused it."""
    with pytest.raises(VMError, match=message):
        scale_lib["scale_to_int"](*args)


def test_arguments_go_by_position(scale_lib):
    with pytest.raises(VMError, match=r"scale_to_int takes its arguments by position"):
        scale_lib["scale_to_int"](A=_a(), B=np.zeros(4, "int32"), k=2)


def test_a_torch_tensor_is_named_with_the_way_to_convert_it(scale_lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(VMError, match=r"got a torch.Tensor of shape \(4,\).*pass t.numpy\(\)"):
        scale_lib["scale_to_int"](torch.ones(4), np.zeros(4, "int32"), 2)


def test_read_only_inputs_are_read_and_a_read_only_output_is_refused(scale_lib):
    a = _a()
    a.setflags(write=False)  # as np.frombuffer, a broadcast view or a memory map give
    out = np.zeros(4, "int32")
    scale_lib["scale_to_int"](a, out, 2)
    np.testing.assert_array_equal(out, a.astype("int32") * 2)
    out.setflags(write=False)
    with pytest.raises(
        VMError, match=r"argument 1 \(B\) receives a result but its array is read-only"
    ):
        scale_lib["scale_to_int"](_a(), out, 2)


@T.prim_func
def pick_row(
    A: T.Buffer((3, 4), "float32"), index: T.Buffer((), "int64"), B: T.Buffer((4,), "float32")
):
    for j in range(4):
        with T.block("B"):
            vj = T.axis.spatial(4, j)
            B[vj] = A[index[()], vj]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_a_zero_dimensional_buffer_is_an_argument(target):
    lib = mlckit.build(pick_row, target)
    a, out = np.arange(12, dtype="float32").reshape(3, 4), np.zeros(4, "float32")
    lib["pick_row"](a, np.array(2, "int64"), out)
    np.testing.assert_array_equal(out, a[2])


@T.prim_func
def matmul_4(
    A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")
):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@pytest.mark.parametrize("target", TARGETS)
def test_an_output_that_overlaps_another_argument_is_refused(target):
    """Kernels assume tir.noalias: in place, C = A @ C would read what it has overwritten."""
    lib = _build(matmul_4, target, "C")
    a = np.arange(16, dtype="float32").reshape(4, 4)
    eye = np.eye(4, dtype="float32")
    if target == "cuda":  # host inputs are copied to the GPU, so only device arrays overlap
        a, eye = mlckit.nd.array(a, mlckit.cuda()), mlckit.nd.array(eye, mlckit.cuda())
    with pytest.raises(
        VMError, match=r"argument 2 \(C\) receives a result but shares memory with argument 0 \(A\)"
    ):
        lib["matmul_4"](a, eye, a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(16).reshape(4, 4))  # nothing written
    # The same array as two inputs is fine: neither is written.
    out = (
        mlckit.nd.empty((4, 4), "float32", a.device)
        if target == "cuda"
        else np.empty((4, 4), "float32")
    )
    lib["matmul_4"](a, a, out)
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) @ np.asarray(a))


def test_a_strided_output_is_refused_instead_of_written_to_a_copy():
    lib = mlckit.build(add_one, "llvm")
    wide = np.zeros((4, 8), "float32")
    with pytest.raises(
        VMError, match=r"argument 1 \(B\) receives a result but is not C-contiguous"
    ):
        lib["add_one"](np.ones((4, 4), "float32"), wide[:, ::2])
    # A strided input is copied, as before.
    out = np.empty((4, 4), "float32")
    lib["add_one"](wide[:, ::2], out)
    np.testing.assert_array_equal(out, 1)
