"""``batch_norm``: inference batch normalization, each channel with its own statistics."""

from __future__ import annotations

from mlckit import te
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const

from ..utils import axis_names, normalize_axis


def batch_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    moving_mean: te.Tensor,
    moving_var: te.Tensor,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> te.Tensor:
    """``(data - moving_mean[c]) / sqrt(moving_var[c] + epsilon) * gamma[c] + beta[c]`` where
    ``c = index[axis]`` is the element's channel; each parameter is a vector of one value per
    channel. Without ``scale`` (``center``) the kernel neither reads ``gamma`` (``beta``) nor
    multiplies (adds). Block ``T_batch_norm``.

    This is inference: the moving statistics are used as they are. TVM's version also
    returns them (updated when ``training``); here the result is the normalized tensor alone.
    """
    axis = normalize_axis(axis, data.ndim, "topi.nn.batch_norm")
    eps = const(epsilon, data.dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        c = i[axis]
        value = (data[i] - moving_mean[c]) / tir_op.sqrt(moving_var[c] + eps)
        if scale:
            value = value * gamma[c]
        if center:
            value = value + beta[c]
        return value

    return te.compute(
        data.shape,
        body,
        name="T_batch_norm",
        tag="injective",
        varargs_names=axis_names(data.ndim),
    )
