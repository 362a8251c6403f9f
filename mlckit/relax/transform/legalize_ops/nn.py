"""Neural-network ops: softmax, layer_norm, batch_norm, conv2d and pooling become their topi.nn
kernels."""

from __future__ import annotations

from typing import Any

from mlckit import arith, te, topi
from mlckit.errors import BuildError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const
from mlckit.topi.utils import axis_names

from ...block_builder import BlockBuilder
from ...expr import Call, Expr, Tuple
from .common import register_legalize


def _axis_op(te_func: Any) -> Any:
    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(te_func, call.args[0], call.attrs["axis"])

    return legalize


register_legalize("relax.nn.softmax", _axis_op(topi.nn.softmax))
register_legalize("relax.nn.log_softmax", _axis_op(topi.nn.log_softmax))


def _te_layer_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    axis: list[int],
    epsilon: float,
    center: bool,
    scale: bool,
) -> te.Tensor:
    # Without scale (center) the kernel neither reads gamma (beta) nor multiplies (adds).
    return topi.nn.layer_norm(
        data, gamma if scale else None, beta if center else None, axis, epsilon
    )


@register_legalize("relax.nn.layer_norm")
def _layer_norm(bb: BlockBuilder, call: Call) -> Expr:
    attrs = call.attrs
    return bb.call_te(
        _te_layer_norm,
        *call.args,
        attrs["axes"],
        attrs["epsilon"],
        attrs["center"],
        attrs["scale"],
        primfunc_name_hint="layer_norm",
    )


def _te_batch_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    moving_mean: te.Tensor,
    moving_var: te.Tensor,
    axis: int,
    epsilon: float,
    center: bool,
    scale: bool,
) -> te.Tensor:
    """Inference batch norm: each element normalized with the statistics of its channel
    ``index[axis]``. Without scale (center) the kernel neither reads gamma (beta) nor
    multiplies (adds)."""

    def body(*i: PrimExpr) -> PrimExpr:
        c = i[axis]
        eps = const(epsilon, data.dtype)
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


@register_legalize("relax.nn.batch_norm")
def _batch_norm(bb: BlockBuilder, call: Call) -> Expr:
    attrs = call.attrs
    if attrs["training"]:
        raise BuildError(
            "LegalizeOps: relax.nn.batch_norm with training=True (normalize with the batch's "
            "own statistics) cannot be compiled; only inference (training=False, with the "
            "moving statistics) is supported"
        )
    data, moving_mean, moving_var = call.args[0], call.args[3], call.args[4]
    normalized = bb.call_te(
        _te_batch_norm,
        *call.args,
        attrs["axis"] % data.struct_info.ndim,  # type: ignore[attr-defined]
        attrs["epsilon"],
        attrs["center"],
        attrs["scale"],
        primfunc_name_hint="batch_norm",
    )
    # Inference leaves the moving statistics unchanged: the tuple passes them through.
    return Tuple([normalized, moving_mean, moving_var])


def _te_group_conv2d(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
    out_dtype: str,
) -> te.Tensor:
    """Grouped convolution, which topi.nn.conv2d_nchw does not do: output channel ``f``
    reads only the input channels of its group, ``f // (O / groups) * (C / groups) + rc``."""
    (sh, sw), (dh, dw), (top, left, bottom, right) = strides, dilation, padding
    batch, _, height, width = data.shape
    out_channels, group_channels, kh, kw = kernel.shape
    per_group = out_channels // groups
    temp = topi.nn.pad(data, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    rc = te.reduce_axis((0, group_channels), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out_h = arith.simplify((height + top + bottom - (kh - 1) * dh - 1) // sh + 1)
    out_w = arith.simplify((width + left + right - (kw - 1) * dw - 1) // sw + 1)

    def body(nn: Any, ff: Any, yy: Any, xx: Any) -> Any:
        channel = ff // per_group * group_channels + rc.var
        window = temp[nn, channel, yy * sh + ry.var * dh, xx * sw + rx.var * dw]
        weight = kernel[ff, rc.var, ry.var, rx.var]
        return te.sum(window.astype(out_dtype) * weight.astype(out_dtype), axis=[rc, ry, rx])

    return te.compute(
        (batch, out_channels, out_h, out_w), body, name="group_conv2d_nchw", tag="conv2d_nchw"
    )


@register_legalize("relax.nn.conv2d")
def _conv2d(bb: BlockBuilder, call: Call) -> Expr:
    attrs = call.attrs
    out_dtype = call.struct_info.dtype  # type: ignore[attr-defined]
    window = (attrs["strides"], attrs["padding"], attrs["dilation"])
    if attrs["groups"] == 1:
        return bb.call_te(
            topi.nn.conv2d_nchw, *call.args, *window, out_dtype, primfunc_name_hint="conv2d"
        )
    return bb.call_te(
        _te_group_conv2d,
        *call.args,
        *window,
        attrs["groups"],
        out_dtype,
        primfunc_name_hint="conv2d",
    )


def _pool2d(pool_type: str) -> Any:
    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        attrs = call.attrs
        return bb.call_te(
            topi.nn.pool2d,
            call.args[0],
            kernel=attrs["pool_size"],
            stride=attrs["strides"],
            dilation=attrs["dilation"],
            padding=attrs["padding"],
            pool_type=pool_type,
            ceil_mode=attrs["ceil_mode"],
            layout=attrs["layout"],
            count_include_pad=attrs["count_include_pad"],
            primfunc_name_hint=f"{pool_type}_pool2d",
        )

    return legalize


register_legalize("relax.nn.max_pool2d", _pool2d("max"))
register_legalize("relax.nn.avg_pool2d", _pool2d("avg"))


@register_legalize("relax.nn.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(bb: BlockBuilder, call: Call) -> Expr:
    output_size = call.attrs["output_size"]
    if output_size is None:  # the input's height and width, which inference gave the result
        output_size = list(call.struct_info.shape_values[2:])  # type: ignore[attr-defined]
    return bb.call_te(
        topi.nn.adaptive_pool,
        call.args[0],
        output_size,
        "avg",
        call.attrs["layout"],
        primfunc_name_hint="adaptive_avg_pool2d",
    )
