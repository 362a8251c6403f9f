"""BindParams: turn named parameters of a function into constants (the model's weights)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.runtime.ndarray import NDArray
from mlckit.tir import expr as E

from ..expr import Constant, Function, Var, const
from ..expr_functor import ExprMutator
from ..struct_info import TensorStructInfo
from ..utils import format_struct_info


class _Binder(ExprMutator):
    def __init__(self, mapping: dict[Var, Constant]):
        super().__init__()
        self.var_remap_.update(mapping)


def bind_params(func: Function, params: Mapping[str, Any], func_name: str = "main") -> Function:
    """``func`` with each parameter named in ``params`` replaced by that constant."""
    by_name = {p.name_hint: p for p in func.params}
    mapping: dict[Var, Constant] = {}
    for name, value in params.items():
        param = by_name.get(name)
        if param is None:
            raise MLCError(
                f"BindParams: function {func_name!r} has no parameter {name!r} "
                f"(parameters: {', '.join(by_name)})"
            )
        array = value.numpy() if isinstance(value, NDArray) else np.asarray(value)
        _check_compatible(func_name, param, array)
        mapping[param] = const(array, array.dtype.name)
    remaining = [p for p in func.params if p not in mapping]
    body = _Binder(mapping).visit_with_new_scope(func.body)
    return Function(remaining, body, func.ret_struct_info, func.is_pure, func.attrs)


def _check_compatible(func_name: str, param: Var, array: np.ndarray) -> None:
    sinfo = param.struct_info_
    if not isinstance(sinfo, TensorStructInfo):
        return
    where = f"BindParams: parameter {param.name_hint!r} of {func_name!r}"
    if sinfo.dtype != "void" and array.dtype.name != sinfo.dtype:
        raise MLCError(f"{where} is {sinfo.dtype}, the value is {array.dtype.name}")
    if sinfo.ndim >= 0 and array.ndim != sinfo.ndim:
        raise MLCError(f"{where} has rank {sinfo.ndim}, the value has shape {array.shape}")
    for axis, dim in enumerate(sinfo.shape_values or ()):
        if isinstance(dim, E.IntImm) and dim.value != array.shape[axis]:
            raise MLCError(
                f"{where} has shape {format_struct_info(sinfo)}, the value has shape {array.shape}"
            )
        if not isinstance(dim, E.IntImm):
            raise MLCError(
                f"{where} has the symbolic shape {format_struct_info(sinfo)}; binding it "
                "would fix symbolic dims, which BindParams does not do yet"
            )


def BindParams(func_name: str, params: Mapping[str, Any]) -> transform.Pass:
    """The pass binding ``params`` (name -> numpy array or NDArray) into ``func_name``."""

    @transform.module_pass(opt_level=0, name="BindParams")
    def bind(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        func = mod[func_name]
        if not isinstance(func, Function):
            raise MLCError(f"BindParams: {func_name!r} is not a relax function")
        mod[func_name] = bind_params(func, params, func_name)
        return mod

    return bind
