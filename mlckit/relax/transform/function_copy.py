"""Copying a function's parameters and bindings into a new function, with variables of its own.

Gradient, ForwardGradient and AppendLoss each build a new function that starts with a copy of
an existing one. The copy must not share variables with the original: not its relax
variables, and not its symbolic dims either. A function ``main(x: R.Tensor((n, 4)))``
defines ``n``; if ``main_adjoint`` reused that very ``n``, the module would print as two
functions each declaring ``n = T.int64()``, and read back as two *different* ``n`` — no
longer the same module. So the copier gives every tir variable the original defines (in a
parameter's shape or a match_cast) a fresh one of the same name, and rewrites every
struct info, shape and value the copy holds::

    def main(x: R.Tensor((n, 4))):             def main_adjoint(x: R.Tensor((n', 4))):
        lv = R.reshape(x, R.shape([n * 4]))        lv = R.reshape(x, R.shape([n' * 4]))

(``n'`` prints as ``n``: it is another variable of the same name).
"""

from __future__ import annotations

from collections.abc import Callable

from mlckit.errors import TransformError
from mlckit.tir import expr as texpr

from ..analysis.struct_info_analysis import substitute_prim_expr, substitute_struct_info
from ..block_builder import BlockBuilder
from ..expr import Binding, DataflowBlock, Expr, Function, MatchCast, SeqExpr, Var
from ..expr_functor import substitute_vars
from ..struct_info import StructInfo, TensorStructInfo, definable_tir_vars_in_struct_info


def only_dataflow_block(
    func: Function, what: str, fail: Callable[[str], TransformError]
) -> DataflowBlock:
    """``func``'s one dataflow block; ``fail(message)`` when it has another shape."""
    body = func.body
    blocks = body.blocks if isinstance(body, SeqExpr) else []
    if len(blocks) != 1 or not isinstance(blocks[0], DataflowBlock):
        kinds = ", ".join(type(b).__name__ for b in blocks) or "none"
        raise fail(
            f"{what} must consist of exactly one dataflow block (`with R.dataflow():`), but "
            f"its blocks are: {kinds}"
        )
    return blocks[0]


class FunctionCopier:
    """Fresh copies of ``funcs``' parameters (``params``) and, through :meth:`copy`, of their
    bindings, reading the copies' variables. ``remap`` maps each original variable to its
    copy; ``dims`` each symbolic dim the functions define to a fresh one."""

    def __init__(self, *funcs: Function):
        self.dims: dict[texpr.Var, texpr.PrimExpr] = {}
        for func in funcs:
            defined = [p.struct_info_ for p in func.params]
            defined += [
                b.struct_info
                for block in getattr(func.body, "blocks", ())
                for b in block.bindings
                if isinstance(b, MatchCast)
            ]
            for sinfo in defined:
                for dim in definable_tir_vars_in_struct_info(sinfo):
                    self.dims.setdefault(dim, texpr.Var(dim.name_hint, dim.dtype))
        self.remap: dict[Var, Var] = {}

    def param(self, param: Var, name: str | None = None) -> Var:
        """A new parameter copying ``param`` (named ``name``, default ``param``'s)."""
        new = Var(name or param.name_hint, self.struct_info(param.struct_info_))
        if name is None:
            self.remap[param] = new
        return new

    def bind_dims(self, sinfo: StructInfo | None, value: StructInfo | None) -> None:
        """Make the dims ``sinfo`` defines those of ``value`` (a parameter of one function
        that receives a value of the other: AppendLoss's loss reading the prediction)."""
        have = value.shape_values if isinstance(value, TensorStructInfo) else None
        want = sinfo.shape_values if isinstance(sinfo, TensorStructInfo) else None
        for dim, source in zip(want or (), have or ()):
            if isinstance(dim, texpr.Var):
                self.dims[dim] = substitute_prim_expr(source, self.dims)

    def struct_info(self, sinfo: object) -> object:
        return substitute_struct_info(sinfo, self.dims) if self.dims else sinfo

    def value(self, expr: Expr) -> Expr:
        """``expr`` reading the copies' variables and fresh dims."""
        return substitute_vars(expr, self.remap, self.dims)

    def copy(self, bb: BlockBuilder, binding: Binding, output: bool) -> Var:
        """Emit a copy of ``binding`` in ``bb`` (a block output when ``output``) and record
        its variable's copy."""
        var = binding.var
        value = self.value(binding.value)  # type: ignore[attr-defined]
        if isinstance(binding, MatchCast):
            new = bb.emit_match_cast(value, self.struct_info(binding.struct_info), var.name_hint)
        elif output:
            new = bb.emit_output(value, var.name_hint)
        else:
            new = bb.emit(value, var.name_hint)
        self.remap[var] = new
        return new


__all__ = ["FunctionCopier", "only_dataflow_block"]
