"""``relax.op.nn``: neural-network operators (activations, softmax, normalization, dense and
linear, convolution and pooling, and the losses ``nll_loss`` and
``cross_entropy_with_logits``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.errors import StructInfoError
from mlckit.ir.dtype import is_float, is_int

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..utils import dims_equal, format_dim, format_shape
from ._registry import (
    common_dtype,
    describe_arg,
    fail,
    float_attr,
    int_attr,
    int_list,
    make_call,
    normalize_axis,
    op_name,
    register,
    tensor_arg,
)
from .linear_algebra import dense, linear
from .manipulate import shape_product
from .spatial import adaptive_avg_pool2d, avg_pool2d, conv2d, conv2d_transpose, max_pool2d
from .unary import unary

relu = unary("relax.nn.relu")
gelu = unary("relax.nn.gelu", float_only=True)
silu = unary("relax.nn.silu", float_only=True)


def _float_tensor(call: Call, index: int) -> TensorStructInfo:
    """Argument ``index``, which must be a floating-point tensor (when its dtype is known)."""
    x = tensor_arg(call, index)
    if x.dtype != "void" and not is_float(x.dtype):
        raise fail(
            call,
            f"needs a floating-point tensor, but {describe_arg(call, index)} and dtype {x.dtype}",
        )
    return x  # type: ignore[return-value]


def _infer_softmax(call: Call, ctx: Any) -> StructInfo:
    x = _float_tensor(call, 0)
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


# ------------------------------------------------------------------------------ losses
# How a loss reduces the per-example losses: their (weighted) mean, sum, or none (kept).
_REDUCTIONS = ("mean", "sum", "none")


def _reduction_attr(reduction: Any, op: str) -> str:
    if reduction not in _REDUCTIONS:
        raise StructInfoError(
            f"{op}: reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}"
        )
    return reduction


_NLL_LAYOUT = "predictions (C,) with a 0-d target, or (N, C, d1, ...) with targets (N, d1, ...)"


def _infer_nll_loss(call: Call, ctx: Any) -> StructInfo:
    if len(call.args) not in (2, 3):
        raise fail(
            call, f"takes 2 or 3 arguments (predictions, targets, weights), got {len(call.args)}"
        )
    pred, targets = _float_tensor(call, 0), tensor_arg(call, 1)
    weights = _float_tensor(call, 2) if len(call.args) == 3 else None
    dtype = pred.dtype if weights is None else common_dtype(call, pred, weights, 0, 2)
    if targets.dtype != "void" and not is_int(targets.dtype):
        raise fail(
            call,
            f"the targets are class indices and need an integer dtype, but "
            f"{describe_arg(call, 1)} and dtype {targets.dtype}",
        )
    reduction = _reduction_attr(call.attrs["reduction"], op_name(call))  # type: ignore[index]
    if pred.ndim == 0:
        raise fail(call, f"{describe_arg(call, 0)}; it needs {_NLL_LAYOUT}")
    if pred.ndim >= 0 and targets.ndim >= 0 and targets.ndim != max(pred.ndim - 1, 0):  # type: ignore[union-attr]
        raise fail(
            call, f"{describe_arg(call, 0)} and {describe_arg(call, 1)}; it needs {_NLL_LAYOUT}"
        )
    if weights is not None and weights.ndim not in (-1, 1):
        raise fail(call, f"weights hold one value per class, but {describe_arg(call, 2)}")
    pv, tv = pred.shape_values, targets.shape_values  # type: ignore[union-attr]
    # The shape of the per-example losses: predictions' without the class axis 1.
    out = None if pv is None else [*pv[:1], *pv[2:]] if len(pv) > 1 else []
    if out is not None and tv is not None:
        for a, b in zip(out, tv):
            if dims_equal(a, b) is False:
                raise fail(
                    call,
                    f"{describe_arg(call, 0)} and {describe_arg(call, 1)}: the targets' shape "
                    f"must be the predictions' without the class axis 1, "
                    f"{format_shape(out)} (dimension {format_dim(b)} vs {format_dim(a)})",
                )
    wv = None if weights is None else weights.shape_values  # type: ignore[union-attr]
    if pv is not None and wv is not None:
        classes = pv[0] if len(pv) == 1 else pv[1]
        if dims_equal(classes, wv[0]) is False:
            raise fail(
                call,
                f"weights hold one value per class, but {describe_arg(call, 2)} while "
                f"{describe_arg(call, 0)}, so C = {format_dim(classes)}",
            )
    if reduction != "none":
        return TensorStructInfo([], dtype)
    if out is None and tv is not None:
        out = list(tv)
    ndim = pred.ndim - 1 if pred.ndim > 0 else targets.ndim  # type: ignore[union-attr]
    return TensorStructInfo(out, dtype, ndim)


register(
    "relax.nn.nll_loss",
    _infer_nll_loss,
    ("predictions", "targets", "weights"),
    ("reduction", "ignore_index"),
    num_inputs=-1,
)


def nll_loss(
    predictions: Expr | Any,
    targets: Expr | Any,
    weights: Expr | Any | None = None,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> Call:
    """``relax.nn.nll_loss(predictions, targets, weights=None, reduction="mean",
    ignore_index=-100)``: the negative log-likelihood loss, torch's ``nll_loss``.

    ``predictions`` are log-probabilities ``(N, C)`` (or ``(N, C, d1, ...)``, or one example
    ``(C,)``), ``targets`` the int class index of each example ``(N,)`` (``(N, d1, ...)``,
    ``()``), ``weights`` one weight per class ``(C,)`` (all 1 when None). Each example's loss
    is ``-weights[t] * predictions[i, t]`` with ``t = targets[i]``, 0 where
    ``t == ignore_index``; ``reduction`` gives them back (``"none"``), their sum (``"sum"``)
    or their weighted mean (``"mean"``: the sum divided by the weights of the examples not
    ignored). After ``log_softmax`` it is the cross-entropy of a classifier::

        loss = R.nn.nll_loss(R.nn.log_softmax(logits), labels)  # logits (N, 10), labels (N,)
    """
    attrs = {
        "reduction": _reduction_attr(reduction, "relax.nn.nll_loss"),
        "ignore_index": int_attr(ignore_index, "ignore_index", "relax.nn.nll_loss"),
    }
    args = [predictions, targets] if weights is None else [predictions, targets, weights]
    return make_call("relax.nn.nll_loss", args, attrs)


def _infer_cross_entropy(call: Call, ctx: Any) -> StructInfo:
    pred, labels = _float_tensor(call, 0), _float_tensor(call, 1)
    dtype = common_dtype(call, pred, labels)
    pv, lv = pred.shape_values, labels.shape_values
    same = pred.ndim < 0 or labels.ndim < 0 or pred.ndim == labels.ndim
    if same and pv is not None and lv is not None:
        same = all(dims_equal(a, b) is not False for a, b in zip(pv, lv))
    if not same:
        raise fail(
            call,
            f"the predictions and labels must have the same shape, but "
            f"{describe_arg(call, 0)} and {describe_arg(call, 1)}",
        )
    if pred.ndim > 2:
        raise fail(call, f"needs (N, C) or (C,) tensors, but {describe_arg(call, 0)}")
    return TensorStructInfo([], dtype)


register("relax.nn.cross_entropy_with_logits", _infer_cross_entropy, ("predictions", "labels"))


def cross_entropy_with_logits(predictions: Expr | Any, labels: Expr | Any) -> Call:
    """``relax.nn.cross_entropy_with_logits(predictions, labels)``: ``-sum(labels *
    predictions) / N`` for ``(N, C)`` tensors, ``-sum(labels * predictions)`` for one example
    ``(C,)``: a 0-d tensor.

    Despite the name (TVM's), ``predictions`` are log-probabilities, not logits: with
    ``labels`` one-hot it equals ``nll_loss`` of the labels' classes, and with soft labels
    (probabilities) it is their cross-entropy. ``predictions [[-0.5, -1.0]]``,
    ``labels [[0.0, 1.0]]`` give 1.0.
    """
    return make_call("relax.nn.cross_entropy_with_logits", [predictions, labels])


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
    "conv2d_transpose",
    "cross_entropy_with_logits",
    "dense",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "max_pool2d",
    "nll_loss",
    "relu",
    "silu",
    "softmax",
]
