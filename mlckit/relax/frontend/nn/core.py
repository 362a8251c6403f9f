"""The three building blocks of ``nn``: :class:`Tensor`, :class:`Parameter` and :class:`Module`.

How a model becomes relax (the idea of TVM's ``relax.frontend.nn``): a model is a tree of plain
Python objects holding Parameters. ``Module.export_tvm`` opens a relax function with a
BlockBuilder, makes a relax Var for every input and every Parameter, and then *runs* the user's
``forward`` once on :class:`Tensor` wrappers of those Vars. Each operator a Tensor meets emits
one binding into the open dataflow block, so one call of ``forward`` traces the whole graph.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.module import IRModule
from mlckit.relax.block_builder import BlockBuilder
from mlckit.relax.expr import Expr, Tuple, Var, const
from mlckit.relax.struct_info import TensorStructInfo
from mlckit.runtime.ndarray import NDArray
from mlckit.tir.expr import IntImm, PrimExpr
from mlckit.tir.expr import Var as SymVar

from . import spec as _spec
from .spec import SpecError

# What export_tvm traces: {method name: {argument name: nn.spec.Tensor}}.
ModuleSpec = Mapping[str, Mapping[str, _spec.Tensor]]


class ModuleError(MLCError):
    """A module is defined or used wrongly: bad layer settings, no ``forward``, a ``forward``
    that returns no Tensor, or a module run on arrays instead of traced by ``export_tvm``."""


class ParameterError(MLCError):
    """A Parameter got a value of the wrong shape or dtype, or has no value where one is needed."""


def _shape_text(shape: Sequence[Any]) -> str:
    return f"({', '.join(str(d) for d in shape)}{',' if len(shape) == 1 else ''})"


# ------------------------------------------------------------------------------ Tensor
# The nn.op functions behind Tensor's operators and methods. nn.op builds on Tensor, so it
# installs them here when it loads (nn's __init__ loads it with every nn module), as relax.op
# installs the operators of relax.Expr.
_OPERATORS: dict[str, Callable[..., Tensor]] = {}


def register_tensor_operators(**ops: Callable[..., Tensor]) -> None:
    """Install the nn.op functions Tensor calls: ``add``, ``subtract``, ``multiply``,
    ``divide``, ``matmul``, ``negative``, ``reshape``, ``permute_dims`` and ``astype``."""
    _OPERATORS.update(ops)


class Tensor:
    """A value inside the relax function being traced: a thin wrapper over a relax expression.

    Tensors exist only while ``export_tvm`` runs ``forward``. Their operators emit relax ops:
    ``a + b``, ``a - b``, ``a * b``, ``a / b`` (numpy broadcasting), ``a @ b`` (matmul) and
    ``-a``; a Python number on either side becomes a constant of the tensor's dtype.
    """

    # Makes numpy hand ``array + tensor`` to Tensor.__radd__ (which explains the error)
    # instead of building an object array of Tensors.
    __array_ufunc__ = None

    def __init__(self, expr: Expr) -> None:
        self._expr: Expr | None = expr

    @property
    def _struct_info(self) -> TensorStructInfo:
        sinfo = self._expr.struct_info_  # type: ignore[union-attr]
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape_values is None:
            raise ModuleError(f"{self!r} does not hold a tensor of known rank")
        return sinfo

    @property
    def shape(self) -> list[int | PrimExpr]:
        """The dims: ints where known, tir expressions (``n``) where symbolic."""
        dims = self._struct_info.shape_values or ()
        return [d.value if isinstance(d, IntImm) else d for d in dims]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        return self._struct_info.dtype

    def __repr__(self) -> str:
        name = getattr(self._expr, "name_hint", type(self._expr).__name__)
        return f'Tensor({name}, {_shape_text(self.shape)}, "{self.dtype}")'

    # The operators are nn.op's (see register_tensor_operators).
    def __add__(self, other: Tensor | float) -> Tensor:
        return _OPERATORS["add"](self, other)

    def __radd__(self, other: float) -> Tensor:
        return _OPERATORS["add"](other, self)

    def __sub__(self, other: Tensor | float) -> Tensor:
        return _OPERATORS["subtract"](self, other)

    def __rsub__(self, other: float) -> Tensor:
        return _OPERATORS["subtract"](other, self)

    def __mul__(self, other: Tensor | float) -> Tensor:
        return _OPERATORS["multiply"](self, other)

    def __rmul__(self, other: float) -> Tensor:
        return _OPERATORS["multiply"](other, self)

    def __truediv__(self, other: Tensor | float) -> Tensor:
        return _OPERATORS["divide"](self, other)

    def __rtruediv__(self, other: float) -> Tensor:
        return _OPERATORS["divide"](other, self)

    def __matmul__(self, other: Tensor) -> Tensor:
        return _OPERATORS["matmul"](self, other)

    def __neg__(self) -> Tensor:
        return _OPERATORS["negative"](self)

    def reshape(self, *shape: Any) -> Tensor:
        """``x.reshape(n, -1)`` or ``x.reshape((n, -1))``: the same elements in a new shape
        (one dim may be -1)."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return _OPERATORS["reshape"](self, dims)

    def permute_dims(self, axes: Sequence[int] | None = None) -> Tensor:
        """The transpose; ``axes=None`` reverses the dims."""
        return _OPERATORS["permute_dims"](self, axes)

    def astype(self, dtype: str) -> Tensor:
        """The same values converted to ``dtype``."""
        return _OPERATORS["astype"](self, dtype)


def as_expr(value: Tensor | float, dtype: str | None, op_name: str) -> Expr:
    """The relax expression of an operand: a Tensor's own, or (where ``dtype`` is given, for
    the other side of a binary op) a number as a constant of that dtype."""
    if isinstance(value, Parameter) and value._expr is None:
        raise ModuleError(
            f"nn.op.{op_name}: {value!r} has no relax variable. Parameters can be used only "
            "while Module.export_tvm(...) traces forward, and only those the exported module "
            "holds as attributes (directly, in a submodule, in a list or in nn.Sequential)"
        )
    if isinstance(value, Tensor):
        return value._expr  # type: ignore[return-value]
    if dtype is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return const(value, dtype)
    raise ModuleError(
        f"nn.op.{op_name} takes nn.Tensor operands, got {type(value).__name__}; a constant "
        "array belongs in an nn.Parameter"
    )


def emit(expr: Expr, name: str) -> Tensor:
    """Bind ``expr`` to a new variable called ``name`` in the function being traced."""
    bb = BlockBuilder.current()
    if bb is None:  # a Tensor kept from an earlier export_tvm and used after it
        raise ModuleError(
            f"cannot emit {name!r}: no function is being traced; nn operators run only "
            "inside Module.export_tvm(...)"
        )
    return Tensor(bb.emit(expr, name))


# ------------------------------------------------------------------------------ Parameter
class Parameter(Tensor):
    """A weight of a model: a declared shape and dtype, and (once set) a numpy value.

    ``p.data = array`` stores a copy of ``array``, whose shape and dtype must match exactly.
    While ``export_tvm`` traces ``forward`` a Parameter is a Tensor like any other: it stands
    for the function parameter named by its dotted path (``"fc1.weight"``).
    """

    def __init__(self, shape: Sequence[int], dtype: str = "float32") -> None:
        dims = tuple(shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise ParameterError(f"a Parameter's shape must be positive integers, got {shape!r}")
        self._shape = dims
        self._dtype = check_dtype(dtype)
        self._data: np.ndarray | None = None
        # The relax Var this Parameter stands for; set only while export_tvm traces forward.
        self._expr = None

    @property
    def shape(self) -> list[int]:  # type: ignore[override]
        return list(self._shape)

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def data(self) -> np.ndarray | None:
        """The value (a numpy array), or None while it has not been set."""
        return self._data

    @data.setter
    def data(self, value: np.ndarray | NDArray) -> None:
        self._data = self._checked(value, "this Parameter")

    def _checked(self, value: Any, name: str) -> np.ndarray:
        array = value.numpy() if isinstance(value, NDArray) else np.asarray(value)
        if array.shape != self._shape:
            raise ParameterError(
                f"{name} has shape {_shape_text(self._shape)}, the value has shape "
                f"{_shape_text(array.shape)}"
            )
        if array.dtype.name != self._dtype:
            raise ParameterError(
                f'{name} is "{self._dtype}", the value is "{array.dtype.name}" '
                f'(convert it with .astype("{self._dtype}"))'
            )
        return array.copy()

    def __repr__(self) -> str:
        return f'Parameter({_shape_text(self._shape)}, "{self._dtype}")'


# ------------------------------------------------------------------------------ Module
def _named_parameters(name: str, value: Any) -> Iterator[tuple[str, Parameter]]:
    """The Parameters reachable from one attribute value, in attribute-assignment order."""
    if isinstance(value, Parameter):
        yield name, value
    elif isinstance(value, Module):
        # vars() keeps the order in which the attributes were first assigned.
        for attr, child in vars(value).items():
            yield from _named_parameters(f"{name}.{attr}" if name else attr, child)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _named_parameters(f"{name}.{i}" if name else str(i), item)


class Module:
    """Base class of models and layers, as in PyTorch: subclass it, assign layers and
    Parameters to attributes in ``__init__``, and write ``forward`` with :class:`Tensor` ops.

    >>> class MLP(nn.Module):
    ...     def __init__(self):
    ...         self.fc1 = nn.Linear(784, 128)
    ...         self.fc2 = nn.Linear(128, 10)
    ...     def forward(self, x):
    ...         return self.fc2(nn.op.relu(self.fc1(x)))
    >>> mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784))}})

    Attributes that are Parameters, Modules, or lists of them are found by walking the
    object's attributes, so ``super().__init__()`` is optional.
    """

    def forward(self, *args: Any) -> Any:
        raise ModuleError(
            f"{type(self).__name__} has no forward method: define `def forward(self, x)` "
            "returning the output Tensor"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if BlockBuilder.current() is None:
            raise ModuleError(
                f"{type(self).__name__}(...) was called outside Module.export_tvm: an nn model "
                "is not run on arrays but traced into relax. Export it with "
                "model.export_tvm(spec), build it with relax.build and run it with "
                "relax.VirtualMachine"
            )
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """``("fc1.weight", Parameter)`` pairs, in the order the attributes were assigned;
        ``prefix`` names this module. A Parameter shared by two layers is listed once."""
        seen: set[int] = set()
        for name, param in _named_parameters(prefix, self):
            if id(param) not in seen:
                seen.add(id(param))
                yield name, param

    def parameters(self) -> Iterator[Parameter]:
        for _, param in self.named_parameters():
            yield param

    def state_dict(self) -> dict[str, Parameter]:
        """Every Parameter by its dotted name."""
        return dict(self.named_parameters())

    def load_state_dict(self, values: Mapping[str, np.ndarray | NDArray]) -> None:
        """Set every Parameter's data from ``{dotted name: array}``; the names must match
        the module's exactly (nothing missing, nothing extra)."""
        params = self.state_dict()
        missing = [name for name in params if name not in values]
        unexpected = [name for name in values if name not in params]
        if missing or unexpected:
            raise ParameterError(
                f"load_state_dict on {type(self).__name__}: missing {missing}, unexpected "
                f"{unexpected}; the parameters are {list(params)}"
            )
        for name, value in values.items():
            params[name]._data = params[name]._checked(value, f"parameter {name!r}")

    def export_tvm(self, spec: ModuleSpec) -> tuple[IRModule, list[tuple[str, Parameter]]]:
        """Trace the methods named in ``spec`` into an IRModule of relax functions.

        ``spec`` maps a method name to its arguments: ``{"forward": {"x": nn.spec.Tensor((1,
        784), "float32")}}``. Each method becomes a function taking the inputs followed by
        every Parameter (named ``"fc1.weight"``, ...). Returns the module and the
        ``(name, Parameter)`` list in that order; bind the values with ``nn.bind_params``.
        """
        return _export(self, spec)

    def extra_repr(self) -> str:
        """The layer's settings, shown inside the parentheses of its repr."""
        return ""

    def __repr__(self) -> str:
        head = f"{type(self).__name__}({self.extra_repr()}"
        children = [(attr, v) for attr, v in vars(self).items() if isinstance(v, Module)]
        if not children:
            return head + ")"
        lines = [f"  ({attr}): {textwrap.indent(repr(m), '  ').lstrip()}" for attr, m in children]
        return "\n".join([head, *lines, ")"])


# ------------------------------------------------------------------------------ export
def _export(module: Module, spec: ModuleSpec) -> tuple[IRModule, list[tuple[str, Parameter]]]:
    """:meth:`Module.export_tvm`. Each method in the spec becomes one function, built like
    this::

        @R.function
        def forward(x: R.Tensor((n, 784)), fc1_weight: R.Tensor((128, 784)), ...):
            R.func_attr({"num_input": 1})          # the first 1 parameter is the input
            with R.dataflow():
                permute_dims = R.permute_dims(fc1_weight)     # one binding per nn operator
                ...
                R.output(gv)
            return gv
    """
    owner = type(module).__name__
    if not isinstance(spec, Mapping) or not spec:
        raise SpecError(
            f"export_tvm on {owner}: spec must map method names to their inputs, e.g. "
            '{"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}; got ' + repr(spec)
        )
    params = list(module.named_parameters())
    bb = BlockBuilder()
    for method_name, inputs in spec.items():
        _trace(bb, module, method_name, inputs, params)
    return bb.get(), params


def _trace(
    bb: BlockBuilder,
    module: Module,
    method_name: str,
    inputs: Mapping[str, _spec.Tensor],
    params: list[tuple[str, Parameter]],
) -> None:
    where = f"{type(module).__name__}.{method_name}"
    method = getattr(module, method_name, None)
    if not callable(method):
        raise SpecError(f"the spec names {where}, but {type(module).__name__} has no such method")
    arg_names = list(inspect.signature(method).parameters)
    if not isinstance(inputs, Mapping) or set(inputs) != set(arg_names):
        given = list(inputs) if isinstance(inputs, Mapping) else inputs
        raise SpecError(
            f"the spec for {where} gives the inputs {given}, but {method_name} takes "
            f"{arg_names}: give one nn.spec.Tensor per argument, by name"
        )
    symbols: dict[str, SymVar] = {}
    input_vars: list[Var] = []
    for name in arg_names:  # the method's order, whatever the spec's order
        arg_spec = inputs[name]
        if not isinstance(arg_spec, _spec.Tensor):
            raise SpecError(
                f"the spec for argument {name!r} of {where} must be an nn.spec.Tensor, "
                f"got {arg_spec!r}"
            )
        input_vars.append(Var(name, arg_spec.as_struct_info(symbols)))
    weight_vars = [Var(name, TensorStructInfo(p.shape, p.dtype)) for name, p in params]

    with bb.function(method_name, [*input_vars, *weight_vars], {"num_input": len(input_vars)}):
        with bb.dataflow():
            for (_, param), var in zip(params, weight_vars):
                param._expr = var
            try:
                result = _output_expr(method(*(Tensor(v) for v in input_vars)), where)
            finally:
                # A Parameter stands for a Var of this function only while it is traced.
                for _, param in params:
                    param._expr = None
            gv = bb.emit_output(result)
        bb.emit_func_output(gv)


def _output_expr(result: Any, where: str) -> Expr:
    """The relax value of what a traced method returned: a Tensor, or a tuple of them."""
    if isinstance(result, Tensor):
        return result._expr  # type: ignore[return-value]
    if isinstance(result, (tuple, list)) and all(isinstance(r, Tensor) for r in result):
        return Tuple([r._expr for r in result])  # type: ignore[misc]
    raise ModuleError(
        f"{where} returned {type(result).__name__}; it must return an nn.Tensor "
        "(or a tuple of them)"
    )
