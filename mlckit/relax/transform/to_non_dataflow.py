"""ToNonDataflow: turn every dataflow block into a plain binding block.

Dataflow variables become ordinary variables (same name and struct info), and binding
blocks that end up next to each other are merged, which is how such a function prints and
parses anyway. Later lowering stages (and the course's step-by-step builds) use it to stop
treating dataflow regions specially.
"""

from __future__ import annotations

from mlckit.ir import transform
from mlckit.ir.module import IRModule

from ..expr import BindingBlock, DataflowBlock, DataflowVar, Expr, Function, SeqExpr, Var
from ..expr_functor import ExprMutator


class _ToNonDataflow(ExprMutator):
    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        return self.visit_binding_block_(block)

    def visit_dataflow_var_def_(self, var: DataflowVar) -> Var:
        new_var = Var(var.name_hint, var.struct_info_)
        self.var_remap_[var] = new_var
        return new_var

    def visit_seq_expr_(self, op: SeqExpr) -> Expr:
        seq = super().visit_seq_expr_(op)
        if not isinstance(seq, SeqExpr) or len(seq.blocks) < 2:
            return seq
        # Every block is a plain one now: one block holds them all.
        bindings = [b for block in seq.blocks for b in block.bindings]
        return SeqExpr([BindingBlock(bindings)], seq.body, span=seq.span)


def ToNonDataflow() -> transform.Pass:
    """Replace dataflow blocks by binding blocks and dataflow variables by variables."""

    @transform.module_pass(opt_level=0, name="ToNonDataflow")
    def to_non_dataflow(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                mod.update_func(gv, _ToNonDataflow().visit_expr(func))
        return mod

    return to_non_dataflow


__all__ = ["ToNonDataflow"]
