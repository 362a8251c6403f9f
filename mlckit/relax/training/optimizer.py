"""Optimizers as Relax functions: one step of SGD, momentum SGD or Adam over a tuple of parameters.

An optimizer turns the gradients that ``relax.transform.Gradient`` computes into new parameter
values. mlckit writes that step as a Relax function, so it is compiled, fused and scheduled like
the model itself::

    (params: tuple, gradients: tuple, optim_states: tuple) -> (new params, new optim_states)

``optim_states[0]`` always counts the steps taken; what follows depends on the method. Plain SGD
needs nothing else, momentum SGD keeps one velocity per parameter, Adam keeps ``beta1 ** t``,
``beta2 ** t`` and two running moments per parameter.

A worked example, SGD with ``lr = 0.1`` on one parameter ``x = [1.0, 2.0]`` whose gradient is
``[0.5, -1.0]``: the new ``x`` is ``x - lr * grad = [0.95, 2.1]`` and the state ``(0,)`` becomes
``(1,)``. In code::

    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    opt = SGD(0.1).init(x)                 # opt.state == (tensor(0, int64),)
    mod = IRModule({"SGD": opt.get_function()})
    vm = relax.VirtualMachine(relax.build(relax.transform.LegalizeOps()(mod), "llvm"), cpu())
    params, opt.state = vm["SGD"]((x_value,), (x_grad,), opt.state)

The function's variables are named as TVM names them (``num_steps``, ``x_grad``, ``x_v_new``,
``x_m_hat``, ``params_new``, ...), so the printed TVMScript reads the same. Each update follows
``torch.optim``'s formula with weight decay added to the gradient (L2 penalty); momentum SGD
applies ``1 - dampening`` from the first step on, where torch takes the first gradient whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from mlckit import runtime
from mlckit.errors import IRError

from ..block_builder import BlockBuilder
from ..expr import Expr, Function, Tuple, TupleGetItem, Var, const
from ..op import add, divide, multiply, sqrt, subtract
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo

_STEP_SINFO = TensorStructInfo((), "int64")
_FLOAT_DTYPES = ("float16", "float32", "float64")


def _one_minus(value: float) -> float:
    """``1 - value`` without binary rounding (1 - 0.9 is 0.1, not 0.09999999999999998), so a
    constant prints as the user wrote its complement and functions compare equal."""
    return float(Decimal(1) - Decimal(str(value)))


class Optimizer:
    """A method for updating parameters from their gradients, built as a Relax function.

    ``init(params)`` fixes the parameters (Relax Vars of float tensors, one dtype) and sets
    ``state`` to the initial optimizer state, a tuple of NDArrays; ``get_function()`` returns
    the step function, named after the optimizer. Subclasses say which state each parameter
    carries and how one step updates it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.param_list: list[Var] | None = None
        self.dtype: str | None = None
        self.state: tuple[runtime.NDArray, ...] | None = None

    # ------------------------------------------------------------------ set up
    def init(self, params: Var | Sequence[Var]) -> Optimizer:
        """Set the parameters to optimize and the initial state; returns the optimizer."""
        params = list(params) if isinstance(params, (list, tuple)) else [params]
        self._check_params(params)
        self.param_list = params
        self.dtype = params[0].struct_info_.dtype
        steps = runtime.tensor(np.zeros((), "int64"))
        self.state = (steps, *(runtime.tensor(a) for a in self._initial_state()))
        return self

    def _check_params(self, params: list[Var]) -> None:
        where = f"{type(self).__name__}.init"
        if not params:
            raise IRError(f"{where}: no parameters to optimize")
        seen: set[int] = set()
        for p in params:
            if not isinstance(p, Var):
                raise IRError(f"{where}: parameter {p!r} is not a relax.Var")
            sinfo = p.struct_info_
            if not isinstance(sinfo, TensorStructInfo):
                raise IRError(
                    f"{where}: parameter {p.name_hint} must be a tensor, its struct info is {sinfo}"
                )
            if sinfo.dtype not in _FLOAT_DTYPES:
                raise IRError(
                    f"{where}: parameter {p.name_hint} has dtype {sinfo.dtype}; optimizers update "
                    f"floating point tensors ({', '.join(_FLOAT_DTYPES)})"
                )
            if sinfo.dtype != params[0].struct_info_.dtype:
                raise IRError(
                    f"{where}: parameter {p.name_hint} has dtype {sinfo.dtype} but "
                    f"{params[0].name_hint} has {params[0].struct_info_.dtype}; all parameters "
                    "share one dtype, the dtype of the optimizer's state"
                )
            if _static_shape(sinfo) is None:
                raise IRError(
                    f"{where}: parameter {p.name_hint} has shape {sinfo.shape}; optimizers need "
                    "static shapes to allocate their state"
                )
            if id(p) in seen:
                raise IRError(f"{where}: parameter {p.name_hint} is listed more than once")
            seen.add(id(p))

    def _initial_state(self) -> list[np.ndarray]:
        """The state after the step count, as numpy arrays."""
        return []

    def _state_sinfo(self) -> list[StructInfo]:
        """The struct info of the state after the step count."""
        return []

    def _zeros_per_param(self) -> list[np.ndarray]:
        return [np.zeros(_static_shape(p.struct_info_), self.dtype) for p in self.param_list]

    # ---------------------------------------------------------------- the step
    def get_function(self) -> Function:
        """The step function ``(params, gradients, optim_states) -> (params_new,
        optim_states_new)`` with one dataflow block. ``init`` must have been called."""
        if self.param_list is None or self.state is None:
            raise IRError(
                f"{type(self).__name__}.get_function: call init(params) first, to say which "
                "parameters the optimizer updates"
            )
        param_sinfo = TupleStructInfo([p.struct_info_ for p in self.param_list])
        params = Var("params", param_sinfo)
        gradients = Var("gradients", param_sinfo)
        states = Var("optim_states", TupleStructInfo([_STEP_SINFO, *self._state_sinfo()]))
        bb = BlockBuilder()
        with bb.function(self.name, [params, gradients, states]):
            with bb.dataflow():
                num_steps = bb.emit(TupleGetItem(states, 0), "num_steps")
                num_steps_new = bb.emit(add(num_steps, const(1, "int64")), "num_steps_new")
                new_params, new_states = self._emit_step(bb, params, gradients, states)
                params_new = bb.emit_output(Tuple(new_params), "params_new")
                states_new = bb.emit_output(Tuple([num_steps_new, *new_states]), "optim_states_new")
            bb.emit_func_output((params_new, states_new))
        return bb.get()[self.name]

    def _emit_step(
        self, bb: BlockBuilder, params: Var, gradients: Var, states: Var
    ) -> tuple[list[Var], list[Var]]:
        """Emit one step: the new parameters and the new state after the step count."""
        raise NotImplementedError

    def _const(self, value: float) -> Expr:
        return const(value, self.dtype)

    def _emit_param_and_grad(
        self, bb: BlockBuilder, params: Var, gradients: Var, i: int, weight_decay: float
    ) -> tuple[str, Var, Var]:
        """Bind parameter ``i`` and its gradient, the weight decay (L2 penalty) added to it."""
        name = self.param_list[i].name_hint
        p = bb.emit(TupleGetItem(params, i), name)
        g = bb.emit(TupleGetItem(gradients, i), f"{name}_grad")
        if weight_decay:
            g = bb.emit(add(multiply(self._const(weight_decay), p), g), f"{name}_grad_new")
        return name, p, g


def _static_shape(sinfo: TensorStructInfo) -> tuple[int, ...] | None:
    dims = sinfo.shape_values
    if dims is None or not all(hasattr(d, "value") for d in dims):
        return None
    return tuple(int(d.value) for d in dims)


def _check_hyperparameters(optimizer: str, **values: float) -> None:
    """Learning rates, decays and epsilons are non-negative numbers, as torch.optim requires."""
    for key, value in values.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
            raise IRError(f"{optimizer}: {key} must be a non-negative number, got {value!r}")


class SGD(Optimizer):
    """Stochastic gradient descent, ``p -= lr * (grad + weight_decay * p)``; the state is
    ``(num_steps,)``."""

    def __init__(self, lr: float, weight_decay: float = 0) -> None:
        _check_hyperparameters("SGD", lr=lr, weight_decay=weight_decay)
        super().__init__("SGD")
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)

    def _emit_step(self, bb, params, gradients, states):
        new_params = []
        for i in range(len(self.param_list)):
            name, p, g = self._emit_param_and_grad(bb, params, gradients, i, self.weight_decay)
            new_params.append(
                bb.emit(subtract(p, multiply(self._const(self.lr), g)), f"{name}_new")
            )
        return new_params, []


class MomentumSGD(Optimizer):
    """SGD with momentum, optionally Nesterov's. With ``g = grad + weight_decay * p``::

        v = momentum * v + (1 - dampening) * g
        p -= lr * (g + momentum * v if nesterov else v)

    The state is ``(num_steps, v_0, ..., v_{n-1})``, the velocities starting at zero.
    """

    def __init__(
        self,
        lr: float,
        momentum: float,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
    ) -> None:
        _check_hyperparameters(
            "MomentumSGD", lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay
        )
        if nesterov and (momentum == 0 or dampening != 0):
            raise IRError(
                "MomentumSGD: Nesterov momentum needs a positive momentum and zero dampening, "
                f"got momentum={momentum}, dampening={dampening}"
            )
        super().__init__("MomentumSGD")
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.dampening = float(dampening)
        self.weight_decay = float(weight_decay)
        self.nesterov = bool(nesterov)

    def _initial_state(self):
        return self._zeros_per_param()

    def _state_sinfo(self):
        return [p.struct_info_ for p in self.param_list]

    def _emit_step(self, bb, params, gradients, states):
        new_params, velocities = [], []
        momentum = self._const(self.momentum)
        for i in range(len(self.param_list)):
            name, p, g = self._emit_param_and_grad(bb, params, gradients, i, self.weight_decay)
            v = bb.emit(TupleGetItem(states, i + 1), f"{name}_v")
            damped = multiply(self._const(_one_minus(self.dampening)), g) if self.dampening else g
            v_new = bb.emit(add(multiply(momentum, v), damped), f"{name}_v_new")
            step = v_new
            if self.nesterov:
                step = bb.emit(add(g, multiply(momentum, v_new)), f"{name}_g_nest")
            p_new = bb.emit(subtract(p, multiply(self._const(self.lr), step)), f"{name}_new")
            new_params.append(p_new)
            velocities.append(v_new)
        return new_params, velocities


class Adam(Optimizer):
    """Adam. With ``g = grad + weight_decay * p`` and ``t`` the step number (from 1)::

        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g * g
        p -= lr * (m / (1 - beta1 ** t)) / (sqrt(v / (1 - beta2 ** t)) + eps)

    The state is ``(num_steps, beta1_prod, beta2_prod, m_0, ..., m_{n-1}, v_0, ..., v_{n-1})``:
    the products ``beta ** t`` start at one and the moments at zero.
    """

    def __init__(
        self,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
    ) -> None:
        _check_hyperparameters("Adam", lr=lr, eps=eps, weight_decay=weight_decay)
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas):
            raise IRError(f"Adam: betas must be two numbers in [0, 1), got {betas!r}")
        super().__init__("Adam")
        self.lr = float(lr)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)

    def _initial_state(self):
        ones = [np.ones((), self.dtype), np.ones((), self.dtype)]
        return ones + self._zeros_per_param() + self._zeros_per_param()

    def _state_sinfo(self):
        param_sinfo = [p.struct_info_ for p in self.param_list]
        scalar = TensorStructInfo((), self.dtype)
        return [scalar, scalar, *param_sinfo, *param_sinfo]

    def _emit_step(self, bb, params, gradients, states):
        n = len(self.param_list)
        c = self._const
        beta1_prod = bb.emit(multiply(TupleGetItem(states, 1), c(self.beta1)), "beta1_prod")
        beta2_prod = bb.emit(multiply(TupleGetItem(states, 2), c(self.beta2)), "beta2_prod")
        new_params, firsts, seconds = [], [], []
        for i in range(n):
            name, p, g = self._emit_param_and_grad(bb, params, gradients, i, self.weight_decay)
            m = bb.emit(TupleGetItem(states, i + 3), f"{name}_m")
            v = bb.emit(TupleGetItem(states, i + 3 + n), f"{name}_v")
            m_new = bb.emit(
                add(multiply(c(self.beta1), m), multiply(c(_one_minus(self.beta1)), g)),
                f"{name}_m_new",
            )
            v_new = bb.emit(
                add(
                    multiply(c(self.beta2), v), multiply(c(_one_minus(self.beta2)), multiply(g, g))
                ),
                f"{name}_v_new",
            )
            m_hat = bb.emit(divide(m_new, subtract(c(1), beta1_prod)), f"{name}_m_hat")
            v_hat = bb.emit(divide(v_new, subtract(c(1), beta2_prod)), f"{name}_v_hat")
            step = multiply(c(self.lr), divide(m_hat, add(sqrt(v_hat), c(self.eps))))
            new_params.append(bb.emit(subtract(p, step), f"{name}_new"))
            firsts.append(m_new)
            seconds.append(v_new)
        return new_params, [beta1_prod, beta2_prod, *firsts, *seconds]
