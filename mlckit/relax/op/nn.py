"""``relax.op.nn``: neural-network operators (activations, softmax, normalization, dense and
linear, convolution and pooling)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.ir.dtype import is_float

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..utils import dims_equal, format_dim
from ._registry import (
    common_dtype,
    describe_arg,
    fail,
    float_attr,
    int_attr,
    int_list,
    make_call,
    normalize_axis,
    register,
    tensor_arg,
)
from .linear_algebra import dense, linear
from .manipulate import shape_product
from .spatial import adaptive_avg_pool2d, avg_pool2d, conv2d, max_pool2d
from .unary import unary

relu = unary("relax.nn.relu")
gelu = unary("relax.nn.gelu", float_only=True)
silu = unary("relax.nn.silu", float_only=True)


def _infer_softmax(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    if x.dtype != "void" and not is_float(x.dtype):
        raise fail(
            call, f"needs a floating-point tensor, but {describe_arg(call, 0)} and dtype {x.dtype}"
        )
    if x.ndim >= 0:  # type: ignore[union-attr]
        normalize_axis(call, call.attrs["axis"], x.ndim)  # type: ignore[index, union-attr]
    return x


register("relax.nn.softmax", _infer_softmax, ("data",), ("axis",))
register("relax.nn.log_softmax", _infer_softmax, ("data",), ("axis",))


def softmax(data: Expr | Any, axis: int = -1) -> Call:
    """``relax.nn.softmax(data, axis=-1)``: normalized exponentials along ``axis``."""
    return make_call(
        "relax.nn.softmax", [data], {"axis": int_attr(axis, "axis", "relax.nn.softmax")}
    )


def log_softmax(data: Expr | Any, axis: int = -1) -> Call:
    """``relax.nn.log_softmax(data, axis=-1)``: ``log(softmax(data))``, computed stably."""
    return make_call(
        "relax.nn.log_softmax", [data], {"axis": int_attr(axis, "axis", "relax.nn.log_softmax")}
    )


def _infer_layer_norm(call: Call, ctx: Any) -> StructInfo:
    data = tensor_arg(call, 0)
    params = [tensor_arg(call, i) for i in (1, 2)]
    dtype = data.dtype
    for i, p in zip((1, 2), params):
        dtype = common_dtype(call, data, p, 0, i)
    axes = call.attrs["axes"]  # type: ignore[index]
    ndim = data.ndim  # type: ignore[union-attr]
    if ndim >= 0:
        normalized = [normalize_axis(call, a, ndim, f"axes={axes}: axis") for a in axes]
        if len(set(normalized)) != len(normalized):
            raise fail(call, f"axes={axes} names an axis twice for {describe_arg(call, 0)}")
        # gamma and beta hold one value per position of the normalized axes.
        values = data.shape_values  # type: ignore[union-attr]
        for i, p in zip((1, 2), params):
            if p.ndim not in (-1, len(axes)):  # type: ignore[union-attr]
                raise fail(
                    call,
                    f"{describe_arg(call, i)}, but it needs {len(axes)} dimension(s), one per "
                    f"normalized axis {axes} of {describe_arg(call, 0)}",
                )
            pv = p.shape_values  # type: ignore[union-attr]
            if values is None or pv is None:
                continue
            for a, d in zip(normalized, pv):
                if dims_equal(values[a], d) is False:
                    raise fail(
                        call,
                        f"{describe_arg(call, i)}, but the normalized axes {axes} of "
                        f"{describe_arg(call, 0)} have size(s) "
                        f"({', '.join(format_dim(values[k]) for k in normalized)})",
                    )
    return TensorStructInfo(data.shape, dtype, ndim)  # type: ignore[union-attr]


register(
    "relax.nn.layer_norm",
    _infer_layer_norm,
    ("data", "gamma", "beta"),
    ("axes", "epsilon", "center", "scale"),
)


def layer_norm(
    data: Expr | Any,
    gamma: Expr | Any,
    beta: Expr | Any,
    axes: int | Sequence[int],
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> Call:
    """``relax.nn.layer_norm(data, gamma, beta, axes, epsilon=1e-5, center=True, scale=True)``:
    ``(data - mean) / sqrt(var + epsilon) * gamma + beta`` with mean and variance over
    ``axes``; ``scale=False`` leaves out ``gamma`` and ``center=False`` leaves out ``beta``."""
    attrs = {
        "axes": int_list(axes, "axes", "relax.nn.layer_norm"),
        "epsilon": float_attr(epsilon, "epsilon", "relax.nn.layer_norm"),
        "center": bool(center),
        "scale": bool(scale),
    }
    return make_call("relax.nn.layer_norm", [data, gamma, beta], attrs)


_BATCH_NORM_PARAMS = ("gamma", "beta", "moving_mean", "moving_var")


def _infer_batch_norm(call: Call, ctx: Any) -> StructInfo:
    data = tensor_arg(call, 0)
    params = [tensor_arg(call, i) for i in range(1, 5)]
    dtype = data.dtype
    for i, p in enumerate(params, 1):
        dtype = common_dtype(call, data, p, 0, i)
    ndim = data.ndim  # type: ignore[union-attr]
    axis = call.attrs["axis"]  # type: ignore[index]
    channels = None
    if ndim >= 0:
        index = normalize_axis(call, axis, ndim)
        values = data.shape_values  # type: ignore[union-attr]
        channels = None if values is None else values[index]
    # Each parameter holds one value per channel: a vector of length C = data.shape[axis].
    for i, p in enumerate(params, 1):
        if p.ndim not in (-1, 1):  # type: ignore[union-attr]
            raise fail(
                call,
                f"{_BATCH_NORM_PARAMS[i - 1]} must be 1-D (one value per channel), but "
                f"{describe_arg(call, i)}",
            )
        pv = p.shape_values  # type: ignore[union-attr]
        if channels is not None and pv is not None and dims_equal(pv[0], channels) is False:
            raise fail(
                call,
                f"{describe_arg(call, i)}, but it needs one value per channel: "
                f"{describe_arg(call, 0)}, so C = data.shape[{axis}] = {format_dim(channels)}",
            )
    out = TensorStructInfo(data.shape, dtype, ndim)  # type: ignore[union-attr]
    # As in TVM: (normalized data, new moving_mean, new moving_var); the statistics keep their
    # own struct info, since inference passes them through unchanged.
    return TupleStructInfo([out, params[2], params[3]])


register(
    "relax.nn.batch_norm",
    _infer_batch_norm,
    ("data", *_BATCH_NORM_PARAMS),
    ("axis", "epsilon", "center", "scale", "momentum", "training"),
)


def batch_norm(
    data: Expr | Any,
    gamma: Expr | Any,
    beta: Expr | Any,
    moving_mean: Expr | Any,
    moving_var: Expr | Any,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    momentum: float = 0.1,
    training: bool = False,
) -> Call:
    """``relax.nn.batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, ...)``:
    ``(data - moving_mean) / sqrt(moving_var + epsilon) * gamma + beta``, each parameter a
    vector of length C = ``data.shape[axis]`` broadcast along ``axis``.

    The result is a tuple ``(normalized, new_moving_mean, new_moving_var)``, as in TVM; take
    field 0 for the output. ``momentum`` and ``training=True`` (normalize with the batch's own
    statistics and update the moving ones) are kept as attributes, but only inference
    (``training=False``, statistics returned unchanged) can be legalized. TVM makes ``axis``
    required and defaults to ``training=True``; the defaults here are inference on NCHW data.
    """
    attrs = {
        "axis": int_attr(axis, "axis", "relax.nn.batch_norm"),
        "epsilon": float_attr(epsilon, "epsilon", "relax.nn.batch_norm"),
        "center": bool(center),
        "scale": bool(scale),
        "momentum": float_attr(momentum, "momentum", "relax.nn.batch_norm"),
        "training": bool(training),
    }
    return make_call("relax.nn.batch_norm", [data, gamma, beta, moving_mean, moving_var], attrs)


def _infer_batch_flatten(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    if x.ndim == 0:  # type: ignore[union-attr]
        raise fail(call, f"needs a batch dimension, but {describe_arg(call, 0)}")
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, x.dtype, 2)
    return TensorStructInfo([values[0], shape_product(values[1:])], x.dtype)


register("relax.nn.batch_flatten", _infer_batch_flatten, ("data",))


def batch_flatten(data: Expr | Any) -> Call:
    """``relax.nn.batch_flatten(data)``: (N, d1, d2, ...) becomes (N, d1 * d2 * ...)."""
    return make_call("relax.nn.batch_flatten", [data])


__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_flatten",
    "batch_norm",
    "conv2d",
    "dense",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "max_pool2d",
    "relu",
    "silu",
    "softmax",
]
