"""``conv2d_nchw``: 2-d convolution, data in NCHW and kernel in OIHW layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.tir.expr import PrimExpr

from ..utils import same_dim, shape_text
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
    op = "topi.nn.conv2d_nchw"
    if Input.ndim != 4 or Filter.ndim != 4:
        raise StructInfoError(
            f"{op}: needs a 4-d NCHW input and a 4-d OIHW kernel, got "
            f"{shape_text(Input.shape)} and {shape_text(Filter.shape)}"
        )
    if not same_dim(Input.shape[1], Filter.shape[1]):
        raise StructInfoError(
            f"{op}: the input has {Input.shape[1].script()} channels but the kernel "
            f"{shape_text(Filter.shape)} expects {Filter.shape[1].script()}"
        )
    sh, sw = pair(stride, "stride", op)
    dh, dw = pair(dilation, "dilation", op)
    top, left, bottom, right = pad_tuple(padding, op)
    out_dtype = out_dtype or Input.dtype
    batch, in_channel, height, width = Input.shape
    out_channel, _, kernel_h, kernel_w = Filter.shape
    out_h = arith.simplify((height + top + bottom - (kernel_h - 1) * dh - 1) // sh + 1)
    out_w = arith.simplify((width + left + right - (kernel_w - 1) * dw - 1) // sw + 1)
    temp = pad(Input, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    rc = te.reduce_axis((0, in_channel), name="rc")
    ry = te.reduce_axis((0, kernel_h), name="ry")
    rx = te.reduce_axis((0, kernel_w), name="rx")

    def body(nn: PrimExpr, ff: PrimExpr, yy: PrimExpr, xx: PrimExpr) -> Any:
        window = temp[
            nn, rc, arith.simplify(yy * sh + ry.var * dh), arith.simplify(xx * sw + rx.var * dw)
        ]
        return te.sum(
            window.astype(out_dtype) * Filter[ff, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx]
        )

    return te.compute(
        (batch, out_channel, out_h, out_w), body, name="conv2d_nchw", tag="conv2d_nchw"
    )
