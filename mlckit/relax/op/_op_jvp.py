"""JVP rules: how each relax operator carries the tangents of its arguments to its output.

Forward-mode differentiation computes a Jacobian-vector product: every value ``v`` of a
function travels with its tangent ``v_tangent``, the derivative of ``v`` along a chosen
direction of the inputs (the pair is a dual number ``v + v_tangent * eps`` with
``eps * eps = 0``). ``relax.transform.ForwardGradient`` walks a function's bindings forwards;
at ``y = op(a, b)`` it knows the tangents of ``a`` and ``b`` and asks the rule of ``op`` for
``y_tangent``. A rule is a function::

    rule(var, call, tangents) -> y_tangent or None

``var`` is the bound variable (its value is the forward result, which several rules reuse:
``exp``'s tangent is ``var * x_tangent``), ``call`` the forward call and ``tangents[i]`` the
tangent of ``call.args[i]``, or None when it is known to be zero (an argument that depends on
no differentiated input, an integer index, a shape). At least one tangent is not None. A tuple
argument (concat's) gets a tuple of tangents. The rule returns an un-normalized relax
expression with ``var``'s dtype, or None when the output's tangent is zero. Zero tangents are
skipped rather than computed: ``y = a * b`` with only ``a`` moving has ``y_tangent = a_tangent
* b``, without a ``+ a * 0`` term. A rule that cannot handle its call (a max_pool2d of
symbolic shape, say) raises :class:`TransformError`, which ``ForwardGradient`` prefixes with
the binding.

Worked example, ``y = x * w`` then ``z = exp(y)``, with tangents ``x_t`` and ``w_t``::

    y = R.multiply(x, w)      y_tangent = R.add(R.multiply(x_t, w), R.multiply(x, w_t))
    z = R.exp(y)              z_tangent = R.multiply(z, y_tangent)        # exp' = exp

Most rules fall into three families, which the tables below register:

* linear ops (reshape, sum, take, concat, ...): the tangent is the op applied to the first
  argument's tangent, the other arguments (a shape, indices) unchanged;
* multilinear ops (multiply, matmul, conv2d, ...): the product rule, one term per argument
  that moves, each the op with that argument replaced by its tangent;
* elementwise unary ops: ``f'(x) * x_tangent``, with the same ``f'`` the reverse rules use.

Broadcasting needs no care in the rules: when only ``b`` of shape ``(4,)`` moves in
``y = a + b`` of shape ``(3, 4)``, the rule answers ``b_tangent`` and the pass broadcasts it to
``y``'s shape. A value that is not a float tensor (a comparison's bools, an argmax) has no
tangent, so comparisons need no rule. An op missing from the table stops ``ForwardGradient``
with an error that lists every such op on the way from the inputs to the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mlckit.errors import TransformError

from ..expr import Call, Expr, Var, const
from ..utils import const_int
from . import binary, create, manipulate, nn, search, statistical, unary
from ._op_gradient import UNARY_DERIVATIVES, scalar_like

Tangents = Sequence[Expr | None]
JvpRule = Callable[[Var, Call, Tangents], Expr | None]

# op name ("relax.add") -> its rule.
JVP_RULES: dict[str, JvpRule] = {}


def register_jvp(op_name: str) -> Callable[[JvpRule], JvpRule]:
    """Decorator registering ``rule`` as the JVP of ``op_name`` (later ones replace)."""

    def decorate(rule: JvpRule) -> JvpRule:
        JVP_RULES[op_name] = rule
        return rule

    return decorate


def jvp_rule(op_name: str) -> JvpRule | None:
    """The registered rule of ``op_name``, or None."""
    return JVP_RULES.get(op_name)


# ------------------------------------------------------------------------------- helpers
def _with_arg(call: Call, index: int, value: Expr) -> Call:
    """``call`` with argument ``index`` replaced by ``value`` (same op, attrs, sinfo_args)."""
    args = list(call.args)
    args[index] = value
    return Call(call.op, args, call.attrs, call.sinfo_args)


def _total(terms: Sequence[Expr | None]) -> Expr | None:
    """The sum of the terms that are not None (None when all are)."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    total = present[0]
    for term in present[1:]:
        total = binary.add(total, term)
    return total


def _shape_of(expr: Expr) -> list:
    """``expr``'s dims (empty when its shape is unknown)."""
    shape = expr.struct_info_.shape_values  # type: ignore[union-attr]
    return [] if shape is None else list(shape)


def _or_zero(tangent: Expr | None, like: Expr) -> Expr:
    """``tangent``, or a 0-d zero of ``like``'s dtype that ``where`` broadcasts."""
    return scalar_like(0.0, like) if tangent is None else tangent


# ------------------------------------------------------------------------ linear ops
def _linear(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # op(x + t, rest) = op(x, rest) + op(t, rest): the op applied to the tangent.
    return None if tangents[0] is None else _with_arg(call, 0, tangents[0])


_LINEAR_OPS = (
    "negative",
    "astype",
    "sum",
    "mean",
    "permute_dims",
    "reshape",
    "flatten",
    "expand_dims",
    "squeeze",
    "broadcast_to",
    "collapse_sum_to",
    "collapse_sum_like",
    "concat",
    "split",
    "take",
    "nn.batch_flatten",
    "nn.avg_pool2d",
    "nn.adaptive_avg_pool2d",
    # The pooling gradients are linear in the output gradient; in the data a max pooling's
    # routing is piecewise constant and an average pooling's absent.
    "grad.max_pool2d_backward",
    "grad.avg_pool2d_backward",
)
for _name in _LINEAR_OPS:
    register_jvp(f"relax.{_name}")(_linear)


@register_jvp("relax.add")
def _add(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    return _total(tangents)


@register_jvp("relax.subtract")
def _subtract(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    a_t, b_t = tangents
    if b_t is None:
        return a_t
    return unary.negative(b_t) if a_t is None else binary.subtract(a_t, b_t)


# ------------------------------------------------------------------- multilinear ops
def _multilinear(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # The product rule: d op(a, b) = op(da, b) + op(a, db), one term per moving argument.
    return _total([None if t is None else _with_arg(call, i, t) for i, t in enumerate(tangents)])


# cross_entropy_with_logits is -sum(labels * predictions) / N, linear in each argument;
# conv2d and conv2d_transpose are linear in each argument whatever their strides, padding,
# dilation and groups.
_MULTILINEAR_OPS = (
    "multiply",
    "matmul",
    "nn.dense",
    "nn.conv2d",
    "nn.conv2d_transpose",
    "nn.cross_entropy_with_logits",
)
for _name in _MULTILINEAR_OPS:
    register_jvp(f"relax.{_name}")(_multilinear)


@register_jvp("relax.divide")
def _divide(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # y = a / b: dy = (da - y * db) / b.
    _, b = call.args
    a_t, b_t = tangents
    moved_b = None if b_t is None else unary.negative(binary.multiply(var, b_t))
    return binary.divide(_total([a_t, moved_b]), b)  # type: ignore[arg-type]


@register_jvp("relax.power")
def _power(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # y = a ** b: dy = b * a ** (b - 1) * da + y * log(a) * db.
    a, b = call.args
    a_t, b_t = tangents
    return _total(
        [
            None
            if a_t is None
            else binary.multiply(
                binary.multiply(b, binary.power(a, binary.subtract(b, scalar_like(1.0, b)))), a_t
            ),
            None if b_t is None else binary.multiply(binary.multiply(var, unary.log(a)), b_t),
        ]
    )


# --------------------------------------------------------------------- selecting ops
def _select(condition: Callable[[Expr, Expr], Expr]) -> JvpRule:
    """The rule of an op that picks ``a`` where ``condition(a, b)`` holds, else ``b``."""

    def rule(var: Var, call: Call, tangents: Tangents) -> Expr | None:
        a, b = call.args
        a_t, b_t = tangents
        return search.where(condition(a, b), _or_zero(a_t, var), _or_zero(b_t, var))

    return rule


# A tie takes the first argument's tangent, as the reverse rules send it the gradient.
register_jvp("relax.maximum")(_select(binary.greater_equal))
register_jvp("relax.minimum")(_select(binary.less_equal))


@register_jvp("relax.where")
def _where(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    condition = call.args[0]
    _, a_t, b_t = tangents
    return search.where(condition, _or_zero(a_t, var), _or_zero(b_t, var))


@register_jvp("relax.nn.relu")
def _relu(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # At x = 0 the tangent passes, as the reverse rule passes the gradient (TVM's choice).
    x = call.args[0]
    return search.where(
        binary.greater_equal(x, scalar_like(0.0, x)), tangents[0], scalar_like(0.0, var)
    )


@register_jvp("relax.abs")
def _abs(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    x, x_t = call.args[0], tangents[0]
    return search.where(binary.less(x, scalar_like(0.0, x)), unary.negative(x_t), x_t)


def _extremum(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # max/min over axes: the tangent of the element that reached the extremum (the sum over
    # tied ones, as the reverse rules would give each of them the gradient).
    x = call.args[0]
    axis, keepdims = call.attrs["axis"], call.attrs["keepdims"]
    reached = var
    if axis is not None and not keepdims:  # the reduced axes back, as 1s, to broadcast
        ndim = x.struct_info_.ndim  # type: ignore[union-attr]
        reached = manipulate.expand_dims(var, sorted(a % ndim for a in axis))
    hit = search.where(binary.equal(x, reached), tangents[0], scalar_like(0.0, var))
    return statistical.sum(hit, axis, keepdims)


register_jvp("relax.max")(_extremum)
register_jvp("relax.min")(_extremum)


def _taps(out: int, stride: int, dilation: int, offset: int, pad: int, size: int) -> tuple:
    """Along one axis, the input index that tap ``offset`` of each of the ``out`` windows
    reads (clipped into the input) and whether it lies inside the input (not the padding)."""
    position = np.arange(out) * stride + offset * dilation - pad
    return np.clip(position, 0, size - 1), (position >= 0) & (position < size)


@register_jvp("relax.nn.max_pool2d")
def _max_pool2d(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # Each output is the largest tap of its window; its tangent is the tangent of the first
    # tap (row by row) that holds it, the element the reverse rule passes the gradient to.
    # Tap (a, b) of all windows at once is a strided view of the input, gathered with take.
    attrs, x, x_t = call.attrs, call.args[0], tangents[0]
    dims = [const_int(d) for d in _shape_of(x) + _shape_of(var)]
    if None in dims or len(dims) != 8 or attrs["layout"] != "NCHW":
        raise TransformError("the JVP of relax.nn.max_pool2d needs static NCHW shapes so far")
    height, width, out_h, out_w = dims[2], dims[3], dims[6], dims[7]
    (kh, kw), (sh, sw) = attrs["pool_size"], attrs["strides"]
    (dh, dw), (top, left) = attrs["dilation"], attrs["padding"][:2]
    found: Expr | None = None  # where an earlier tap already held the maximum
    terms = []
    for a in range(kh):
        rows, rows_inside = _taps(out_h, sh, dh, a, top, height)  # type: ignore[arg-type]
        for b in range(kw):
            cols, cols_inside = _taps(out_w, sw, dw, b, left, width)  # type: ignore[arg-type]

            def tap(t: Expr, rows: np.ndarray = rows, cols: np.ndarray = cols) -> Expr:
                return manipulate.take(manipulate.take(t, const(rows), 2), const(cols), 3)

            holds = binary.equal(tap(x), var)
            inside = np.outer(rows_inside, cols_inside)
            if not inside.all():  # a tap in the padding holds nothing
                holds = search.where(const(inside), holds, const(False))
            first = holds if found is None else search.where(found, const(False), holds)
            terms.append(search.where(first, tap(x_t), scalar_like(0.0, var)))  # type: ignore[arg-type]
            found = holds if found is None else search.where(holds, const(True), found)
    return _total(terms)


# -------------------------------------------------------------------- elementwise unary
def _unary(derivative: Callable[[Expr, Var], Expr]) -> JvpRule:
    """The rule of ``y = f(x)`` from ``f'`` written with ``x`` and ``y``: f'(x) * x_tangent."""

    def rule(var: Var, call: Call, tangents: Tangents) -> Expr | None:
        return binary.multiply(derivative(call.args[0], var), tangents[0])

    return rule


# exp, log, sqrt, sigmoid, tanh, erf, gelu, silu: the derivatives the reverse rules use.
for _name, _derivative in UNARY_DERIVATIVES.items():
    register_jvp(_name)(_unary(_derivative))


# ---------------------------------------------------------------------------- softmax
@register_jvp("relax.nn.softmax")
def _softmax(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # y = softmax(x): dy = y * (dx - sum(y * dx, axis)).
    x_t = tangents[0]
    weighted = statistical.sum(binary.multiply(var, x_t), [call.attrs["axis"]], keepdims=True)
    return binary.multiply(var, binary.subtract(x_t, weighted))


@register_jvp("relax.nn.log_softmax")
def _log_softmax(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # y = log_softmax(x): dy = dx - sum(softmax(x) * dx, axis), softmax(x) = exp(y).
    x_t = tangents[0]
    weighted = statistical.sum(
        binary.multiply(unary.exp(var), x_t), [call.attrs["axis"]], keepdims=True
    )
    return binary.subtract(x_t, weighted)


@register_jvp("relax.nn.layer_norm")
def _layer_norm(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # x_hat = c * r with c = x - mean(x), r = 1 / sqrt(mean(c^2) + eps) over ``axes``:
    # d x_hat = r * (dc - x_hat * mean(x_hat * dc)), dc = dx - mean(dx); then
    # y = x_hat * gamma + beta gives dy = d x_hat * gamma + x_hat * d gamma + d beta.
    data, gamma, _ = call.args
    data_t, gamma_t, beta_t = tangents
    ndim = data.struct_info_.ndim  # type: ignore[union-attr]
    axes = sorted(a % ndim for a in call.attrs["axes"])
    # gamma and beta hold the normalized axes' extents; broadcasting needs 1s elsewhere.
    expanded = [a for a in range(ndim) if a not in axes]

    def mean(x: Expr) -> Expr:
        return statistical.mean(x, axes, keepdims=True)

    def along_axes(x: Expr) -> Expr:
        return manipulate.expand_dims(x, expanded) if expanded else x

    centered = binary.subtract(data, mean(data))
    eps = scalar_like(call.attrs["epsilon"], data)
    inv_std = binary.divide(
        scalar_like(1.0, data),
        unary.sqrt(binary.add(mean(binary.multiply(centered, centered)), eps)),
    )
    x_hat = binary.multiply(centered, inv_std)
    x_hat_t = None
    if data_t is not None:
        centered_t = binary.subtract(data_t, mean(data_t))
        x_hat_t = binary.multiply(
            inv_std,
            binary.subtract(
                centered_t, binary.multiply(x_hat, mean(binary.multiply(x_hat, centered_t)))
            ),
        )
        if call.attrs["scale"]:
            x_hat_t = binary.multiply(x_hat_t, along_axes(gamma))
    return _total(
        [
            x_hat_t,
            binary.multiply(x_hat, along_axes(gamma_t))
            if call.attrs["scale"] and gamma_t is not None
            else None,
            along_axes(beta_t) if call.attrs["center"] and beta_t is not None else None,
        ]
    )


# ----------------------------------------------------------------------------- losses
@register_jvp("relax.nn.nll_loss")
def _nll_loss(var: Var, call: Call, tangents: Tangents) -> Expr | None:
    # Example i's loss is -w[t_i] * p[i, t_i]: linear in the predictions p (the "mean"
    # divisor W = sum of w[t_i] does not depend on p), so dp's term is nll_loss(dp, t, w).
    # In the weights it is linear for "sum" and "none"; for "mean", L = S(w) / W(w) with S and
    # W linear, so dL = (S(dw) - L * W(dw)) / W(w), where nll_loss(1, t, v, "sum") = -W(v).
    predictions, targets = call.args[0], call.args[1]
    weights_t = tangents[2] if len(tangents) > 2 else None
    by_weights = None
    if weights_t is not None:
        by_weights = _with_arg(call, 2, weights_t)
        if call.attrs["reduction"] == "mean":
            ignore_index = call.attrs["ignore_index"]

            def summed(p: Expr, weights: Expr) -> Expr:
                return nn.nll_loss(p, targets, weights, "sum", ignore_index)

            ones = create.ones_like(predictions)
            by_weights = binary.divide(
                binary.add(
                    summed(predictions, weights_t), binary.multiply(var, summed(ones, weights_t))
                ),
                unary.negative(summed(ones, call.args[2])),
            )
    by_predictions = None if tangents[0] is None else _with_arg(call, 0, tangents[0])
    return _total([by_predictions, by_weights])


__all__ = ["JVP_RULES", "JvpRule", "jvp_rule", "register_jvp"]
