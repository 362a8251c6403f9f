"""The base of every IR node.

Nodes are frozen dataclasses compared by identity (``is``); structural comparison lives in
:mod:`mlckit.ir.structural`. A dataclass field declared with ``compare=False`` (such as
``span``) is bookkeeping and is ignored by structural equality and hashing.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import IRError

# The TVMScript printer belongs to a later stage (mlckit.script) that imports the IR; it installs
# its ``script`` and ``show`` here when it loads, as TVM's printer registers the function that
# ``Node.script`` calls. ``import mlckit`` loads it, so every node can print itself.
_PRINTER: dict[str, Callable[..., Any]] = {}


def register_printer(script: Callable[..., str], show: Callable[..., None]) -> None:
    """Install the functions behind :meth:`Node.script` and :meth:`Node.show`."""
    _PRINTER["script"] = script
    _PRINTER["show"] = show


# Pickling goes through the JSON form; mlckit.ir.serialization, which builds on the nodes,
# installs save_json and load_json here when it loads (mlckit.ir loads it).
_SERIALIZER: dict[str, Callable[..., Any]] = {}


def register_serializer(save_json: Callable[[Any], str], load_json: Callable[[str], Any]) -> None:
    """Install the functions behind :meth:`Node.__reduce__` (pickling)."""
    _SERIALIZER["save_json"] = save_json
    _SERIALIZER["load_json"] = load_json


@dataclass(frozen=True)
class Span:
    """A source location: where a node was written in TVMScript."""

    filename: str
    lineno: int
    col: int
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col + 1}"


@dataclass(frozen=True, eq=False, repr=False)
class Node:
    """Base class of all IR nodes.

    Subclasses are ``@dataclass(frozen=True, eq=False, repr=False)`` so that equality stays
    identity, and every field is visible to the generic structural traversal.
    """

    span: Span | None = field(default=None, kw_only=True, compare=False)

    # Nodes that stand for a variable (tir.Var, relax.Var, tir.Buffer) set this; structural
    # equality maps them to each other on first sight instead of comparing by identity.
    _binds_like_var = False

    def same_as(self, other: Any) -> bool:
        return self is other

    def structural_fields(self) -> Iterator[tuple[str, Any]]:
        """The (name, value) pairs that structural equality and hashing look at."""
        for f in _structural_fields_of(type(self)):
            yield f, getattr(self, f)

    def with_fields(self, **changes: Any) -> "Node":
        """A copy of this node with some fields replaced (nodes are immutable)."""
        new = copy.copy(self)
        for name, value in changes.items():
            object.__setattr__(new, name, value)
        return new

    # ------------------------------------------------------------------ copying
    def __copy__(self) -> "Node":
        # A shallow copy shares the fields (what with_fields starts from); without this,
        # copy.copy would go through __reduce__ and save the whole graph as JSON.
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __reduce__(self) -> tuple[Callable[[str], Any], tuple[str]]:
        """Pickle as the JSON text of the node's graph (mlckit.ir.save_json)."""
        return _SERIALIZER["load_json"], (_SERIALIZER["save_json"](self),)

    # ------------------------------------------------------------------ display
    def script(self, **options: Any) -> str:
        """This node as TVMScript text."""
        return _PRINTER["script"](self, **options)

    def show(self, **options: Any) -> None:
        """Print this node as syntax-highlighted TVMScript (plain text when not a terminal)."""
        _PRINTER["show"](self, **options)

    def __repr__(self) -> str:
        try:
            text = self.script()
        except Exception:
            return f"<{type(self).__module__}.{type(self).__name__} at {id(self):#x}>"
        return text

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            import mlckit.viz as viz
        except ImportError:
            return {"text/plain": self.script()}
        return viz.mimebundle(self, include=include, exclude=exclude)


_FIELD_CACHE: dict[type, tuple[str, ...]] = {}


def _structural_fields_of(cls: type) -> tuple[str, ...]:
    names = _FIELD_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
        _FIELD_CACHE[cls] = names
    return names


def set_cached(node: Node, name: str, value: Any) -> None:
    """Fill a derived, non-structural slot of a node once (e.g. a relax Expr's struct_info_)."""
    object.__setattr__(node, name, value)


def check_str(value: Any, what: str) -> str:
    """``value`` when it is a string; an IRError naming the node ``what`` otherwise."""
    if not isinstance(value, str):
        raise IRError(f"{what} takes a string, got {type(value).__name__} ({value!r})")
    return value
