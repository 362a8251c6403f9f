"""The dataflow pattern language (``relax.dpl``): describe, match and rewrite expressions.

``is_op("relax.add")(wildcard(), is_const())`` is a pattern; ``pattern.match(expr, var2val)``
tests it, ``pattern.extract_matched_expr(expr, var2val)`` says what each part matched, and
``rewrite_call`` / ``PatternMatchingRewriter`` replace the calls it matches.
"""

from .pattern import (
    AndPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataflowVarPattern,
    DataTypePattern,
    DFPattern,
    ExprPattern,
    ExternFuncPattern,
    GlobalVarPattern,
    NotPattern,
    OrPattern,
    PatternError,
    ShapePattern,
    StructInfoPattern,
    TupleGetItemPattern,
    TuplePattern,
    VarPattern,
    WildcardPattern,
    is_call_dps_packed,
    is_call_tir,
    is_const,
    is_dfv,
    is_expr,
    is_gv,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    make_fused_bias_activation_pattern,
    wildcard,
)
from .rewrite import PatternMatchingRewriter, rewrite_call

__all__ = [name for name in dir() if not name.startswith("_")]
