"""The parser's imports go one way: core <- namespaces (T, R, I) <- dialect parsers.

The core (the decorators, the evaluator, what a script may reach) dispatches through the table
of dialects that each dialect parser fills in when imported; it never imports a namespace or a
dialect parser, not even inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mlckit
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.script.parser import dialects

SCRIPT = Path(mlckit.__file__).parent / "script"
CORE = ["core", "decorator", "diagnostics", "dialects", "evaluator", "markers", "namespaces"]
ABOVE_THE_CORE = {
    *(f"mlckit.script.{name}" for name in ("ir", "relax", "tir", "tirx")),
    *(f"mlckit.script.parser.{name}" for name in ("ir", "relax", "tir")),
}


def _imports(path: Path, module: str) -> list[tuple[str, ast.stmt, bool]]:
    """Every import in the file as (dotted module, statement, inside a function)."""
    package = module.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                found.extend((f"{base}.{alias.name}", child, in_function) for alias in child.names)
                found.append((base, child, in_function))
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(SCRIPT.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_parser_core_imports_no_namespace_and_no_dialect_parser():
    upward = [
        f"parser/{name}.py:{stmt.lineno}: {ast.unparse(stmt)}"
        for name in CORE
        for imported, stmt, _ in _imports(
            SCRIPT / "parser" / f"{name}.py", f"mlckit.script.parser.{name}"
        )
        if imported in ABOVE_THE_CORE
    ]
    assert not upward, upward


def test_no_mlckit_module_is_imported_inside_a_function():
    lazy = [
        f"{path.relative_to(SCRIPT)}:{stmt.lineno}: {ast.unparse(stmt)}"
        for path in sorted(SCRIPT.rglob("*.py"))
        for imported, stmt, in_function in _imports(path, _module_name(path))
        if in_function and imported.startswith("mlckit")
    ]
    assert not lazy, lazy


def test_the_three_dialects_are_registered():
    registered = {d.prefix: (d.namespace, d.decorator) for d in dialects.dialects()}
    assert registered == {
        "T": (T, T.prim_func),
        "R": (R, R.function),
        "I": (I, I.ir_module),
    }
    assert dialects.dialect_of(T.prim_func).prefix == "T"
    assert dialects.dialect_of(T.block) is None
