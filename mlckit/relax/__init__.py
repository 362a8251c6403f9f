"""Relax: the graph-level IR (expressions, struct info, operators, BlockBuilder)."""

from mlckit.ir.module import GlobalVar

from . import analysis, dpl, expr_functor, op, training, transform, utils, vm, vm_build
from .block_builder import BlockBuilder
from .expr import (
    Attrs,
    Binding,
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
    const,
)
from .expr_functor import (
    ExprFunctor,
    ExprMutator,
    ExprVisitor,
    PyExprMutator,
    PyExprVisitor,
)
from .normalize import normalize
from .op.base import call_dps_packed, call_pure_packed, call_tir
from .pipeline import get_pipeline
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from .ty import DynTensorType
from .vm import Executable, VirtualMachine, build

__all__ = [name for name in dir() if not name.startswith("_")]
