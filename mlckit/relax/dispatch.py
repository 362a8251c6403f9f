"""Dispatch on a relax node's kind: TVM's ExprFunctor, the base of the visitors and mutators
(:mod:`mlckit.relax.expr_functor`) and of the normalizer that fills struct info.

``visit_expr(expr)`` calls the method named for the node's kind (``visit_call_``,
``visit_var_``, ...); bindings go through ``visit_binding`` (``visit_var_binding_`` /
``visit_match_cast_``), blocks through ``visit_binding_block`` (``visit_binding_block_`` /
``visit_dataflow_block_``) and variable definitions through ``visit_var_def``
(``visit_var_def_`` / ``visit_dataflow_var_def_``). It lives apart from the visitors because the
mutator re-emits through a BlockBuilder, which normalizes with this dispatch.
"""

from __future__ import annotations

from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar
from mlckit.ir.op import Op

from .expr import (
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    DataTypeImm,
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

# The method each node kind dispatches to; subclasses are found through the MRO, so a
# DataflowVar goes to visit_dataflow_var_ and any other Var to visit_var_.
_EXPR_METHODS: dict[type, str] = {
    Constant: "visit_constant_",
    Tuple: "visit_tuple_",
    DataflowVar: "visit_dataflow_var_",
    Var: "visit_var_",
    ShapeExpr: "visit_shape_expr_",
    ExternFunc: "visit_extern_func_",
    GlobalVar: "visit_global_var_",
    Function: "visit_function_",
    Call: "visit_call_",
    SeqExpr: "visit_seq_expr_",
    If: "visit_if_",
    Op: "visit_op_",
    TupleGetItem: "visit_tuple_getitem_",
    PrimValue: "visit_prim_value_",
    StringImm: "visit_string_imm_",
    DataTypeImm: "visit_data_type_imm_",
}
_BINDING_METHODS: dict[type, str] = {
    VarBinding: "visit_var_binding_",
    MatchCast: "visit_match_cast_",
}
_BLOCK_METHODS: dict[type, str] = {
    DataflowBlock: "visit_dataflow_block_",
    BindingBlock: "visit_binding_block_",
}
_VAR_DEF_METHODS: dict[type, str] = {
    DataflowVar: "visit_dataflow_var_def_",
    Var: "visit_var_def_",
}
_CACHE: dict[tuple[int, type], str] = {}


def _method_name(table: dict[type, str], node: Any, what: str) -> str:
    key = (id(table), type(node))
    name = _CACHE.get(key)
    if name is None:
        for cls in type(node).__mro__:
            if cls in table:
                name = table[cls]
                break
        else:
            raise MLCError(f"cannot visit a {type(node).__name__} as a relax {what}")
        _CACHE[key] = name
    return name


def expr_method(expr: Any) -> str:
    """The name of the method ``visit_expr`` calls for ``expr`` (``"visit_call_"``, ...)."""
    return _method_name(_EXPR_METHODS, expr, "expression")


class ExprFunctor:
    """Dispatch only: ``visit_expr`` and friends route each node to its ``visit_<kind>_``."""

    def visit_expr(self, expr: Any) -> Any:
        return getattr(self, expr_method(expr))(expr)

    def visit_binding(self, binding: Binding) -> Any:
        return getattr(self, _method_name(_BINDING_METHODS, binding, "binding"))(binding)

    def visit_binding_block(self, block: BindingBlock) -> Any:
        return getattr(self, _method_name(_BLOCK_METHODS, block, "binding block"))(block)

    def visit_var_def(self, var: Var) -> Any:
        return getattr(self, _method_name(_VAR_DEF_METHODS, var, "variable"))(var)
