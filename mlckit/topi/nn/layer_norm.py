"""``layer_norm``: normalize over some axes to zero mean and unit variance, then scale and
shift."""

from __future__ import annotations

from collections.abc import Sequence

from mlckit import te
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const

from ..utils import as_float, axis_names, normalize_axes, prod

# One pass over the data sums both x and x*x: a reducer over pairs.
_sum_pair = te.comm_reducer(
    lambda x, y: (x[0] + y[0], x[1] + y[1]),
    lambda t0, t1: (const(0, t0), const(0, t1)),
    name="sum_pair",
)


def layer_norm(
    data: te.Tensor,
    gamma: te.Tensor | None,
    beta: te.Tensor | None,
    axis: int | Sequence[int],
    epsilon: float = 1e-5,
) -> te.Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` with mean and variance over
    ``axis``; ``gamma``/``beta`` have the shape of those axes. Block
    ``T_layer_norm_red_temp`` sums x and x*x in one pass, ``T_layer_norm`` normalizes."""
    axes = normalize_axes(axis, data.ndim, "topi.nn.layer_norm")
    kept = [a for a in range(data.ndim) if a not in axes]
    raxes = [te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]

    def full_index(kept_index: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        index: list[PrimExpr] = [None] * data.ndim  # type: ignore[list-item]
        for a, i in zip(kept, kept_index):
            index[a] = i
        for a, rv in zip(axes, raxes):
            index[a] = rv.var
        return tuple(index)

    def sums(*i: PrimExpr) -> tuple[te.Reduce, ...]:
        x = data[full_index(i)]
        return _sum_pair((x, x * x), axis=raxes)

    total, total_sq = te.compute(
        [data.shape[a] for a in kept],
        sums,
        name="T_layer_norm_red_temp",
        tag="comm_reduce",
        varargs_names=axis_names(len(kept)),
    )
    count = as_float(prod([data.shape[a] for a in axes]), data.dtype)

    def normalize(*i: PrimExpr) -> PrimExpr:
        r = tuple(i[a] for a in kept)
        mean = total[r] / count
        var = total_sq[r] / count - mean * mean
        value = (data[i] - mean) * tir_op.rsqrt(var + const(epsilon, data.dtype))
        g = tuple(i[a] for a in axes)
        if gamma is not None:
            value = value * gamma[g]
        if beta is not None:
            value = value + beta[g]
        return value

    return te.compute(
        data.shape,
        normalize,
        name="T_layer_norm",
        tag="injective",
        varargs_names=axis_names(data.ndim),
    )
