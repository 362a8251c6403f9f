"""Build te tensors into a PrimFunc, check its print/parse round trip, and run it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

import mlckit
from mlckit import te, tir
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source


def run(
    inputs: Sequence[te.Tensor], output: te.Tensor, *arrays: np.ndarray, target: str = "python"
) -> np.ndarray:
    """The value of ``output`` computed from ``arrays`` (bound to ``inputs``)."""
    func = te.create_prim_func([*inputs, output])
    assert_structural_equal(from_source(func.script()), func)
    sizes: dict[int, int] = {}
    for tensor, array in zip(inputs, arrays):
        assert array.dtype == tensor.dtype
        for dim, size in zip(tensor.shape, array.shape):
            sizes[id(dim)] = size
    shape = [d.value if isinstance(d, tir.IntImm) else _eval(d, sizes) for d in output.shape]
    out = np.zeros(shape, output.dtype)
    mlckit.build(func, target)["main"](*arrays, out)
    return out


def _eval(dim: tir.PrimExpr, sizes: dict[int, int]) -> int:
    if isinstance(dim, tir.Var):
        return sizes[id(dim)]
    raise AssertionError(f"test helper cannot size an output dim {dim.script()}")


def placeholders(arrays: Sequence[np.ndarray], symbolic: bool = False) -> list[te.Tensor]:
    """One placeholder per array (named A, B, ...); with ``symbolic`` every dim is a var."""
    tensors = []
    for i, a in enumerate(arrays):
        shape = (
            [tir.Var(f"n{i}_{d}", "int64") for d in range(a.ndim)] if symbolic else list(a.shape)
        )
        tensors.append(te.placeholder(shape, str(a.dtype), chr(ord("A") + i)))
    return tensors


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@st.composite
def broadcastable_shapes(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Two shapes that broadcast: the second drops leading dims and sets some to 1."""
    a = draw(shapes)
    b = list(a[draw(st.integers(0, len(a) - 1)) :])
    b = [1 if draw(st.booleans()) else d for d in b]
    return (a, b) if draw(st.booleans()) else (b, a)


def random(shape: Sequence[int], dtype: str = "float32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(dtype)


def conv2d_ref(
    x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int, groups: int = 1
) -> np.ndarray:
    """numpy's NCHW convolution of ``x`` with the OIHW kernel ``w`` in ``groups`` groups."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - (kh - 1) * dil - 1) // stride + 1
    ow = (xp.shape[3] - (kw - 1) * dil - 1) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), "float32")
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    for g in range(groups):
        xg, wg = xp[:, g * cin : (g + 1) * cin], w[g * cout : (g + 1) * cout]
        for i in range(oh):
            for j in range(ow):
                patch = xg[:, :, i * stride : i * stride + (kh - 1) * dil + 1 : dil,
                           j * stride : j * stride + (kw - 1) * dil + 1 : dil]  # fmt: skip
                out[:, g * cout : (g + 1) * cout, i, j] = np.einsum("nchw,fchw->nf", patch, wg)
    return out
