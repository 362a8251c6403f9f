"""NameSupply: one readable, unique identifier per object, for printed and generated code.

Used by the TVMScript printer and by the code generators, so a variable is called the same
way everywhere: its name hint, sanitized to an ASCII identifier, with ``_1``, ``_2``, ... for
later distinct objects that would clash. Scopes (``checkpoint``/``restore``) free the names
of a finished loop, so sibling loops both print ``i`` as TVM does.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Any

_NOT_IDENT = re.compile(r"\W", re.ASCII)


def sanitize(name: str) -> str:
    """``name`` as an ASCII Python identifier (``"conv2d.0"`` -> ``"conv2d_0"``)."""
    name = _NOT_IDENT.sub("_", name) or "v"
    return "v" + name if name[0].isdigit() else name


class NameSupply:
    """Gives each object (by identity) one name, unique among the names in use."""

    def __init__(self, reserved: Iterable[str] = ()):
        self._reserved = set(reserved) | set(keyword.kwlist)
        # How many named objects (plus fresh names) hold each name.
        self._used: dict[str, int] = {}
        self._names: dict[int, str] = {}
        # Objects named, in order: keeps ids stable while named, and lets restore() unwind.
        self._named: list[Any] = []
        # The next suffix worth trying per hint, so naming n clashing objects stays linear.
        self._next_suffix: dict[str, int] = {}

    def get(self, obj: Any, hint: str) -> str:
        """The name of ``obj``, choosing a fresh one from ``hint`` on first sight."""
        known = self._names.get(id(obj))
        if known is not None:
            return known
        name = self._new_name(hint)
        self._names[id(obj)] = name
        self._named.append(obj)
        return name

    def lookup(self, obj: Any) -> str | None:
        return self._names.get(id(obj))

    def has(self, obj: Any) -> bool:
        return id(obj) in self._names

    def alias(self, obj: Any, name: str) -> None:
        """Name ``obj`` exactly ``name`` (a T.Buffer parameter and its handle share one)."""
        self._names[id(obj)] = name
        self._used[name] = self._used.get(name, 0) + 1
        self._named.append(obj)

    def fresh(self, hint: str) -> str:
        """A new unique name, not tied to any object (never freed)."""
        return self._new_name(hint)

    def _new_name(self, hint: str) -> str:
        base = sanitize(hint)
        suffix = self._next_suffix.get(base, 0)
        name = f"{base}_{suffix}" if suffix else base
        while name in self._used or name in self._reserved:
            suffix += 1
            name = f"{base}_{suffix}"
        self._next_suffix[base] = suffix + 1
        self._used[name] = 1
        return name

    def checkpoint(self) -> int:
        """Mark a scope; ``restore`` frees every object name given out after the mark."""
        return len(self._named)

    def restore(self, mark: int) -> None:
        for obj in self._named[mark:]:
            name = self._names.pop(id(obj), None)
            if name is None:
                continue
            self._used[name] -= 1
            if self._used[name] == 0:
                del self._used[name]
                self._next_suffix.clear()  # freed names can be given out again
        del self._named[mark:]
