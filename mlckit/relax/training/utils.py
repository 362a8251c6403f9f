"""AppendLoss: a backbone function followed by a loss, as one function to differentiate.

A model's ``backbone`` predicts; a loss function (``relax.training.loss``) scores the
prediction against targets. Training differentiates their composition, so ``AppendLoss``
inlines the loss after the backbone into one new function of one dataflow block, which
``relax.transform.Gradient`` can then take apart. Worked example::

    def main(x, y):                         def loss(arg1):
        with R.dataflow():                      with R.dataflow():
            gv0 = R.add(x, y)                       gv0 = R.sum(arg1)
            R.output(gv0)                           R.output(gv0)
        return gv0                              return gv0

``AppendLoss("main", loss)`` adds::

    def main_loss(x, y):
        with R.dataflow():
            gv0 = R.add(x, y)         # now a dataflow variable: no longer returned
            gv0_1 = R.sum(gv0)        # the loss's parameter arg1 reads the backbone's gv0
            R.output(gv0_1)
        return gv0_1

The first ``num_backbone_outputs`` values the backbone returns feed the loss's first
parameters (their struct info must agree); the loss's other parameters (targets) are appended
to the backbone's parameters; the backbone's other return values (updated model states)
follow the loss in the new function's result.
"""

from __future__ import annotations

from mlckit.errors import TransformError
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_equal

from ..block_builder import BlockBuilder
from ..expr import (
    Binding,
    DataflowVar,
    Expr,
    Function,
    Tuple,
    Var,
)
from ..struct_info import TensorStructInfo
from ..transform.function_copy import FunctionCopier, only_dataflow_block
from ..utils import format_struct_info


def AppendLoss(
    func_name: str,
    loss_function: Function,
    num_backbone_outputs: int = 1,
    new_func_name: str | None = None,
) -> transform.Pass:
    """Add ``new_func_name`` (default ``<func_name>_loss``): the backbone ``func_name`` with
    ``loss_function`` appended, returning ``loss`` or ``(loss, *other backbone outputs)``.

    Raises :class:`TransformError` when either function is not one dataflow block, the loss
    does not return a 0-d tensor variable, the backbone does not return a variable or a flat
    tuple of them, there are fewer than ``num_backbone_outputs`` of those or of the loss's
    parameters, or a returned value's struct info differs from the loss parameter it feeds."""

    @transform.module_pass(opt_level=0, name="AppendLoss")
    def append_loss(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        new_name = new_func_name or f"{func_name}_loss"
        where = f"AppendLoss({func_name!r})"
        if func_name not in mod or not isinstance(mod[func_name], Function):
            names = ", ".join(gv.name_hint for gv in mod.functions) or "none"
            raise TransformError(
                f"{where}: the module has no relax function named {func_name!r} "
                f"(its functions: {names})"
            )
        if not isinstance(loss_function, Function):
            raise TransformError(
                f"{where}: the loss must be a relax.Function (such as MSELoss()(pred, target)), "
                f"not {type(loss_function).__name__}"
            )
        mod[new_name] = _append(
            where, mod[func_name], loss_function, num_backbone_outputs, new_name
        )
        return mod

    return append_loss


def _returned_vars(where: str, result: Expr) -> list[Var]:
    fields = result.fields if isinstance(result, Tuple) else [result]
    if not all(isinstance(f, Var) for f in fields):
        raise TransformError(
            f"{where}: the backbone must return a variable or a tuple of variables, but it "
            f"returns {format_struct_info(result.struct_info_)} with a nested value"
        )
    return list(fields)  # type: ignore[arg-type]


def _loss_result(where: str, loss: Function) -> Var:
    result = loss.body.body  # type: ignore[attr-defined]
    sinfo = result.struct_info_
    if not isinstance(result, Var) or not (isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 0):
        raise TransformError(
            f"{where}: the loss function must return one 0-d tensor variable (a scalar loss), "
            f"but it returns {format_struct_info(sinfo)}"
        )
    return result


def _append(
    where: str, backbone: Function, loss: Function, num_outputs: int, new_name: str
) -> Function:
    def fail(message: str) -> TransformError:
        return TransformError(f"{where}: {message}")

    backbone_block = only_dataflow_block(backbone, "the backbone", fail)
    loss_block = only_dataflow_block(loss, "the loss function", fail)
    loss_result = _loss_result(where, loss)
    returned = _returned_vars(where, backbone.body.body)  # type: ignore[attr-defined]
    for count, what in ((len(returned), "return values"), (len(loss.params), "parameters")):
        if count < num_outputs:
            owner = "backbone" if what == "return values" else "loss function"
            raise TransformError(
                f"{where}: the {owner} has {count} {what}, fewer than num_backbone_outputs="
                f"{num_outputs}"
            )
    predictions, others = returned[:num_outputs], returned[num_outputs:]
    for i, (value, param) in enumerate(zip(predictions, loss.params)):
        if not structural_equal(value.struct_info_, param.struct_info_):
            raise TransformError(
                f"{where}: backbone return value {i} ({value.name_hint}) is "
                f"{format_struct_info(value.struct_info_)}, but the loss parameter it feeds "
                f"({param.name_hint}) is {format_struct_info(param.struct_info_)}"
            )

    copier = FunctionCopier(backbone, loss)
    for param, value in zip(loss.params, predictions):
        copier.bind_dims(param.struct_info_, value.struct_info_)
    params = [copier.param(p) for p in (*backbone.params, *loss.params[num_outputs:])]
    # A prediction only the loss reads is no longer an output of the new function.
    outputs = set(others) | {loss_result}

    def copy(binding: Binding) -> None:
        var = binding.var
        output = var in outputs or (not isinstance(var, DataflowVar) and var not in predictions)
        copier.copy(bb, binding, output)

    attrs = {**backbone.attrs, "global_symbol": new_name}
    bb = BlockBuilder()
    with bb.function(new_name, params, attrs, pure=backbone.is_pure):
        with bb.dataflow():
            for binding in backbone_block.bindings:
                copy(binding)
            remap = copier.remap
            remap.update({p: remap.get(v, v) for p, v in zip(loss.params, predictions)})
            for binding in loss_block.bindings:
                copy(binding)
        result = [remap[loss_result], *(remap.get(v, v) for v in others)]
        bb.emit_func_output(result[0] if len(result) == 1 else Tuple(result))
    return bb.get()[new_name]


__all__ = ["AppendLoss"]
