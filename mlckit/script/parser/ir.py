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
from .decorator import definition_kind, function, prim_func
from .diagnostics import Source
from .namespaces import SCRIPT_GLOBALS, ModuleFunctions
from .relax import declare_function, parse_function
from .tir import parse_prim_func


def parse_module(source: Source, node: ast.ClassDef, env: Environment) -> IRModule:
    parser = Parser(source, env)
    functions: list[tuple[ast.FunctionDef, Any, dict[str, Any]]] = []
    attrs: dict[str, Any] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef):
            kind, options = definition_kind(parser, stmt)
            functions.append((stmt, kind, options))
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

    for stmt, kind, options in functions:
        if kind is function:
            sinfo = declare_function(source, stmt, env, options, dict(base))
            object.__setattr__(gvars[stmt.name], "struct_info_", sinfo)
    mod = IRModule(attrs=attrs)
    for stmt, kind, options in functions:
        gvar = gvars[stmt.name]
        if kind is prim_func:
            func = parse_prim_func(source, stmt, env, options, dict(base))
        else:
            func = parse_function(source, stmt, env, options, dict(base))
            # Calls of this function parsed from now on see its full struct info.
            object.__setattr__(gvar, "struct_info_", func.struct_info_)
        mod[gvar] = func
    return mod
