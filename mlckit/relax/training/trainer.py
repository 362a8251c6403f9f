"""Trainer: runs a training module built by SetupTrainer, holding its parameters and states.

``SetupTrainer`` produces functions that take every parameter and state as arguments and
return new ones; something must keep those values between calls. A ``Trainer`` holds the
model parameters, the model states and the optimizer state on a device, and calls the
compiled functions with them::

    train_mod = SetupTrainer(CrossEntropyLoss(), Adam(1e-3), [pred_sinfo, label_sinfo])(Backbone)
    vm = relax.VirtualMachine(mlckit.build(train_mod, "llvm"), mlckit.cpu())
    trainer = Trainer(train_mod, vm, mlckit.cpu())
    trainer.xavier_uniform_init_params()
    loss = trainer.update(images, labels)   # backbone_loss_adjoint, then optimizer
    scores = trainer.predict(images)        # backbone

Values are kept as :class:`~mlckit.runtime.NDArray`; ``update`` hands the optimizer the
gradients the adjoint function returned, and keeps the new parameters and optimizer state
the optimizer returns, so a step copies nothing between the two calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mlckit import runtime
from mlckit.errors import VMError
from mlckit.ir.module import IRModule

from ..expr import Var
from ..struct_info import TensorStructInfo
from ..utils import const_int, format_struct_info
from ..vm import VirtualMachine
from .setup_trainer import SetupTrainer

Values = Sequence[Any] | Mapping[str, Any]


class Trainer:
    """Holds a model's parameters, states and optimizer state and runs ``train_mod``'s
    functions on ``vm`` (the built ``train_mod``) and ``device``. With
    ``zero_init_param_state`` (the default) parameters and states start as zeros; else
    initialize or load them before ``predict`` and ``update``."""

    def __init__(
        self,
        train_mod: IRModule,
        vm: VirtualMachine,
        device: runtime.Device,
        zero_init_param_state: bool = True,
    ) -> None:
        for key in ("input_num", "param_num", "state_num", "optim_state"):
            if key not in train_mod.attrs:
                raise VMError(
                    f"Trainer: the module has no attribute {key!r}; pass the module "
                    "SetupTrainer(loss, optimizer, loss_args) returned"
                )
        self.mod = train_mod.without_attr("optim_state")
        self.vm = vm
        self.device = device
        self._input_num = int(train_mod.attrs["input_num"])
        self._param_num = int(train_mod.attrs["param_num"])
        self._state_num = int(train_mod.attrs["state_num"])
        self._optim_state = [s.copyto(device) for s in train_mod.attrs["optim_state"]]
        adjoint_params = train_mod[SetupTrainer.ADJOINT_FUNC].params
        start = self._input_num
        self._param_vars: list[Var] = list(adjoint_params[start : start + self._param_num])
        start += self._param_num
        self._state_vars: list[Var] = list(adjoint_params[start : start + self._state_num])
        self._params: list[runtime.NDArray | None] = [None] * self._param_num
        self._states: list[runtime.NDArray | None] = [None] * self._state_num
        if zero_init_param_state:
            self.zero_init_params()
            self.zero_init_states()

    # ------------------------------------------------------------------ initial values
    def _new(self, var: Var, value: Any) -> runtime.NDArray:
        """``value`` as an NDArray on the device, checked against ``var``'s struct info."""
        shape = _shape(var)  # a VMError for a value of no static tensor shape
        array = np.asarray(value.numpy() if isinstance(value, runtime.NDArray) else value)
        if array.shape != shape or str(array.dtype) != _dtype(var):
            raise VMError(
                f"Trainer: {var.name_hint} is {format_struct_info(var.struct_info_)}, but the "
                f"value given has shape {array.shape} and dtype {array.dtype}"
            )
        return runtime.array(array, self.device)

    def xaiver_uniform_init_params(self) -> None:
        """Xavier (Glorot) uniform initialization, TVM's spelling: each parameter drawn from
        U(-a, a) with a = sqrt(6 / sum of its dimensions) (fan in + fan out for a matrix)."""
        params = []
        for p in self._param_vars:
            shape = _shape(p)
            bound = np.sqrt(6.0 / sum(shape)) if shape else 0.0  # a scalar has no fan
            params.append(self._new(p, (bound * np.random.uniform(-1, 1, shape)).astype(_dtype(p))))
        self._params = params

    xavier_uniform_init_params = xaiver_uniform_init_params

    def zero_init_params(self) -> None:
        """Set every parameter to zeros."""
        self._params = [self._new(p, np.zeros(_shape(p), _dtype(p))) for p in self._param_vars]

    def zero_init_states(self) -> None:
        """Set every model state to zeros."""
        self._states = [self._new(s, np.zeros(_shape(s), _dtype(s))) for s in self._state_vars]

    def load_params(self, params: Values) -> None:
        """Set parameters from a list (all of them, in order) or a dict by parameter name
        (some of them)."""
        self._load("parameter", params, self._param_vars, self._params)

    def load_states(self, states: Values) -> None:
        """Set model states from a list (all of them, in order) or a dict by state name."""
        self._load("state", states, self._state_vars, self._states)

    def _load(self, what: str, values: Values, variables: list[Var], into: list) -> None:
        if isinstance(values, Mapping):
            position = {v.name_hint: i for i, v in enumerate(variables)}
            for name, value in values.items():
                if name not in position:
                    known = ", ".join(position) or "none"
                    raise VMError(f"Trainer: the model has no {what} named {name!r} ({known})")
                into[position[name]] = self._new(variables[position[name]], value)
        elif isinstance(values, Sequence) and not isinstance(values, str):
            if len(values) != len(variables):
                raise VMError(
                    f"Trainer: {len(values)} values given for the model's {len(variables)} {what}s"
                )
            into[:] = [self._new(v, value) for v, value in zip(variables, values)]
        else:
            raise VMError(
                f"Trainer: give {what}s as a list or a dict by name, not {type(values).__name__}"
            )

    def export_params(self) -> dict[str, runtime.NDArray | None]:
        """The parameters, by name."""
        return {p.name_hint: value for p, value in zip(self._param_vars, self._params)}

    def export_states(self) -> dict[str, runtime.NDArray | None]:
        """The model states, by name."""
        return {s.name_hint: value for s, value in zip(self._state_vars, self._states)}

    # ------------------------------------------------------------------ running
    def _check_inited(self, caller: str) -> None:
        for what, variables, values in (
            ("parameter", self._param_vars, self._params),
            ("state", self._state_vars, self._states),
        ):
            missing = [v.name_hint for v, value in zip(variables, values) if value is None]
            if missing:
                raise VMError(
                    f"Trainer.{caller}: {what} {', '.join(missing)} not initialized; call "
                    f"zero_init_params(), xavier_uniform_init_params() or load_{what}s() first"
                )

    def _inputs(self, caller: str, values: Sequence[Any], count: int, what: str) -> list[Any]:
        if len(values) != count:
            raise VMError(f"Trainer.{caller}: the backbone takes {count} {what}, got {len(values)}")
        return list(values)  # the VM takes numpy arrays and NDArrays as they are

    def predict(self, *input_instances: Any) -> Any:
        """Run ``backbone`` on the inputs with the current parameters and states; returns the
        prediction (the updated states, if any, are dropped)."""
        self._check_inited("predict")
        inputs = self._inputs("predict", input_instances, self._input_num, "inputs")
        result = self.vm[SetupTrainer.BACKBONE_FUNC](*inputs, *self._params, *self._states)
        if self._state_num:
            result = result[: -self._state_num]
            return result[0] if len(result) == 1 else result
        return result

    def update(self, input_instances: Any, targets: Any) -> runtime.NDArray:
        """One training step on a batch: the loss and the gradients (``backbone_loss_adjoint``),
        then new parameters (``optimizer``); the model states become the updated ones.
        Several inputs or targets are given as lists. Returns the loss before the step."""
        self._check_inited("update")
        inputs = self._inputs("update", _as_list(input_instances), self._input_num, "inputs")
        targets = _as_list(targets)
        loss, grads = self.vm[SetupTrainer.ADJOINT_FUNC](
            *inputs, *self._params, *self._states, *targets
        )
        if self._state_num:
            self._states = list(loss[1:])
            loss = loss[0]
        new_params, new_state = self.vm[SetupTrainer.OPTIMIZER_FUNC](
            self._params, grads, self._optim_state
        )
        self._params, self._optim_state = list(new_params), list(new_state)
        return loss


def _shape(var: Var) -> tuple[int, ...]:
    sinfo = var.struct_info_
    dims = sinfo.shape_values if isinstance(sinfo, TensorStructInfo) else None
    shape = None if dims is None else [const_int(d) for d in dims]
    if shape is None or None in shape:
        raise VMError(
            f"Trainer: {var.name_hint} is {format_struct_info(sinfo)}; the trainer initializes "
            "values of static shape only"
        )
    return tuple(shape)  # type: ignore[arg-type]


def _dtype(var: Var) -> str:
    return var.struct_info_.dtype  # type: ignore[union-attr]


def _as_list(values: Any) -> list[Any]:
    return list(values) if isinstance(values, list) else [values]


__all__ = ["Trainer"]
