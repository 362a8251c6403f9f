"""Gradient rules: how each relax operator passes the gradient of its output to its arguments.

``relax.transform.Gradient`` walks a function's bindings backwards. At ``y = op(a, b)`` it knows
``y_adjoint``, the gradient of the target with respect to ``y``, and asks the rule of ``op``
for the partial gradients of ``a`` and ``b``. A rule is a function::

    rule(var, call, grad) -> [partial_of_arg_0, partial_of_arg_1, ...]

``var`` is the bound variable (its value is the forward result, which several rules reuse:
``exp``'s gradient is ``grad * var``), ``call`` the forward call and ``grad`` the output's
adjoint. Each partial is an un-normalized relax expression with the struct info of that
argument (a tuple for a tuple argument, as concat's), or None for an argument that takes no
gradient (a shape, a bool condition). Worked example, ``y = R.multiply(a, b)``: the rule
returns ``[grad * b, grad * a]``. A rule that cannot handle its call (a conv2d of unknown
size, say) raises :class:`TransformError`, which ``Gradient`` prefixes with the binding.

The rules say nothing about broadcasting: when ``a`` has shape ``(4,)`` and ``y`` shape
``(3, 4)``, the partial ``grad * b`` has shape ``(3, 4)``, and the pass sums it back to ``(4,)``
with ``collapse_sum_to`` (the one place that knows both shapes after normalization).

Comparison ops are registered with :func:`no_gradient`: their output is piecewise constant,
so nothing flows back. An op missing from the table stops ``Gradient`` with an error that
lists every such op the target depends on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit.arith import simplify
from mlckit.errors import TransformError

from ..expr import Call, Expr, Tuple, TupleGetItem, Var, const
from ..struct_info import TensorStructInfo
from ..utils import const_int
from . import binary, datatype, linear_algebra, manipulate, search, spatial, statistical, unary
from . import grad as grad_op

GradientRule = Callable[[Var, Call, Expr], Sequence[Expr | None]]

# op name ("relax.add") -> its rule.
GRADIENT_RULES: dict[str, GradientRule] = {}


def register_gradient(op_name: str) -> Callable[[GradientRule], GradientRule]:
    """Decorator registering ``rule`` as the gradient of ``op_name`` (later ones replace)."""

    def decorate(rule: GradientRule) -> GradientRule:
        GRADIENT_RULES[op_name] = rule
        return rule

    return decorate


def gradient_rule(op_name: str) -> GradientRule | None:
    """The registered rule of ``op_name``, or None."""
    return GRADIENT_RULES.get(op_name)


def no_gradient(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    """The rule of an op whose output does not depend smoothly on its arguments."""
    return [None] * len(call.args)


for _comparison in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    register_gradient(f"relax.{_comparison}")(no_gradient)


# ------------------------------------------------------------------------------- helpers
def _sinfo(expr: Expr) -> TensorStructInfo:
    return expr.struct_info_  # type: ignore[return-value]


def scalar_like(value: float, like: Expr) -> Expr:
    """A 0-d constant with ``like``'s dtype (relax does not convert dtypes implicitly)."""
    return const(value, _sinfo(like).dtype)


def _zero_where_not(condition: Expr, grad: Expr, like: Expr | None = None) -> Expr:
    """``grad`` where ``condition`` holds, else a 0 of ``like``'s dtype (``grad``'s when
    normalized)."""
    return search.where(condition, grad, scalar_like(0.0, grad if like is None else like))


def _label(expr: Expr) -> str:
    return expr.name_hint if isinstance(expr, Var) else type(expr).__name__


def _shape(expr: Expr) -> list[Any]:
    shape = _sinfo(expr).shape_values
    if shape is None:
        raise TransformError(f"{_label(expr)} has no known shape, which its gradient needs")
    return list(shape)


# ------------------------------------------------------------------- elementwise binary
@register_gradient("relax.add")
def _add(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [grad, grad]


@register_gradient("relax.subtract")
def _subtract(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [grad, unary.negative(grad)]


@register_gradient("relax.multiply")
def _multiply(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    a, b = call.args
    return [binary.multiply(grad, b), binary.multiply(grad, a)]


@register_gradient("relax.divide")
def _divide(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # y = a / b: dy/da = 1 / b, dy/db = -a / b^2 = -y / b.
    _, b = call.args
    return [
        binary.divide(grad, b),
        unary.negative(binary.multiply(grad, binary.divide(var, b))),
    ]


@register_gradient("relax.power")
def _power(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # y = a ** b: dy/da = b * a ** (b - 1), dy/db = y * log(a).
    a, b = call.args
    a_pow = binary.power(a, binary.subtract(b, scalar_like(1.0, b)))
    return [
        binary.multiply(grad, binary.multiply(b, a_pow)),
        binary.multiply(grad, binary.multiply(var, unary.log(a))),
    ]


@register_gradient("relax.maximum")
def _maximum(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # A tie sends the whole gradient to the first argument.
    a, b = call.args
    return [
        _zero_where_not(binary.greater_equal(a, b), grad),
        _zero_where_not(binary.less(a, b), grad),
    ]


@register_gradient("relax.minimum")
def _minimum(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    a, b = call.args
    return [
        _zero_where_not(binary.less_equal(a, b), grad),
        _zero_where_not(binary.greater(a, b), grad),
    ]


# -------------------------------------------------------------------- elementwise unary
def _unary_rule(derivative: Callable[[Expr, Var], Expr]) -> GradientRule:
    """The rule of ``y = f(x)`` from ``f'`` written with ``x`` and ``y``: grad * f'(x)."""

    def rule(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
        return [binary.multiply(grad, derivative(call.args[0], var))]

    return rule


def _one_minus(value: Expr, like: Expr) -> Expr:
    """``1 - value``, the constant of ``like``'s dtype (``value`` may be un-normalized)."""
    return binary.subtract(scalar_like(1.0, like), value)


# op name -> f'(x) in terms of x and y = f(x).
UNARY_DERIVATIVES: dict[str, Callable[[Expr, Var], Expr]] = {
    "relax.exp": lambda x, y: y,
    "relax.log": lambda x, y: binary.divide(scalar_like(1.0, x), x),
    "relax.sqrt": lambda x, y: binary.divide(scalar_like(0.5, y), y),
    "relax.sigmoid": lambda x, y: binary.multiply(y, _one_minus(y, y)),
    "relax.tanh": lambda x, y: _one_minus(binary.multiply(y, y), y),
    # erf'(x) = 2 / sqrt(pi) * exp(-x^2).
    "relax.erf": lambda x, y: binary.multiply(
        scalar_like(2.0 / math.sqrt(math.pi), x), unary.exp(unary.negative(binary.multiply(x, x)))
    ),
    # gelu(x) = x * Phi(x): Phi(x) + x * phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2 and
    # phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
    "relax.nn.gelu": lambda x, y: binary.add(
        binary.multiply(
            scalar_like(0.5, x),
            binary.add(
                scalar_like(1.0, x), unary.erf(binary.multiply(x, scalar_like(1 / math.sqrt(2), x)))
            ),
        ),
        binary.multiply(
            binary.multiply(x, scalar_like(1 / math.sqrt(2 * math.pi), x)),
            unary.exp(binary.multiply(binary.multiply(x, x), scalar_like(-0.5, x))),
        ),
    ),
    # silu(x) = x * s(x): s(x) * (1 + x * (1 - s(x))).
    "relax.nn.silu": lambda x, y: binary.multiply(
        unary.sigmoid(x),
        binary.add(scalar_like(1.0, x), binary.multiply(x, _one_minus(unary.sigmoid(x), x))),
    ),
}
for _name, _derivative in UNARY_DERIVATIVES.items():
    register_gradient(_name)(_unary_rule(_derivative))


@register_gradient("relax.negative")
def _negative(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [unary.negative(grad)]


@register_gradient("relax.abs")
def _abs(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    x = call.args[0]
    return [search.where(binary.less(x, scalar_like(0.0, x)), unary.negative(grad), grad)]


@register_gradient("relax.nn.relu")
def _relu(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # At x = 0 the gradient passes (TVM's choice; torch's stops it): a network whose
    # weights all start at zero then still learns.
    x = call.args[0]
    return [_zero_where_not(binary.greater_equal(x, scalar_like(0.0, x)), grad)]


@register_gradient("relax.astype")
def _astype(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [datatype.astype(grad, _sinfo(call.args[0]).dtype)]


@register_gradient("relax.where")
def _where(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    condition = call.args[0]
    zero = scalar_like(0.0, grad)
    return [None, search.where(condition, grad, zero), search.where(condition, zero, grad)]


# ------------------------------------------------------------------------- reductions
def _reduced_axes(call: Call) -> list[int]:
    ndim = _sinfo(call.args[0]).ndim
    axis = call.attrs["axis"] if call.attrs is not None else None
    return list(range(ndim)) if axis is None else [a % ndim for a in axis]


def _spread(call: Call, grad: Expr) -> Expr:
    """``grad`` of a reduction's output broadcast back to the input's shape: the reduced axes
    come back as 1s first (unless keepdims kept them), then ``broadcast_to`` repeats."""
    x = call.args[0]
    shape = _shape(x)
    if not call.attrs["keepdims"] and _sinfo(grad).ndim > 0:
        axes = set(_reduced_axes(call))
        grad = manipulate.reshape(grad, [1 if i in axes else d for i, d in enumerate(shape)])
    return manipulate.broadcast_to(grad, shape)


@register_gradient("relax.sum")
def _sum(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [_spread(call, grad)]


@register_gradient("relax.mean")
def _mean(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    shape = _shape(call.args[0])
    count = 1
    for axis in _reduced_axes(call):
        extent = const_int(shape[axis])
        if extent is None:
            raise TransformError(
                f"the gradient of relax.mean needs the reduced axis {axis} of "
                f"{_label(call.args[0])} to have a known extent, not {shape[axis]}"
            )
        count *= extent
    return [binary.divide(_spread(call, grad), scalar_like(float(count), grad))]


# -------------------------------------------------------------------- linear algebra
def _swap_last_two(x: Expr) -> Expr:
    ndim = _sinfo(x).ndim
    axes = [*range(ndim - 2), ndim - 1, ndim - 2]
    return manipulate.permute_dims(x, axes)


@register_gradient("relax.matmul")
def _matmul(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # (.., m, k) @ (.., k, n): da = grad @ b^T, db = a^T @ grad; broadcast batch dims are
    # summed back by the pass.
    a, b = call.args
    if _sinfo(a).ndim < 2 or _sinfo(b).ndim < 2:
        raise TransformError("the gradient of relax.matmul needs both operands at least 2-D")
    return [
        linear_algebra.matmul(grad, _swap_last_two(b)),
        linear_algebra.matmul(_swap_last_two(a), grad),
    ]


# --------------------------------------------------------------------------- layout
@register_gradient("relax.permute_dims")
def _permute_dims(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    axes = call.attrs["axes"]
    if axes is None:  # the reversal is its own inverse
        return [manipulate.permute_dims(grad)]
    ndim = len(axes)
    inverse = [0] * ndim
    for position, axis in enumerate(axes):
        inverse[axis % ndim] = position
    return [manipulate.permute_dims(grad, inverse)]


def _back_to_input_shape(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    return [manipulate.reshape(grad, _shape(call.args[0]))] + [None] * (len(call.args) - 1)


for _name in ("reshape", "flatten", "expand_dims", "squeeze", "nn.batch_flatten"):
    register_gradient(f"relax.{_name}")(_back_to_input_shape)


@register_gradient("relax.concat")
def _concat(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # The output's adjoint cut where the inputs were joined: a tuple, one part per input.
    fields = call.args[0].struct_info_.fields  # type: ignore[union-attr]
    axis = call.attrs["axis"]
    _require(axis is not None, "relax.concat", "an axis (not the flattening axis=None)")
    axis %= len(_shape(var))
    cuts, position = [], 0
    for field in fields[:-1]:
        extent = const_int(field.shape_values[axis]) if field.shape_values is not None else None
        _require(extent is not None, "relax.concat", "static extents along the axis")
        position += extent  # type: ignore[operator]
        cuts.append(position)
    return [manipulate.split(grad, cuts, axis)]


@register_gradient("relax.split")
def _split(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # The parts' adjoints joined back (concat's kernels take a tuple literal, not a variable).
    count = len(var.struct_info_.fields)  # type: ignore[union-attr]
    parts = Tuple([TupleGetItem(grad, index) for index in range(count)])
    return [manipulate.concat(parts, call.attrs["axis"])]


@register_gradient("relax.take")
def _take(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # Each taken slice adds its adjoint to the slice it came from: with x's axis of n and the
    # k indices flattened, the adjoint of x is grad (pre, post, k) @ one_hot (k, n), where
    # one_hot[j, i] says whether index j is i. Indices are in range ("fast" and "clip" agree).
    op = "relax.take"
    x, indices = call.args
    shape = _static_shape(x, op)
    axis = call.attrs["axis"]
    axis = 0 if axis is None else axis % len(shape)
    n = shape[axis]
    k = int(np.prod(_static_shape(indices, op), dtype="int64"))
    pre = int(np.prod(shape[:axis], dtype="int64"))
    post = int(np.prod(shape[axis + 1 :], dtype="int64"))
    index_dtype = _sinfo(indices).dtype
    one_hot = search.where(
        binary.equal(
            manipulate.reshape(indices, [k, 1]), const(np.arange(n, dtype=index_dtype)[None, :])
        ),
        scalar_like(1.0, x),
        scalar_like(0.0, x),
    )
    rows = manipulate.permute_dims(manipulate.reshape(grad, [pre, k, post]), [0, 2, 1])
    summed = linear_algebra.matmul(manipulate.reshape(rows, [pre * post, k]), one_hot)
    back = manipulate.permute_dims(manipulate.reshape(summed, [pre, post, n]), [0, 2, 1])
    return [manipulate.reshape(back, shape), None]


@register_gradient("relax.broadcast_to")
def _broadcast_to(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # The partial has the output's shape; the pass sums it back to the input's.
    return [grad, None]


def _collapse_sum(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # The adjoint of summing down is repeating back up.
    return [manipulate.broadcast_to(grad, _shape(call.args[0])), None]


register_gradient("relax.collapse_sum_to")(_collapse_sum)
register_gradient("relax.collapse_sum_like")(_collapse_sum)


# ---------------------------------------------------------------------------- softmax
def _softmax_axis(call: Call) -> list[int]:
    return [call.attrs["axis"]]


@register_gradient("relax.nn.softmax")
def _softmax(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # y = softmax(x): dx = y * (grad - sum(grad * y, axis, keepdims)).
    weighted = statistical.sum(binary.multiply(grad, var), _softmax_axis(call), keepdims=True)
    return [binary.multiply(var, binary.subtract(grad, weighted))]


@register_gradient("relax.nn.log_softmax")
def _log_softmax(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # y = log_softmax(x): dx = grad - exp(y) * sum(grad, axis, keepdims).
    total = statistical.sum(grad, _softmax_axis(call), keepdims=True)
    return [binary.subtract(grad, binary.multiply(unary.exp(var), total))]


@register_gradient("relax.nn.layer_norm")
def _layer_norm(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # With x_hat = (x - mean) / sqrt(var + eps) over ``axes`` (n elements) and g = grad * gamma:
    # dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sqrt(var + eps), d gamma = sum(grad * x_hat)
    # and d beta = sum(grad) over the other axes.
    data, gamma, beta = call.args
    shape = _shape(data)
    axes = sorted(a % len(shape) for a in call.attrs["axes"])
    others = [a for a in range(len(shape)) if a not in axes]
    normalized_shape = [d if a in axes else 1 for a, d in enumerate(shape)]

    def mean(x: Expr) -> Expr:
        return statistical.mean(x, axes, keepdims=True)

    def over_others(x: Expr, like: Expr) -> Expr:
        summed = statistical.sum(x, others) if others else x
        return manipulate.reshape(summed, _shape(like))

    centered = binary.subtract(data, mean(data))
    variance = mean(binary.multiply(centered, centered))
    eps = scalar_like(call.attrs["epsilon"], data)
    inv_std = binary.divide(scalar_like(1.0, data), unary.sqrt(binary.add(variance, eps)))
    x_hat = binary.multiply(centered, inv_std)
    g = grad
    if call.attrs["scale"]:
        g = binary.multiply(grad, manipulate.reshape(gamma, normalized_shape))
    correction = binary.add(mean(g), binary.multiply(x_hat, mean(binary.multiply(g, x_hat))))
    return [
        binary.multiply(binary.subtract(g, correction), inv_std),
        over_others(binary.multiply(grad, x_hat), gamma) if call.attrs["scale"] else None,
        over_others(grad, beta) if call.attrs["center"] else None,
    ]


# ---------------------------------------------------------------- convolution, pooling
def _require(condition: bool, op: str, what: str) -> None:
    if not condition:
        raise TransformError(f"the gradient of {op} supports {what} so far")


def _static_shape(expr: Expr, op: str) -> list[int]:
    dims = [const_int(d) for d in _shape(expr)]
    _require(None not in dims, op, "static shapes")
    return dims  # type: ignore[return-value]


def _static_dims(expr: Expr, axes: Sequence[int], op: str) -> list[int]:
    """The dims ``axes`` of ``expr``'s shape, which must be known numbers."""
    shape = _shape(expr)
    dims = [const_int(shape[a]) for a in axes]
    _require(None not in dims, op, "static channels, heights and widths")
    return dims  # type: ignore[return-value]


@register_gradient("relax.nn.conv2d")
def _conv2d(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # Along one axis out[y] = sum_k x_pad[y*s + k*d] * w[k]; both adjoints are convolutions:
    # dx sends grad[y] back to the rows that read it, the transposed convolution; dw[k]
    # correlates x_pad (its rows k*d apart: dilation d becomes the stride) with grad (its rows
    # s apart: the stride becomes the dilation).
    op, attrs = "relax.nn.conv2d", call.attrs
    data, weight = call.args
    _require(
        attrs["out_dtype"] in ("void", _sinfo(data).dtype), op, "an out_dtype equal to the data's"
    )
    strides, dilation, padding = attrs["strides"], attrs["dilation"], attrs["padding"]
    # Static channels too: the data's adjoint takes its channels from the weight.
    _, height, width = _static_dims(data, (1, 2, 3), op)
    kernel = _static_dims(weight, (2, 3), op)
    out = _static_dims(var, (2, 3), op)
    # Input rows (columns) past the last window get no gradient: the transposed convolution
    # adds them back as output_padding, and dw's correlation reaches past the kernel by them.
    reached = [(out[a] - 1) * strides[a] + (kernel[a] - 1) * dilation[a] + 1 for a in range(2)]
    uncovered = [
        size + padding[a] + padding[a + 2] - reached[a] for a, size in enumerate((height, width))
    ]
    data_grad = spatial.conv2d_transpose(
        grad, weight, strides, padding, uncovered, dilation, attrs["groups"]
    )
    weight_grad = _conv2d_weight_grad(data, grad, call)
    for axis, (k, extra, d) in enumerate(zip(kernel, uncovered, dilation), start=2):
        if extra >= d:  # the correlation has kernel offsets past the kernel's own: cut them
            weight_grad = manipulate.take(weight_grad, const(np.arange(k, dtype="int64")), axis)
    return [data_grad, weight_grad]


def _conv2d_weight_grad(data: Expr, grad: Expr, call: Call) -> Expr:
    """dw[o, c] = sum over the batch of x_pad[n, c] correlated with grad[n, o], for the input
    channels c of output channel o's group: a grouped convolution whose reduced axis is the
    batch. Data (N, C, H, W) becomes (C / groups, groups * N, H, W) and grad (N, O, OH, OW)
    becomes (O, N, OH, OW), so that group g's outputs read only group g's inputs."""
    attrs, groups = call.attrs, call.attrs["groups"]
    batch, channels, height, width = _shape(data)
    if groups == 1:
        by_group = manipulate.permute_dims(data, [1, 0, 2, 3])
    else:
        group_channels = simplify(channels // groups)
        split = manipulate.reshape(data, [batch, groups, group_channels, height, width])
        by_group = manipulate.reshape(
            manipulate.permute_dims(split, [2, 1, 0, 3, 4]),
            [group_channels, simplify(groups * batch), height, width],
        )
    correlation = spatial.conv2d(
        by_group,
        manipulate.permute_dims(grad, [1, 0, 2, 3]),
        strides=attrs["dilation"],
        padding=attrs["padding"],
        dilation=attrs["strides"],
        groups=groups,
    )
    return manipulate.permute_dims(correlation, [1, 0, 2, 3])


def _pool2d_backward(backward: Callable[..., Call]) -> GradientRule:
    """The rule of a pooling: its backward op under the forward call's attributes."""

    def rule(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
        return [backward(grad, call.args[0], **call.attrs.fields)]  # type: ignore[union-attr]

    return rule


# Overlapping windows (a stride below the window) make an input element gather from several
# outputs, and a max pooling passes each window's gradient to its first largest element only,
# so the gradients are ops of their own, legalized through topi.nn.pool_grad.
register_gradient("relax.nn.max_pool2d")(_pool2d_backward(grad_op.max_pool2d_backward))
register_gradient("relax.nn.avg_pool2d")(_pool2d_backward(grad_op.avg_pool2d_backward))


# ----------------------------------------------------------------------------- losses
def _along_class_axis(values: Expr, axis: int, shape: list[Any]) -> Expr:
    """C values ``(C,)`` reshaped to lie along the class axis of a tensor of ``shape``."""
    if len(shape) == 1:
        return values
    return manipulate.reshape(values, [d if a == axis else 1 for a, d in enumerate(shape)])


@register_gradient("relax.nn.nll_loss")
def _nll_loss(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # Example i's loss is -w[t_i] * p[i, t_i]. ``chosen`` is 1 at (i, t_i) and 0 elsewhere
    # (all 0 for an ignored example), ``picked = chosen * w``: dL/dp = -grad * picked, divided
    # by W = sum(picked) for "mean".
    predictions, targets = call.args[0], call.args[1]
    weights = call.args[2] if len(call.args) > 2 else None
    shape = _shape(predictions)
    axis = 1 if len(shape) > 1 else 0
    classes = const_int(shape[axis])
    if classes is None:
        raise TransformError("the gradient of relax.nn.nll_loss needs a known class count")
    target_dtype = _sinfo(targets).dtype
    # The targets and a per-example gradient get the class axis back, as 1.
    one_class = [1 if a == axis else d for a, d in enumerate(shape)]
    expanded = manipulate.reshape(targets, one_class) if len(shape) > 1 else targets
    class_ids = _along_class_axis(const(np.arange(classes, dtype=target_dtype)), axis, shape)
    ignored = binary.equal(expanded, const(call.attrs["ignore_index"], target_dtype))
    hit = search.where(
        binary.equal(expanded, class_ids), scalar_like(1.0, grad), scalar_like(0.0, grad)
    )
    chosen = search.where(ignored, scalar_like(0.0, grad), hit)
    picked = (
        chosen
        if weights is None
        else binary.multiply(chosen, _along_class_axis(weights, axis, shape))
    )
    reduction = call.attrs["reduction"]
    if reduction == "none" and len(shape) > 1:
        grad = manipulate.reshape(grad, one_class)
    total = statistical.sum(picked) if reduction == "mean" else None
    loss_grad = unary.negative(binary.multiply(grad, picked))
    partials: list[Expr | None] = [
        loss_grad if total is None else binary.divide(loss_grad, total),
        None,
    ]
    if weights is not None:
        # dL/dw_c = -sum of grad_i * p[i, c] over the examples of class c (S_c); for "mean",
        # where L = S / W, (S_c - L * count_c) / W.
        others = [a for a in range(len(shape)) if a != axis]

        def per_class(x: Expr) -> Expr:
            return statistical.sum(x, others) if others else x

        summed = per_class(
            unary.negative(binary.multiply(binary.multiply(chosen, grad), predictions))
        )
        if total is not None:
            count = per_class(binary.multiply(chosen, grad))
            summed = binary.divide(binary.subtract(summed, binary.multiply(var, count)), total)
        partials.append(summed)
    return partials


@register_gradient("relax.nn.cross_entropy_with_logits")
def _cross_entropy_with_logits(var: Var, call: Call, grad: Expr) -> list[Expr | None]:
    # L = -sum(labels * predictions) / N, N the batch (1 for one example (C,)).
    predictions, labels = call.args
    shape = _shape(predictions)
    batch = const_int(shape[0]) if len(shape) > 1 else 1
    if batch is None:
        raise TransformError(
            "the gradient of relax.nn.cross_entropy_with_logits needs a known batch size"
        )
    scale = binary.divide(unary.negative(grad), scalar_like(float(batch), grad))
    return [binary.multiply(scale, labels), binary.multiply(scale, predictions)]


__all__ = ["GRADIENT_RULES", "GradientRule", "gradient_rule", "no_gradient", "register_gradient"]
