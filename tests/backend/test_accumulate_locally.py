"""A reduction block annotated "accumulate_locally" sums in a local variable over its innermost
loop: the generated code reads each output element once before the loop and stores it once
after, and computes what the plain loops compute."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax, te
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import Schedule


def row_sum(split: int | None) -> PrimFunc:
    a = te.placeholder((8, 32), "float32", name="A")
    k = te.reduce_axis((0, 32), name="k")
    c = te.compute((8,), lambda i: te.sum(a[i, k], axis=k), name="C")
    sch = Schedule(te.create_prim_func([a, c]))
    block = sch.get_block("C")
    if split is not None:
        _, loop = sch.get_loops(block)
        sch.split(loop, [None, split])
    sch.annotate(block, "accumulate_locally", True)
    return sch.func


@pytest.mark.parametrize("target", ["python", "llvm"])
@pytest.mark.parametrize("split", [None, 4])
def test_a_row_sum_accumulates_in_a_local_variable(target: str, split: int | None) -> None:
    lib = mlckit.build(row_sum(split), target)
    text = lib.get_source()
    assert "C_acc = C_acc + A[" in text and "C[i] = C_acc" in text
    # Unsplit, the loop starts the reduction: the init sets the accumulator, nothing is read.
    assert ("C_acc = C[i]" in text) == (split is not None)
    a = np.random.default_rng(0).random((8, 32), dtype=np.float32)
    c = np.zeros(8, "float32")
    lib(a, c)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


def test_a_block_whose_output_moves_with_the_loop_is_left_as_it_is() -> None:
    # The innermost loop is spatial (j): nothing to accumulate across it.
    a = te.placeholder((8, 16), "float32", name="A")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((16,), lambda j: te.sum(a[k, j], axis=k), name="C")
    sch = Schedule(te.create_prim_func([a, c]))
    block = sch.get_block("C")
    sch.reorder(*sch.get_loops(block)[::-1])
    sch.annotate(block, "accumulate_locally", True)
    lib = mlckit.build(sch.func, "llvm")
    assert "_acc" not in lib.get_source()
    x = np.random.default_rng(1).random((8, 16), dtype=np.float32)
    out = np.zeros(16, "float32")
    lib(x, out)
    np.testing.assert_allclose(out, x.sum(axis=0), rtol=1e-5)


def test_the_default_schedule_accumulates_a_layer_norms_two_statistics() -> None:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4, 96), "float32"))
    g = relax.Var("g", relax.TensorStructInfo((96,), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((96,), "float32"))
    with bb.function("main", [x, g, b]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.layer_norm(x, g, b, axes=[-1])))
        bb.emit_func_output(out)
    ex = relax.build(relax.get_pipeline("default")(bb.get()), "llvm")
    assert "accumulated in local variables" in ex.source()
    rng = np.random.default_rng(2)
    xs, gs, bs = (rng.standard_normal(s).astype("float32") for s in ((4, 96), (96,), (96,)))
    got = relax.VirtualMachine(ex, mlckit.cpu())["main"](xs, gs, bs).numpy()
    mean, var = xs.mean(axis=1, keepdims=True), xs.var(axis=1, keepdims=True)
    np.testing.assert_allclose(got, (xs - mean) / np.sqrt(var + 1e-5) * gs + bs, atol=1e-4)
