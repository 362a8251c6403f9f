"""2-d convolution, data in NCHW and kernel in OIHW layout: ``conv2d_nchw``, and
``group_conv2d_nchw`` whose channels split into independent groups; ``conv2d`` is TVM's entry
point that picks the kernel for a layout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.tir.expr import PrimExpr

from ..utils import get_const_tuple, same_dim, shape_text
from .pad import pad


def pair(value: int | Sequence[int], what: str, op: str) -> tuple[int, int]:
    """``(h, w)`` from one int or a pair."""
    items = [value] if isinstance(value, int) else list(value)
    if len(items) == 1:
        items = items * 2
    if len(items) != 2:
        raise StructInfoError(f"{op}: {what} must be an int or a pair, got {value!r}")
    return int(items[0]), int(items[1])


def pad_tuple(padding: int | Sequence[int], op: str) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from an int, ``(h, w)`` or the 4-tuple itself."""
    items = [padding] if isinstance(padding, int) else list(padding)
    if len(items) == 1:
        items = items * 4
    elif len(items) == 2:
        items = items * 2
    if len(items) != 4:
        raise StructInfoError(
            f"{op}: padding must be an int, (h, w) or (top, left, bottom, right), got {padding!r}"
        )
    top, left, bottom, right = (int(p) for p in items)
    return top, left, bottom, right


def _convolve(
    Input: te.Tensor,
    Filter: te.Tensor,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    out_dtype: str | None,
    reduced_channels: PrimExpr,
    channel_of: Callable[[PrimExpr, PrimExpr], PrimExpr],
    name: str,
) -> te.Tensor:
    """The NCHW convolution every variant shares: zero padding (block ``pad_temp``), then
    ``out[n, f, y, x] = sum_{rc, ry, rx} pad_temp[n, channel_of(f, rc), y*sh + ry*dh,
    x*sw + rx*dw] * Filter[f, rc, ry, rx]`` with ``rc < reduced_channels`` (block ``name``).
    The indices are simplified, so that the printed kernel parses back to the same ones."""
    op = f"topi.nn.{name}"
    if Input.ndim != 4 or Filter.ndim != 4:
        raise StructInfoError(
            f"{op}: needs a 4-d NCHW input and a 4-d OIHW kernel, got "
            f"{shape_text(Input.shape)} and {shape_text(Filter.shape)}"
        )
    sh, sw = pair(stride, "stride", op)
    dh, dw = pair(dilation, "dilation", op)
    top, left, bottom, right = pad_tuple(padding, op)
    out_dtype = out_dtype or Input.dtype
    batch, _, height, width = Input.shape
    out_channel, _, kernel_h, kernel_w = Filter.shape
    out_h = arith.simplify((height + top + bottom - (kernel_h - 1) * dh - 1) // sh + 1)
    out_w = arith.simplify((width + left + right - (kernel_w - 1) * dw - 1) // sw + 1)
    temp = pad(Input, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    rc = te.reduce_axis((0, reduced_channels), name="rc")
    ry = te.reduce_axis((0, kernel_h), name="ry")
    rx = te.reduce_axis((0, kernel_w), name="rx")

    def body(nn: PrimExpr, ff: PrimExpr, yy: PrimExpr, xx: PrimExpr) -> Any:
        window = temp[
            nn,
            arith.simplify(channel_of(ff, rc.var)),
            arith.simplify(yy * sh + ry.var * dh),
            arith.simplify(xx * sw + rx.var * dw),
        ]
        weight = Filter[ff, rc.var, ry.var, rx.var]
        return te.sum(window.astype(out_dtype) * weight.astype(out_dtype), axis=[rc, ry, rx])

    return te.compute((batch, out_channel, out_h, out_w), body, name=name, tag="conv2d_nchw")


def conv2d_nchw(
    Input: te.Tensor,
    Filter: te.Tensor,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    out_dtype: str | None = None,
) -> te.Tensor:
    """``out[n, f, y, x] = sum_{c, ry, rx} pad_temp[n, c, y*sh + ry*dh, x*sw + rx*dw] *
    Filter[f, c, ry, rx]``, after zero padding (block ``pad_temp``). Block ``conv2d_nchw``."""
    if Input.ndim == 4 == Filter.ndim and not same_dim(Input.shape[1], Filter.shape[1]):
        raise StructInfoError(
            f"topi.nn.conv2d_nchw: the input has {Input.shape[1].script()} channels but the "
            f"kernel {shape_text(Filter.shape)} expects {Filter.shape[1].script()}"
        )
    return _convolve(
        Input,
        Filter,
        stride,
        padding,
        dilation,
        out_dtype,
        reduced_channels=Input.shape[1],
        channel_of=lambda ff, rc: rc,
        name="conv2d_nchw",
    )


def conv2d(
    input: te.Tensor,
    filter: te.Tensor,
    strides: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_dtype: str | None = None,
) -> te.Tensor:
    """The convolution for ``data_layout`` (TVM's signature); NCHW data with an OIHW kernel,
    ``conv2d_nchw``, is the one layout mlckit has."""
    if data_layout != "NCHW" or kernel_layout not in ("", "OIHW"):
        raise StructInfoError(
            f"topi.nn.conv2d: only NCHW data with an OIHW kernel is supported, got "
            f"data_layout={data_layout!r}, kernel_layout={kernel_layout!r}"
        )
    return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype)


def group_conv2d_nchw(
    Input: te.Tensor,
    Filter: te.Tensor,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    groups: int,
    out_dtype: str | None = None,
) -> te.Tensor:
    """Grouped convolution: the C input and O output channels split into ``groups`` groups,
    and output channel ``f`` reads only the C / groups input channels of its group,
    ``f // (O / groups) * (C / groups) + rc``; ``Filter`` is (O, C / groups, KH, KW).
    ``groups == C == O`` is the depthwise convolution. Block ``group_conv2d_nchw``."""
    if Input.ndim == 4 == Filter.ndim:
        sizes = get_const_tuple((Input.shape[1], Filter.shape[1], Filter.shape[0]))
        if all(isinstance(s, int) for s in sizes) and (
            sizes[0] != sizes[1] * groups or sizes[2] % groups
        ):
            raise StructInfoError(
                f"topi.nn.group_conv2d_nchw: with {groups} groups the input's {sizes[0]} "
                f"channels and the kernel's {sizes[2]} outputs must both split into groups, "
                f"the kernel {shape_text(Filter.shape)} reading {sizes[1]} channels per group"
            )
    out_channels, group_channels = Filter.shape[0], Filter.shape[1]
    per_group = out_channels // groups
    return _convolve(
        Input,
        Filter,
        stride,
        padding,
        dilation,
        out_dtype,
        reduced_channels=group_channels,
        channel_of=lambda ff, rc: ff // per_group * group_channels + rc,
        name="group_conv2d_nchw",
    )
