"""The operator registry: ``Op.get("relax.add")`` returns the one Op of that name.

Dialects register their operators (``tir.exp``, ``relax.matmul``) together with attributes
such as the struct-info inference function; the registry itself knows no dialect.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import MLCError

from .node import Node


@dataclass(frozen=True, eq=False, repr=False)
class Op(Node):
    """A primitive operator, identified by its registered name."""

    name: str
    num_inputs: int = -1
    attrs: dict[str, Any] = field(default_factory=dict, compare=False)

    @staticmethod
    def get(name: str) -> "Op":
        op = _OPS.get(name)
        if op is None:
            close = difflib.get_close_matches(name, _OPS.keys(), n=3)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise MLCError(f"no operator named {name!r} is registered{hint}")
        return op

    @staticmethod
    def list_op_names() -> list[str]:
        return sorted(_OPS)

    def get_attr(self, key: str) -> Any:
        return self.attrs.get(key)

    def __repr__(self) -> str:
        return f'Op("{self.name}")'


_OPS: dict[str, Op] = {}


def register_op(name: str, num_inputs: int = -1, **attrs: Any) -> Op:
    """Register (or extend) the operator ``name`` and return it."""
    op = _OPS.get(name)
    if op is None:
        op = Op(name, num_inputs)
        _OPS[name] = op
    op.attrs.update(attrs)
    return op


def register_op_attr(name: str, key: str) -> Callable[[Callable], Callable]:
    """Decorator: attach a function as attribute ``key`` of operator ``name``."""

    def wrap(fn: Callable) -> Callable:
        register_op(name).attrs[key] = fn
        return fn

    return wrap
