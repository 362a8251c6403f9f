"""PrimFunc: a TensorIR function."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.ir.module import BaseFunc

from .buffer import Buffer
from .expr import Var
from .stmt import Stmt


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc(BaseFunc):
    """A primitive tensor function: scalar/handle params, a body, and params' buffers.

    A public function carries the attribute ``global_symbol`` (its exported name); a private
    one (``@T.prim_func(private=True)``) does not.
    """

    params: tuple[Var, ...] = ()
    body: Stmt = None  # type: ignore[assignment]
    ret_type: Any = None
    buffer_map: dict[Var, Buffer] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        params: Sequence[Var],
        body: Stmt,
        ret_type: Any = None,
        buffer_map: Mapping[Var, Buffer] | None = None,
        attrs: Mapping[str, Any] | None = None,
        *,
        span: Any = None,
    ):
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "buffer_map", dict(buffer_map or {}))
        object.__setattr__(self, "attrs", dict(attrs or {}))
        object.__setattr__(self, "span", span)

    def structural_fields(self) -> Iterator[tuple[str, Any]]:
        yield "params", self.params
        # buffer_map is keyed by parameter; compare it in parameter order.
        yield "buffer_map", [(p, self.buffer_map[p]) for p in self.params if p in self.buffer_map]
        yield "body", self.body
        yield "ret_type", self.ret_type
        yield "attrs", self.attrs

    def with_body(self, body: Stmt) -> "PrimFunc":
        return self.with_fields(body=body)
