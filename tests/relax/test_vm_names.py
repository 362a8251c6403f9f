"""Every user name reaches the VM's generated Python sanitized, unique, or quoted: a name never
stands for another value, and no name is ever run as code."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.errors import IRError
from mlckit.script import tir as T
from mlckit.testing.fuzzing import CANARY, canary_payload


@T.prim_func
def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]


def _run(mod, *args, target="python"):
    return relax.VirtualMachine(relax.build(mod, target))[_main_name(mod)](*args)


def _main_name(mod):
    return next(gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function))


@pytest.mark.parametrize("name", ["β", "_", "γ"])
def test_a_parameter_that_sanitizes_to_the_placeholder_keeps_its_value(name):
    """`def main(β: R.Tensor((4, n)))` returned the 4 that `_, n = check_tensor(...)` bound."""
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    beta = relax.Var(name, relax.TensorStructInfo((4, n), "float32"))
    with bb.function("main", [beta]):
        bb.emit_func_output(beta)
    x = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_array_equal(_run(bb.get(), x).numpy(), x)


# Names the generated code itself uses: the runtime's functions, numpy, the builtins of the
# shape arithmetic, the placeholder, and the module's own builtins.
RUNTIME_NAMES = ["np", "check_tensor", "constants", "aligned_empty", "min", "__builtins__", "_"]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_names_of_the_generated_code_are_never_taken_by_user_names(target):
    n = tir.Var("_", "int64")  # a symbolic dim named like the placeholder
    bb = relax.BlockBuilder()
    gv = bb.add_func(add, "np")  # a kernel named like numpy
    params = [relax.Var(name, relax.TensorStructInfo((4,), "float32")) for name in RUNTIME_NAMES]
    sized = relax.Var("β", relax.TensorStructInfo((4, n), "float32"))
    with bb.function("check_tensor", [*params, sized]):  # a function named like a check
        total = params[0]
        for param in params[1:]:
            total = bb.emit(
                relax.op.call_tir(gv, (total, param), relax.TensorStructInfo((4,), "float32"))
            )
        bb.emit_func_output(relax.Tuple([total, sized]))
    ex = relax.build(bb.get(), target)
    args = [np.full(4, i + 1, "float32") for i in range(len(params))]
    total, sized_out = relax.VirtualMachine(ex)["check_tensor"](*args, np.ones((4, 3), "float32"))
    np.testing.assert_array_equal(total.numpy(), np.full(4, sum(range(1, len(params) + 1))))
    np.testing.assert_array_equal(sized_out.numpy(), np.ones((4, 3)))


def test_packed_function_names_are_string_literals_never_code():
    """A registered name is looked up by its text, whatever characters it holds."""
    name = f"env.{canary_payload()}\"'\n# {{}}"
    calls = []

    @mlckit.register_func(name, override=True)
    def copy(x, out):
        calls.append(name)
        np.from_dlpack(out)[...] = np.from_dlpack(x)

    try:
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
        with bb.function("main", [x]):
            out = bb.emit(
                relax.op.call_dps_packed(name, (x,), relax.TensorStructInfo((4,), "float32"))
            )
            bb.emit_func_output(out)
        result = _run(bb.get(), np.arange(4, dtype="float32"))
    finally:
        mlckit.runtime.remove_global_func(name)
    assert not hasattr(builtins, CANARY)
    assert calls == [name]
    np.testing.assert_array_equal(result.numpy(), np.arange(4))


@pytest.mark.parametrize(
    "make",
    [
        lambda: relax.DataTypeImm("float32); import os; (1"),
        lambda: relax.StringImm(42),
        lambda: relax.ExternFunc(("env", "f")),
        lambda: relax.Var(7),
    ],
    ids=["dtype", "string", "extern", "var"],
)
def test_text_that_reaches_generated_code_is_checked_when_the_node_is_made(make):
    with pytest.raises(IRError):
        make()
