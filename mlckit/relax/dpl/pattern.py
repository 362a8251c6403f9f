"""Dataflow patterns: small graphs that describe the shape of relax expressions.

A pattern is built from constructors and operators, as in TVM's ``relax.dpl``::

    x, y = wildcard(), wildcard()
    pat = is_op("relax.add")(is_op("relax.multiply")(x, y), y)

and matched against an expression with ``pat.match(expr, var2val)``. With ``var2val`` (see
``relax.analysis.get_var2val``) a variable stands for the value it is bound to, so the pattern
above matches ``gv0 = R.add(lv0, y)`` when ``lv0 = R.multiply(x, y)`` is bound earlier.
``pat.extract_matched_expr(expr, var2val)`` returns what each sub-pattern matched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar
from mlckit.ir.node import Node
from mlckit.ir.op import Op
from mlckit.ir.structural import structural_equal

from ..expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    ExternFunc,
    Tuple,
    TupleGetItem,
    Var,
)
from ..struct_info import StructInfo, TensorStructInfo, _as_dim
from ..utils import dims_equal

Var2Val = Mapping[Var, Expr]


class PatternError(MLCError):
    """A pattern was built from arguments that cannot describe a relax expression."""


class DFPattern:
    """Base class of dataflow patterns. Patterns compare by identity, like IR nodes."""

    # ------------------------------------------------------------------ building
    def __call__(self, *args: Any, varg_default_wildcard: bool = False) -> CallPattern:
        """A call of this pattern (usually ``is_op(...)``) with argument patterns."""
        return CallPattern(self, list(args), varg_default_wildcard)

    def __or__(self, other: DFPattern) -> OrPattern:
        return OrPattern(self, other)

    def __and__(self, other: DFPattern) -> AndPattern:
        return AndPattern(self, other)

    def __invert__(self) -> NotPattern:
        return NotPattern(self)

    def has_attr(self, attrs: Mapping[str, Any]) -> AttrPattern:
        """Also require these attributes (a call's op attributes, a function's attrs)."""
        return AttrPattern(self, dict(attrs))

    def has_dtype(self, dtype: str) -> DataTypePattern:
        """Also require a tensor of this dtype."""
        return DataTypePattern(self, dtype)

    def has_shape(self, shape: Sequence[Any]) -> ShapePattern:
        """Also require a tensor whose shape provably equals ``shape``."""
        return ShapePattern(self, shape)

    def has_struct_info(self, struct_info: StructInfo) -> StructInfoPattern:
        """Also require struct info structurally equal to ``struct_info``."""
        return StructInfoPattern(self, struct_info)

    # ------------------------------------------------------------------ matching
    def match(self, expr: Expr, var2val: Var2Val | None = None) -> bool:
        """Whether ``expr`` matches; variables in ``var2val`` stand for their bound values."""
        return _Matcher(var2val).match(self, expr)

    def extract_matched_expr(
        self, expr: Expr, var2val: Var2Val | None = None
    ) -> dict[DFPattern, Expr] | None:
        """Each sub-pattern mapped to the expression it matched, or None without a match."""
        matcher = _Matcher(var2val)
        return dict(matcher.memo) if matcher.match(self, expr) else None


# ---------------------------------------------------------------------------- leaves
class WildcardPattern(DFPattern):
    def __repr__(self) -> str:
        return "wildcard()"


class ExprPattern(DFPattern):
    """Exactly this expression (an Op, a GlobalVar, a constant, ...)."""

    def __init__(self, expr: Any):
        if not isinstance(expr, (Expr, Op, GlobalVar)):
            raise PatternError(f"is_expr expects a relax expression, got {type(expr).__name__}")
        self.expr = expr

    def __repr__(self) -> str:
        if isinstance(self.expr, Op):
            return f"is_op({self.expr.name!r})"
        return f"is_expr({self.expr!r})"


class VarPattern(DFPattern):
    """A relax variable that is not bound to a known value (a parameter), by name if given."""

    def __init__(self, name: str = ""):
        self.name = name

    def __repr__(self) -> str:
        return f"is_var({self.name!r})" if self.name else "is_var()"


class DataflowVarPattern(VarPattern):
    def __repr__(self) -> str:
        return f"is_dfv({self.name!r})" if self.name else "is_dfv()"


class GlobalVarPattern(DFPattern):
    """A function of the module, by name if given."""

    def __init__(self, name: str = ""):
        self.name = name

    def __repr__(self) -> str:
        return f"is_gv({self.name!r})" if self.name else "is_gv()"


class ExternFuncPattern(DFPattern):
    """A function of the runtime registry, by name if given."""

    def __init__(self, global_symbol: str = ""):
        self.global_symbol = global_symbol

    def __repr__(self) -> str:
        return f"ExternFuncPattern({self.global_symbol!r})"


class ConstantPattern(DFPattern):
    def __repr__(self) -> str:
        return "is_const()"


# ---------------------------------------------------------------------------- composites
class CallPattern(DFPattern):
    """``op(args...)``. ``args=None`` accepts any arguments; with ``varg_default_wildcard``
    the call may have more arguments than patterns, the extra ones unconstrained."""

    def __init__(
        self,
        op: DFPattern,
        args: Sequence[Any] | None = None,
        varg_default_wildcard: bool = False,
    ):
        self.op = _as_pattern(op)
        self.args = None if args is None else [_as_pattern(a) for a in args]
        self.varg_default_wildcard = varg_default_wildcard

    def __repr__(self) -> str:
        args = "..." if self.args is None else ", ".join(repr(a) for a in self.args)
        return f"{self.op!r}({args})"


class TuplePattern(DFPattern):
    def __init__(self, fields: Sequence[Any]):
        self.fields = [_as_pattern(f) for f in fields]

    def __repr__(self) -> str:
        return f"is_tuple([{', '.join(repr(f) for f in self.fields)}])"


class TupleGetItemPattern(DFPattern):
    """``tuple[index]``; ``index=-1`` accepts any field."""

    def __init__(self, tuple_value: Any, index: int = -1):
        self.tuple = _as_pattern(tuple_value)
        self.index = index

    def __repr__(self) -> str:
        return f"is_tuple_get_item({self.tuple!r}, {self.index})"


class OrPattern(DFPattern):
    def __init__(self, left: DFPattern, right: DFPattern):
        self.left, self.right = _as_pattern(left), _as_pattern(right)

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


class AndPattern(DFPattern):
    def __init__(self, left: DFPattern, right: DFPattern):
        self.left, self.right = _as_pattern(left), _as_pattern(right)

    def __repr__(self) -> str:
        return f"({self.left!r} & {self.right!r})"


class NotPattern(DFPattern):
    def __init__(self, reject: DFPattern):
        self.reject = _as_pattern(reject)

    def __repr__(self) -> str:
        return f"~{self.reject!r}"


class AttrPattern(DFPattern):
    def __init__(self, pattern: DFPattern, attrs: dict[str, Any]):
        self.pattern, self.attrs = pattern, attrs

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_attr({self.attrs!r})"


class DataTypePattern(DFPattern):
    def __init__(self, pattern: DFPattern, dtype: str):
        self.pattern, self.dtype = pattern, dtype

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_dtype({self.dtype!r})"


class ShapePattern(DFPattern):
    def __init__(self, pattern: DFPattern, shape: Sequence[Any]):
        self.pattern = pattern
        self.shape = [_as_dim(d) for d in shape]

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_shape({self.shape!r})"


class StructInfoPattern(DFPattern):
    def __init__(self, pattern: DFPattern, struct_info: StructInfo):
        self.pattern, self.struct_info = pattern, struct_info

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_struct_info({self.struct_info!r})"


def _as_pattern(value: Any) -> DFPattern:
    if isinstance(value, DFPattern):
        return value
    if isinstance(value, (Expr, Op, GlobalVar)):
        return ExprPattern(value)
    raise PatternError(
        f"expected a pattern (wildcard(), is_op(...)(...), is_const(), ...), got "
        f"{type(value).__name__} {value!r}"
    )


# ---------------------------------------------------------------------------- constructors
def wildcard() -> WildcardPattern:
    """Matches any expression."""
    return WildcardPattern()


def is_op(op_name: str) -> ExprPattern:
    """The operator ``op_name`` (``"relax.add"``); call it with argument patterns."""
    return ExprPattern(Op.get(op_name))


def is_expr(expr: Any) -> ExprPattern:
    return ExprPattern(expr)


def is_const() -> ConstantPattern:
    return ConstantPattern()


def is_var(name: str = "") -> VarPattern:
    return VarPattern(name)


def is_dfv(name: str = "") -> DataflowVarPattern:
    return DataflowVarPattern(name)


def is_gv(name: str = "") -> GlobalVarPattern:
    return GlobalVarPattern(name)


def is_tuple(fields: Sequence[Any]) -> TuplePattern:
    return TuplePattern(fields)


def is_tuple_get_item(tuple_value: Any, index: int = -1) -> TupleGetItemPattern:
    return TupleGetItemPattern(tuple_value, index)


def is_call_tir(func_name: str, args: DFPattern | Sequence[Any] | None = None) -> CallPattern:
    """``R.call_tir(cls.<func_name>, args, ...)``; ``args`` a list of patterns, a pattern
    for the argument tuple, or None for any."""
    return CallPattern(is_op("relax.call_tir"), [is_gv(func_name), _args_pattern(args)], True)


def is_call_dps_packed(
    func_name: str, args: DFPattern | Sequence[Any] | None = None
) -> CallPattern:
    """``R.call_dps_packed("<func_name>", args, ...)``."""
    return CallPattern(
        is_op("relax.call_dps_packed"), [ExternFuncPattern(func_name), _args_pattern(args)]
    )


def _args_pattern(args: DFPattern | Sequence[Any] | None) -> DFPattern:
    if args is None:
        return wildcard()
    if isinstance(args, DFPattern):
        return args
    return is_tuple(args)


def make_fused_bias_activation_pattern(
    op_name: str, with_bias: bool = False, activation: str | None = None
) -> DFPattern:
    """``activation(op(x, w) + bias)``, the usual shape of a fusable layer (TVM's helper)."""
    out: DFPattern = is_op(op_name)(wildcard(), wildcard())
    if with_bias:
        out = is_op("relax.add")(out, wildcard())
    if activation:
        out = is_op(activation)(out)
    return out


# ---------------------------------------------------------------------------- matching
# Ops whose two operands may be matched in either order.
_COMMUTATIVE = frozenset({"relax.add", "relax.multiply", "relax.maximum", "relax.minimum"})


class _Matcher:
    """Matches a pattern against an expression, remembering what each sub-pattern matched.

    A sub-pattern used twice (``y`` in ``add(multiply(x, y), y)``) must match the same
    expression both times. ``bound_var`` records, for each value reached through a variable,
    the variable bound to it, so rewriters can reuse it instead of computing it again.
    """

    def __init__(self, var2val: Var2Val | Callable[[Var], Expr | None] | None):
        if var2val is None:
            self.lookup: Callable[[Var], Expr | None] = lambda var: None
        elif callable(var2val) and not isinstance(var2val, Mapping):
            self.lookup = var2val
        else:
            self.lookup = var2val.get  # type: ignore[union-attr]
        self.memo: dict[DFPattern, Any] = {}
        self.bound_var: dict[int, Var] = {}

    def unwrap(self, expr: Any) -> Any:
        while isinstance(expr, Var):
            value = self.lookup(expr)
            if value is None:
                break
            self.bound_var[id(value)] = expr
            expr = value
        return expr

    def match(self, pattern: DFPattern, expr: Any) -> bool:
        """Match, leaving the memo as it was when the match fails (so alternatives can try)."""
        expr = self.unwrap(expr)
        if pattern in self.memo:
            return self.memo[pattern] is expr
        saved = dict(self.memo)
        if self._visit(pattern, expr):
            self.memo[pattern] = expr
            return True
        self.memo = saved
        return False

    def _visit(self, pattern: DFPattern, expr: Any) -> bool:
        visit = getattr(self, "_visit_" + type(pattern).__name__, None)
        if visit is None:
            raise PatternError(f"cannot match a {type(pattern).__name__}")
        return visit(pattern, expr)

    # ------------------------------------------------------------------ leaves
    def _visit_WildcardPattern(self, pattern: WildcardPattern, expr: Any) -> bool:
        return True

    def _visit_ExprPattern(self, pattern: ExprPattern, expr: Any) -> bool:
        if pattern.expr is expr:
            return True
        if isinstance(pattern.expr, (Var, Op)) or isinstance(expr, (Var, Op)):
            return False
        return type(pattern.expr) is type(expr) and structural_equal(pattern.expr, expr)

    def _visit_VarPattern(self, pattern: VarPattern, expr: Any) -> bool:
        return isinstance(expr, Var) and pattern.name in ("", expr.name_hint)

    def _visit_DataflowVarPattern(self, pattern: DataflowVarPattern, expr: Any) -> bool:
        return isinstance(expr, DataflowVar) and pattern.name in ("", expr.name_hint)

    def _visit_GlobalVarPattern(self, pattern: GlobalVarPattern, expr: Any) -> bool:
        return isinstance(expr, GlobalVar) and pattern.name in ("", expr.name_hint)

    def _visit_ExternFuncPattern(self, pattern: ExternFuncPattern, expr: Any) -> bool:
        return isinstance(expr, ExternFunc) and pattern.global_symbol in ("", expr.global_symbol)

    def _visit_ConstantPattern(self, pattern: ConstantPattern, expr: Any) -> bool:
        return isinstance(expr, Constant)

    # ------------------------------------------------------------------ composites
    def _visit_CallPattern(self, pattern: CallPattern, expr: Any) -> bool:
        if not isinstance(expr, Call) or not self.match(pattern.op, expr.op):
            return False
        if pattern.args is None:
            return True
        args = list(expr.args)
        if pattern.varg_default_wildcard:
            if len(args) < len(pattern.args):
                return False
            args = args[: len(pattern.args)]
        elif len(args) != len(pattern.args):
            return False
        if self._attempt_all(pattern.args, args):
            return True
        commutative = isinstance(expr.op, Op) and expr.op.name in _COMMUTATIVE
        return commutative and len(args) == 2 and self._attempt_all(pattern.args, args[::-1])

    def _attempt_all(self, patterns: Sequence[DFPattern], exprs: Sequence[Any]) -> bool:
        saved = dict(self.memo)
        if all(self.match(p, e) for p, e in zip(patterns, exprs)):
            return True
        self.memo = saved
        return False

    def _visit_TuplePattern(self, pattern: TuplePattern, expr: Any) -> bool:
        return (
            isinstance(expr, Tuple)
            and len(expr.fields) == len(pattern.fields)
            and self._attempt_all(pattern.fields, expr.fields)
        )

    def _visit_TupleGetItemPattern(self, pattern: TupleGetItemPattern, expr: Any) -> bool:
        return (
            isinstance(expr, TupleGetItem)
            and pattern.index in (-1, expr.index)
            and self.match(pattern.tuple, expr.tuple_value)
        )

    def _visit_OrPattern(self, pattern: OrPattern, expr: Any) -> bool:
        return self.match(pattern.left, expr) or self.match(pattern.right, expr)

    def _visit_AndPattern(self, pattern: AndPattern, expr: Any) -> bool:
        return self._attempt_all([pattern.left, pattern.right], [expr, expr])

    def _visit_NotPattern(self, pattern: NotPattern, expr: Any) -> bool:
        saved = dict(self.memo)
        rejected = self.match(pattern.reject, expr)
        self.memo = saved
        return not rejected

    # ------------------------------------------------------------------ constraints
    def _visit_AttrPattern(self, pattern: AttrPattern, expr: Any) -> bool:
        if not self.match(pattern.pattern, expr):
            return False
        attrs = getattr(expr, "attrs", None)
        if attrs is None:
            return False
        fields = attrs.fields if hasattr(attrs, "fields") else attrs
        return all(
            key in fields and _same_value(fields[key], v) for key, v in pattern.attrs.items()
        )

    def _visit_DataTypePattern(self, pattern: DataTypePattern, expr: Any) -> bool:
        sinfo = getattr(expr, "struct_info_", None)
        return (
            isinstance(sinfo, TensorStructInfo)
            and sinfo.dtype == pattern.dtype
            and self.match(pattern.pattern, expr)
        )

    def _visit_ShapePattern(self, pattern: ShapePattern, expr: Any) -> bool:
        sinfo = getattr(expr, "struct_info_", None)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape_values is None:
            return False
        values = sinfo.shape_values
        return (
            len(values) == len(pattern.shape)
            and all(dims_equal(a, b) is True for a, b in zip(values, pattern.shape))
            and self.match(pattern.pattern, expr)
        )

    def _visit_StructInfoPattern(self, pattern: StructInfoPattern, expr: Any) -> bool:
        sinfo = getattr(expr, "struct_info_", None)
        return (
            sinfo is not None
            and structural_equal(sinfo, pattern.struct_info)
            and self.match(pattern.pattern, expr)
        )


def _same_value(actual: Any, expected: Any) -> bool:
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(_same_value, actual, expected))
    if isinstance(actual, Node) or isinstance(expected, Node):
        # PrimExpr's == builds an expression; compare IR values by structure.
        return structural_equal(actual, expected)
    return bool(actual == expected)


__all__ = [
    "AndPattern",
    "AttrPattern",
    "CallPattern",
    "ConstantPattern",
    "DFPattern",
    "DataTypePattern",
    "DataflowVarPattern",
    "ExprPattern",
    "ExternFuncPattern",
    "GlobalVarPattern",
    "NotPattern",
    "OrPattern",
    "PatternError",
    "ShapePattern",
    "StructInfoPattern",
    "TupleGetItemPattern",
    "TuplePattern",
    "VarPattern",
    "WildcardPattern",
    "is_call_dps_packed",
    "is_call_tir",
    "is_const",
    "is_dfv",
    "is_expr",
    "is_gv",
    "is_op",
    "is_tuple",
    "is_tuple_get_item",
    "is_var",
    "make_fused_bias_activation_pattern",
    "wildcard",
]
