"""The global function registry: ``register_func("env.linear")`` makes a Python function
callable from compiled programs (``R.call_dps_packed("env.linear", ...)``)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from mlckit.errors import MLCError

_GLOBAL_FUNCS: dict[str, Callable[..., Any]] = {}


def register_func(
    name: str | Callable[..., Any], f: Callable[..., Any] | None = None, override: bool = False
) -> Any:
    """Register ``f`` under ``name``; usable as ``@register_func("env.linear", override=True)``."""
    if callable(name) and f is None:
        func = name
        return register_func(func.__name__, func, override)
    if not isinstance(name, str):
        raise MLCError(f"register_func: the name must be a string, got {type(name).__name__}")

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        if name in _GLOBAL_FUNCS and not override:
            raise MLCError(
                f"a global function named {name!r} is already registered; "
                "pass override=True to replace it"
            )
        _GLOBAL_FUNCS[name] = func
        return func

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable[..., Any] | None:
    func = _GLOBAL_FUNCS.get(name)
    if func is None and not allow_missing:
        close = difflib.get_close_matches(name, _GLOBAL_FUNCS, n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise MLCError(f"no global function named {name!r} is registered{hint}")
    return func


def list_global_func_names() -> list[str]:
    return sorted(_GLOBAL_FUNCS)


def remove_global_func(name: str) -> None:
    _GLOBAL_FUNCS.pop(name, None)


# Newer TVM spelling.
register_global_func = register_func
