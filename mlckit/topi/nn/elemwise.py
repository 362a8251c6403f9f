"""Activations: ``relu``, ``gelu`` (the exact, erf form) and ``silu``."""

from __future__ import annotations

import math

from mlckit import te
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const

from ..math import unary


def relu(x: te.Tensor) -> te.Tensor | PrimExpr:
    """``max(x, 0)`` elementwise."""
    return unary(x, lambda v: tir_op.max(v, const(0, v.dtype)))


def gelu(x: te.Tensor) -> te.Tensor | PrimExpr:
    """``x * (1 + erf(x / sqrt(2))) / 2`` elementwise (block ``T_gelu``)."""

    def f(v: PrimExpr) -> PrimExpr:
        half = const(0.5, v.dtype)
        return v * (half + tir_op.erf(v * const(1 / math.sqrt(2), v.dtype)) * half)

    return unary(x, f, "T_gelu")


def silu(x: te.Tensor) -> te.Tensor | PrimExpr:
    """``x * sigmoid(x)`` elementwise (block ``T_silu``)."""
    return unary(x, lambda v: v * tir_op.sigmoid(v), "T_silu")
