"""Statement builders: names like ``T.block`` or ``R.output`` that only a parsed script uses.

They are not functions that build something when called. The parser recognizes them by
identity (after evaluating ``T.block`` like any attribute) and handles the statement itself;
called from ordinary Python they raise an error saying how to use them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from mlckit.errors import MLCError

from .evaluator import plain_signature


class ScriptStatement:
    """A TVMScript statement builder. ``signature`` documents and checks its arguments."""

    def __init__(self, name: str, usage: str, fn: Callable[..., Any]):
        self.name = name
        self.usage = usage
        self.signature = plain_signature(inspect.signature(fn))
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise MLCError(f"{self.name} can only be used in TVMScript, as `{self.usage}`")

    def __repr__(self) -> str:
        return f"<TVMScript statement {self.name}{self.signature}>"

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name (defaults filled in)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise MLCError(f"{self.name}{self.signature}: {err}") from None
        bound.apply_defaults()
        return dict(bound.arguments)


def statement(prefix: str, usage: str) -> Callable[[Callable[..., Any]], ScriptStatement]:
    """Declare a statement builder ``prefix.<function name>`` with the given usage hint."""

    def wrap(fn: Callable[..., Any]) -> ScriptStatement:
        return ScriptStatement(f"{prefix}.{fn.__name__}", usage, fn)

    return wrap
