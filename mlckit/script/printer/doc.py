"""The small building blocks every printer method shares.

* :class:`Lines` collects statement lines at an indentation depth and joins them once at the
  end, so printing stays linear in the size of the program.
* Names come from :class:`mlckit.ir.name_supply.NameSupply`, shared with the code generators.
* The precedence table and :func:`wrap` put parentheses exactly where Python needs them.
* :func:`quote` and :func:`float_literal` write literals that Python reads back exactly.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

INDENT = "    "
# Signatures longer than this print one parameter per line.
MAX_WIDTH = 100

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

    def emit_def(self, name: str, params: list[str], suffix: str = "") -> None:
        """``def name(params)suffix:``, one parameter per line when it would exceed MAX_WIDTH."""
        line = f"def {name}({', '.join(params)}){suffix}:"
        if len(INDENT * self._depth) + len(line) <= MAX_WIDTH or not params:
            self.emit(line)
            return
        self.emit(f"def {name}(")
        for param in params:
            self.emit(f"{INDENT}{param},")
        self.emit(f"){suffix}:")

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
RESERVED_NAMES = frozenset(keyword.kwlist) | SCRIPT_NAMES


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
