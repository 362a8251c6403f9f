"""2-D windowed operators on NCHW images: ``relax.nn.conv2d``, ``relax.nn.conv2d_transpose``,
``relax.nn.max_pool2d``, ``relax.nn.avg_pool2d``, ``relax.nn.adaptive_avg_pool2d``.

They share the window arithmetic: along each spatial axis an output position covers
``dilation * (kernel - 1) + 1`` input positions, and positions step by ``stride`` over the
padded input, so

    out = (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1

(pooling with ``ceil_mode`` rounds the division up, but drops a last window that would start
in the padding after the input: ``topi.utils.window_count``). Attributes follow TVM:
``strides`` and ``dilation`` are ``[h, w]``, ``padding`` is ``[top, left, bottom, right]``
(one value or a pair is expanded), layouts are strings. Only the NCHW data / OIHW kernel
layouts are supported (IOHW for the transposed convolution, whose output size inverts the
formula above). Adaptive pooling instead fixes the output size and derives each window from
it (see ``adaptive_avg_pool2d``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.arith import simplify
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import check_dtype
from mlckit.tir.expr import PrimExpr
from mlckit.topi.utils import window_count

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ..utils import const_int, dims_equal, format_dim
from ._registry import common_dtype, describe_arg, fail, int_list, make_call, register, tensor_arg

_CONV2D = "relax.nn.conv2d"
POOL_ATTRS = (
    "pool_size",
    "strides",
    "dilation",
    "padding",
    "ceil_mode",
    "count_include_pad",
    "layout",
    "out_layout",
)

_SUPPORTED_LAYOUTS = {
    "data_layout": "NCHW",
    "kernel_layout": "OIHW",
    "layout": "NCHW",
    "out_layout": "NCHW",
}

IntPair = int | Sequence[int]


# ------------------------------------------------------------------------------ attributes
def _pair(value: IntPair, what: str, op: str, minimum: int) -> list[int]:
    """``3`` or ``(3,)`` or ``(3, 3)`` as ``[3, 3]``; every entry at least ``minimum``."""
    items = int_list(value, what, op) or []
    if len(items) == 1:
        items = items * 2
    if len(items) != 2 or min(items) < minimum:
        raise StructInfoError(
            f"{op}: {what} must be one integer or two (height, width), each at least "
            f"{minimum}, got {value!r}"
        )
    return items


def _padding(value: IntPair, op: str) -> list[int]:
    """TVM's padding forms: ``p`` (all sides), ``(h, w)`` (both sides of each axis), or
    ``(top, left, bottom, right)``."""
    items = int_list(value, "padding", op) or []
    if len(items) == 1:
        items = items * 4
    elif len(items) == 2:
        items = items * 2
    if len(items) != 4 or min(items) < 0:
        raise StructInfoError(
            f"{op}: padding must be one non-negative integer, two (height, width) or four "
            f"(top, left, bottom, right), got {value!r}"
        )
    return items


def _check_layouts(call: Call, **layouts: str) -> None:
    for key, value in layouts.items():
        if value != _SUPPORTED_LAYOUTS[key]:
            raise fail(
                call,
                f'{key}="{value}" is not supported: only the NCHW data layout (and OIHW kernel '
                "layout) is; transpose the tensors with R.permute_dims first",
            )


def _four_dims(call: Call, index: int, what: str) -> tuple[PrimExpr, ...] | None:
    sinfo = tensor_arg(call, index)
    if sinfo.ndim not in (-1, 4):  # type: ignore[union-attr]
        raise fail(call, f"the {what} must be 4-D, but {describe_arg(call, index)}")
    return sinfo.shape_values  # type: ignore[union-attr]


def _window_out(
    call: Call,
    size: PrimExpr,
    pad: tuple[int, int],
    kernel: PrimExpr | int,
    stride: int,
    dilation: int,
    ceil_mode: bool = False,
    data_index: int = 0,
) -> PrimExpr:
    out = window_count(size, pad[0], pad[1], kernel, stride, dilation, ceil_mode)
    value = const_int(out)
    if value is not None and value < 1:
        raise fail(
            call,
            f"the window (size {format_dim(kernel)}, dilation {dilation}) does not fit in "
            f"{describe_arg(call, data_index)} (input size {format_dim(size)} with padding "
            f"{sum(pad)})",
        )
    return out


def _spatial_out(
    call: Call, data: Sequence[PrimExpr], kernel: Sequence[Any], data_index: int = 0
) -> list[PrimExpr]:
    """The output height and width of the windows over ``data``, argument ``data_index``."""
    attrs = call.attrs
    pad = attrs["padding"]  # type: ignore[index]
    ceil_mode = bool(attrs.fields.get("ceil_mode", False))  # type: ignore[union-attr]
    return [
        _window_out(
            call,
            data[2 + i],
            (pad[i], pad[i + 2]),
            kernel[i],
            attrs["strides"][i],  # type: ignore[index]
            attrs["dilation"][i],  # type: ignore[index]
            ceil_mode,
            data_index,
        )
        for i in range(2)
    ]


# ------------------------------------------------------------------------------ conv2d
def _infer_conv2d(call: Call, ctx: Any) -> StructInfo:
    attrs = call.attrs
    _check_layouts(
        call,
        data_layout=attrs["data_layout"],  # type: ignore[index]
        kernel_layout=attrs["kernel_layout"],  # type: ignore[index]
        out_layout=attrs["out_layout"],  # type: ignore[index]
    )
    data, weight = tensor_arg(call, 0), tensor_arg(call, 1)
    out_dtype = attrs["out_dtype"]  # type: ignore[index]
    dtype = out_dtype if out_dtype != "void" else common_dtype(call, data, weight)
    sd, sw = _four_dims(call, 0, "data"), _four_dims(call, 1, "weight")
    if sd is None or sw is None:
        return TensorStructInfo(None, dtype, 4)
    groups = attrs["groups"]  # type: ignore[index]
    channels, out_channels = sd[1], sw[0]
    if dims_equal(channels, sw[1] * groups) is False:
        grouped = f" x groups={groups}" if groups != 1 else ""
        raise fail(
            call,
            f"the input channels differ: {describe_arg(call, 0)} (C = {format_dim(channels)}) "
            f"and {describe_arg(call, 1)} (I{grouped} = {format_dim(simplify(sw[1] * groups))})",
        )
    known_out = const_int(out_channels)
    if known_out is not None and known_out % groups != 0:
        raise fail(
            call,
            f"the output channels ({format_dim(out_channels)}, from {describe_arg(call, 1)}) "
            f"are not divisible by groups={groups}",
        )
    return TensorStructInfo([sd[0], out_channels, *_spatial_out(call, sd, sw[2:])], dtype)


register(
    _CONV2D,
    _infer_conv2d,
    ("data", "weight"),
    (
        "strides",
        "padding",
        "dilation",
        "groups",
        "data_layout",
        "kernel_layout",
        "out_layout",
        "out_dtype",
    ),
)


def conv2d(
    data: Expr | Any,
    weight: Expr | Any,
    strides: IntPair = (1, 1),
    padding: IntPair = (0, 0),
    dilation: IntPair = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "OIHW",
    out_layout: str | None = None,
    out_dtype: str | None = None,
) -> Call:
    """``relax.nn.conv2d(data, weight, ...)``: 2-D convolution (cross-correlation, as in deep
    learning) of ``data`` (N, C, H, W) with ``weight`` (O, C / groups, KH, KW)."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise StructInfoError(f"{_CONV2D}: groups must be a positive integer, got {groups!r}")
    attrs = {
        "strides": _pair(strides, "strides", _CONV2D, 1),
        "padding": _padding(padding, _CONV2D),
        "dilation": _pair(dilation, "dilation", _CONV2D, 1),
        "groups": groups,
        "data_layout": data_layout,
        "kernel_layout": kernel_layout,
        "out_layout": data_layout if out_layout is None else out_layout,
        "out_dtype": "void" if out_dtype in (None, "void") else check_dtype(out_dtype),
    }
    return make_call(_CONV2D, [data, weight], attrs)


# ------------------------------------------------------------------------------ conv2d_transpose
_CONV2D_TRANSPOSE = "relax.nn.conv2d_transpose"


def _infer_conv2d_transpose(call: Call, ctx: Any) -> StructInfo:
    attrs = call.attrs
    _check_layouts(call, data_layout=attrs["data_layout"], out_layout=attrs["out_layout"])  # type: ignore[index]
    if attrs["kernel_layout"] != "IOHW":  # type: ignore[index]
        raise fail(
            call,
            f'kernel_layout="{attrs["kernel_layout"]}" is not supported: only IOHW (input '  # type: ignore[index]
            "channels, output channels per group, height, width) is",
        )
    data, weight = tensor_arg(call, 0), tensor_arg(call, 1)
    out_dtype = attrs["out_dtype"]  # type: ignore[index]
    dtype = out_dtype if out_dtype != "void" else common_dtype(call, data, weight)
    sd, sw = _four_dims(call, 0, "data"), _four_dims(call, 1, "weight")
    if sd is None or sw is None:
        return TensorStructInfo(None, dtype, 4)
    groups = attrs["groups"]  # type: ignore[index]
    if dims_equal(sd[1], sw[0]) is False:
        raise fail(
            call,
            f"the input channels differ: {describe_arg(call, 0)} (C = {format_dim(sd[1])}) "
            f"and {describe_arg(call, 1)} (I = {format_dim(sw[0])})",
        )
    known_in = const_int(sd[1])
    if known_in is not None and known_in % groups != 0:
        raise fail(
            call,
            f"the input channels of {describe_arg(call, 0)} are not divisible by groups={groups}",
        )
    spatial = []
    for i in range(2):
        stride, dilation = attrs["strides"][i], attrs["dilation"][i]  # type: ignore[index]
        extra = attrs["output_padding"][i]  # type: ignore[index]
        if extra >= max(stride, dilation):
            raise fail(
                call,
                f"output_padding {attrs['output_padding']} must be smaller than the stride or "  # type: ignore[index]
                f"the dilation of each axis (strides {attrs['strides']}, dilation "  # type: ignore[index]
                f"{attrs['dilation']})",  # type: ignore[index]
            )
        pad = attrs["padding"][i] + attrs["padding"][i + 2]  # type: ignore[index]
        out = simplify((sd[2 + i] - 1) * stride - pad + (sw[2 + i] - 1) * dilation + extra + 1)
        value = const_int(out)
        if value is not None and value < 1:
            raise fail(
                call,
                f"the padding {attrs['padding']} removes the whole output of "  # type: ignore[index]
                f"{describe_arg(call, 0)} (output size {value})",
            )
        spatial.append(out)
    return TensorStructInfo([sd[0], simplify(sw[1] * groups), *spatial], dtype)


register(
    _CONV2D_TRANSPOSE,
    _infer_conv2d_transpose,
    ("data", "weight"),
    (
        "strides",
        "padding",
        "output_padding",
        "dilation",
        "groups",
        "data_layout",
        "kernel_layout",
        "out_layout",
        "out_dtype",
    ),
)


def conv2d_transpose(
    data: Expr | Any,
    weight: Expr | Any,
    strides: IntPair = (1, 1),
    padding: IntPair = (0, 0),
    output_padding: IntPair = (0, 0),
    dilation: IntPair = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "IOHW",
    out_layout: str | None = None,
    out_dtype: str | None = None,
) -> Call:
    """``relax.nn.conv2d_transpose(data, weight, ...)``: the transposed 2-D convolution of
    ``data`` (N, C, H, W) by ``weight`` (C, O / groups, KH, KW), the gradient of ``conv2d``
    with respect to its data. Each output size is ``(H - 1) * stride - pad_before - pad_after
    + dilation * (K - 1) + output_padding + 1``; ``output_padding`` (smaller than the stride
    or the dilation) recovers the input rows a strided convolution skipped."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise StructInfoError(
            f"{_CONV2D_TRANSPOSE}: groups must be a positive integer, got {groups!r}"
        )
    attrs = {
        "strides": _pair(strides, "strides", _CONV2D_TRANSPOSE, 1),
        "padding": _padding(padding, _CONV2D_TRANSPOSE),
        "output_padding": _pair(output_padding, "output_padding", _CONV2D_TRANSPOSE, 0),
        "dilation": _pair(dilation, "dilation", _CONV2D_TRANSPOSE, 1),
        "groups": groups,
        "data_layout": data_layout,
        "kernel_layout": kernel_layout,
        "out_layout": data_layout if out_layout is None else out_layout,
        "out_dtype": "void" if out_dtype in (None, "void") else check_dtype(out_dtype),
    }
    return make_call(_CONV2D_TRANSPOSE, [data, weight], attrs)


# ------------------------------------------------------------------------------ pooling
def pooled_struct_info(call: Call, data_index: int = 0) -> TensorStructInfo:
    """What pooling argument ``data_index`` of ``call`` under its attributes gives."""
    attrs = call.attrs
    _check_layouts(call, layout=attrs["layout"], out_layout=attrs["out_layout"])  # type: ignore[index]
    data = tensor_arg(call, data_index)
    sd = _four_dims(call, data_index, "data")
    if sd is None:
        return TensorStructInfo(None, data.dtype, 4)
    spatial = _spatial_out(call, sd, attrs["pool_size"], data_index)  # type: ignore[index]
    return TensorStructInfo([sd[0], sd[1], *spatial], data.dtype)


def _infer_pool2d(call: Call, ctx: Any) -> StructInfo:
    return pooled_struct_info(call)


def pool_attrs(
    op_name: str,
    pool_size: IntPair,
    strides: IntPair,
    padding: IntPair,
    dilation: IntPair,
    ceil_mode: bool,
    count_include_pad: bool,
    layout: str,
    out_layout: str | None,
) -> dict[str, Any]:
    """The checked attributes of a pooling call (and of its backward op)."""
    return {
        "pool_size": _pair(pool_size, "pool_size", op_name, 1),
        "strides": _pair(strides, "strides", op_name, 1),
        "dilation": _pair(dilation, "dilation", op_name, 1),
        "padding": _padding(padding, op_name),
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "layout": layout,
        "out_layout": layout if out_layout is None else out_layout,
    }


def _pool2d(kind: str) -> Any:
    op_name = f"relax.nn.{kind}_pool2d"
    register(op_name, _infer_pool2d, ("data",), POOL_ATTRS)

    def constructor(
        data: Expr | Any,
        pool_size: IntPair = (1, 1),
        strides: IntPair = (1, 1),
        padding: IntPair = (0, 0),
        dilation: IntPair = (1, 1),
        ceil_mode: bool = False,
        count_include_pad: bool = False,
        layout: str = "NCHW",
        out_layout: str | None = None,
    ) -> Call:
        attrs = pool_attrs(
            op_name,
            pool_size,
            strides,
            padding,
            dilation,
            ceil_mode,
            count_include_pad,
            layout,
            out_layout,
        )
        return make_call(op_name, [data], attrs)

    constructor.__name__ = constructor.__qualname__ = f"{kind}_pool2d"
    constructor.__doc__ = (
        f"``{op_name}(data, pool_size, strides, padding, dilation, ceil_mode, ...)``: the "
        f"{'maximum' if kind == 'max' else 'average'} of each window of ``data`` (N, C, H, W). "
        "``count_include_pad`` (average only) counts padded positions in the divisor."
    )
    return constructor


max_pool2d = _pool2d("max")
avg_pool2d = _pool2d("avg")


# ------------------------------------------------------------------------------ adaptive pooling
_ADAPTIVE_AVG = "relax.nn.adaptive_avg_pool2d"


def _infer_adaptive_pool2d(call: Call, ctx: Any) -> StructInfo:
    attrs = call.attrs
    _check_layouts(call, layout=attrs["layout"], out_layout=attrs["out_layout"])  # type: ignore[index]
    data = tensor_arg(call, 0)
    sd = _four_dims(call, 0, "data")
    output_size = attrs["output_size"]  # type: ignore[index]
    if output_size is None:  # the input's own height and width
        return TensorStructInfo(data.shape, data.dtype, 4)  # type: ignore[union-attr]
    if sd is None:
        return TensorStructInfo(None, data.dtype, 4)
    return TensorStructInfo([sd[0], sd[1], *output_size], data.dtype)


register(_ADAPTIVE_AVG, _infer_adaptive_pool2d, ("data",), ("output_size", "layout", "out_layout"))


def adaptive_avg_pool2d(
    data: Expr | Any,
    output_size: IntPair | None = None,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> Call:
    """``relax.nn.adaptive_avg_pool2d(data, output_size=None, layout="NCHW")``: average
    ``data`` (N, C, H, W) down to (N, C, OH, OW) = ``output_size`` (one int means a square;
    None keeps H and W). Output row ``i`` averages the input rows
    ``floor(i * H / OH) <= h < ceil((i + 1) * H / OH)`` (likewise for columns), so windows
    may overlap when OH does not divide H, as in PyTorch's ``AdaptiveAvgPool2d``."""
    attrs = {
        "output_size": None
        if output_size is None
        else _pair(output_size, "output_size", _ADAPTIVE_AVG, 1),
        "layout": layout,
        "out_layout": layout if out_layout is None else out_layout,
    }
    return make_call(_ADAPTIVE_AVG, [data], attrs)


__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "conv2d", "conv2d_transpose", "max_pool2d"]
