"""Identifier hygiene for generated code: every name is a sanitized, unique identifier."""

from __future__ import annotations

import builtins
import keyword
import re
from typing import Any

_NOT_IDENT = re.compile(r"\W")


def sanitize(name: str) -> str:
    """A valid Python identifier close to ``name`` (``"T_add.1"`` -> ``"T_add_1"``)."""
    text = _NOT_IDENT.sub("_", name) or "v"
    if text[0].isdigit():
        text = "v" + text
    return text


class NameTable:
    """Gives each object one identifier, unique in this table and distinct from reserved words.

    Objects are keyed by identity, so two different variables that share a name hint get
    ``i`` and ``i_1``.
    """

    def __init__(self, reserved: set[str] | frozenset[str] = frozenset()):
        self._reserved = set(reserved) | set(keyword.kwlist) | {"None", "True", "False"}
        self._used: set[str] = set()
        self._names: dict[int, str] = {}
        self._keepalive: list[Any] = []

    def get(self, obj: Any, hint: str) -> str:
        """The name of ``obj``, creating one from ``hint`` on first use."""
        name = self._names.get(id(obj))
        if name is None:
            name = self.fresh(hint)
            self._names[id(obj)] = name
            self._keepalive.append(obj)
        return name

    def has(self, obj: Any) -> bool:
        return id(obj) in self._names

    def checkpoint(self) -> int:
        """Mark the current scope; ``restore`` frees every name given out after the mark."""
        return len(self._keepalive)

    def restore(self, mark: int) -> None:
        # Sibling loops can then reuse `i`, `j` instead of `i_1`, `j_1`.
        for obj in self._keepalive[mark:]:
            self._used.discard(self._names.pop(id(obj)))
        del self._keepalive[mark:]

    def fresh(self, hint: str) -> str:
        """A new unique name (not tied to an object, so never freed by ``restore``)."""
        base = sanitize(hint)
        name, suffix = base, 0
        while name in self._used or name in self._reserved:
            suffix += 1
            name = f"{base}_{suffix}"
        self._used.add(name)
        return name


PYTHON_BUILTINS = frozenset(dir(builtins))
