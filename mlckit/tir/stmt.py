"""TensorIR statements: loops, blocks, stores and control flow."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import IRError
from mlckit.ir.node import Node

from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .expr import IterVar, PrimExpr, Var, convert

_NODE = dict(frozen=True, eq=False, repr=False)


@dataclass(**_NODE)
class Stmt(Node):
    """Base class of statements."""


class ForKind(enum.IntEnum):
    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3
    THREAD_BINDING = 4


@dataclass(**_NODE)
class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer = None  # type: ignore[assignment]
    value: PrimExpr = None  # type: ignore[assignment]
    indices: tuple[PrimExpr, ...] = ()

    def __init__(self, buffer: Buffer, value: Any, indices: Sequence[Any], *, span: Any = None):
        indices = tuple(convert(i) for i in indices)
        if len(indices) != len(buffer.shape):
            raise IRError(
                f"buffer {buffer.name} has {len(buffer.shape)} dimensions but is stored to with "
                f"{len(indices)} indices"
            )
        value = convert(value, buffer.dtype)
        if value.dtype != buffer.dtype:
            raise IRError(
                f"cannot store a {value.dtype} value into buffer {buffer.name} of dtype "
                f"{buffer.dtype}; use T.Cast"
            )
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...] = ()

    def __init__(self, seq: Sequence[Stmt], *, span: Any = None):
        object.__setattr__(self, "seq", tuple(seq))
        object.__setattr__(self, "span", span)

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]

    @staticmethod
    def flatten(stmts: Sequence[Stmt]) -> Stmt:
        """One statement for a list: nested SeqStmts are spliced, a single one is returned."""
        flat: list[Stmt] = []
        for s in stmts:
            if isinstance(s, SeqStmt):
                flat.extend(s.seq)
            elif s is not None:
                flat.append(s)
        if len(flat) == 1:
            return flat[0]
        return SeqStmt(flat)


@dataclass(**_NODE)
class For(Stmt):
    """``for loop_var in range(min, min + extent)`` of a given kind."""

    loop_var: Var = None  # type: ignore[assignment]
    min: PrimExpr = None  # type: ignore[assignment]
    extent: PrimExpr = None  # type: ignore[assignment]
    kind: ForKind = ForKind.SERIAL
    body: Stmt = None  # type: ignore[assignment]
    thread_binding: IterVar | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        loop_var: Var,
        min: Any,
        extent: Any,
        kind: ForKind | int,
        body: Stmt,
        thread_binding: IterVar | None = None,
        annotations: dict[str, Any] | None = None,
        *,
        span: Any = None,
    ):
        object.__setattr__(self, "loop_var", loop_var)
        object.__setattr__(self, "min", convert(min, loop_var.dtype))
        object.__setattr__(self, "extent", convert(extent, loop_var.dtype))
        object.__setattr__(self, "kind", ForKind(kind))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "thread_binding", thread_binding)
        object.__setattr__(self, "annotations", dict(annotations or {}))
        object.__setattr__(self, "span", span)

    @property
    def thread_tag(self) -> str:
        """The GPU thread axis the loop is bound to (``"threadIdx.x"``), or ``""``."""
        if self.kind != ForKind.THREAD_BINDING or self.thread_binding is None:
            return ""
        return self.thread_binding.thread_tag


def is_thread_loop(loop: Stmt, kind: str = "") -> bool:
    """Whether ``loop`` is a loop bound to a GPU thread axis whose tag starts with ``kind``
    (``"threadIdx"``: the threads of one block; ``"blockIdx"``: the blocks of the grid)."""
    return isinstance(loop, For) and bool(loop.thread_tag) and loop.thread_tag.startswith(kind)


@dataclass(**_NODE)
class IfThenElse(Stmt):
    condition: PrimExpr = None  # type: ignore[assignment]
    then_case: Stmt = None  # type: ignore[assignment]
    else_case: Stmt | None = None


@dataclass(**_NODE)
class LetStmt(Stmt):
    var: Var = None  # type: ignore[assignment]
    value: PrimExpr = None  # type: ignore[assignment]
    body: Stmt = None  # type: ignore[assignment]


@dataclass(**_NODE)
class AssertStmt(Stmt):
    """``assert condition, message``, then ``body``: a check made when the program runs.

    Lowering adds them where only the run time can tell whether an access stays inside its
    buffer (symbolic shapes); a failing one raises :class:`mlckit.errors.VMError` with the
    message (TVM's ``AssertStmt``; ``T.Assert`` in TVMScript is written ``assert``)."""

    condition: PrimExpr = None  # type: ignore[assignment]
    message: str = ""
    body: Stmt = None  # type: ignore[assignment]

    def __init__(self, condition: Any, message: str, body: Stmt, *, span: Any = None):
        condition = convert(condition)
        if condition.dtype != "bool":
            raise IRError(f"an assert needs a boolean condition, got dtype {condition.dtype}")
        object.__setattr__(self, "condition", condition)
        object.__setattr__(self, "message", str(message))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Evaluate(Stmt):
    value: PrimExpr = None  # type: ignore[assignment]

    def __init__(self, value: Any, *, span: Any = None):
        object.__setattr__(self, "value", convert(value))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class Allocate(Stmt):
    """A raw allocation of ``extents`` elements of ``dtype`` bound to ``buffer_var``."""

    buffer_var: Var = None  # type: ignore[assignment]
    dtype: str = "float32"
    extents: tuple[PrimExpr, ...] = ()
    condition: PrimExpr = None  # type: ignore[assignment]
    body: Stmt = None  # type: ignore[assignment]
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(**_NODE)
class Block(Stmt):
    """A block: the unit of computation that schedules transform (``with T.block(name)``)."""

    iter_vars: tuple[IterVar, ...] = ()
    reads: tuple[BufferRegion, ...] = ()
    writes: tuple[BufferRegion, ...] = ()
    name_hint: str = ""
    body: Stmt = None  # type: ignore[assignment]
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    match_buffers: tuple[MatchBufferRegion, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        iter_vars: Sequence[IterVar],
        reads: Sequence[BufferRegion],
        writes: Sequence[BufferRegion],
        name_hint: str,
        body: Stmt,
        init: Stmt | None = None,
        alloc_buffers: Sequence[Buffer] = (),
        match_buffers: Sequence[MatchBufferRegion] = (),
        annotations: dict[str, Any] | None = None,
        *,
        span: Any = None,
    ):
        object.__setattr__(self, "iter_vars", tuple(iter_vars))
        object.__setattr__(self, "reads", tuple(reads))
        object.__setattr__(self, "writes", tuple(writes))
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "init", init)
        object.__setattr__(self, "alloc_buffers", tuple(alloc_buffers))
        object.__setattr__(self, "match_buffers", tuple(match_buffers))
        object.__setattr__(self, "annotations", dict(annotations or {}))
        object.__setattr__(self, "span", span)


@dataclass(**_NODE)
class BlockRealize(Stmt):
    """Binds a block's iter vars to values (usually loop variables) under a predicate."""

    iter_values: tuple[PrimExpr, ...] = ()
    predicate: PrimExpr = None  # type: ignore[assignment]
    block: Block = None  # type: ignore[assignment]

    def __init__(
        self, iter_values: Sequence[Any], predicate: Any, block: Block, *, span: Any = None
    ):
        iter_values = tuple(convert(v) for v in iter_values)
        if len(iter_values) != len(block.iter_vars):
            raise IRError(
                f"block {block.name_hint!r} has {len(block.iter_vars)} iter vars but is bound "
                f"to {len(iter_values)} values"
            )
        object.__setattr__(self, "iter_values", iter_values)
        object.__setattr__(self, "predicate", convert(True if predicate is None else predicate))
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "span", span)
