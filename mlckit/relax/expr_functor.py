"""Visitors and mutators over relax expressions, dispatching on the node's type (TVM's
ExprFunctor, which :mod:`mlckit.relax.dispatch` defines and this module exports).

``visit_expr(expr)`` calls the method named for the node's kind (``visit_call_``,
``visit_var_``, ...); bindings go through ``visit_binding`` (``visit_var_binding_`` /
``visit_match_cast_``), blocks through ``visit_binding_block`` (``visit_binding_block_`` /
``visit_dataflow_block_``) and variable definitions through ``visit_var_def``
(``visit_var_def_`` / ``visit_dataflow_var_def_``). A mutator reuses the same dispatch and
overrides the methods to return new nodes.
"""

from __future__ import annotations

from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar
from mlckit.ir.op import Op
from mlckit.ir.structural import structural_equal

from .analysis.struct_info_analysis import substitute_prim_expr, substitute_struct_info
from .block_builder import BlockBuilder
from .dispatch import ExprFunctor, expr_method
from .expr import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)


class ExprVisitor(ExprFunctor):
    """Walks every sub-expression, binding and variable definition; override what you need.

    Uses of variables arrive at ``visit_var_`` / ``visit_dataflow_var_``; definitions
    (function parameters, binding targets) at ``visit_var_def_`` /
    ``visit_dataflow_var_def_``. A binding's value is visited before its variable is defined.
    """

    # ---------------------------------------------------------------- leaves
    def visit_constant_(self, op: Constant) -> None:
        pass

    def visit_var_(self, op: Var) -> None:
        pass

    def visit_dataflow_var_(self, op: DataflowVar) -> None:
        pass

    def visit_shape_expr_(self, op: ShapeExpr) -> None:
        pass

    def visit_extern_func_(self, op: ExternFunc) -> None:
        pass

    def visit_global_var_(self, op: GlobalVar) -> None:
        pass

    def visit_op_(self, op: Op) -> None:
        pass

    def visit_prim_value_(self, op: PrimValue) -> None:
        pass

    def visit_string_imm_(self, op: StringImm) -> None:
        pass

    def visit_data_type_imm_(self, op: DataTypeImm) -> None:
        pass

    # ---------------------------------------------------------------- composites
    def visit_tuple_(self, op: Tuple) -> None:
        for field in op.fields:
            self.visit_expr(field)

    def visit_call_(self, op: Call) -> None:
        self.visit_expr(op.op)
        for arg in op.args:
            self.visit_expr(arg)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> None:
        self.visit_expr(op.tuple_value)

    def visit_if_(self, op: If) -> None:
        self.visit_expr(op.cond)
        self.visit_expr(op.true_branch)
        self.visit_expr(op.false_branch)

    def visit_seq_expr_(self, op: SeqExpr) -> None:
        for block in op.blocks:
            self.visit_binding_block(block)
        self.visit_expr(op.body)

    def visit_function_(self, op: Function) -> None:
        for param in op.params:
            self.visit_var_def(param)
        self.visit_expr(op.body)

    # ---------------------------------------------------------------- blocks and bindings
    def visit_binding_block_(self, block: BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_var_def_(self, var: Var) -> None:
        pass

    def visit_dataflow_var_def_(self, var: DataflowVar) -> None:
        pass


class ExprMutator(ExprFunctor):
    """Rewrites relax programs bottom-up, as TVM's ExprMutator.

    Each ``visit_<kind>_`` returns the (possibly new) node; a node whose children did not
    change is returned as it is. Bindings are re-emitted through ``self.builder_``, which
    normalizes every new value (so a rewritten call gets its struct info) and lets
    ``lookup_binding`` see the rewritten program. When a value's struct info changes, its
    variable is replaced by a new one with the new struct info, and later uses follow.
    """

    def __init__(self, mod: Any = None):
        self.builder_ = BlockBuilder(mod)
        self.var_remap_: dict[Var, Expr] = {}

    # ---------------------------------------------------------------- helpers
    def visit_expr_post_order(self, expr: Any) -> Any:
        """Rewrite the children of ``expr`` and rebuild it, without this class's override for
        ``expr``'s own kind (the idiom ``call = self.visit_expr_post_order(call)``)."""
        return getattr(ExprMutator, expr_method(expr))(self, expr)

    def lookup_binding(self, var: Var) -> Expr | None:
        """The value ``var`` is bound to in the program being built, or None."""
        return self.builder_.lookup_binding(var)

    def visit_with_new_scope(self, expr: Expr) -> Expr:
        self.builder_.begin_binding_block()
        new_expr = self.visit_expr(expr)
        block = self.builder_.end_block()
        if block.bindings:
            # Rewriting a bare expression emitted bindings: keep them with it.
            new_expr = self.builder_.normalize(SeqExpr([block], new_expr))
        return new_expr

    def _normalized(self, expr: Expr) -> Expr:
        return expr if expr.struct_info_ is not None else self.builder_.normalize(expr)

    # ---------------------------------------------------------------- leaves
    def visit_constant_(self, op: Constant) -> Expr:
        return op

    def visit_var_(self, op: Var) -> Expr:
        return self.var_remap_.get(op, op)

    def visit_dataflow_var_(self, op: DataflowVar) -> Expr:
        return self.var_remap_.get(op, op)

    def visit_shape_expr_(self, op: ShapeExpr) -> Expr:
        return op

    def visit_extern_func_(self, op: ExternFunc) -> Expr:
        return op

    def visit_global_var_(self, op: GlobalVar) -> Any:
        return op

    def visit_op_(self, op: Op) -> Any:
        return op

    def visit_prim_value_(self, op: PrimValue) -> Expr:
        return op

    def visit_string_imm_(self, op: StringImm) -> Expr:
        return op

    def visit_data_type_imm_(self, op: DataTypeImm) -> Expr:
        return op

    # ---------------------------------------------------------------- composites
    def visit_tuple_(self, op: Tuple) -> Expr:
        fields = [self.visit_expr(f) for f in op.fields]
        if all(a is b for a, b in zip(fields, op.fields)):
            return op
        return self._normalized(Tuple(fields))

    def visit_call_(self, op: Call) -> Expr:
        new_op = self.visit_expr(op.op)
        args = [self.visit_expr(a) for a in op.args]
        if new_op is op.op and all(a is b for a, b in zip(args, op.args)):
            return op
        return self._normalized(Call(new_op, args, op.attrs, op.sinfo_args))

    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        value = self.visit_expr(op.tuple_value)
        if value is op.tuple_value:
            return op
        return self._normalized(TupleGetItem(value, op.index))

    def visit_if_(self, op: If) -> Expr:
        cond = self.visit_expr(op.cond)
        true_branch = self.visit_with_new_scope(op.true_branch)
        false_branch = self.visit_with_new_scope(op.false_branch)
        if cond is op.cond and true_branch is op.true_branch and false_branch is op.false_branch:
            return op
        return self._normalized(If(cond, true_branch, false_branch))

    def visit_seq_expr_(self, op: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(block) for block in op.blocks]
        body = self.visit_expr(op.body)
        unchanged = (
            body is op.body
            and len(blocks) == len(op.blocks)
            and all(
                len(new.bindings) == len(old.bindings)
                and all(a is b for a, b in zip(new.bindings, old.bindings))
                for new, old in zip(blocks, op.blocks)
            )
        )
        if unchanged:
            return op
        return self._normalized(SeqExpr([b for b in blocks if b.bindings], body))

    def visit_function_(self, op: Function) -> Expr:
        params = [self.visit_var_def(p) for p in op.params]
        body = self.visit_with_new_scope(op.body)
        if body is op.body and all(a is b for a, b in zip(params, op.params)):
            return op
        return Function(params, body, op.ret_struct_info, op.is_pure, op.attrs)

    # ---------------------------------------------------------------- blocks and bindings
    def visit_binding_block_(self, block: BindingBlock) -> BindingBlock:
        self.builder_.begin_binding_block()
        for binding in block.bindings:
            self.visit_binding(binding)
        return self.builder_.end_block()

    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        self.builder_.begin_dataflow_block()
        for binding in block.bindings:
            self.visit_binding(binding)
        return self.builder_.end_block()

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self._normalized(self.visit_expr(binding.value))
        var = self._var_for(self.visit_var_def(binding.var), value.struct_info_)
        if value is binding.value and var is binding.var:
            self.builder_.emit_normalized(binding)
        else:
            self.builder_.emit_normalized(VarBinding(var, value))

    def visit_match_cast_(self, binding: MatchCast) -> None:
        value = self._normalized(self.visit_expr(binding.value))
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            self.builder_.emit_normalized(binding)
        else:
            self.builder_.emit_normalized(MatchCast(var, value, binding.struct_info))

    def _var_for(self, var: Var, struct_info: Any) -> Var:
        """``var``, or a same-named replacement when its value's struct info changed."""
        if (
            struct_info is None
            or var.struct_info_ is struct_info
            or structural_equal(var.struct_info_, struct_info)
        ):
            return var
        new_var = type(var)(var.name_hint, struct_info)
        self.var_remap_[var] = new_var
        return new_var

    def visit_var_def_(self, var: Var) -> Var:
        remapped = self.var_remap_.get(var, var)
        return remapped if isinstance(remapped, Var) else var

    def visit_dataflow_var_def_(self, var: DataflowVar) -> Var:
        return self.visit_var_def_(var)


# TVM's Python-subclassable names: here every mutator and visitor is subclassable already.
PyExprMutator = ExprMutator
PyExprVisitor = ExprVisitor


def mutator(cls: type) -> type:
    """Class decorator for mutators (``@relax.expr_functor.mutator``), as in TVM."""
    if not issubclass(cls, ExprMutator):
        raise MLCError(
            f"@relax.expr_functor.mutator decorates a subclass of relax.PyExprMutator, "
            f"not {cls.__name__}"
        )
    return cls


def visitor(cls: type) -> type:
    """Class decorator for visitors (``@relax.expr_functor.visitor``), as in TVM."""
    if not issubclass(cls, ExprVisitor):
        raise MLCError(
            f"@relax.expr_functor.visitor decorates a subclass of relax.PyExprVisitor, "
            f"not {cls.__name__}"
        )
    return cls


class _Substitute(ExprMutator):
    def __init__(self, remap: dict[Var, Var], dims: dict[Any, Any]):
        super().__init__()
        self.var_remap_ = remap  # type: ignore[assignment]
        self.dims = dims

    def visit_shape_expr_(self, op: ShapeExpr) -> Expr:
        if not self.dims:
            return op
        values = [substitute_prim_expr(v, self.dims) for v in op.values]
        if all(a is b for a, b in zip(values, op.values)):
            return op
        return self._normalized(ShapeExpr(values))

    def visit_prim_value_(self, op: PrimValue) -> Expr:
        value = substitute_prim_expr(op.value, self.dims)
        return op if value is op.value else self._normalized(PrimValue(value))

    def visit_call_(self, op: Call) -> Expr:
        call = super().visit_call_(op)
        if not op.sinfo_args or not self.dims:
            return call
        sinfo_args = [substitute_struct_info(s, self.dims) for s in op.sinfo_args]
        if all(a is b for a, b in zip(sinfo_args, op.sinfo_args)):
            return call
        return self._normalized(Call(call.op, call.args, call.attrs, sinfo_args))


def substitute_vars(expr: Expr, remap: dict[Var, Var], dims: dict[Any, Any] | None = None) -> Expr:
    """``expr`` reading ``remap[v]`` wherever it read a variable ``v`` of ``remap``, and
    ``dims[d]`` for each symbolic dim ``d`` of ``dims`` in its shapes and values (a pass that
    copies bindings into a new function reads the new function's variables)."""
    return _Substitute(remap, dims or {}).visit_expr(expr)


__all__ = [
    "ExprFunctor",
    "ExprMutator",
    "ExprVisitor",
    "PyExprMutator",
    "PyExprVisitor",
    "mutator",
    "substitute_vars",
    "visitor",
]
