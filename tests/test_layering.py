"""The compiler's layers import only downward (docs/architecture.md, "Which layer may import which").

The main check is static: every module under ``mlckit/`` is parsed with ``ast``, its
module-level imports are collected (the ones that run when it is imported: not those inside
functions, not those under ``if TYPE_CHECKING:``), each module gets a layer from ``LAYERS``, and
no module may import a module of a later layer. Python runs ``mlckit/__init__.py`` before any
submodule, and that imports every stage, so only reading the files can tell which module needs
which.

Imports inside functions are checked too: an import of an mlckit module that waits until a
function runs hides a cycle from the table, so each one must be in ``LAZY_IMPORTS`` with the
reason it cannot be at the top (an optional dependency behind it, code shown to students).

The runtime checks that remain: ``import mlckit`` loads no optional dependency, and every stage
can be the first module a program imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
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
            "mlckit.contrib",
        ),
    ),
]

# The only package __init__ with a module __getattr__: mlckit's own, deferring the subpackages
# whose import pulls an optional or heavy third-party package.
DEFERRED = {"viz": "graphviz", "widgets": "ipywidgets", "meta_schedule": "scikit-learn"}
OPTIONAL = ["graphviz", "ipywidgets", "matplotlib", "sklearn", "torch"]

# The only imports of mlckit modules inside functions, by file or folder under mlckit/: why each
# waits until its function runs.
LAZY_IMPORTS = {
    "ir/node.py": "the base node's Jupyter hook: mlckit.viz loads graphviz, which importing "
    "the compiler must not",
    "exercises/checks.py": "program_diff: mlckit.viz loads graphviz, and importing mlckit "
    "loads the exercises",
    "exercises/solutions/": "solution code: solution() shows a solution function's source, "
    "its imports included",
}


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


def _imports_in_functions(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports of ``tree`` that run only when a function runs, ``if TYPE_CHECKING:``
    blocks excluded."""
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                    skipped.add(id(node))  # a nested function's import is found once
                    yield node


def _imports_mlckit(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "mlckit"
    return any(alias.name.split(".")[0] == "mlckit" for alias in node.names)


@cache
def lazy_imports() -> dict[str, list[str]]:
    """``{path under mlckit/: [line: import statement, ...]}`` for every import of an mlckit
    module inside a function."""
    found: dict[str, list[str]] = {}
    for path in modules().values():
        tree = ast.parse(path.read_text(), str(path))
        for node in sorted(_imports_in_functions(tree), key=lambda n: n.lineno):
            if _imports_mlckit(node):
                where = path.relative_to(ROOT).as_posix()
                found.setdefault(where, []).append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _listed_under(path: str, entry: str) -> bool:
    return path == entry or (entry.endswith("/") and path.startswith(entry))


def test_mlckit_modules_are_imported_inside_functions_only_where_listed():
    unlisted = [
        f"mlckit/{path}:{line}"
        for path, lines in lazy_imports().items()
        if not any(_listed_under(path, entry) for entry in LAZY_IMPORTS)
        for line in lines
    ]
    assert not unlisted, (
        "imports inside functions (move them to the top; a cycle is fixed by pointing the "
        "dependency downward, or list the file in LAZY_IMPORTS with the reason):\n"
        + "\n".join(unlisted)
    )


def test_every_listed_lazy_import_is_still_there():
    stale = [
        entry
        for entry in LAZY_IMPORTS
        if not any(_listed_under(path, entry) for path in lazy_imports())
    ]
    assert not stale, f"LAZY_IMPORTS lists files without such imports: {stale}"


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
