"""CanonicalizeBindings: remove bindings that only rename a value.

``y = x; z = y + 1`` becomes ``z = x + 1``. The trivial bindings, each a (pattern, rewrite)
entry of ``_TRIVIAL``, are:

* ``y = x``: a variable bound to a variable;
* ``y = R.match_cast(x, sinfo)`` where ``x`` already has exactly that struct info;
* ``y = t[i]`` where ``t`` is bound to a tuple literal whose field ``i`` is a variable.

Uses of ``y`` then read the variable it stands for. A dataflow block's output stays valid:
when ``gv = lv`` publishes a dataflow variable, ``lv``'s own binding is made to define
``gv`` instead (``lv = R.add(x, x); gv = lv`` becomes ``gv = R.add(x, x)``), because a
dataflow variable cannot be read after its block.
"""

from __future__ import annotations

from collections.abc import Callable

from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_equal

from ..analysis import tir_vars_in_struct_info
from ..expr import (
    Binding,
    DataflowVar,
    Expr,
    Function,
    If,
    MatchCast,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprMutator

Tuples = dict[Var, Tuple]


def _var_alias(binding: Binding, tuples: Tuples) -> Var | None:
    value = binding.value  # type: ignore[attr-defined]
    return value if isinstance(binding, VarBinding) and isinstance(value, Var) else None


def _trivial_match_cast(binding: Binding, tuples: Tuples) -> Var | None:
    if not isinstance(binding, MatchCast) or not isinstance(binding.value, Var):
        return None
    before, after = binding.value.struct_info_, binding.struct_info
    # Structural equality maps symbolic dims onto each other; a cast is trivial only when the
    # dims are the very same variables (one that introduces ``m`` defines something new).
    same_dims = [id(v) for v in tir_vars_in_struct_info(before)] == [
        id(v) for v in tir_vars_in_struct_info(after)
    ]
    return binding.value if same_dims and structural_equal(before, after) else None


def _field_of_known_tuple(binding: Binding, tuples: Tuples) -> Var | None:
    value = binding.value  # type: ignore[attr-defined]
    if not isinstance(binding, VarBinding) or not isinstance(value, TupleGetItem):
        return None
    tup = tuples.get(value.tuple_value) if isinstance(value.tuple_value, Var) else None
    field = tup.fields[value.index] if tup is not None else None
    return field if isinstance(field, Var) else None


_TRIVIAL: tuple[Callable[[Binding, Tuples], Var | None], ...] = (
    _var_alias,
    _trivial_match_cast,
    _field_of_known_tuple,
)


class _Analysis:
    """Finds the trivial bindings and what each removed variable is replaced by."""

    def __init__(self) -> None:
        self.replacement: dict[Var, Var] = {}
        self.removed: set[Var] = set()
        self.tuples: Tuples = {}

    def resolve(self, var: Var) -> Var:
        while var in self.replacement:
            var = self.replacement[var]
        return var

    def visit(self, expr: Expr) -> None:
        if isinstance(expr, SeqExpr):
            for block in expr.blocks:
                defined = {b.var for b in block.bindings}
                for binding in block.bindings:
                    self.visit(binding.value)  # type: ignore[attr-defined]
                    self._binding(binding, defined)
            self.visit(expr.body)
        elif isinstance(expr, If):
            self.visit(expr.true_branch)
            self.visit(expr.false_branch)
        elif isinstance(expr, Function):
            self.visit(expr.body)

    def _binding(self, binding: Binding, defined: set[Var]) -> None:
        var = binding.var
        if isinstance(binding, VarBinding) and isinstance(binding.value, Tuple):
            self.tuples[var] = binding.value
        target = next((t for rule in _TRIVIAL if (t := rule(binding, self.tuples))), None)
        if target is None:
            return
        target = self.resolve(target)
        if isinstance(var, DataflowVar) or not isinstance(target, DataflowVar):
            self.replacement[var] = target
            self.removed.add(var)
        elif target in defined and structural_equal(var.struct_info_, target.struct_info_):
            # ``gv = lv``: lv's binding will define gv, and lv's uses read gv.
            self.replacement[target] = var
            self.removed.add(var)


class _Canonicalizer(ExprMutator):
    def __init__(self, analysis: _Analysis):
        super().__init__()
        self.removed = analysis.removed
        for var in analysis.replacement:
            self.var_remap_[var] = analysis.resolve(var)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        if binding.var not in self.removed:
            super().visit_var_binding_(binding)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        if binding.var not in self.removed:
            super().visit_match_cast_(binding)


def canonicalize_bindings(func: Function) -> Function:
    """``func`` without its trivial bindings."""
    analysis = _Analysis()
    analysis.visit(func)
    if not analysis.removed:
        return func
    return _Canonicalizer(analysis).visit_expr(func)


def CanonicalizeBindings() -> transform.Pass:
    """Remove variable-to-variable bindings (and trivial casts and tuple look-ups)."""

    @transform.module_pass(opt_level=0, name="CanonicalizeBindings")
    def canonicalize(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                mod.update_func(gv, canonicalize_bindings(func))
        return mod

    return canonicalize


__all__ = ["CanonicalizeBindings", "canonicalize_bindings"]
