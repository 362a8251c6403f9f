"""Loss functions as Relax functions, TVM's ``relax.training.loss``.

A loss object is a recipe: calling it with the struct info (or variables) of the model's
predictions and of the targets returns a ``relax.Function`` of one dataflow block computing
the loss, named as TVM names it. ``relax.transform.Gradient`` can then differentiate that
function, and a training module appends it after a backbone.

Each loss first computes one value per element (L1, MSE) or per example (the cross
entropies), then reduces them: ``reduction="mean"`` averages, ``"sum"`` adds, ``"none"``
returns them unreduced. Worked example: predictions ``[[1, 2], [3, 4]]`` against targets
``[[1, 0], [3, 6]]`` differ by ``[[0, 2], [0, -2]]``, so ``L1Loss()`` is
``mean(|d|) = 4 / 4 = 1`` and ``MSELoss(reduction="sum")`` is ``0 + 4 + 0 + 4 = 8``::

    loss = MSELoss(reduction="sum")(R.Tensor((2, 2), "float32"), R.Tensor((2, 2), "float32"))
    # def mse_loss(predictions, targets):
    #     lv = R.subtract(predictions, targets); lv1 = R.multiply(lv, lv); gv = R.sum(lv1)

``CrossEntropyLoss`` is ``nll_loss(log_softmax(predictions), targets)`` with int class
targets ``(N,)``, optional class weights ``(C,)`` and ``ignore_index``, as torch's
``cross_entropy``. ``CategoricalCrossEntropyLoss`` takes one-hot int targets ``(N, C)`` and
follows TVM: with ``ignore_index < 0`` (the default) it reduces the elements
``-log_softmax(predictions) * targets (* weights)`` of the whole ``(N, C)`` matrix, so its
``"sum"`` is torch's ``cross_entropy`` with probability targets but its ``"mean"`` divides by
``N * C`` (torch divides by ``N``) and its ``"none"`` is ``(N, C)``; with
``ignore_index >= 0`` it turns the one-hot rows into class indices (``argmax``) and is
``CrossEntropyLoss``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from mlckit.errors import StructInfoError

from .. import op
from ..block_builder import BlockBuilder
from ..expr import Expr, Function, Var
from ..struct_info import StructInfo, TensorStructInfo
from ..utils import dims_equal, format_tensor_shape

Reduction = Literal["mean", "sum", "none"]
_REDUCTIONS = ("mean", "sum", "none")


def _param(value: Var | StructInfo, name: str, loss: str) -> Var:
    """A fresh parameter: named ``name`` for a struct info, or a copy of a given Var (a loss
    function must not share variables with the function they came from)."""
    if isinstance(value, Var):
        name, value = value.name_hint, value.struct_info
    if not isinstance(value, TensorStructInfo):
        raise StructInfoError(
            f"{loss}: {name} must be a TensorStructInfo or a Var of one, got {value!r}"
        )
    return Var(name, value)


def _same_shape(loss: str, predictions: Var, targets: Var) -> None:
    """Elementwise losses compare equal shapes: a broadcast would silently change the mean."""
    p, t = predictions.struct_info, targets.struct_info
    if p.ndim >= 0 and t.ndim >= 0 and p.ndim != t.ndim:
        different = True
    elif p.shape_values is not None and t.shape_values is not None:
        different = any(dims_equal(a, b) is False for a, b in zip(p.shape_values, t.shape_values))
    else:
        different = False
    if different:
        raise StructInfoError(
            f"{loss}: predictions and targets must have the same shape, but predictions has "
            f"shape {format_tensor_shape(p)} and targets has shape {format_tensor_shape(t)}"
        )


class Loss:
    """The base of every loss: its function name, how many backbone outputs it reads (TVM's
    ``num_backbone_outputs``, 1 for all losses here) and its ``reduction``."""

    def __init__(self, loss_name: str, num_backbone_outputs: int, reduction: Reduction) -> None:
        if reduction not in _REDUCTIONS:
            raise StructInfoError(
                f"{type(self).__name__}: reduction must be one of "
                f"{', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}"
            )
        self._loss_name = loss_name
        self._num_backbone_outputs = num_backbone_outputs
        self._reduction: Reduction = reduction

    @property
    def num_backbone_outputs(self) -> int:
        """How many of the backbone's outputs are the loss's predictions."""
        return self._num_backbone_outputs

    @property
    def reduction(self) -> Reduction:
        """How the per-element (or per-example) losses are reduced."""
        return self._reduction

    def _with_reduction(self, expr: Expr) -> Expr:
        if self._reduction == "sum":
            return op.sum(expr)
        if self._reduction == "mean":
            return op.mean(expr)
        return expr

    def _function(
        self, params: Sequence[Var | None], body: Callable[[BlockBuilder], Expr]
    ) -> Function:
        """A function named after the loss, ``params`` in (those not None: an optional
        parameter not given), ``body``'s value out, computed in one dataflow block."""
        bb = BlockBuilder()
        with bb.function(self._loss_name, [p for p in params if p is not None]):
            with bb.dataflow():
                result = bb.emit_output(body(bb))
            bb.emit_func_output(result)
        return bb.get()[self._loss_name]


class _ElementwiseLoss(Loss):
    """A loss of ``elementwise(predictions - targets)``, reduced."""

    def _elementwise(self, difference: Expr) -> Expr:
        raise NotImplementedError

    def __call__(self, predictions: Var | StructInfo, targets: Var | StructInfo) -> Function:
        """The loss as a Relax function of ``(predictions, targets)`` of one shape."""
        predictions = _param(predictions, "predictions", self._loss_name)
        targets = _param(targets, "targets", self._loss_name)
        _same_shape(self._loss_name, predictions, targets)

        def body(bb: BlockBuilder) -> Expr:
            difference = bb.emit(op.subtract(predictions, targets))
            return self._with_reduction(self._elementwise(difference))

        return self._function([predictions, targets], body)


class L1Loss(_ElementwiseLoss):
    """``|predictions - targets|``, reduced (torch's ``l1_loss``)."""

    def __init__(self, reduction: Reduction = "mean") -> None:
        super().__init__("l1_loss", 1, reduction)

    def _elementwise(self, difference: Expr) -> Expr:
        return op.abs(difference)


class MSELoss(_ElementwiseLoss):
    """``(predictions - targets) ** 2``, reduced (torch's ``mse_loss``)."""

    def __init__(self, reduction: Reduction = "mean") -> None:
        super().__init__("mse_loss", 1, reduction)

    def _elementwise(self, difference: Expr) -> Expr:
        return op.multiply(difference, difference)


class _ClassificationLoss(Loss):
    """A loss over class scores ``(N, C)`` with optional class weights and an ignored class."""

    def __init__(self, loss_name: str, reduction: Reduction, ignore_index: int) -> None:
        super().__init__(loss_name, 1, reduction)
        self.ignore_index = ignore_index

    def __call__(
        self,
        predictions: Var | StructInfo,
        targets: Var | StructInfo,
        weights: Var | StructInfo | None = None,
    ) -> Function:
        """The loss as a Relax function of ``(predictions, targets[, weights])``."""
        params = (
            _param(predictions, "predictions", self._loss_name),
            _param(targets, "targets", self._loss_name),
            None if weights is None else _param(weights, "weights", self._loss_name),
        )
        self._check(*params)
        return self._function(params, lambda bb: self._body(bb, *params))

    def _check(self, predictions: Var, targets: Var, weights: Var | None) -> None:
        """Raise for parameters this loss cannot take (beyond what its ops check)."""

    def _body(self, bb: BlockBuilder, predictions: Var, targets: Var, weights: Var | None) -> Expr:
        raise NotImplementedError

    def _nll_loss(self, log_probs: Expr, labels: Expr, weights: Var | None) -> Expr:
        return op.nn.nll_loss(log_probs, labels, weights, self._reduction, self.ignore_index)


class CrossEntropyLoss(_ClassificationLoss):
    """``nll_loss(log_softmax(predictions), targets, weights)`` (torch's ``cross_entropy``):
    predictions ``(N, C)``, int class targets ``(N,)``, optional weights ``(C,)``; a target
    equal to ``ignore_index`` counts neither in the sum nor in the mean's divisor."""

    def __init__(self, reduction: Reduction = "mean", ignore_index: int = -100) -> None:
        super().__init__("cross_entropy_loss", reduction, ignore_index)

    def _body(self, bb: BlockBuilder, predictions: Var, targets: Var, weights: Var | None) -> Expr:
        log_probs = bb.emit(op.nn.log_softmax(predictions))
        return self._nll_loss(log_probs, targets, weights)


class CategoricalCrossEntropyLoss(_ClassificationLoss):
    """Cross entropy against one-hot int targets ``(N, C)``, with TVM's reductions (see the
    module docstring): ``-log_softmax(predictions) * targets (* weights)`` reduced over all
    ``N * C`` elements, or, when ``ignore_index >= 0``, ``CrossEntropyLoss`` of the targets'
    ``argmax``."""

    def __init__(self, reduction: Reduction = "mean", ignore_index: int = -100) -> None:
        super().__init__("categorical_cross_entropy_loss", reduction, ignore_index)

    def _check(self, predictions: Var, targets: Var, weights: Var | None) -> None:
        dtype = targets.struct_info.dtype
        if "int" not in dtype:
            raise StructInfoError(
                f"{self._loss_name}: the one-hot targets must be an int tensor, got {dtype}"
            )
        _same_shape(self._loss_name, predictions, targets)

    def _body(self, bb: BlockBuilder, predictions: Var, targets: Var, weights: Var | None) -> Expr:
        log_probs = bb.emit(op.nn.log_softmax(predictions))
        if self.ignore_index >= 0:
            # Only a class index can equal ignore_index: nll_loss of the argmax. TVM
            # reshapes the (N,) argmax to (N,), a copy left out here.
            labels = bb.emit(op.argmax(targets, axis=1))
            return self._nll_loss(log_probs, labels, weights)
        one_hot = op.astype(targets, predictions.struct_info.dtype)
        losses = op.multiply(op.negative(log_probs), one_hot)
        if weights is not None:
            losses = op.multiply(losses, weights)
        return self._with_reduction(losses)
