"""2-d transposed convolution, data in NCHW and kernel in IOHW layout:
``conv2d_transpose_nchw`` and ``group_conv2d_transpose_nchw``.

A convolution with stride ``s`` reads input row ``y*s + ky*d - pad_top`` for output row ``y``;
its transpose sends each input row back to every output row that read it, which is the
gradient of the convolution with respect to its data. It is computed as a convolution again:

1. spread the input rows ``s`` apart (``s - 1`` zeros between them: the stride becomes a
   dilation of the input),
2. pad by ``K - 1 - pad`` on each side, ``K = d*(k-1) + 1`` the dilated kernel's extent (a
   negative amount crops), plus ``output_padding`` rows after,
3. convolve with stride 1 and dilation ``d`` by the kernel turned by 180 degrees, its in and
   out channels swapped.

Steps 1 and 2 are one block, ``data_dilate_pad``; step 3 is the shared convolution kernel.
Worked example in 1-d: input ``[a, b]``, kernel ``[u, v]``, stride 2, no padding: the spread,
padded input is ``[0, a, 0, b, 0]`` and its correlation with ``[v, u]`` gives
``[a*u, a*v, b*u, b*v]``, the output length ``(2 - 1)*2 + 2 = 4``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const

from ..utils import get_const_tuple, shape_text
from .conv2d import conv2d_nchw, group_conv2d_nchw, pad_tuple, pair


def _spread_and_pad(
    data: te.Tensor,
    strides: tuple[int, int],
    before: tuple[PrimExpr, PrimExpr],
    after: tuple[PrimExpr, PrimExpr],
) -> te.Tensor:
    """``data`` with ``stride - 1`` zeros between neighbouring rows (columns), then ``before`` /
    ``after`` zeros around them (a negative count crops instead)."""
    batch, channels, height, width = data.shape
    spread = [arith.simplify((size - 1) * s + 1) for size, s in zip((height, width), strides)]
    out_shape = [
        batch,
        channels,
        *(arith.simplify(n + b + a) for n, b, a in zip(spread, before, after)),
    ]

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        inside: list[PrimExpr] = []
        index: list[PrimExpr] = []
        for i, b, s, extent in zip((y, x), before, strides, spread):
            offset = arith.simplify(i - b)
            inside += [offset >= 0, offset < extent]
            if s > 1:
                inside.append(tir_op.floormod(offset, s) == 0)
                offset = tir_op.floordiv(offset, s)
            index.append(offset)
        condition = inside[0]
        for term in inside[1:]:
            condition = condition & term
        return tir_op.if_then_else(condition, data[n, c, index[0], index[1]], const(0, data.dtype))

    return te.compute(out_shape, body, name="data_dilate_pad", tag="injective,pad")


def _turned_kernel(kernel: te.Tensor, groups: int) -> te.Tensor:
    """The IOHW ``kernel`` (I, O / groups, KH, KW) as the OIHW kernel (O, I / groups, KH, KW)
    of the equivalent convolution, turned by 180 degrees in its spatial axes."""
    in_channels, group_out, kh, kw = kernel.shape
    group_in = arith.simplify(in_channels // groups)

    def body(o: PrimExpr, i: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        group = arith.simplify(o // group_out)
        return kernel[
            arith.simplify(group * group_in + i),
            arith.simplify(o - group * group_out),
            arith.simplify(kh - 1 - y),
            arith.simplify(kw - 1 - x),
        ]

    shape = (arith.simplify(group_out * groups), group_in, kh, kw)
    return te.compute(shape, body, name="kernel_turned", tag="injective")


def group_conv2d_transpose_nchw(
    data: te.Tensor,
    kernel: te.Tensor,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    out_dtype: str | None,
    output_padding: int | Sequence[int],
    groups: int,
    dilation: int | Sequence[int] = 1,
) -> te.Tensor:
    """The transposed convolution of ``data`` (N, C, H, W) by ``kernel`` (C, O / groups, KH,
    KW): output channel ``o`` gathers the C / groups input channels of its group. The output
    is (N, O, (H-1)*sh - top - bottom + dh*(KH-1) + output_padding_h + 1, ...)."""
    op = "topi.nn.group_conv2d_transpose_nchw"
    if data.ndim != 4 or kernel.ndim != 4:
        raise StructInfoError(
            f"{op}: needs a 4-d NCHW input and a 4-d IOHW kernel, got {shape_text(data.shape)} "
            f"and {shape_text(kernel.shape)}"
        )
    channels, kernel_in = get_const_tuple((data.shape[1], kernel.shape[0]))
    if (
        isinstance(channels, int)
        and isinstance(kernel_in, int)
        and (channels != kernel_in or channels % groups)
    ):
        raise StructInfoError(
            f"{op}: the input {shape_text(data.shape)} and the kernel {shape_text(kernel.shape)} "
            f"must have the same number of input channels, divisible by groups={groups}"
        )
    strides = pair(stride, "stride", op)
    dilations = pair(dilation, "dilation", op)
    extra = pair(output_padding, "output_padding", op)
    top, left, bottom, right = pad_tuple(padding, op)
    extents = [
        arith.simplify((k - 1) * d + 1) for k, d in zip(kernel.shape[2:], dilations)
    ]  # the dilated kernel's extent K
    before = (arith.simplify(extents[0] - 1 - top), arith.simplify(extents[1] - 1 - left))
    after = (
        arith.simplify(extents[0] - 1 - bottom + extra[0]),
        arith.simplify(extents[1] - 1 - right + extra[1]),
    )
    padded = _spread_and_pad(data, strides, before, after)
    turned = _turned_kernel(kernel, groups)
    if groups == 1:
        return conv2d_nchw(padded, turned, 1, 0, dilations, out_dtype)
    return group_conv2d_nchw(padded, turned, 1, 0, dilations, groups, out_dtype)


def conv2d_transpose_nchw(
    Input: te.Tensor,
    Filter: te.Tensor,
    strides: int | Sequence[int],
    padding: int | Sequence[int],
    out_dtype: str | None = None,
    output_padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
) -> te.Tensor:
    """The transposed convolution of NCHW ``Input`` by the IOHW ``Filter`` (one group)."""
    return group_conv2d_transpose_nchw(
        Input, Filter, strides, padding, out_dtype, output_padding, 1, dilation
    )
