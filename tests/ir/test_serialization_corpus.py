"""Every TVMScript module, prim_func and relax function written in the tests and in the
chapters round-trips through save_json / load_json: to a structurally equal node, whose
second save gives the same text.

The definitions are found in the source files (``@I.ir_module`` classes, ``@T.prim_func``
and ``@R.function`` functions, at any depth) and parsed on their own with ``from_source``;
one that needs the Python around it (a closure's value, a helper) or that a test writes to be
refused does not parse alone and is left out. What parses must round-trip."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal, load_json, save_json
from mlckit.script import from_source

ROOT = Path(__file__).resolve().parents[2]
DECORATORS = {"ir_module", "prim_func", "function"}
SOURCES = sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("chapters/*.py")], key=lambda p: str(p))


def _decorator_name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else None


def _definitions(path: Path) -> list[str]:
    """The source text of each TVMScript definition in ``path``."""
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and any(
            _decorator_name(d) in DECORATORS for d in node.decorator_list
        ):
            start = node.decorator_list[0].lineno - 1
            lines = text.splitlines()[start : node.end_lineno]
            found.append(textwrap.dedent("\n".join(lines)))
    return found


def _parsed(definitions: list[str]) -> list[object]:
    nodes = []
    for definition in definitions:
        try:
            nodes.append(from_source(definition))
        except (MLCError, SyntaxError, TypeError, ValueError, KeyError, AttributeError):
            continue  # needs its surroundings, or is written to be refused
    return nodes


FILES = [p for p in SOURCES if _definitions(p)]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_definition_that_parses_round_trips(path):
    for node in _parsed(_definitions(path)):
        text = save_json(node)
        loaded = load_json(text)
        assert_structural_equal(loaded, node)
        assert save_json(loaded) == text


def test_the_corpus_is_large():
    """The search finds what it should: most definitions parse alone."""
    definitions = [d for p in FILES for d in _definitions(p)]
    parsed = _parsed(definitions)
    assert len(FILES) > 60 and len(parsed) > 400
    assert len(parsed) > 0.6 * len(definitions)
    chapters = [p for p in FILES if p.parent.name == "chapters"]
    assert len(chapters) >= 7
