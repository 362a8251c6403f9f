"""The error the arithmetic analyzer raises for bad input."""

from mlckit.errors import MLCError


class ArithError(MLCError):
    """A request to the analyzer is malformed (a bad domain, a conflicting binding, ...)."""
