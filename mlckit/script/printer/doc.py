"""The small building blocks every printer method shares.

* :class:`Lines` collects statement lines at an indentation depth and joins them once at the
  end, so printing stays linear in the size of the program.
* :class:`Namer` gives every variable-like object one printed name, unique in its scope.
* The precedence table and :func:`wrap` put parentheses exactly where Python needs them.
* :func:`quote` and :func:`float_literal` write literals that Python reads back exactly.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

INDENT = "    "

# Python's binding strengths for the operators TVMScript uses, weakest first. An operand prints
# in parentheses when it binds more weakly than its context allows.
PREC_OR = 2
PREC_AND = 3
PREC_NOT = 4
PREC_CMP = 5
PREC_ADD = 10
PREC_MUL = 11
PREC_UNARY = 12  # a negative literal such as -1
PREC_ATOM = 14  # names, calls, subscripts, literals, parenthesized forms


def wrap(text: str, prec: int, required: int) -> str:
    """``text`` (binding with strength ``prec``) as an operand that needs at least ``required``."""
    return text if prec >= required else f"({text})"


class Lines:
    """Indented output lines, joined once by :meth:`text`."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def emit(self, text: str) -> None:
        self._lines.append(INDENT * self._depth + text)

    def blank(self) -> None:
        self._lines.append("")

    @contextmanager
    def indent(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def mark(self) -> int:
        """A position to :meth:`insert` at later (e.g. declarations known only after a body)."""
        return len(self._lines)

    def insert(self, at: int, texts: Iterable[str]) -> None:
        self._lines[at:at] = [INDENT * self._depth + t for t in texts]

    def text(self) -> str:
        return "\n".join(self._lines)


# Names a printed script uses itself; a variable with one of these names is renamed so that it
# cannot shadow them.
SCRIPT_NAMES = frozenset({"T", "R", "I", "cls", "metadata", "Module", "range", "float"})
_RESERVED = frozenset(keyword.kwlist) | SCRIPT_NAMES
_NOT_IDENT = re.compile(r"\W", re.ASCII)


def sanitize(name: str) -> str:
    """``name`` as an ASCII Python identifier (``"conv2d.0"`` -> ``"conv2d_0"``)."""
    name = _NOT_IDENT.sub("_", name) or "v"
    return "_" + name if name[0].isdigit() else name


class Namer:
    """Printed names of variables, buffers and functions within one scope.

    The first object to ask for a name gets its sanitized hint; a later, distinct object with
    the same hint gets ``hint_1``, ``hint_2``, ... Objects are kept alive while named, so an
    ``id`` is never reused for a different object during one print.
    """

    def __init__(self, reserved: Iterable[str] = _RESERVED) -> None:
        self._names: dict[int, str] = {}
        self._used: set[str] = set(reserved)
        # The next suffix worth trying per hint, so that naming n clashing objects stays linear.
        self._next_suffix: dict[str, int] = {}
        self._alive: list[Any] = []

    def get(self, obj: Any) -> str | None:
        return self._names.get(id(obj))

    def name(self, obj: Any, hint: str) -> str:
        """The name of ``obj``, choosing a fresh one from ``hint`` on first sight."""
        known = self._names.get(id(obj))
        if known is not None:
            return known
        base = sanitize(hint)
        suffix = self._next_suffix.get(base, 0)
        name = f"{base}_{suffix}" if suffix else base
        while name in self._used:
            suffix += 1
            name = f"{base}_{suffix}"
        self._next_suffix[base] = suffix + 1
        self.alias(obj, name)
        return name

    def alias(self, obj: Any, name: str) -> None:
        """Print ``obj`` as ``name`` too (a T.Buffer parameter and its handle share one name)."""
        self._names[id(obj)] = name
        self._used.add(name)
        self._alive.append(obj)


FUNCTION_NAMES_RESERVED = frozenset(keyword.kwlist)


def quote(text: str) -> str:
    """A double-quoted Python string literal that evaluates back to exactly ``text``."""
    escaped = text.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return f'"{escaped}"'


def float_literal(value: float) -> str:
    """``repr`` of a float, with inf and nan spelled so that Python evaluates them."""
    if math.isfinite(value):
        return repr(value)
    return f"float({quote(repr(value))})"
