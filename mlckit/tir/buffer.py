"""Buffers: named, shaped, typed regions of memory that TensorIR reads and writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import IRError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.node import Node

from .expr import BufferLoad, PrimExpr, Range, Var, convert


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(Node):
    """A multi-dimensional buffer. ``A[i, j]`` builds a load, ``A[0:4, j]`` a region."""

    data: Var = None  # type: ignore[assignment]
    dtype: str = "float32"
    shape: tuple[PrimExpr, ...] = ()
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    scope: str = "global"
    name: str = field(default="buffer", compare=False)
    _binds_like_var = True

    def __init__(
        self,
        data: Var | None,
        dtype: str,
        shape: Sequence[Any],
        strides: Sequence[Any] = (),
        elem_offset: Any = None,
        name: str = "buffer",
        scope: str = "global",
        *,
        span: Any = None,
    ):
        shape = tuple(_as_index(s, "shape") for s in shape)
        object.__setattr__(self, "data", data if data is not None else Var(name, "handle"))
        object.__setattr__(self, "dtype", check_dtype(dtype, "buffer dtype"))
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", tuple(_as_index(s, "strides") for s in strides))
        object.__setattr__(
            self,
            "elem_offset",
            None if elem_offset is None else _as_index(elem_offset, "elem_offset"),
        )
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "span", span)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(i, slice) for i in indices):
            return BufferRegion.from_indices(self, indices)
        return BufferLoad(self, indices)

    def vload(self, indices: Sequence[Any]) -> BufferLoad:
        return BufferLoad(self, indices)

    def scope_name(self) -> str:
        return self.scope


def _as_index(value: Any, what: str) -> PrimExpr:
    expr = convert(value)
    if not (expr.dtype.startswith("int") or expr.dtype.startswith("uint")):
        raise IRError(f"buffer {what} must be integers, got an expression of dtype {expr.dtype}")
    return expr


def decl_buffer(
    shape: Sequence[Any],
    dtype: str = "float32",
    name: str = "buffer",
    data: Var | None = None,
    strides: Sequence[Any] = (),
    elem_offset: Any = None,
    scope: str = "global",
) -> Buffer:
    """Declare a new buffer (TVM's ``tir.decl_buffer``)."""
    return Buffer(data, dtype, shape, strides, elem_offset, name, scope)


@dataclass(frozen=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular region of a buffer: one Range per dimension."""

    buffer: Buffer = None  # type: ignore[assignment]
    region: tuple[Range, ...] = ()

    def __init__(self, buffer: Buffer, region: Sequence[Range], *, span: Any = None):
        if len(region) != len(buffer.shape):
            raise IRError(
                f"region of buffer {buffer.name} has {len(region)} ranges, the buffer has "
                f"{len(buffer.shape)} dimensions"
            )
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "region", tuple(region))
        object.__setattr__(self, "span", span)

    @staticmethod
    def from_indices(buffer: Buffer, indices: Sequence[Any]) -> "BufferRegion":
        ranges = []
        for index in indices:
            if isinstance(index, slice):
                if index.step not in (None, 1):
                    raise IRError("buffer regions cannot have a step")
                start = 0 if index.start is None else index.start
                stop = buffer.shape[len(ranges)] if index.stop is None else index.stop
                ranges.append(Range(start, stop))
            else:
                ranges.append(Range.from_min_extent(index, convert(1, convert(index).dtype)))
        return BufferRegion(buffer, ranges)

    @staticmethod
    def full_region(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(
            buffer, [Range.from_min_extent(convert(0, s.dtype), s) for s in buffer.shape]
        )


@dataclass(frozen=True, eq=False, repr=False)
class MatchBufferRegion(Node):
    """A block-level ``T.match_buffer``: ``buffer`` views the region ``source``."""

    buffer: Buffer = None  # type: ignore[assignment]
    source: BufferRegion = None  # type: ignore[assignment]
