"""The negative log-likelihood loss ``nll_loss``, as ``torch.nn.functional.nll_loss``.

``predictions`` hold log-probabilities, one row of ``C`` classes per example:
``(N, C)``, ``(N, C, d1, ...)`` (a class axis at position 1, as in an image segmentation) or
one example ``(C,)``; ``targets`` hold the class index of each example, ``(N, d1, ...)`` or
``()``. Each example's loss is its prediction at its target class, negated and weighted::

    loss[i, ...] = -weights[t] * predictions[i, t, ...]     with t = targets[i, ...]

and 0 where ``t == ignore_index``. ``reduction="none"`` returns these losses, ``"sum"``
their sum and ``"mean"`` their *weighted* mean, the sum divided by the sum of the weights of
the examples not ignored: predictions ``[[-1, -2], [-3, -4]]`` with targets ``[0, 1]`` and
weights ``[1, 3]`` give ``(1 * 1 + 3 * 4) / (1 + 3) = 3.25``. With every example ignored the
mean is 0 / 0 (NaN), as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit import te
from mlckit.errors import StructInfoError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, const

from ..broadcast import divide
from ..reduction import sum as reduce_sum
from ..utils import axis_names

REDUCTIONS = ("mean", "sum", "none")


def nll_loss(
    predictions: te.Tensor,
    targets: te.Tensor,
    weights: te.Tensor | None,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> te.Tensor:
    """The loss of each example (block ``nll_loss``), reduced as ``reduction`` says; without
    ``weights`` every class weighs 1. A target outside ``[0, C)`` other than
    ``ignore_index`` is not checked (it reads outside the predictions)."""
    if reduction not in REDUCTIONS:
        raise StructInfoError(
            f"topi.nn.nll_loss: reduction must be one of {', '.join(map(repr, REDUCTIONS))}, "
            f"got {reduction!r}"
        )
    dtype = predictions.dtype
    zero = const(0, dtype)

    def kept(index: Sequence[PrimExpr], value: PrimExpr) -> PrimExpr:
        # Lazily evaluated: an ignored target (-100) must not index the predictions.
        return tir_op.if_then_else(targets[tuple(index)] != ignore_index, value, zero)

    def weight(c: PrimExpr) -> PrimExpr:
        return const(1, dtype) if weights is None else weights[c]

    def loss(*index: PrimExpr) -> PrimExpr:
        c = targets[index]
        at = (c,) if predictions.ndim == 1 else (index[0], c, *index[1:])
        return kept(index, -predictions[at] * weight(c))

    names = axis_names(targets.ndim)
    losses = te.compute(targets.shape, loss, name="nll_loss", varargs_names=names)
    if reduction == "none":
        return losses
    total = _sum_all(losses)
    if reduction == "sum":
        return total
    counted = te.compute(
        targets.shape,
        lambda *index: kept(index, weight(targets[index])),
        name="nll_loss_weights",
        varargs_names=names,
    )
    return divide(total, _sum_all(counted))


def _sum_all(x: te.Tensor) -> te.Tensor:
    """The sum of all elements; one example's (0-d) loss is its own sum."""
    return reduce_sum(x) if x.ndim else x
