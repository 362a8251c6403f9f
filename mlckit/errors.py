"""The errors mlckit raises for bad input, and its warning for old spellings.

Every user-facing failure is an :class:`MLCError`; each subclass names the stage that found
the problem, and its message says where (file:line:col, or the node) and why. A spelling of an
older API that mlckit still accepts (the MLC course's early Relax, say) works and announces
its modern replacement once per process with a FutureWarning (:func:`warn_old_spelling`).
"""

from __future__ import annotations

import warnings


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


class TransformError(MLCError):
    """A pass cannot be applied to a module; names the pass, the function and the cause."""


class SerializationError(MLCError):
    """IR text cannot be loaded (not JSON, cut short, an unknown version or type name, wrong
    fields, a dangling reference), or an object cannot be saved (a Python function)."""


# The old spellings warned about so far: each is announced once per process, however often it
# runs (a course loop that builds a variable per layer should not print a warning per layer).
_warned_spellings: set[str] = set()


def warn_old_spelling(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Announce, with a FutureWarning the first time only, that ``old`` (an older API's
    spelling that mlckit still accepts) is written ``new`` today. ``stacklevel`` points the
    warning at the user's line: 3 when called from the function that implements ``old``."""
    if old in _warned_spellings:
        return
    _warned_spellings.add(old)
    warnings.warn(f"{old} is an older spelling; write {new}", FutureWarning, stacklevel=stacklevel)


__all__ = [
    "BuildError",
    "IRError",
    "MLCError",
    "ParseError",
    "ScheduleError",
    "SerializationError",
    "StructInfoError",
    "StructuralMismatchError",
    "TransformError",
    "VMError",
    "WellFormedError",
    "warn_old_spelling",
]
