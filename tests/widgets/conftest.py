"""Models shared by the widget tests."""

from __future__ import annotations

import pytest

import mlckit
from mlckit import relax, tir


def mlp() -> mlckit.IRModule:
    """A two-layer MLP with high-level operators and a symbolic batch: the passes of a
    pipeline all have something to change in it."""
    bb = relax.BlockBuilder()
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 16), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((16, 8), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((8,), "float32"))
    with bb.function("main", [x, w0, b0]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, w0))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            gv = bb.emit_output(relax.op.nn.relu(lv1))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.fixture
def mlp_module() -> mlckit.IRModule:
    return mlp()
