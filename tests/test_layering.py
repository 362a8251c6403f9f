"""The compiler's layers import only downward (docs/architecture.md, "Which layer may import which").

The main check is static: every module under ``mlckit/`` is parsed with ``ast``, its
module-level imports are collected (the ones that run when it is imported: not those inside
functions, not those under ``if TYPE_CHECKING:``), each module gets a layer from ``LAYERS``, and
no module may import a module of a later layer. Python runs ``mlckit/__init__.py`` before any
submodule, and that imports every stage, so only reading the files can tell which module needs
which.

The runtime checks that remain: ``import mlckit`` loads no optional dependency, and every stage
can be the first module a program imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "mlckit"

# From the bottom up; a module may import its own layer and the layers before it. A module
# belongs to the layer of its longest matching prefix ("mlckit" itself matches only the package).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("errors, ir and runtime", ("mlckit.errors", "mlckit.ir", "mlckit.runtime")),
    (
        "tir node classes",
        (
            "mlckit.tir.expr",
            "mlckit.tir.stmt",
            "mlckit.tir.buffer",
            "mlckit.tir.function",
            "mlckit.tir.op",
            "mlckit.tir.stmt_functor",
        ),
    ),
    ("arith", ("mlckit.arith",)),
    ("tir analyses, transforms and schedule", ("mlckit.tir",)),
    ("te", ("mlckit.te",)),
    ("topi", ("mlckit.topi",)),
    # A target knows its default schedule (tir) and the backend compiles for a target.
    ("target and backend", ("mlckit.target", "mlckit.backend")),
    ("relax", ("mlckit.relax",)),
    ("driver", ("mlckit.driver",)),
    ("script", ("mlckit.script",)),
    ("meta_schedule and frontends", ("mlckit.meta_schedule", "mlckit.relax.frontend")),
    (
        "tools and course",
        (
            "mlckit",
            "mlckit.s_tir",
            "mlckit.viz",
            "mlckit.widgets",
            "mlckit.exercises",
            "mlckit.datasets",
            "mlckit.testing",
            "mlckit.demo",
            "mlckit.book",
        ),
    ),
]

# The only package __init__ with a module __getattr__: mlckit's own, deferring the subpackages
# whose import pulls an optional or heavy third-party package.
DEFERRED = {"viz": "graphviz", "widgets": "ipywidgets", "meta_schedule": "scikit-learn"}
OPTIONAL = ["graphviz", "ipywidgets", "matplotlib", "sklearn", "torch"]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "mlckit" and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return best[1]


def _runs_at_import(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body that run when it is imported, nested blocks included,
    function bodies and ``if TYPE_CHECKING:`` blocks excluded."""
    found: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            found.extend(_runs_at_import(stmt.orelse))
            continue
        found.append(stmt)
        for field in ("body", "orelse", "finalbody", "handlers"):
            nested = getattr(stmt, field, None)
            if isinstance(nested, list):
                found.extend(_runs_at_import([s for s in nested if isinstance(s, ast.AST)]))
    return found


@cache
def imports_of(module: str) -> frozenset[str]:
    """The mlckit modules ``module`` imports when it is imported (``from a import b`` counts as
    ``a.b`` when ``b`` is a submodule, else as ``a``)."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for stmt in _runs_at_import(ast.parse(path.read_text(), str(path)).body):
        if isinstance(stmt, ast.Import):
            found.update(alias.name for alias in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                anchor = package.split(".")[: len(package.split(".")) - (stmt.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in stmt.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base)
    return frozenset(m for m in found if m == "mlckit" or m.startswith("mlckit."))


def test_every_module_imports_only_its_layer_and_the_ones_below():
    violations = []
    for module in modules():
        for imported in sorted(imports_of(module)):
            if layer_of(imported) > layer_of(module):
                violations.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {imported} "
                    f"({LAYERS[layer_of(imported)][0]})"
                )
    print("\n".join(violations))
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_expression_nodes_do_not_import_arith():
    # The files tir.expr needs, transitively (packages' __init__ side effects aside).
    seen, todo = set(), ["mlckit.tir.expr"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(imports_of(module))
    assert not [m for m in seen if m == "mlckit.arith" or m.startswith("mlckit.arith.")], sorted(
        seen
    )


def test_no_package_getattr_except_for_optional_dependencies():
    with_getattr = [
        module
        for module, path in modules().items()
        if path.name == "__init__.py"
        and any(
            isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__"
            for stmt in ast.parse(path.read_text()).body
        )
    ]
    assert with_getattr == ["mlckit"]
    import mlckit

    assert set(mlckit._DEFERRED) == set(DEFERRED)


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_import_mlckit_loads_no_optional_dependency():
    forbidden = [*OPTIONAL, *(f"mlckit.{name}" for name in DEFERRED)]
    loaded = _run(f"import sys, mlckit; print([m for m in {forbidden!r} if m in sys.modules])")
    assert loaded == "[]"


@pytest.mark.parametrize(
    "module",
    [
        "mlckit.ir",
        "mlckit.tir.expr",
        "mlckit.arith",
        "mlckit.tir",
        "mlckit.tir.schedule",
        "mlckit.tir.transform",
        "mlckit.te",
        "mlckit.topi",
        "mlckit.target",
        "mlckit.backend",
        "mlckit.relax",
        "mlckit.driver",
        "mlckit.script",
        "mlckit.meta_schedule",
        "mlckit.viz",
    ],
)
def test_any_stage_can_be_imported_first(module):
    assert _run(f"import {module}; print('ok')") == "ok"
