"""``softmax`` and ``log_softmax`` along an axis, computed stably (the maximum is subtracted
before ``exp``)."""

from __future__ import annotations

from collections.abc import Sequence

from mlckit import te
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr

from ..utils import normalize_axis


def _without(indices: Sequence[PrimExpr], axis: int) -> tuple[PrimExpr, ...]:
    return tuple(indices[:axis]) + tuple(indices[axis + 1 :])


def _with(indices: Sequence[PrimExpr], axis: int, value: PrimExpr) -> tuple[PrimExpr, ...]:
    return (*indices[:axis], value, *indices[axis:])


def _max_and_expsum(x: te.Tensor, axis: int) -> tuple[te.Tensor, te.Tensor]:
    """``max(x)`` along ``axis`` and ``sum(exp(x - max))``, over the other dims."""
    reduced = _without(x.shape, axis)
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    max_elem = te.compute(
        reduced, lambda *i: te.max(x[_with(i, axis, k.var)], axis=k), name="T_softmax_maxelem"
    )
    k2 = te.reduce_axis((0, x.shape[axis]), name="k")
    expsum = te.compute(
        reduced,
        lambda *i: te.sum(tir_op.exp(x[_with(i, axis, k2.var)] - max_elem[i]), axis=k2),
        name="T_softmax_expsum",
    )
    return max_elem, expsum


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``. As in TVM, each ``exp`` is
    computed once (block ``T_softmax_exp``), then summed and divided: it costs more than the
    rest together."""
    axis = normalize_axis(axis, x.ndim, "topi.nn.softmax")
    reduced = _without(x.shape, axis)
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    max_elem = te.compute(
        reduced, lambda *i: te.max(x[_with(i, axis, k.var)], axis=k), name="T_softmax_maxelem"
    )
    exp = te.compute(
        x.shape,
        lambda *i: tir_op.exp(x[i] - max_elem[_without(i, axis)]),
        name="T_softmax_exp",
    )
    k2 = te.reduce_axis((0, x.shape[axis]), name="k")
    expsum = te.compute(
        reduced, lambda *i: te.sum(exp[_with(i, axis, k2.var)], axis=k2), name="T_softmax_expsum"
    )
    return te.compute(
        x.shape,
        lambda *i: exp[i] / expsum[_without(i, axis)],
        name="T_softmax_norm",
        tag="softmax_output",
    )


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``."""
    axis = normalize_axis(axis, x.ndim, "topi.nn.log_softmax")
    max_elem, expsum = _max_and_expsum(x, axis)
    return te.compute(
        x.shape,
        lambda *i: x[i] - max_elem[_without(i, axis)] - tir_op.log(expsum[_without(i, axis)]),
        name="T_log_softmax",
        tag="log_softmax_output",
    )
