"""The Relax dialect: an ``@R.function`` definition becomes a ``relax.Function``.

Each assignment of a relax expression becomes a binding whose variable gets the struct info
that normalization infers (or the annotation's). Nested calls are bound to fresh variables
first, giving the A-normal form every pass expects (``R.matmul(x, w) + b`` binds the matmul
to ``lv``). Symbolic dimensions are int64 TensorIR variables shared by name in the function.
A relax expression's one method, as TVM's expressions have it, is ``astype``:
``targets.astype("float32")`` reads as ``R.astype(targets, "float32")``, and prints so.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

import mlckit.relax as relax_module
from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar
from mlckit.ir.node import Span
from mlckit.relax.expr import (
    Binding,
    BindingBlock,
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
    Var,
    VarBinding,
    convert_to_expr,
)
from mlckit.relax.expr import Call as RelaxCall
from mlckit.relax.normalize import Normalizer
from mlckit.relax.struct_info import FuncStructInfo, ObjectStructInfo, StructInfo
from mlckit.runtime.ndarray import NDArray
from mlckit.script import relax as R
from mlckit.tir.expr import Var as TirVar

from .core import MISSING, Environment, Parser, is_docstring, single_target
from .diagnostics import Source
from .dialects import Dialect, register_dialect
from .evaluator import did_you_mean, plain_signature
from .markers import ScriptStatement

# Leaves may be a function's result as they are; anything else is bound to a variable first.
_LEAVES = (Var, Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm, ExternFunc, Tuple)
# Pre-0.1 relax spelled these statements on the `relax` module itself.
_LEGACY_STATEMENTS = {
    "dataflow": R.dataflow,
    "output": R.output,
    "func_attr": R.func_attr,
    "match_cast": R.match_cast,
}
# Pre-0.1 relax wrote struct info without the R. prefix (`x: Tensor((3, 4), "float32")`).
_LEGACY_NAMES = {"Tensor": R.Tensor, "Tuple": R.Tuple, "Shape": R.Shape, "Object": R.Object}
# The methods TVM's relax expressions have (ExprWithOp; its other operations are operators):
# `targets.astype("float32")` is R.astype(targets, "float32"), and prints in that form.
_EXPR_METHODS: dict[str, Callable[..., Expr]] = {"astype": R.astype}


class MethodOfExpr:
    """``expr.<method>`` before it is called: the R.<op> with ``expr`` as its first argument.
    Messages about its arguments show the op's signature without that first parameter."""

    def __init__(self, text: str, name: str, owner: Expr):
        self.text = text
        self.op = _EXPR_METHODS[name]
        self.owner = owner
        signature = plain_signature(inspect.signature(self.op))
        self.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])

    def __call__(self, *args: Any, **kwargs: Any) -> Expr:
        return self.op(self.owner, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.text}, not called: write {self.text}{self.__signature__}"


def declare_function(
    source: Source,
    node: ast.FunctionDef,
    env: Environment,
    options: dict[str, Any],
    base: dict[str, Any],
) -> FuncStructInfo:
    """The struct info of a function's signature, before its body is parsed."""
    parser = RelaxParser(source, env, base)
    with R.symbol_scope(parser.symbols):
        params, ret = parser.signature(node)
    return FuncStructInfo(
        [p.struct_info_ for p in params], ret or ObjectStructInfo(), options.get("pure", True)
    )


def parse_function(
    source: Source,
    node: ast.FunctionDef,
    env: Environment,
    options: dict[str, Any],
    base: dict[str, Any] | None = None,
) -> Function:
    return RelaxParser(source, env, base).parse(node, options)


# Pre-0.1 relax scripts spelled R as the relax module (relax.dataflow, relax.add).
register_dialect(
    Dialect("R", R, R.function, parse_function, ("mlckit.script.relax", "mlckit.relax"))
)


class _Dataflow:
    def __init__(self, outputs: set[str]):
        self.outputs = outputs


class RelaxParser(Parser):
    dialect = "R.function"

    def __init__(self, source: Source, env: Environment, base: dict[str, Any] | None = None):
        super().__init__(source, env, base)
        self.symbols: dict[str, TirVar] = {}
        self.blocks: list[BindingBlock] = []
        self.bindings: list[Binding] = []
        self.dataflow: _Dataflow | None = None
        self.attrs: dict[str, Any] = {}
        self.result: Expr | None = None
        self.nesting = 0
        self.constants: dict[int, Constant] = {}
        self.finished_dataflow_vars: set[str] = set()
        self.expr_statements: dict[ScriptStatement, Callable[..., Any]] = {
            R.output: self.stmt_output,
            R.func_attr: self.stmt_func_attr,
        }

    # ------------------------------------------------------------------ function
    def signature(self, node: ast.FunctionDef) -> tuple[list[Var], StructInfo | None]:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(
                node,
                "an R.function takes plain parameters (no defaults, *args, "
                "keyword-only or positional-only parameters)",
            )
        # `n = T.int64()` in the body may declare what the signature uses as `n`. Only a value
        # that reads names from outside the function is looked at: no variable exists yet, and
        # `y = x.astype("float32")` has the form of `n = T.var("int64")`.
        param_names = {arg.arg for arg in args.args}
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and self.reads_outside_names_only(stmt.value, param_names)
            ):
                for name_node, var in self.symbolic_declarations(stmt.targets[0], stmt.value) or ():
                    self.symbols.setdefault(name_node.id, var)
        for name, var in self.symbols.items():
            self.vars.add(name, var)
        params = []
        for arg in args.args:
            if arg.annotation is None:
                raise self.error(
                    arg,
                    f"parameter {arg.arg!r} needs a struct info annotation, "
                    f'e.g. `{arg.arg}: R.Tensor((3, 4), "float32")`',
                )
            params.append(Var(arg.arg, self.struct_info(arg.annotation)))
        ret = None if node.returns is None else self.struct_info(node.returns)
        self.sync_symbols()
        for param in params:
            self.vars.add(param.name_hint, param)
        return params, ret

    def reads_outside_names_only(self, value: ast.expr, param_names: set[str]) -> bool:
        """Whether every name ``value`` reads comes from outside the function (``T``)."""
        return all(
            name.id not in param_names and self.env.get(name.id) is not MISSING
            for name in ast.walk(value)
            if isinstance(name, ast.Name)
        )

    def parse(self, node: ast.FunctionDef, options: dict[str, Any]) -> Function:
        with R.symbol_scope(self.symbols):
            params, ret = self.signature(node)
            with self.vars.frame():
                for stmt in node.body:
                    if self.result is not None:
                        raise self.error(stmt, "statements after `return` are never run")
                    self.visit_stmt(stmt)
            if self.result is None:
                raise self.error(node, f"R.function {node.name!r} must end with a return statement")
        self.flush()
        body = SeqExpr(self.blocks, self.result)
        if not options.get("private", False):
            self.attrs.setdefault("global_symbol", node.name)
        span = Span(self.source.filename, node.lineno, node.col_offset)
        with self.guard(node):
            return Function(params, body, ret, options.get("pure", True), self.attrs, span=span)

    def struct_info(self, node: ast.expr) -> StructInfo:
        value = self.eval(node)
        if isinstance(value, (StructInfo, R.StructInfoBuilder)):
            with self.guard(node):
                return R.to_struct_info(value)
        raise self.error(
            node,
            f"type annotation `{ast.unparse(node)}` is not a struct info; "
            'write e.g. R.Tensor((3, 4), "float32"), R.Tuple(...), '
            "R.Shape(...), R.Prim(...) or R.Object",
        )

    def sync_symbols(self) -> None:
        """Make symbolic dims named by strings usable as names too (``n`` after ``"n"``)."""
        for name, var in self.symbols.items():
            if self.vars.get(name) is MISSING:
                self.vars.frames[0][name] = var

    # ------------------------------------------------------------------ names and values
    def undefined_name(self, name: str, node: ast.AST) -> Any:
        if name in _LEGACY_NAMES:
            return _LEGACY_NAMES[name]
        if name in self.finished_dataflow_vars:
            raise self.error(
                node,
                f"{name!r} is a dataflow variable, visible only inside its "
                f"dataflow block; list it in R.output(...) to use it after",
            )
        return super().undefined_name(name, node)

    def attribute(self, owner: Any, node: ast.Attribute) -> Any:
        if isinstance(owner, Expr) and node.attr in _EXPR_METHODS:
            return MethodOfExpr(ast.unparse(node), node.attr, owner)
        if isinstance(owner, Expr) and not self.env.trusted:
            return self.missing_attribute(owner, node)
        return super().attribute(owner, node)

    def missing_attribute(self, owner: Any, node: ast.Attribute) -> Any:
        if isinstance(owner, Expr):
            methods = ", ".join(f".{name}(...)" for name in _EXPR_METHODS)
            raise self.error(
                node,
                f"`{ast.unparse(node)}`: a relax expression has no method {node.attr!r}; its "
                f"methods are {methods}, and R.<op>(...) calls every operator"
                f"{did_you_mean(node.attr, _EXPR_METHODS)}",
            )
        if owner is relax_module:
            if node.attr in _LEGACY_STATEMENTS:
                return _LEGACY_STATEMENTS[node.attr]
            op = getattr(relax_module.op, node.attr, None)
            if op is not None:
                return op
            raise self.error(
                node,
                f"relax.{node.attr} is not defined (the relax operators "
                "of old scripts, relax.<op>, are spelled R.<op> today)"
                f"{did_you_mean(node.attr, dir(R))}",
            )
        return super().missing_attribute(owner, node)

    def convert_leaf(self, value: Any) -> Any:
        # A metadata tensor used in a function is a relax constant (one per tensor).
        if isinstance(value, NDArray):
            constant = self.constants.get(id(value))
            if constant is None:
                constant = self.constants[id(value)] = Constant(value)
            return constant
        return value

    def call_value(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(func, MethodOfExpr):
            return func(*args, **kwargs)
        if isinstance(func, (GlobalVar, Expr)):
            if kwargs:
                raise MLCError("a call of a relax function takes positional arguments only")
            return RelaxCall(func, args)
        return super().call_value(node, func, args, kwargs)

    def normalized(self, value: Any) -> Expr:
        """``value`` as a relax expression with struct info; nested calls get bound first."""
        return Normalizer(None, emit=self.emit_nested).visit_expr(convert_to_expr(value))

    def emit_nested(self, value: Expr) -> Var:
        # A temporary is never an output of the dataflow block it is bound in.
        return self.emit("lv", value, None, output=False)

    def emit(
        self, name: str, value: Expr, sinfo: StructInfo | None, output: bool | None = None
    ) -> Var:
        """Bind an already normalized ``value`` to a new variable ``name``; in a dataflow
        block it is a DataflowVar unless it is an output (by default: R.output names it)."""
        if output is None:
            output = self.dataflow is None or name in self.dataflow.outputs
        var_cls = DataflowVar if self.dataflow is not None and not output else Var
        var = var_cls(name, sinfo if sinfo is not None else value.struct_info_)
        self.bindings.append(VarBinding(var, value))
        return var

    def flush(self) -> None:
        if self.bindings:
            self.blocks.append(BindingBlock(self.bindings))
            self.bindings = []

    # ------------------------------------------------------------------ statements
    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        raise self.error(
            node,
            "functions cannot be defined inside an R.function; define them "
            "in the module and call them as cls.f(...)",
        )

    def visit_Assign(self, node: ast.Assign) -> None:
        self.assign(single_target(self, node), node.value, None, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "an annotated name needs a value: `lv: R.Tensor(...) = ...`")
        self.assign(node.target, node.value, self.struct_info(node.annotation), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        raise self.error(
            node,
            "relax variables are bound once; write `y = x + 1` with a new name instead of `x += 1`",
        )

    def assign(
        self, target: ast.expr, value_node: ast.expr, sinfo: StructInfo | None, node: ast.stmt
    ) -> None:
        declared = self.symbolic_declarations(target, value_node)
        if declared is not None:
            for name_node, new in declared:
                var = self.symbols.setdefault(name_node.id, new)
                if var.dtype != new.dtype:
                    raise self.error(
                        name_node,
                        f"{name_node.id!r} is already a symbolic variable of dtype {var.dtype}",
                    )
                self.vars.add(name_node.id, var)
            return
        func = self.callee(value_node)
        if func is R.match_cast:
            self.match_cast(target, value_node, node)  # type: ignore[arg-type]
            return
        if isinstance(func, ScriptStatement):
            raise self.wrong_statement(node, func)
        value = self.eval(value_node) if func is MISSING else self.finish_call(value_node, func)
        self.bind_value(target, value, value_node, sinfo)

    def bind_value(
        self, target: ast.expr, value: Any, value_node: ast.expr, sinfo: StructInfo | None
    ) -> None:
        if isinstance(target, ast.Tuple):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.error(
                    target,
                    "unpacking works on Python tuples only; take the "
                    "fields of a relax tuple with t[0], t[1], ...",
                )
            for elt, item in zip(target.elts, value):
                self.bind_value(elt, item, value_node, None)
            return
        if not isinstance(target, ast.Name):
            raise self.error(target, "a relax binding assigns a name")
        if isinstance(value, (tuple, list)) and any(isinstance(v, Expr) for v in value):
            value = Tuple(list(value))
        # `f = cls.g` names the function; `f: R.Callable(...) = cls.g`, as a function used as a
        # value prints, binds it.
        bound = isinstance(value, Expr) or (isinstance(value, GlobalVar) and sinfo is not None)
        if not bound:
            if sinfo is not None:
                raise self.error(
                    value_node, "only relax expressions can have a struct info annotation"
                )
            self.vars.add(target.id, value)  # a Python value: `cls = Module`, constants
            return
        with self.guard(value_node):
            var = self.emit(target.id, self.normalized(value), sinfo)
        self.vars.add(target.id, var)

    def match_cast(self, target: ast.expr, call: ast.Call, node: ast.stmt) -> None:
        bound = self.bind_statement(call, R.match_cast)
        if not isinstance(target, ast.Name):
            raise self.error(target, "R.match_cast binds one name")
        with self.guard(call):
            value = self.normalized(bound["value"])
            sinfo = R.to_struct_info(bound["struct_info"])
        in_dataflow = self.dataflow is not None and target.id not in self.dataflow.outputs
        var = (DataflowVar if in_dataflow else Var)(target.id, sinfo)
        self.bindings.append(MatchCast(var, value, sinfo))
        self.sync_symbols()
        self.vars.add(target.id, var)

    def visit_Expr(self, node: ast.Expr) -> None:
        if is_docstring(node):
            return
        func = self.callee(node.value)
        if isinstance(func, ScriptStatement):
            handler = self.expr_statements.get(func)
            if handler is None:
                raise self.wrong_statement(node, func)
            handler(node.value, self.bind_statement(node.value, func))  # type: ignore[arg-type]
            return
        value = self.eval(node.value) if func is MISSING else self.finish_call(node.value, func)
        if not isinstance(value, Expr):
            raise self.error(
                node,
                "this expression statement has no effect; bind relax values to names (`lv = ...`)",
            )
        with self.guard(node):
            self.emit("_", self.normalized(value), None)

    def stmt_output(self, node: ast.Call, bound: dict[str, Any]) -> None:
        if self.dataflow is None:
            raise self.error(
                node,
                "R.output can only be used as the last statement of a `with R.dataflow():` block",
            )
        for arg in node.args:
            if not isinstance(arg, ast.Name) or arg.id not in self.vars.frames[-1]:
                raise self.error(arg, "R.output lists variables bound in this dataflow block")

    def stmt_func_attr(self, node: ast.Call, bound: dict[str, Any]) -> None:
        self.attrs.update(self.attributes(node, R.func_attr.name, bound["attrs"]))

    def visit_With(self, node: ast.With) -> None:
        item = node.items[0]
        func = self.callee(item.context_expr)
        if len(node.items) != 1 or func is not R.dataflow or item.optional_vars is not None:
            raise self.error(item.context_expr, "relax's `with` statement is `with R.dataflow():`")
        self.bind_statement(item.context_expr, R.dataflow)  # type: ignore[arg-type]
        if self.dataflow is not None or self.nesting:
            raise self.error(node, "a dataflow block cannot be nested in another block")
        outputs = self.dataflow_outputs(node.body)
        self.flush()
        self.dataflow = _Dataflow({arg.id for arg in outputs})
        self.nesting += 1
        try:
            with self.vars.frame() as frame:
                self.visit_body(node.body)
        finally:
            self.nesting -= 1
            self.dataflow = None
        if self.bindings:
            self.blocks.append(DataflowBlock(self.bindings))
            self.bindings = []
        for arg in outputs:
            self.vars.add(arg.id, frame[arg.id])
        self.finished_dataflow_vars.update(name for name in frame if name not in self.vars.names())

    def dataflow_outputs(self, body: list[ast.stmt]) -> list[ast.Name]:
        """The names the block's closing ``R.output(...)`` lists (checked where it stands)."""
        outputs: list[ast.Name] = []
        for index, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) and self.callee(stmt.value) is R.output:
                if index != len(body) - 1:
                    raise self.error(
                        stmt, "R.output must be the last statement of the dataflow block"
                    )
                call: ast.Call = stmt.value  # type: ignore[assignment]
                if call.keywords:
                    raise self.error(call, "R.output takes variables, not keywords")
                for arg in call.args:
                    if not isinstance(arg, ast.Name):
                        raise self.error(
                            arg, "R.output lists variables bound in this dataflow block"
                        )
                    outputs.append(arg)
        return outputs

    def visit_If(self, node: ast.If) -> None:
        if self.dataflow is not None:
            raise self.error(
                node, "`if` is not allowed inside a dataflow block; put it after the block"
            )
        if not node.orelse:
            raise self.error(node, "a relax `if` needs an `else` branch")
        cond = self.eval(node.test)
        then_seq, name, sinfo = self.branch(node.body, node)
        else_seq, else_name, else_sinfo = self.branch(node.orelse, node)
        if else_name.id != name.id:
            raise self.error(
                else_name,
                f"both branches of a relax `if` must end by assigning "
                f"the same name; the first assigns {name.id!r}",
            )
        with self.guard(node):
            var = self.emit(
                name.id, self.normalized(If(cond, then_seq, else_seq)), sinfo or else_sinfo
            )
        self.vars.add(name.id, var)

    def branch(
        self, body: list[ast.stmt], node: ast.If
    ) -> tuple[SeqExpr, ast.Name, StructInfo | None]:
        last = body[-1]
        target = (
            last.targets[0]
            if isinstance(last, ast.Assign) and len(last.targets) == 1
            else last.target
            if isinstance(last, ast.AnnAssign) and last.value
            else None
        )
        if not isinstance(target, ast.Name):
            raise self.error(
                last,
                "each branch of a relax `if` ends with an assignment to the "
                "name the `if` defines, e.g. `y = lv`",
            )
        saved = self.blocks, self.bindings
        self.blocks, self.bindings = [], []
        self.nesting += 1
        try:
            with self.vars.frame():
                self.visit_body(body[:-1])
                sinfo = None
                if isinstance(last, ast.AnnAssign):
                    sinfo = self.struct_info(last.annotation)
                value_node: ast.expr = last.value  # type: ignore[assignment]
                with self.guard(value_node):
                    value = self.normalized(self.eval(value_node))
            self.flush()
            return SeqExpr(self.blocks, value), target, sinfo
        finally:
            self.nesting -= 1
            self.blocks, self.bindings = saved

    def visit_Return(self, node: ast.Return) -> None:
        if self.dataflow is not None or self.nesting:
            raise self.error(
                node,
                "`return` must be the last statement of the function, "
                "outside dataflow blocks and branches",
            )
        if node.value is None:
            raise self.error(node, "an R.function returns a value")
        value = self.eval(node.value)
        with self.guard(node.value):
            result = self.normalized(value)
            if not isinstance(result, _LEAVES):
                result = self.emit("gv", result, None)
        self.result = result
