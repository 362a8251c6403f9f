"""What the VM does with the arguments it is given, and with those it gives its kernels: the
right ones run, the wrong ones raise an MLCError naming the argument and saying what to do."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax, te, tir
from mlckit.errors import BuildError, VMError
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.testing.examples import MyModule


@I.ir_module
class Calls:
    @T.prim_func
    def add_half(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(0.5)

    @R.function
    def any_dtype(x: R.Tensor(ndim=1)):
        y = R.call_tir(Calls.add_half, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function(pure=False)
    def into(x: R.Tensor((4,), "float32"), out: R.Tensor((4,), "float32")):
        Calls.add_half(x, out)
        return out

    @R.function
    def shape_of(s: R.Shape(ndim=1)):
        return s


@pytest.fixture(scope="module", params=["python", "llvm"])
def my_vm(request):
    ex = relax.build(relax.transform.LegalizeOps()(MyModule), request.param)
    return relax.VirtualMachine(ex, mlckit.cpu())


def _read_only(array):
    array.setflags(write=False)
    return array


def test_read_only_inputs_are_read(my_vm):
    """On llvm, numba refused read-only arrays (its TypeError reached the student)."""
    x = _read_only(np.arange(12, dtype="float32").reshape(3, 4))
    y = _read_only(np.full((3, 4), 2, "float32"))
    np.testing.assert_array_equal(my_vm["main"](x, y).numpy(), x * y + y)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1.0] * 4] * 3, r"got a list of 3 lists; make it one with mlckit.nd.array\(...\)"),
        (3.0, r"got a float \(3.0\); make it one with mlckit.nd.array"),
        (None, r"expects a tensor, got None"),
        (np.ones((3, 4)), r"expects dtype float32, got a float64 tensor.*\.astype\('float32'\)"),
    ],
    ids=["list", "float", "none", "float64"],
)
def test_a_wrong_argument_is_named_with_how_to_fix_it(my_vm, value, message):
    with pytest.raises(VMError, match=f"main: parameter x .*{message}"):
        my_vm["main"](value, np.ones((3, 4), "float32"))


def test_a_torch_tensor_is_named_with_how_to_convert_it(my_vm):
    torch = pytest.importorskip("torch")
    with pytest.raises(VMError, match=r"got a torch.Tensor of shape \(3, 4\).*pass t.numpy\(\)"):
        my_vm["main"](torch.ones(3, 4), np.ones((3, 4), "float32"))


@pytest.fixture(scope="module", params=["python", "llvm"])
def calls_vm(request):
    return relax.VirtualMachine(relax.build(Calls, request.param), mlckit.cpu())


def test_a_kernel_gets_the_dtype_it_was_written_for_or_a_vm_error(calls_vm):
    """An R.Tensor(ndim=1) of float64 reached the float32 kernel: the python target computed
    in float64, llvm raised numba's TypeError."""
    with pytest.raises(
        VMError, match=r"any_dtype: add_half\(x, y\): argument 0 \(A\) expects dtype float32"
    ):
        calls_vm["any_dtype"](np.ones(4, "float64"))
    np.testing.assert_array_equal(calls_vm["any_dtype"](np.ones(4, "float32")).numpy(), 1.5)


def test_a_kernel_writes_only_into_a_writable_array(calls_vm):
    x = np.ones(4, "float32")
    with pytest.raises(VMError, match=r"into: add_half\(x, out\): argument 1 \(B\) .* read-only"):
        calls_vm["into"](x, _read_only(np.zeros(4, "float32")))
    with pytest.raises(VMError, match=r"argument 1 \(B\) receives a result but shares memory"):
        calls_vm["into"](x, x)
    with pytest.raises(
        VMError, match=r"into: parameter out receives a result, but .* C-contiguous"
    ):
        calls_vm["into"](x, np.zeros(8, "float32")[::2])  # the result would go to a copy
    np.testing.assert_array_equal(calls_vm["into"](x, np.zeros(4, "float32")).numpy(), 1.5)


def test_a_shape_argument_holds_integers(calls_vm):
    with pytest.raises(VMError, match=r"parameter s expects a shape of 1 dims \(a tuple of ints\)"):
        calls_vm["shape_of"]((1, 2))
    with pytest.raises(
        VMError, match=r"parameter s, dimension 0, expects an int64 scalar, got a fl"
    ):
        calls_vm["shape_of"]((2.5,))
    with pytest.raises(VMError, match=r"parameter s, dimension 0, .* outside the range of int64"):
        calls_vm["shape_of"]((2**63,))
    assert calls_vm["shape_of"]([3]) == [3]


def test_a_call_tir_whose_output_disagrees_with_the_kernel_is_refused_at_build_time():
    """The python target filled an int32 output with the kernel's truncated float32 values."""

    @I.ir_module
    class WrongOutput:
        @T.prim_func
        def add_half(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi] + T.float32(0.5)

        @R.function
        def main(x: R.Tensor((4,), "float32")):
            y = R.call_tir(WrongOutput.add_half, (x,), out_sinfo=R.Tensor((4,), "int32"))
            return y

    with pytest.raises(
        BuildError,
        match=r"main: add_half\(x, y\): argument 1 \(B\) expects a float32 tensor, but gets "
        r"R.Tensor\(\(4,\), dtype=\"int32\"\)",
    ):
        relax.build(WrongOutput, "python")


def test_arguments_go_by_position_and_the_device_is_a_device(my_vm):
    """Keyword arguments and a device given as a string raised bare TypeError/AttributeError."""
    x = np.ones((3, 4), "float32")
    with pytest.raises(VMError, match=r"main takes its arguments by position, main\(x, y\)"):
        my_vm["main"](x=x, y=x)
    with pytest.raises(VMError, match=r"runs on a device such as mlckit.cpu\(\).*not a str"):
        relax.VirtualMachine(my_vm.executable, "cpu")


@I.ir_module
class Untyped:
    @R.function
    def cond(c: R.Tensor(dtype="bool"), x: R.Tensor((2,), "float32")):
        if c:
            y = x
        else:
            y = R.add(x, x)
        return y

    @R.function
    def second(t: R.Object):
        return t[1]


def test_values_that_struct_info_leaves_open_are_checked_where_they_are_used():
    """A condition of two elements raised numpy's ValueError, field 1 of an int a TypeError."""
    vm = relax.VirtualMachine(relax.build(relax.transform.LegalizeOps()(Untyped), "python"))
    x = np.ones(2, "float32")
    with pytest.raises(VMError, match=r"cond: the condition of the if that defines y must be one"):
        vm["cond"](np.array([True, False]), x)
    np.testing.assert_array_equal(vm["cond"](np.array(False), x).numpy(), 2 * x)
    with pytest.raises(VMError, match=r"second: t\[1\] takes field 1 of a tuple, got an int \(5\)"):
        vm["second"](5)
    assert vm["second"]((1, 2)) == 2


def test_a_registered_function_returns_what_the_call_declares():
    """A float64 result declared float32 went on to the kernels unchecked."""

    @mlckit.register_func("test.vm.twice", override=True)
    def twice(x):
        return mlckit.nd.array(np.from_dlpack(x).astype("float64") * 2)

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        declared = relax.TensorStructInfo((4,), "float32")
        bb.emit_func_output(
            bb.emit(relax.op.call_pure_packed("test.vm.twice", x, sinfo_args=declared))
        )
    vm = relax.VirtualMachine(relax.build(bb.get(), "python"))
    try:
        with pytest.raises(
            VMError, match=r"main: the result of test.vm.twice expects dtype float32, got a float64"
        ):
            vm["main"](np.ones(4, "float32"))
    finally:
        mlckit.runtime.remove_global_func("test.vm.twice")


def _quotient(x: te.Tensor, y: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda i: tir.floordiv(x[i], y[i]), name="q")


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_an_integer_division_by_zero_in_the_data_is_a_vm_error(target):
    # Both targets raised a bare ZeroDivisionError from inside the kernel.
    a, b = (relax.Var(n, relax.TensorStructInfo((3,), "int32")) for n in "ab")
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        bb.emit_func_output(bb.emit_te(_quotient, a, b))
    vm = relax.VirtualMachine(relax.build(bb.get(), target), mlckit.cpu())
    numerators = np.array([4, 5, 6], "int32")
    quotients = vm["main"](numerators, np.array([2, 2, 2], "int32")).numpy()
    np.testing.assert_array_equal(quotients, [2, 2, 3])
    with pytest.raises(VMError, match="main: integer division by zero"):
        vm["main"](numerators, np.array([2, 0, 2], "int32"))

    x, y = (te.placeholder((3,), "int32", name=n) for n in "xy")
    kernel = mlckit.build(te.create_prim_func([x, y, _quotient(x, y)]), target)
    with pytest.raises(VMError, match="integer division by zero"):
        kernel["main"](numerators, np.array([0, 1, 1], "int32"), np.empty(3, "int32"))
