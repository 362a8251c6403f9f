"""``bind_params``: after ``Module.export_tvm`` (in :mod:`.core`), the exported weight
parameters become constants holding their data."""

from __future__ import annotations

from collections.abc import Sequence

from mlckit.ir.module import IRModule
from mlckit.relax.expr import Function
from mlckit.relax.transform import BindParams

from .core import Parameter, ParameterError


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
