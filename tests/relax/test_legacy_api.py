"""Early Relax's API, as the MLC course writes it: each spelling means today's struct info,
warns once per process with the modern spelling, and a use that cannot be mapped is a clear
error."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import mlckit as tvm
import mlckit.testing
from mlckit import errors, relax, te, tir, topi
from mlckit.errors import IRError, MLCError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no old spelling announced yet."""
    monkeypatch.setattr(errors, "_warned_spellings", set())


def future_warnings(action: Callable[[], Any]) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    return result, [w for w in caught if issubclass(w.category, FutureWarning)]


def old_var(name: str = "x", shape: Any = (1, 784)) -> relax.Var:
    return relax.Var(name, shape, relax.DynTensorType(len(shape), "float32"))


# ------------------------------------------------------------------ the equivalent struct info
def test_dyn_tensor_type_is_a_tensor_of_known_rank_and_dtype():
    typ = relax.DynTensorType(2, "float32")
    assert (typ.ndim, typ.dtype) == (2, "float32")
    assert typ == relax.DynTensorType(2, "float32") != relax.DynTensorType(2, "int32")
    assert_structural_equal(typ.struct_info(), relax.TensorStructInfo(ndim=2, dtype="float32"))
    assert relax.DynTensorType().struct_info().ndim == -1


@pytest.mark.parametrize(
    "shape", [(1, 784), [1, 784], relax.ShapeExpr([1, 784])], ids=["tuple", "list", "ShapeExpr"]
)
def test_var_with_shape_and_type_is_var_with_struct_info(shape):
    x = relax.Var("x", shape, relax.DynTensorType(2, "float32"))
    assert_structural_equal(x.struct_info, relax.TensorStructInfo((1, 784), "float32"))
    assert x.name_hint == "x"


def test_var_with_symbolic_shape_and_unknown_shape():
    n = tir.Var("n", "int64")
    x = relax.Var("x", (n, 1, 28, 28), relax.DynTensorType(4, "float32"))
    assert x.struct_info.shape_values[0] is n
    y = relax.Var("y", None, relax.DynTensorType(3, "int32"))
    assert_structural_equal(y.struct_info, relax.TensorStructInfo(ndim=3, dtype="int32"))
    z = relax.Var("z", (2, 3), relax.DynTensorType(-1, "float32"))  # rank from the shape
    assert z.struct_info.ndim == 2
    lv = relax.DataflowVar("lv", (2, 3), relax.DynTensorType(2, "float32"))
    assert isinstance(lv, relax.DataflowVar) and lv.struct_info.ndim == 2


def test_shape_and_checked_type_read_the_struct_info():
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    assert_structural_equal(x.shape_, relax.ShapeExpr([1, 784]))
    assert x._checked_type_ == relax.DynTensorType(2, "float32")
    # The course's copy of a variable's annotations makes an equally typed variable.
    y = relax.Var("y", x.shape_, x._checked_type_)
    assert_structural_equal(y.struct_info, x.struct_info)
    c = relax.const(np.zeros((3,), "int32"))
    assert c._checked_type_ == relax.DynTensorType(1, "int32")
    unknown = relax.Var("u", relax.TensorStructInfo(ndim=2, dtype="float32"))
    assert unknown.shape_ is None


def test_const_with_a_type_takes_its_dtype():
    value = np.arange(6, dtype="float64").reshape(2, 3)
    c = relax.const(value, relax.DynTensorType(2, "float32"))
    assert c.data.dtype == "float32"
    np.testing.assert_array_equal(c.data.numpy(), value)


# ------------------------------------------------------------------ warned once, in the user's code
def test_each_spelling_warns_once_naming_the_modern_one():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    spellings = {
        "relax.DynTensorType(ndim, dtype)": lambda: relax.DynTensorType(2, "float32"),
        "relax.Var(name, shape, type_annotation)": lambda: relax.Var("y", (2, 3), x._checked_type_),
        "expr.shape_": lambda: x.shape_,
        "expr._checked_type_": lambda: x._checked_type_,
        "relax.const(value, relax.DynTensorType(ndim, dtype))": lambda: relax.const(
            np.zeros((2, 3)), x._checked_type_
        ),
    }
    modern = {
        "relax.DynTensorType(ndim, dtype)": "relax.TensorStructInfo(shape, dtype)",
        "relax.Var(name, shape, type_annotation)": "relax.TensorStructInfo(shape, dtype)",
        "expr.shape_": "expr.struct_info.shape",
        "expr._checked_type_": "expr.struct_info",
        "relax.const(value, relax.DynTensorType(ndim, dtype))": "relax.const(value, dtype)",
    }
    for old, action in spellings.items():
        errors._warned_spellings.clear()
        _, first = future_warnings(action)
        _, again = future_warnings(action)
        mine = [w for w in first if str(w.message).startswith(old)]
        assert len(mine) == 1, (old, [str(w.message) for w in first])
        assert modern[old] in str(mine[0].message)
        assert not [w for w in again if str(w.message).startswith(old)], old


def test_the_warning_points_at_the_users_line():
    _, caught = future_warnings(lambda: old_var())
    assert {w.filename for w in caught} == {__file__}, [(w.filename, w.lineno) for w in caught]


# ------------------------------------------------------------------ a module built with them
def build_mlp(var: Callable[[], relax.Var], weight: Callable[[np.ndarray], relax.Constant]):
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((16, 8), "float32"), rng.standard_normal((1, 16), "float32")
    bb = relax.BlockBuilder()
    x = var()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit_te(topi.nn.dense, x, weight(w0))
            lv1 = bb.emit_te(topi.add, lv0, weight(b0))
            gv = bb.emit_output(bb.emit_te(topi.nn.relu, lv1))
        bb.emit_func_output(gv)
    return bb.get(), w0, b0


def test_a_module_built_with_the_old_api_is_the_modern_one_and_runs():
    old, w0, b0 = build_mlp(
        lambda: old_var("x", (4, 8)),
        lambda w: relax.const(w, relax.DynTensorType(w.ndim, "float32")),
    )
    modern, _, _ = build_mlp(
        lambda: relax.Var("x", relax.TensorStructInfo((4, 8), "float32")),
        lambda w: relax.const(w, "float32"),
    )
    assert_structural_equal(old, modern)
    assert_structural_equal(from_source(old.script(show_meta=True)), old)
    data = np.random.default_rng(1).standard_normal((4, 8), "float32")
    vm = relax.VirtualMachine(relax.vm_build.build(old, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(
        vm["main"](tvm.nd.array(data)).numpy(), np.maximum(data @ w0.T + b0, 0), rtol=1e-5
    )


def test_vm_build_is_relax_build():
    assert relax.vm_build.build is relax.build is relax.vm.build
    assert relax.vm_build.Executable is relax.Executable


# ------------------------------------------------------------------ uses that cannot be mapped
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: relax.DynTensorType(-2, "float32"), "ndim is the tensor's rank"),
        (lambda: relax.DynTensorType("2", "float32"), "ndim is the tensor's rank"),
        (lambda: relax.DynTensorType(2, "float33"), "did you mean 'float32'"),
        (
            lambda: relax.Var("y", (1, 784), relax.DynTensorType(3)),
            "relax.Var('y', ...): the shape (1, 784) has 2 dims but its type "
            'relax.DynTensorType(3, "float32") says 3',
        ),
        (
            lambda: relax.Var("x", (1, 784), "float32"),
            "third argument is the variable's type, a relax.DynTensorType",
        ),
        (
            lambda: relax.Var("x", relax.TensorStructInfo((1,), "float32"), relax.DynTensorType(1)),
            "a struct info already says the dtype",
        ),
        (
            lambda: relax.const(np.zeros((2, 3)), relax.DynTensorType(1, "float32")),
            "the value has 2 dims but its type",
        ),
    ],
    ids=["negative-ndim", "str-ndim", "dtype", "rank", "type", "struct-info", "const-rank"],
)
def test_bad_uses_are_clear_errors(make, message):
    with pytest.raises(IRError, match=re.escape(message)):
        make()


def test_non_tensors_have_no_old_shape_or_type():
    pair = relax.Var("p", relax.TupleStructInfo([relax.ObjectStructInfo()]))
    with pytest.raises(MLCError, match=r"relax.Var p .* is not a tensor: expr.shape_"):
        pair.shape_
    s = relax.Var("s", relax.ShapeStructInfo([2, 3]))
    with pytest.raises(MLCError, match=r"not a tensor: early Relax's type .*struct_info"):
        s._checked_type_
    with pytest.raises(MLCError, match="has no struct info yet"):
        relax.Var("bare").shape_


# ------------------------------------------------------------------ the course's fx importer
def test_function_output_may_be_the_dataflow_var_emit_output_carried_out():
    # The course's from_fx returns the dataflow variable it passed to bb.emit_output.
    def build(output_of: Callable[[relax.Var, relax.Var, relax.Var], Any]) -> tvm.IRModule:
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
        with bb.function("main"):
            with bb.dataflow():
                lv = bb.emit_te(topi.nn.relu, x)
                gv = bb.emit_output(lv)
            bb.emit_func_output(output_of(x, lv, gv), [x])
        return bb.get()

    mod, caught = future_warnings(lambda: build(lambda x, lv, gv: lv))
    assert_structural_equal(mod, build(lambda x, lv, gv: gv))
    assert [str(w.message).split(" is ")[0] for w in caught] == [
        "bb.emit_func_output(lv) for a dataflow variable lv"
    ]
    assert caught[0].filename == __file__
    assert_structural_equal(
        build(lambda x, lv, gv: (lv, x)), build(lambda x, lv, gv: relax.Tuple([gv, x]))
    )


def test_a_dataflow_var_no_output_carried_out_stays_an_error():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit_te(topi.nn.relu, x)
            bb.emit_output(bb.emit_te(topi.nn.relu, lv))
        with pytest.raises(MLCError, match="'lv' of function 'main' is a dataflow variable"):
            bb.emit_func_output(lv)
        bb.emit_func_output(x)


# ------------------------------------------------------------------ the course's assignment 1
def test_assignment_model_with_symbolic_batch_via_emit_te():
    # What the assignment asks for: its CNN with bb.emit_te and topi, batch left symbolic.
    rng = np.random.default_rng(2)
    weights = {
        "conv_w": rng.standard_normal((4, 1, 3, 3), "float32"),
        "conv_b": rng.standard_normal((1, 4, 1, 1), "float32"),
        "dense_w": rng.standard_normal((5, 36), "float32"),
        "dense_b": rng.standard_normal((1, 5), "float32"),
    }
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", (n, 1, 8, 8), relax.DynTensorType(4, "float32"))
    w = {k: relax.const(v, "float32") for k, v in weights.items()}
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit_te(topi.nn.conv2d, x, w["conv_w"], strides=1, padding=0, dilation=1)
            lv = bb.emit_te(topi.add, lv, w["conv_b"])
            lv = bb.emit_te(topi.nn.relu, lv)
            lv = bb.emit_te(
                topi.nn.pool2d, lv, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], pool_type="max"
            )
            lv = bb.emit_te(topi.nn.flatten, lv)
            lv = bb.emit_te(topi.nn.dense, lv, w["dense_w"])
            lv = bb.emit_te(topi.add, lv, w["dense_b"])
            gv = bb.emit_output(bb.emit_te(topi.nn.softmax, lv, axis=1))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(relax.vm.build(bb.get(), "llvm"), tvm.cpu())

    data = rng.standard_normal((3, 1, 8, 8), "float32")
    windows = np.lib.stride_tricks.sliding_window_view(data, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwij,fcij->nfhw", windows, weights["conv_w"]) + weights["conv_b"]
    pooled = np.maximum(conv, 0).reshape(3, 4, 3, 2, 3, 2).max(axis=(3, 5))
    logits = pooled.reshape(3, 36) @ weights["dense_w"].T + weights["dense_b"]
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    tvm.testing.assert_allclose(vm["main"](tvm.nd.array(data)), expected, rtol=1e-4, atol=1e-6)


def test_topi_conv2d_names_the_one_layout_it_has():
    data, kernel = te.placeholder((1, 1, 4, 4)), te.placeholder((1, 1, 3, 3))
    with pytest.raises(MLCError, match="only NCHW data with an OIHW kernel"):
        topi.nn.conv2d(data, kernel, 1, 0, 1, data_layout="NHWC")


def test_the_assignments_check_compares_shapes_too():
    # tvm.testing.assert_allclose, the assignment's check_equivalence: no broadcasting.
    tvm.testing.assert_allclose(tvm.nd.array(np.ones((2, 3), "float32")), np.ones((2, 3)))
    with pytest.raises(AssertionError, match="the shapes differ"):
        tvm.testing.assert_allclose(np.ones((2, 3)), np.ones((1, 3)))
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        tvm.testing.assert_allclose(np.ones(3), np.zeros(3), rtol=1e-4)
