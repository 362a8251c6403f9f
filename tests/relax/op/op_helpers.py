"""Helpers shared by the operator tests: variables, inference and shape checks."""

from __future__ import annotations

from typing import Any

import pytest

from mlckit import relax, tir
from mlckit.errors import StructInfoError
from mlckit.relax.utils import dims_equal

n = tir.Var("n", "int64")
m = tir.Var("m", "int64")


def var(name: str, shape: Any, dtype: str = "float32") -> relax.Var:
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def infer(call: Any) -> relax.StructInfo:
    return relax.normalize(call).struct_info


def assert_tensor(sinfo: Any, shape: Any, dtype: str = "float32") -> None:
    """``sinfo`` is a tensor of ``dtype`` whose dims provably equal ``shape``."""
    assert isinstance(sinfo, relax.TensorStructInfo), sinfo
    assert sinfo.dtype == dtype, sinfo.dtype
    values = sinfo.shape_values
    assert values is not None and len(values) == len(shape), (values, shape)
    for got, want in zip(values, shape):
        want = tir.IntImm("int64", want) if isinstance(want, int) else want
        assert dims_equal(got, want), (got, want)


def assert_rank_only(sinfo: Any, ndim: int, dtype: str = "float32") -> None:
    assert isinstance(sinfo, relax.TensorStructInfo), sinfo
    assert sinfo.shape is None and sinfo.ndim == ndim and sinfo.dtype == dtype


def raises(call: Any, *fragments: str) -> str:
    """Inference of ``call`` fails with a StructInfoError containing every fragment."""
    with pytest.raises(StructInfoError) as info:
        infer(call)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    return text
