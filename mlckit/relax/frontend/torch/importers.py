"""``from_fx`` and ``from_exported_program``: a PyTorch model as a relax IRModule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlckit.ir import IRModule

from . import ops
from .translator import FrontendError, Importer, describe_node, name_of

InputInfo = Sequence[tuple[Sequence[int | str], str]]


def _require_torch(where: str) -> Any:
    try:
        import torch
        import torch.export
        import torch.fx
    except ImportError:
        raise FrontendError(
            f"{where} needs PyTorch, which is not installed: pip install 'mlckit[torch]'"
        ) from None
    return torch


def _unsupported(imp: Importer, node: Any, what: str, known: list[str]) -> FrontendError:
    return FrontendError(
        f"{imp.where}: {describe_node(node)}: {what} has no converter. Supported: "
        f"{', '.join(known)} (see mlckit.relax.frontend.torch.coverage())"
    )


def from_fx(
    model: Any,
    input_info: InputInfo,
    *,
    keep_params_as_input: bool = False,
    unwrap_unit_return_tuple: bool = False,
) -> IRModule:
    """Import a ``torch.fx.GraphModule`` (``torch.fx.symbolic_trace(model)``) as an IRModule
    whose function ``main`` takes the inputs described by ``input_info`` (a ``(shape, dtype)``
    pair per input; a ``str`` in a shape is a symbolic dimension) and computes with high-level
    relax operators. The weights are constants, or with ``keep_params_as_input`` parameters of
    ``main`` after the inputs; :func:`detach_params` then returns their values, ready for
    ``relax.transform.BindParams``.
    """
    torch = _require_torch("from_fx")
    if not isinstance(model, torch.fx.GraphModule):
        raise FrontendError(
            f"from_fx takes a torch.fx.GraphModule, not {type(model).__name__}; trace the model "
            "first: torch.fx.symbolic_trace(model)"
        )
    imp = Importer(keep_params_as_input, "from_fx")
    modules = dict(model.named_modules())
    placeholders = [n for n in model.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(input_info):
        raise FrontendError(
            f"from_fx: the model takes {len(placeholders)} inputs "
            f"({', '.join(n.name for n in placeholders)}), input_info describes {len(input_info)}"
        )
    infos = dict(zip(placeholders, input_info))

    def body() -> Any:
        for node in model.graph.nodes:
            args, kwargs = imp.convert_arg(node.args), imp.convert_arg(node.kwargs)
            if node.op == "placeholder":
                shape, dtype = infos[node]
                imp.env[node] = imp.input(node.name, shape, dtype)
            elif node.op == "get_attr":
                imp.env[node] = imp.weight(_fetch_attr(model, node.target), node.target)
            elif node.op == "call_module":
                module = modules[node.target]
                convert = ops.module_table().get(type(module))
                if convert is None:
                    known = [f"nn.{cls.__name__}" for cls in ops.module_table()]
                    raise _unsupported(imp, node, f"nn.{type(module).__name__}", known)
                imp.env[node] = imp.call(node, convert, module, node.target, *args, **kwargs)
            elif node.op == "call_function":
                convert = ops.function_table().get(node.target)
                if convert is None:
                    known = sorted(ops.FUNCTIONS)
                    raise _unsupported(imp, node, name_of(node.target), known)
                imp.env[node] = imp.call(node, convert, *args, **kwargs)
            elif node.op == "call_method":
                convert = ops.METHODS.get(node.target)
                if convert is None:
                    known = [f"Tensor.{name}" for name in ops.METHODS]
                    raise _unsupported(imp, node, f"Tensor.{node.target}", known)
                imp.env[node] = imp.call(node, convert, *args, **kwargs)
            elif node.op == "output":
                return args[0]
        raise FrontendError("from_fx: the graph has no output")

    return imp.build(body, unwrap_unit_return_tuple)


def _fetch_attr(model: Any, target: str) -> Any:
    value = model
    for part in target.split("."):
        value = getattr(value, part)
    return value


def from_exported_program(
    exported_program: Any,
    *,
    keep_params_as_input: bool = False,
    unwrap_unit_return_tuple: bool = False,
) -> IRModule:
    """Import a ``torch.export.ExportedProgram`` (``torch.export.export(model, args)``): its
    graph of ATen operators, the inputs' shapes and dtypes from the example arguments, the
    parameters and buffers (batch norm statistics) from its state dict. The result is a tuple
    unless ``unwrap_unit_return_tuple`` (an exported program always returns a tuple)."""
    torch = _require_torch("from_exported_program")
    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise FrontendError(
            "from_exported_program takes a torch.export.ExportedProgram, not "
            f"{type(exported_program).__name__}; export the model first: "
            "torch.export.export(model.eval(), (example_input,))"
        )
    imp = Importer(keep_params_as_input, "from_exported_program")
    signature = exported_program.graph_signature
    weights = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    constants = {**exported_program.state_dict, **exported_program.constants}

    def body() -> Any:
        for node in exported_program.graph.nodes:
            args, kwargs = imp.convert_arg(node.args), imp.convert_arg(node.kwargs)
            if node.op == "placeholder":
                if node.name in weights:
                    imp.env[node] = imp.weight(constants[weights[node.name]], weights[node.name])
                else:
                    value = node.meta["val"]
                    shape = [int(d) for d in value.shape]
                    imp.env[node] = imp.input(node.name, shape, str(value.dtype).split(".")[-1])
            elif node.op == "call_function":
                name = str(node.target)
                # Besides ATen operators, an exported graph reads fields of tuples (getitem).
                convert = ops.ATEN.get(name) or ops.function_table().get(node.target)
                if convert is None:
                    raise _unsupported(imp, node, name, sorted(ops.ATEN))
                imp.env[node] = imp.call(node, convert, *args, **kwargs)
            elif node.op == "output":
                return args[0]
            else:
                raise FrontendError(
                    f"from_exported_program: {describe_node(node)} is not supported"
                )
        raise FrontendError("from_exported_program: the graph has no output")

    return imp.build(body, unwrap_unit_return_tuple)


def detach_params(mod: IRModule) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Split an import with ``keep_params_as_input=True`` into the module (without the
    attribute ``params``) and the weights' values by parameter name, ready for
    ``relax.transform.BindParams("main", params)``."""
    func = mod["main"]
    values = func.attrs.get("params") if func.attrs else None
    if values is None:
        raise FrontendError(
            "detach_params: main carries no weights; import with keep_params_as_input=True"
        )
    detached = mod.copy()
    detached["main"] = func.without_attr("params")
    return detached, dict(values)
