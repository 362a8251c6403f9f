"""SetupTrainer: from a model's ``backbone`` to a module that can train it.

The input module holds the model as a function ``backbone(inputs..., params..., states...)``
returning ``prediction`` (or ``(prediction..., new states...)``), and says how many of its
parameters are model parameters and states with the module attributes ``param_num`` and
``state_num`` (``I.module_attrs({"param_num": 4, "state_num": 0})`` in TVMScript). The pass
adds three functions and a few attributes::

    backbone_loss(inputs, params, states, targets)          AppendLoss(backbone, loss)
        -> loss, or (loss, new states)
    backbone_loss_adjoint(inputs, params, states, targets)  Gradient(backbone_loss, params)
        -> ((loss...), (d loss / d param, ...))
    optimizer(params, gradients, optim_states)              the optimizer's step function
        -> (new params, new optim_states)

    attrs: input_num (how many leading parameters are inputs), optim_state (the
    optimizer's initial state, NDArrays)

and legalizes the module, so ``mlckit.build`` compiles every operator of all four functions
into kernels. A training step is then: the adjoint function for the loss and the gradients,
the optimizer for the new parameters (``Trainer.update`` does both).
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit.errors import TransformError
from mlckit.ir import transform
from mlckit.ir.module import IRModule

from ..analysis import well_formed
from ..expr import Function, Tuple
from ..struct_info import StructInfo
from ..transform import Gradient, LegalizeOps
from .loss import Loss
from .optimizer import Optimizer
from .utils import AppendLoss


@transform.module_pass(opt_level=0, name="SetupTrainer")
class SetupTrainer:
    """Turn a backbone module into a legalized training module (see the module docstring).

    ``loss`` is a :class:`~mlckit.relax.training.loss.Loss`, called with ``loss_args`` (the
    struct info of the prediction and of the targets) to build the loss function;
    ``optimizer`` an :class:`~mlckit.relax.training.optimizer.Optimizer`, initialized here with
    the backbone's parameters; ``legalize=False`` keeps the operators as relax calls.
    """

    BACKBONE_FUNC = "backbone"
    BACKBONE_LOSS_FUNC = "backbone_loss"
    ADJOINT_FUNC = "backbone_loss_adjoint"
    OPTIMIZER_FUNC = "optimizer"
    PARAM_NUM_ATTR_KEY = "param_num"
    STATE_NUM_ATTR_KEY = "state_num"

    def __init__(
        self,
        loss: Loss,
        optimizer: Optimizer,
        loss_args: Sequence[StructInfo],
        legalize: bool = True,
    ) -> None:
        if not isinstance(loss, Loss):
            raise TransformError(
                f"SetupTrainer: loss must be a relax.training.loss.Loss such as MSELoss(), not "
                f"{type(loss).__name__}"
            )
        if not isinstance(optimizer, Optimizer):
            raise TransformError(
                f"SetupTrainer: optimizer must be a relax.training.optimizer.Optimizer such as "
                f"SGD(0.01), not {type(optimizer).__name__}"
            )
        self._loss = loss
        self._optimizer = optimizer
        self._loss_args = list(loss_args)
        self._legalize = legalize

    def _counts(self, mod: IRModule) -> tuple[int, int]:
        """``(param_num, state_num)`` after checking the backbone module's shape."""
        well_formed(mod, raise_error=True)
        if self.BACKBONE_FUNC not in mod or not isinstance(mod[self.BACKBONE_FUNC], Function):
            raise TransformError(
                f"SetupTrainer: the module has no relax function named {self.BACKBONE_FUNC!r}; "
                "name the model's function `backbone`"
            )
        backbone = mod[self.BACKBONE_FUNC]
        counts = []
        for key in (self.PARAM_NUM_ATTR_KEY, self.STATE_NUM_ATTR_KEY):
            value = mod.attrs.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TransformError(
                    f"SetupTrainer: the module needs a non-negative integer attribute {key!r}, "
                    f"has {value!r}; write "
                    f'I.module_attrs({{"{self.PARAM_NUM_ATTR_KEY}": P, '
                    f'"{self.STATE_NUM_ATTR_KEY}": S}}) in the module'
                )
            counts.append(value)
        param_num, state_num = counts
        if len(backbone.params) < param_num + state_num:
            raise TransformError(
                f"SetupTrainer: backbone has {len(backbone.params)} parameters, fewer than "
                f"param_num + state_num = {param_num} + {state_num}"
            )
        result = backbone.body.body  # type: ignore[attr-defined]
        if state_num and not (isinstance(result, Tuple) and len(result.fields) > state_num):
            raise TransformError(
                f"SetupTrainer: with state_num = {state_num}, backbone must return a tuple of "
                "the prediction(s) followed by the updated states"
            )
        return param_num, state_num

    def transform_module(self, mod: IRModule, ctx: transform.PassContext) -> IRModule:
        param_num, state_num = self._counts(mod)
        loss = self._loss(*self._loss_args)  # type: ignore[operator]
        mod = AppendLoss(
            self.BACKBONE_FUNC, loss, self._loss.num_backbone_outputs, self.BACKBONE_LOSS_FUNC
        )(mod)
        input_num = len(mod[self.BACKBONE_FUNC].params) - param_num - state_num
        params = mod[self.BACKBONE_LOSS_FUNC].params[input_num : input_num + param_num]
        mod = Gradient(self.BACKBONE_LOSS_FUNC, require_grads=params, target_index=0)(mod)
        self._optimizer.init(params)
        mod[self.OPTIMIZER_FUNC] = self._optimizer.get_function().with_attr(
            "global_symbol", self.OPTIMIZER_FUNC
        )
        mod = mod.with_attrs({"input_num": input_num, "optim_state": self._optimizer.state})
        return LegalizeOps()(mod) if self._legalize else mod


__all__ = ["SetupTrainer"]
