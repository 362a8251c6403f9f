"""``well_formed``: check the rules every relax program must follow.

* every variable is defined (a parameter or a binding) before it is used, and only once;
* a ``DataflowVar`` is bound inside a dataflow block and used only there;
* a dataflow block holds only pure calls (and no ``if``); a pure function calls nothing impure;
* a symbolic shape variable is defined (by a parameter's struct info or an ``R.match_cast``)
  before any other struct info, shape or value uses it;
* every variable and, with ``check_struct_info``, every expression has struct info;
* a function's body is a sequence of binding blocks (``SeqExpr``), called global functions
  exist in the module, and a public function's ``global_symbol`` is its name.

Each problem is reported with the variable and the function it occurs in.
"""

from __future__ import annotations

from typing import Any

from mlckit.errors import WellFormedError
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.tir import expr as texpr

from ..expr import (
    Call,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternFunc,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprVisitor
from ..struct_info import FuncStructInfo, StructInfo
from ..utils import format_struct_info
from .struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    tir_vars_in_prim_expr,
    tir_vars_in_struct_info,
)


def well_formed(
    obj: IRModule | Function, check_struct_info: bool = True, raise_error: bool = False
) -> bool:
    """Whether ``obj`` (a module or a relax function) is well formed.

    With ``raise_error=True`` a malformed program raises :class:`WellFormedError` listing every
    problem (also available as the error's ``problems`` list) instead of returning False.
    """
    checker = _WellFormedChecker(check_struct_info)
    checker.check(obj)
    if checker.problems and raise_error:
        err = WellFormedError(
            "the program is not well formed:\n" + "\n".join(f"  - {p}" for p in checker.problems)
        )
        err.problems = list(checker.problems)  # type: ignore[attr-defined]
        raise err
    return not checker.problems


class _BoundVarCollector(ExprVisitor):
    """Every variable a function binds, to tell "used before definition" from "undefined"."""

    def __init__(self) -> None:
        self.bound: set[int] = set()

    def visit_var_def_(self, var: Var) -> None:
        self.bound.add(id(var))

    visit_dataflow_var_def_ = visit_var_def_

    def visit_function_(self, op: Function) -> None:
        pass  # an inner function's variables are its own


class _WellFormedChecker(ExprVisitor):
    def __init__(self, check_struct_info: bool):
        self.check_struct_info = check_struct_info
        self.problems: list[str] = []
        self.mod: IRModule | None = None
        self.func_name = "<function>"
        self.func_pure = True
        self.scopes: list[set[int]] = [set()]
        self.ever_defined: set[int] = set()
        self.bound_in_func: set[int] = set()
        self.tir_defined: set[int] = set()
        self.in_dataflow = False
        self.block_dataflow_vars: list[DataflowVar] = []
        self.left_dataflow: set[int] = set()
        self.binding_var: Var | None = None

    # ------------------------------------------------------------------ entry points
    def check(self, obj: Any) -> None:
        if isinstance(obj, IRModule):
            self.mod = obj
            for gv, func in obj.functions.items():
                if isinstance(func, Function):
                    symbol = func.attrs.get("global_symbol")
                    if symbol is not None and symbol != gv.name_hint:
                        self.report(
                            f"function {gv.name_hint!r} has global_symbol {symbol!r}; "
                            "a public function's global_symbol must be its name"
                        )
                    self.check_top_level(func, gv.name_hint)
        elif isinstance(obj, Function):
            name = obj.attrs.get("global_symbol", "<function>")
            self.check_top_level(obj, str(name))
        else:
            raise WellFormedError(
                f"well_formed checks an IRModule or a relax.Function, not a {type(obj).__name__}"
            )

    def check_top_level(self, func: Function, name: str) -> None:
        # Each module function is checked on its own: sharing a parameter Var object between
        # two functions is harmless.
        self.ever_defined, self.left_dataflow, self.tir_defined = set(), set(), set()
        self.scopes = [set()]
        self.check_function(func, name)

    def report(self, message: str) -> None:
        self.problems.append(message)

    def where(self) -> str:
        binding = f" (binding of {self.binding_var.name_hint})" if self.binding_var else ""
        return f"in function {self.func_name}{binding}"

    # ------------------------------------------------------------------ functions
    def check_function(self, func: Function, name: str) -> None:
        saved = (
            self.func_name,
            self.func_pure,
            self.bound_in_func,
            self.in_dataflow,
            self.binding_var,
            set(self.tir_defined),
        )
        self.func_name = name
        self.func_pure = func.is_pure and not func.attrs.get("relax.force_pure", False)
        collector = _BoundVarCollector()
        collector.visit_expr(func.body)
        self.bound_in_func = collector.bound
        self.in_dataflow = False
        self.binding_var = None
        self.scopes.append(set())

        for param in func.params:
            self.tir_defined.update(
                id(v) for v in definable_tir_vars_in_struct_info(param.struct_info_)
            )
        for param in func.params:
            self.define(param, f"parameter {param.name_hint}")
        self.check_tir_vars(tir_vars_in_struct_info(func.ret_struct_info), "the return struct info")
        if not isinstance(func.body, SeqExpr):
            self.report(
                f"the body of function {name} is a {type(func.body).__name__}; a "
                "relax function's body must be a SeqExpr (binding blocks and a result)"
            )
        self.visit_expr(func.body)

        self.scopes.pop()
        (
            self.func_name,
            self.func_pure,
            self.bound_in_func,
            self.in_dataflow,
            self.binding_var,
            self.tir_defined,
        ) = saved

    def visit_function_(self, op: Function) -> None:
        # A function value (a local function) sees the enclosing variables: closures capture.
        name = self.binding_var.name_hint if self.binding_var is not None else "<lambda>"
        self.check_function(op, f"{self.func_name}.{name}")

    # ------------------------------------------------------------------ definitions
    def is_defined(self, var: Var) -> bool:
        return any(id(var) in scope for scope in self.scopes)

    def define(self, var: Var, what: str) -> None:
        if id(var) in self.ever_defined:
            self.report(
                f"variable {var.name_hint} is bound more than once {self.where()}; "
                "every relax variable is defined exactly once"
            )
        self.ever_defined.add(id(var))
        if isinstance(var, DataflowVar):
            if not self.in_dataflow:
                self.report(
                    f"dataflow variable {var.name_hint} is bound outside a dataflow "
                    f"block {self.where()}; outside `with R.dataflow()` use relax.Var"
                )
            else:
                self.block_dataflow_vars.append(var)
        if var.struct_info_ is None:
            if self.check_struct_info:
                self.report(f"variable {var.name_hint} has no struct info {self.where()}")
        else:
            self.check_tir_vars(
                tir_vars_in_struct_info(var.struct_info_), f"the struct info of {what}"
            )
        self.scopes[-1].add(id(var))

    def check_tir_vars(self, used: list[texpr.Var], what: str) -> None:
        for v in used:
            if id(v) not in self.tir_defined:
                self.report(
                    f"symbolic variable {v.name_hint} is used in {what} before it is defined "
                    f"{self.where()}; define it in a parameter's shape or with R.match_cast"
                )

    def visit_var_def_(self, var: Var) -> None:
        self.define(var, f"variable {var.name_hint}")

    visit_dataflow_var_def_ = visit_var_def_

    # ------------------------------------------------------------------ uses
    def visit_var_(self, op: Var) -> None:
        if self.is_defined(op):
            return
        if id(op) in self.left_dataflow:
            self.report(
                f"dataflow variable {op.name_hint} is used outside its dataflow block "
                f"{self.where()}; emit it with R.output / bb.emit_output to use it "
                "after the block"
            )
        elif id(op) in self.bound_in_func:
            self.report(f"variable {op.name_hint} is used before its definition {self.where()}")
        else:
            self.report(f"variable {op.name_hint} is not defined {self.where()}")

    visit_dataflow_var_ = visit_var_

    def visit_global_var_(self, op: GlobalVar) -> None:
        if self.mod is not None and op.name_hint not in self.mod:
            self.report(f"global function {op.name_hint} is not in the module {self.where()}")

    def visit_shape_expr_(self, op: ShapeExpr) -> None:
        for value in op.values:
            self.check_tir_vars(tir_vars_in_prim_expr(value), "a shape expression")

    def visit_prim_value_(self, op: PrimValue) -> None:
        self.check_tir_vars(tir_vars_in_prim_expr(op.value), "a prim value")

    def visit_extern_func_(self, op: ExternFunc) -> None:
        pass

    # ------------------------------------------------------------------ composite exprs
    def require_struct_info(self, expr: Expr) -> None:
        if self.check_struct_info and expr.struct_info_ is None:
            self.report(
                f"a {type(expr).__name__} has no struct info {self.where()}; normalize "
                "it (bb.normalize / bb.emit)"
            )

    def visit_call_(self, op: Call) -> None:
        self.require_struct_info(op)
        super().visit_call_(op)
        for sinfo in op.sinfo_args:
            self.check_tir_vars(tir_vars_in_struct_info(sinfo), "the struct info of a call")
        if not self.call_is_pure(op):
            callee = self.callee_name(op)
            if self.in_dataflow:
                self.report(
                    f"impure call to {callee} inside a dataflow block {self.where()}; "
                    "calls with side effects must be outside `with R.dataflow()`"
                )
            elif self.func_pure:
                self.report(
                    f"impure call to {callee} in the pure function {self.func_name}; "
                    "mark the function impure (R.function(pure=False)) or call "
                    "something pure"
                )

    def call_is_pure(self, call: Call) -> bool:
        callee = call.op
        if isinstance(callee, Op):
            return callee.get_attr("FPurity") is not False
        sinfo: StructInfo | None = getattr(callee, "struct_info_", None)
        if isinstance(callee, GlobalVar) and self.mod is not None and callee.name_hint in self.mod:
            sinfo = getattr(self.mod[callee.name_hint], "struct_info_", None)
        # Without a signature nothing vouches for purity (e.g. a PrimFunc called directly).
        return isinstance(sinfo, FuncStructInfo) and sinfo.purity

    @staticmethod
    def callee_name(call: Call) -> str:
        callee = call.op
        if isinstance(callee, ExternFunc):
            return f'R.ExternFunc("{callee.global_symbol}")'
        if isinstance(callee, (Var, GlobalVar)):
            return callee.name_hint
        if isinstance(callee, Op):
            return callee.name
        return type(callee).__name__

    def visit_tuple_(self, op: Tuple) -> None:
        self.require_struct_info(op)
        super().visit_tuple_(op)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> None:
        self.require_struct_info(op)
        super().visit_tuple_getitem_(op)

    def visit_if_(self, op: If) -> None:
        self.require_struct_info(op)
        if self.in_dataflow:
            self.report(
                f"an if/else is inside a dataflow block {self.where()}; control flow "
                "must be outside `with R.dataflow()`"
            )
        self.visit_expr(op.cond)
        for branch in (op.true_branch, op.false_branch):
            self.scopes.append(set())
            self.visit_expr(branch)
            self.scopes.pop()

    def visit_seq_expr_(self, op: SeqExpr) -> None:
        self.require_struct_info(op)
        super().visit_seq_expr_(op)

    # ------------------------------------------------------------------ blocks and bindings
    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        outer = (self.in_dataflow, self.block_dataflow_vars)
        self.in_dataflow, self.block_dataflow_vars = True, []
        super().visit_dataflow_block_(block)
        # A dataflow block's own variables go out of scope when it ends.
        for var in self.block_dataflow_vars:
            for scope in self.scopes:
                scope.discard(id(var))
            self.left_dataflow.add(id(var))
        self.in_dataflow, self.block_dataflow_vars = outer

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.binding_var = binding.var
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)
        self.binding_var = None

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.binding_var = binding.var
        self.visit_expr(binding.value)
        # match_cast is where new symbolic dims come from: it defines them, then uses them.
        self.tir_defined.update(
            id(v) for v in definable_tir_vars_in_struct_info(binding.struct_info)
        )
        self.check_tir_vars(
            tir_vars_in_struct_info(binding.struct_info),
            f"the match_cast struct info {format_struct_info(binding.struct_info)}",
        )
        self.visit_var_def(binding.var)
        self.binding_var = None


__all__ = ["well_formed"]
