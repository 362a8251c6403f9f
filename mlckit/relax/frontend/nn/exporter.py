"""``Module.export_tvm``: trace a module's methods into relax functions; and ``bind_params``,
which turns the exported weight parameters into constants.

Each method in the spec becomes one function, built like this:

    @R.function
    def forward(x: R.Tensor((n, 784)), fc1_weight: R.Tensor((128, 784)), ...):
        R.func_attr({"num_input": 1})          # the first 1 parameter is the input
        with R.dataflow():
            permute_dims = R.permute_dims(fc1_weight)     # one binding per nn operator
            ...
            R.output(gv)
        return gv
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from mlckit.ir.module import IRModule
from mlckit.relax.block_builder import BlockBuilder
from mlckit.relax.expr import Expr, Function, Tuple, Var
from mlckit.relax.struct_info import TensorStructInfo
from mlckit.relax.transform import BindParams
from mlckit.tir.expr import Var as SymVar

from . import spec as _spec
from .core import Module, ModuleError, Parameter, ParameterError, SpecError, Tensor

ModuleSpec = Mapping[str, Mapping[str, _spec.Tensor]]


def export(module: Module, spec: ModuleSpec) -> tuple[IRModule, list[tuple[str, Parameter]]]:
    """See :meth:`Module.export_tvm`."""
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


def bind_params(mod: IRModule, params: Sequence[tuple[str, Parameter]]) -> IRModule:
    """``mod`` with each exported weight replaced by a constant holding its ``.data``.

    The same as ``relax.transform.BindParams(name, {n: p.data for n, p in params})`` applied
    to every exported function, but it names a Parameter whose data was never set.
    """
    values = {}
    for name, param in params:
        if param.data is None:
            raise ParameterError(
                f"parameter {name!r} {param!r} has no data to bind: set its .data to a "
                "numpy array, or load every weight with model.load_state_dict({name: array})"
            )
        values[name] = param.data
    for gv, func in list(mod.functions.items()):
        if isinstance(func, Function):
            names = {p.name_hint for p in func.params}
            bound = {name: value for name, value in values.items() if name in names}
            mod = BindParams(gv.name_hint, bound)(mod)
    return mod
