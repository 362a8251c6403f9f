"""Where a script error is, and how it is shown: ``file:line:col``, the line, a caret.

Every error the parser reports goes through :func:`located`, so a ParseError and a
StructInfoError raised inside a script read the same way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from mlckit.errors import ParseError


@dataclass(frozen=True)
class Source:
    """The whole text a script was parsed from (a file, a notebook cell or a string).

    AST positions are absolute in this text: the parser never re-bases line or column numbers.
    """

    filename: str
    lines: tuple[str, ...]

    @staticmethod
    def from_text(text: str, filename: str) -> Source:
        return Source(filename, tuple(text.splitlines()))

    def line(self, lineno: int) -> str | None:
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1]
        return None


def _char_col(line: str | None, byte_col: int) -> int:
    # ast reports UTF-8 byte offsets; the caret is placed in characters.
    if line is None:
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def located(cls: type[Exception], message: str, source: Source, node: ast.AST | None) -> Exception:
    """An exception of type ``cls`` whose message points at ``node`` in ``source``."""
    lineno = getattr(node, "lineno", 0) or 0
    line = source.line(lineno)
    col = _char_col(line, getattr(node, "col_offset", 0) or 0)
    end_col = None
    if getattr(node, "end_lineno", None) == lineno:
        end_col = _char_col(line, node.end_col_offset)  # type: ignore[union-attr]
    elif line is not None:
        end_col = len(line.rstrip())
    error = ParseError(
        message, filename=source.filename, lineno=lineno, col=col, source_line=line, end_col=end_col
    )
    if cls is not ParseError:
        # Same text as a ParseError, but the type says which stage found the problem.
        error = cls(str(error))
    # The location, also on errors that are not ParseErrors (a StructInfoError, say).
    error.filename, error.lineno, error.col = source.filename, lineno, col  # type: ignore[attr-defined]
    error.script_location = (source.filename, lineno, col)  # type: ignore[attr-defined]
    return error


def is_located(error: BaseException) -> bool:
    # A ParseError raised without a position (by a decorator called as a function, say) is
    # not: the statement that raised it locates it.
    return hasattr(error, "script_location") or (isinstance(error, ParseError) and error.lineno > 0)
