"""The TVMScript dialects, each registered by its parser module when that module is imported.

A dialect is a namespace that scripts name (``T`` for :mod:`mlckit.script.tir`), the decorator
that marks its definitions (``@T.prim_func``), the function that parses such a definition,
and the dotted names TVMScript text may import the namespace by.

The parser's core (the decorators, :mod:`.namespaces`) reads this table and the dialect
parsers (:mod:`.tir`, :mod:`.relax`, :mod:`.ir`) fill it in. A namespace imports its decorator
from the core and a dialect parser imports the core and its namespace, so the imports go one
way: core <- namespaces (``mlckit.script.tir``, ...) <- dialect parsers. ``mlckit.script``
imports every dialect parser, so the table is complete before any script is parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Environment
    from .diagnostics import Source


@dataclass(frozen=True)
class Dialect:
    """One TVMScript dialect: what the core needs to know of it."""

    # How scripts name the namespace ("T"), and the namespace itself.
    prefix: str
    namespace: ModuleType
    # The decorator marking a definition of this dialect (T.prim_func), compared by identity.
    decorator: Callable[..., Any]
    # parse(source, definition node, environment, the decorator's options) -> the IR.
    parse: Callable[[Source, Any, Environment, dict[str, Any]], Any]
    # What `from <module> import <name>` in TVMScript text may name to import the namespace.
    imports: tuple[str, ...]


_DIALECTS: dict[str, Dialect] = {}


def register_dialect(dialect: Dialect) -> None:
    """Make ``dialect`` known to the parser (its decorator, namespace and imports)."""
    _DIALECTS[dialect.prefix] = dialect


def dialects() -> tuple[Dialect, ...]:
    """The registered dialects, in the order their parsers were imported."""
    return tuple(_DIALECTS.values())


def dialect_of(decorator: Any) -> Dialect | None:
    """The dialect whose decorator is ``decorator``; None for anything else."""
    return next((d for d in _DIALECTS.values() if d.decorator is decorator), None)
