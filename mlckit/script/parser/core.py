"""What every dialect's parser shares: names, errors, evaluation and statement dispatch."""

from __future__ import annotations

import ast
import builtins
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from mlckit.errors import MLCError, ParseError, StructInfoError
from mlckit.ir.dtype import check_dtype
from mlckit.runtime.ndarray import NDArray
from mlckit.tir.expr import PrimExpr, SizeVar, Var

from .diagnostics import Source, is_located, located
from .evaluator import Evaluator, describe_value, did_you_mean
from .markers import DType, ScriptStatement, SymbolicVar
from .namespaces import (
    TEXT_BUILTINS,
    ModuleFunctions,
    is_decorator,
    is_script_value,
    namespace_names,
)

MISSING: Any = object()

# Python statements a script cannot contain, with what to write instead.
_UNSUPPORTED_STATEMENTS: dict[type, str] = {
    ast.While: "while loops are not supported in TVMScript; use `for i in range(n):`",
    ast.Try: "try/except is not supported in TVMScript",
    ast.Raise: "raise is not supported in TVMScript",
    ast.Import: "imports are not allowed inside a TVMScript function; import at module level",
    ast.ImportFrom: "imports are not allowed inside a TVMScript function; import at module level",
    ast.ClassDef: "a class cannot be defined inside a TVMScript function",
    ast.Delete: "del is not supported in TVMScript",
    ast.Global: "global is not supported in TVMScript",
    ast.Nonlocal: "nonlocal is not supported in TVMScript",
    ast.Break: "break is not supported in TVMScript",
    ast.Continue: "continue is not supported in TVMScript",
    ast.Assert: "assert is not supported in TVMScript",
    ast.AsyncFunctionDef: "async functions are not supported in TVMScript",
    ast.AsyncFor: "async for is not supported in TVMScript",
    ast.AsyncWith: "async with is not supported in TVMScript",
}


class Environment:
    """The Python names a script sees after its own variables: the definition's locals
    (closure and defining frame), then its globals, then builtins.

    A decorated definition's environment is ``trusted``: its caller's Python, as in TVM. The
    environment of TVMScript text is not: it has only the builtins the printer writes, and the
    parser limits what the text reaches from it (see :mod:`.namespaces`). The values in
    ``granted`` (the caller's ``extra_vars``) may still be called.
    """

    def __init__(
        self,
        globals: Mapping[str, Any],
        locals: Mapping[str, Any] | None = None,
        *,
        trusted: bool = True,
        granted: Iterable[Any] = (),
    ):
        self.globals = globals
        self.locals = locals or {}
        self.trusted = trusted
        self.builtins: Mapping[str, Any] = builtins.__dict__ if trusted else TEXT_BUILTINS
        self.granted = list(granted)

    def get(self, name: str) -> Any:
        for scope in (self.locals, self.globals, self.builtins):
            if name in scope:
                return scope[name]
        return MISSING

    def names(self) -> set[str]:
        return set(self.locals) | set(self.globals) | set(self.builtins)

    def may_call(self, func: Any) -> bool:
        """Whether a script in this environment may call ``func``: any callable in trusted
        Python; in text, the namespaces' constructors, the granted values and the builtins."""
        return (
            self.trusted
            or is_script_value(func)
            or any(func is allowed for allowed in (*self.granted, *TEXT_BUILTINS.values()))
        )


class VarTable:
    """The script's own variables, in nested scopes (a loop's variable dies with the loop)."""

    def __init__(self, base: dict[str, Any] | None = None):
        self.frames: list[dict[str, Any]] = [base if base is not None else {}]

    @contextmanager
    def frame(self) -> Iterator[dict[str, Any]]:
        self.frames.append({})
        try:
            yield self.frames[-1]
        finally:
            self.frames.pop()

    def add(self, name: str, value: Any) -> None:
        self.frames[-1][name] = value

    def get(self, name: str) -> Any:
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        return MISSING

    def names(self) -> set[str]:
        return {name for frame in self.frames for name in frame}


class Parser:
    """The base of the dialect parsers. A subclass defines ``visit_<Stmt>`` for the Python
    statements its dialect gives a meaning to; the others are reported as unsupported."""

    dialect = "TVMScript"

    def __init__(self, source: Source, env: Environment, base: dict[str, Any] | None = None):
        self.source = source
        self.env = env
        self.vars = VarTable(base)
        self.evaluator = Evaluator(self)

    # ------------------------------------------------------------------ errors
    def error(
        self, node: ast.AST | None, message: str, cls: type[Exception] = ParseError
    ) -> Exception:
        return located(cls, message, self.source, node)

    def relocate(self, err: Exception, node: ast.AST) -> Exception:
        """``err`` located at ``node``, unless an inner node already located it."""
        if is_located(err):
            return err
        if isinstance(err, StructInfoError):
            return self.error(node, str(err), StructInfoError)
        if isinstance(err, ParseError):
            return self.error(node, err.msg)
        if isinstance(err, MLCError):
            return self.error(node, str(err))
        for kind, explain in _PYTHON_ERRORS.items():
            if isinstance(err, kind):
                return self.error(node, explain(ast.unparse(node)))
        return self.error(node, f"{ast.unparse(node)}: {type(err).__name__}: {err}")

    @contextmanager
    def guard(self, node: ast.AST) -> Iterator[None]:
        try:
            yield
        except Exception as err:
            raise self.relocate(err, node) from None

    # ------------------------------------------------------------------ names
    def lookup(self, name: str, node: ast.AST) -> Any:
        value = self.vars.get(name)
        if value is MISSING:
            value = self.env.get(name)
        if value is MISSING:
            value = self.undefined_name(name, node)
        return value

    def undefined_name(self, name: str, node: ast.AST) -> Any:
        """Called for a name found nowhere; a dialect may give it a meaning."""
        hint = did_you_mean(name, self.vars.names() | self.env.names())
        if not self.env.trusted and name in builtins.__dict__:
            hint = " (TVMScript text has no Python builtins but range and float)"
        raise self.error(node, f"name {name!r} is not defined{hint}")

    def attribute(self, owner: Any, node: ast.Attribute) -> Any:
        """``owner.<node.attr>``: a namespace gives only its public names, and in TVMScript
        text nothing but a namespace has attributes."""
        names = namespace_names(owner)
        if names is None and not self.env.trusted:
            raise self.error(
                node,
                f"TVMScript text reads attributes only of T, R, I and the module's functions "
                f"(cls.f); `{ast.unparse(node)}` reads {node.attr!r} of "
                f"{describe_value(owner)}, which is not allowed",
            )
        if names is not None and node.attr not in names:
            return self.missing_attribute(owner, node)
        try:
            return getattr(owner, node.attr)
        except AttributeError:
            return self.missing_attribute(owner, node)

    def missing_attribute(self, owner: Any, node: ast.Attribute) -> Any:
        """Called when ``owner`` has no attribute ``node.attr``; a dialect may resolve it."""
        owner_text = ast.unparse(node.value)
        if node.attr.startswith("_"):
            raise self.error(
                node, f"TVMScript cannot read private or special attributes such as {node.attr!r}"
            )
        candidates = namespace_names(owner)
        if candidates is None:
            try:
                candidates = frozenset(dir(owner))
            except Exception:
                candidates = frozenset()
        missing = (
            f"module {owner.name!r} has no function"
            if isinstance(owner, ModuleFunctions)
            else f"{owner_text} has no attribute"
        )
        raise self.error(node, f"{missing} {node.attr!r}{did_you_mean(node.attr, candidates)}")

    def convert_leaf(self, value: Any) -> Any:
        """A value read from a name, attribute or subscript, as the dialect uses it."""
        return value

    def call_value(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Perform a call inside an expression; a dialect may call IR functions here."""
        callee = ast.unparse(node.func)
        if is_decorator(func):
            raise self.error(
                node,
                f"{callee} is a decorator: write @{callee} above a def "
                "(or a class, for @I.ir_module); it cannot be called inside a script",
            )
        if not self.env.may_call(func):
            raise self.error(
                node.func,
                f"TVMScript text calls only T., R. and I. constructors, the module's functions "
                f"and range/float; `{callee}` is {describe_value(func)}, which is not allowed",
            )
        return func(*args, **kwargs)

    # ------------------------------------------------------------------ evaluation
    def eval(self, node: ast.AST) -> Any:
        return self.evaluator.eval(node)

    def callee(self, node: ast.AST) -> Any:
        """The evaluated callee when ``node`` is a call, else MISSING."""
        if isinstance(node, ast.Call):
            return self.eval(node.func)
        return MISSING

    def finish_call(self, node: ast.Call, func: Any) -> Any:
        """Evaluate the call ``node`` whose callee ``func`` was evaluated already."""
        with self.guard(node):
            return self.evaluator.call(node, func)

    def bind_statement(self, node: ast.Call, builder: ScriptStatement) -> dict[str, Any]:
        """The arguments of a statement builder's call, by parameter name."""
        with self.guard(node):
            args, kwargs = self.evaluator.call_arguments(node)
            return builder.bind(args, kwargs)

    def attributes(self, node: ast.AST, what: str, attrs: Any) -> dict[str, Any]:
        """``attrs`` checked as the attributes ``what`` (T.func_attr, a loop's annotations, ...)
        takes: a dict with string keys whose values print back as they were written."""
        if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
            raise self.error(
                node, f'{what} takes a dict with string keys, e.g. {{"tir.noalias": True}}'
            )
        for key, value in attrs.items():
            wrong = _unprintable(value)
            if wrong is not None:
                raise self.error(
                    node,
                    f"{what}: the value of {key!r} holds {describe_value(wrong)}; attribute "
                    "values are numbers, strings, booleans, None, TensorIR expressions, "
                    "tensors (I.tensor) and lists, tuples and dicts of them",
                )
        return attrs

    # ------------------------------------------------------------------ statements
    def symbolic_declarations(
        self, target: ast.expr, value: ast.expr
    ) -> list[tuple[ast.Name, Any]] | None:
        """``n = T.int64()`` / ``M, N = T.int64(), T.int64()``: the names declared and their new
        TensorIR variables (a SizeVar for ``T.int64(is_size_var=True)``). TVM's older
        ``n = T.var("int64")`` declares the same."""
        targets = target.elts if isinstance(target, ast.Tuple) else [target]
        values = value.elts if isinstance(value, ast.Tuple) else [value]
        if len(targets) != len(values) or not all(_is_declaration(v) for v in values):
            return None
        makers = []
        for v in values:
            func = self.eval(v.func)  # type: ignore[attr-defined]
            options = {k.arg: k.value.value for k in v.keywords}  # type: ignore[attr-defined]
            make = SizeVar if options.pop("is_size_var", False) else Var
            if isinstance(func, SymbolicVar):
                args = [a.value for a in v.args]  # type: ignore[attr-defined]
                dtype = args[0] if args else options.pop("dtype", None)
                if dtype is None or options:
                    raise self.error(v, 'T.var takes the dtype alone: `n = T.var("int32")`')
                with self.guard(v):
                    makers.append((make, check_dtype(dtype, "T.var")))
            elif isinstance(func, DType) and not v.args and not options:  # type: ignore[attr-defined]
                makers.append((make, func.dtype))
            else:
                return None
        declared = []
        for t, (make, dtype) in zip(targets, makers):
            if not isinstance(t, ast.Name):
                raise self.error(t, "a symbolic variable is declared with a name: `n = T.int64()`")
            declared.append((t, make(t.id, dtype)))
        return declared

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.visit_stmt(stmt)

    def visit_stmt(self, stmt: ast.stmt) -> Any:
        method = getattr(self, f"visit_{type(stmt).__name__}", None)
        if method is None:
            message = _UNSUPPORTED_STATEMENTS.get(
                type(stmt), f"{type(stmt).__name__} statements are not supported in {self.dialect}"
            )
            raise self.error(stmt, message)
        with self.guard(stmt):
            return method(stmt)

    def wrong_statement(self, node: ast.AST, builder: ScriptStatement) -> Exception:
        """The error for a statement builder used where it has no meaning."""
        return self.error(
            node,
            f"{builder.name} cannot be used here; write it as "
            f"`{builder.usage}` {self.statement_context(builder)}",
        )

    def statement_context(self, builder: ScriptStatement) -> str:
        return f"in a {self.dialect}"


# Python errors a constructor or an operator may raise on odd constants, as messages about the
# expression (its source text) that raised them.
_PYTHON_ERRORS: dict[type[BaseException], Callable[[str], str]] = {
    ZeroDivisionError: lambda text: f"division by zero in `{text}`",
    OverflowError: lambda text: f"a number in `{text}` is too large",
    RecursionError: lambda text: "this expression is nested too deeply",
    MemoryError: lambda text: f"`{text}` is too large to evaluate",
}


def _unprintable(value: Any) -> Any:
    """The part of an attribute value that does not print as text that reads back, or None."""
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return value  # attributes are int64, as in TVM
    if value is None or isinstance(value, (numbers.Number, np.bool_, str, PrimExpr, NDArray)):
        return None
    if isinstance(value, (list, tuple)):
        items: list[Any] = list(value)
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    else:
        return value
    return next((wrong for wrong in map(_unprintable, items) if wrong is not None), None)


def _is_declaration(value: ast.expr) -> bool:
    """Whether ``value`` has the form of ``T.int64()``, ``T.int64(is_size_var=True)`` or
    ``T.var("int64")``: a call with at most one string and constant keywords."""
    return (
        isinstance(value, ast.Call)
        and len(value.args) <= 1
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in value.args)
        and all(
            k.arg in ("is_size_var", "dtype") and isinstance(k.value, ast.Constant)
            for k in value.keywords
        )
    )


def is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def single_target(parser: Parser, node: ast.Assign) -> ast.expr:
    if len(node.targets) != 1:
        raise parser.error(
            node, "chained assignments like `a = b = c` are not supported in TVMScript"
        )
    return node.targets[0]
