"""Shared helpers for the relax tests."""

from __future__ import annotations

from typing import Any

from mlckit import relax, tir
from mlckit.relax.utils import dims_equal


def tensor(shape: Any, dtype: str = "float32") -> relax.TensorStructInfo:
    return relax.TensorStructInfo(shape, dtype)


def assert_tensor(sinfo: Any, shape: Any, dtype: str = "float32") -> None:
    """``sinfo`` is a tensor of ``dtype`` whose dims provably equal ``shape``."""
    assert isinstance(sinfo, relax.TensorStructInfo), sinfo
    assert sinfo.dtype == dtype
    values = sinfo.shape_values
    assert values is not None and len(values) == len(shape), (values, shape)
    for got, want in zip(values, shape):
        if isinstance(want, tir.Var):
            assert got is want, (got, want)
        else:
            assert dims_equal(got, tir.IntImm("int64", want) if isinstance(want, int) else want)


def normalized(expr: Any) -> Any:
    return relax.normalize(expr)
