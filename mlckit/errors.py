"""The errors mlckit raises for bad input.

Every user-facing failure is an :class:`MLCError`; each subclass names the stage that found
the problem, and its message says where (file:line:col, or the node) and why.
"""

from __future__ import annotations


class MLCError(Exception):
    """Base class of every error mlckit raises for bad input."""


class ParseError(MLCError):
    """A TVMScript program is malformed. The message carries file:line:col and a caret."""

    def __init__(
        self,
        message: str,
        *,
        filename: str = "<unknown>",
        lineno: int = 0,
        col: int = 0,
        source_line: str | None = None,
        end_col: int | None = None,
    ):
        self.msg = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self.source_line = source_line
        text = f"{filename}:{lineno}:{col + 1}: error: {message}"
        if source_line is not None:
            width = max(1, (end_col - col) if end_col and end_col > col else 1)
            text += f"\n    {source_line.rstrip()}\n    {' ' * col}{'^' * width}"
        super().__init__(text)


class StructInfoError(MLCError):
    """An operator was applied to arguments whose shape, rank or dtype it cannot accept."""


class WellFormedError(MLCError):
    """An IR violates a structural rule (undefined variable, misplaced dataflow var, ...)."""


class StructuralMismatchError(MLCError, AssertionError):
    """Two IR nodes that were asserted structurally equal differ."""


class ScheduleError(MLCError):
    """A schedule primitive cannot be applied; names the primitive and the violated condition."""


class BuildError(MLCError):
    """A module cannot be compiled for the requested target."""


class VMError(MLCError):
    """A compiled function was called with the wrong number, shape or dtype of arguments."""


class IRError(MLCError):
    """An IR node was constructed with invalid fields (wrong dtype, wrong type of child, ...)."""


__all__ = [
    "BuildError",
    "IRError",
    "MLCError",
    "ParseError",
    "ScheduleError",
    "StructInfoError",
    "StructuralMismatchError",
    "VMError",
    "WellFormedError",
]
