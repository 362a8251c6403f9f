"""The module dialect: an ``@I.ir_module`` class becomes an ``IRModule``.

A first pass declares a GlobalVar for every function (a relax function's also carries the
struct info of its signature, so that calls ``cls.f(x)`` can be inferred before ``f`` is
parsed); the second pass parses the functions in source order.
"""

from __future__ import annotations

import ast
from typing import Any

from mlckit.ir.module import GlobalVar, IRModule
from mlckit.script import ir as I

from .core import Environment, Parser, is_docstring
from .decorator import definition_kind, function, ir_module
from .diagnostics import Source
from .dialects import Dialect, register_dialect
from .namespaces import SCRIPT_GLOBALS, ModuleFunctions
from .relax import declare_function, parse_function
from .tir import parse_prim_func


def parse_module(
    source: Source, node: ast.ClassDef, env: Environment, options: dict[str, Any]
) -> IRModule:
    """Parse an ``@I.ir_module`` class (the decorator has no ``options`` left to apply once
    its ``check_well_formed`` is taken)."""
    parser = Parser(source, env)
    functions: list[tuple[ast.FunctionDef, Dialect, dict[str, Any]]] = []
    attrs: dict[str, Any] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef):
            dialect, options = definition_kind(parser, stmt)
            functions.append((stmt, dialect, options))
        elif isinstance(stmt, ast.Expr) and parser.callee(stmt.value) is I.module_attrs:
            bound = parser.bind_statement(stmt.value, I.module_attrs)  # type: ignore[arg-type]
            attrs.update(parser.attributes(stmt.value, I.module_attrs.name, bound["attrs"]))
        elif not is_docstring(stmt) and not isinstance(stmt, ast.Pass):
            raise parser.error(
                stmt,
                "an @I.ir_module class holds only functions decorated "
                "with @T.prim_func or @R.function",
            )
    gvars: dict[str, GlobalVar] = {}
    for stmt, _, _ in functions:
        if stmt.name in gvars:
            raise parser.error(stmt, f"the module already has a function named {stmt.name!r}")
        gvars[stmt.name] = GlobalVar(stmt.name)
    # The class name and each function's name mean the module's functions; a function named
    # like a name printed scripts rely on (T, metadata, range, ...) is reached as cls.<name>.
    bare = {name: gv for name, gv in gvars.items() if name not in SCRIPT_GLOBALS}
    base: dict[str, Any] = {**bare, node.name: ModuleFunctions(node.name, gvars)}

    for stmt, dialect, options in functions:
        if dialect.decorator is function:
            sinfo = declare_function(source, stmt, env, options, dict(base))
            object.__setattr__(gvars[stmt.name], "struct_info_", sinfo)
    mod = IRModule(attrs=attrs)
    for stmt, dialect, options in functions:
        gvar = gvars[stmt.name]
        if dialect.decorator is function:
            func = parse_function(source, stmt, env, options, dict(base))
            # Calls of this function parsed from now on see its full struct info.
            object.__setattr__(gvar, "struct_info_", func.struct_info_)
        else:
            func = parse_prim_func(source, stmt, env, options, dict(base))
        mod[gvar] = func
    return mod


register_dialect(Dialect("I", I, ir_module, parse_module, ("mlckit.script.ir",)))
