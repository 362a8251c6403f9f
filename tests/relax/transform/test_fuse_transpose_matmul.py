"""FuseTransposeMatmul: ``matmul(x, permute_dims(w))`` becomes one NT_matmul kernel that reads
``w`` as stored (a linear layer's weight), computing the same; other transposes stay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.relax.transform import FuseTransposeMatmul

op = relax.op
rng = np.random.default_rng(0)


def module(x_shape: tuple[Any, ...], w: np.ndarray, axes: list[int] | None, reuse: bool = False):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            wt = bb.emit(op.permute_dims(relax.const(w), axes))
            y = bb.emit(op.matmul(x, wt))
            out = bb.emit_output(bb.emit(op.add(y, op.sum(wt))) if reuse else y)
        bb.emit_func_output(out)
    return bb.get()


def calls(mod: Any) -> list[str]:
    names = []
    for binding in mod["main"].body.blocks[0].bindings:
        value = binding.value
        if isinstance(value, relax.Var):
            continue
        op_name = getattr(value.op, "name", None)
        if op_name == "relax.call_tir":
            op_name = f"call_tir {value.args[0].name_hint}"
        names.append(op_name)
    return names


def run(mod: Any, x: np.ndarray) -> np.ndarray:
    built = relax.build(relax.get_pipeline("default")(mod), "llvm")
    return relax.VirtualMachine(built, mlckit.cpu())["main"](x).numpy()


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "axes"),
    [((3, 8), (5, 8), None), ((3, 8), (5, 8), [1, 0]), ((2, 3, 8), (2, 5, 8), [0, 2, 1])],
)
def test_a_transposed_weight_is_read_as_stored(x_shape, w_shape, axes) -> None:
    w = rng.standard_normal(w_shape).astype("float32")
    mod = module(x_shape, w, axes)
    fused = FuseTransposeMatmul()(mod)
    assert calls(fused) == ["call_tir NT_matmul"]
    kernel = fused["NT_matmul"]
    assert isinstance(kernel, tir.PrimFunc)
    # The kernel reads the weight in its own (untransposed) shape.
    assert [list(map(int, b.shape)) for b in kernel.buffer_map.values()][1] == list(w_shape)
    x = rng.standard_normal(x_shape).astype("float32")
    np.testing.assert_allclose(run(mod, x), x @ np.swapaxes(w, -1, -2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "axes"),
    [((3, 8), (8, 5), [0, 1]), ((8, 3, 4), (4, 8, 5), [1, 0, 2])],
)
def test_other_transposes_stay(x_shape, w_shape, axes) -> None:
    # The identity permutation, or one that moves a batch axis: nothing to fuse.
    w = rng.standard_normal(w_shape).astype("float32")
    mod = module(x_shape, w, axes)
    assert calls(FuseTransposeMatmul()(mod)) == ["relax.permute_dims", "relax.matmul"]
    x = rng.standard_normal(x_shape).astype("float32")
    np.testing.assert_allclose(run(mod, x), x @ np.transpose(w, axes), rtol=1e-5, atol=1e-5)


def test_a_transpose_read_elsewhere_stays_for_that_reader() -> None:
    w = rng.standard_normal((5, 8)).astype("float32")
    mod = module((3, 8), w, None, reuse=True)
    assert calls(FuseTransposeMatmul()(mod)) == [
        "relax.permute_dims",
        "call_tir NT_matmul",
        "relax.sum",
        "relax.add",
    ]
    x = rng.standard_normal((3, 8)).astype("float32")
    np.testing.assert_allclose(run(mod, x), x @ w.T + w.sum(), rtol=1e-5, atol=1e-4)
