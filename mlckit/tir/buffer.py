"""Buffers: named, shaped, typed regions of memory that TensorIR reads and writes.

A buffer's layout is its ``shape`` plus, optionally, its ``strides`` (elements between
neighbours along each dimension; none means dense, row-major) and ``elem_offset`` (where its
first element sits in the memory it views). ``offset_factor`` promises that this offset is a
multiple of the factor, as a hardware intrinsic requires of its operands; a buffer declared
with a factor but no offset gets a fresh variable ``<name>_elem_offset`` for it, as in TVM.

``A.access_ptr("w")`` is how TensorIR hands a buffer's memory to an external function
(``T.call_extern``): the call ``tir.tvm_access_ptr(A.data, offset, extent, mask)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import IRError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.node import Node
from mlckit.ir.op import register_op

from .expr import BufferLoad, Call, IntImm, PrimExpr, Range, Var, convert

# tvm_access_ptr(data, offset, extent, mask): a pointer to ``extent`` elements of a buffer's
# memory from ``offset`` (counted from the buffer's first element: mlckit's buffers are arrays
# of their own, where TVM adds the buffer's elem_offset), read (mask 1), written (2) or both (3).
ACCESS_PTR = register_op("tir.tvm_access_ptr", 4)
ACCESS_MASKS = {"r": 1, "w": 2, "rw": 3}


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(Node):
    """A multi-dimensional buffer. ``A[i, j]`` builds a load, ``A[0:4, j]`` a region."""

    data: Var = None  # type: ignore[assignment]
    dtype: str = "float32"
    shape: tuple[PrimExpr, ...] = ()
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    scope: str = "global"
    offset_factor: int = 0
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
        offset_factor: int = 0,
        *,
        span: Any = None,
    ):
        shape = tuple(_as_index(s, "shape") for s in shape)
        if not isinstance(offset_factor, int) or offset_factor < 0:
            raise IRError(f"buffer offset_factor must be a non-negative int, got {offset_factor!r}")
        if offset_factor and elem_offset is None:
            elem_offset = Var(f"{name}_elem_offset", shape[0].dtype if shape else "int32")
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
        object.__setattr__(self, "offset_factor", offset_factor)
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

    def access_ptr(
        self,
        access_mask: str | int,
        ptr_type: str = "handle",
        content_lanes: int = 1,
        offset: Any = 0,
        extent: Any = None,
    ) -> Call:
        """A pointer to this buffer's memory for an external function (``T.call_extern``).

        ``access_mask`` says what the callee does: ``"r"`` reads, ``"w"`` writes, ``"rw"``
        both (or TVM's bit mask 1, 2, 3). ``offset`` counts elements from the buffer's first
        one; ``extent`` (the rest of the buffer by default) is how many the callee may touch.
        """
        mask = ACCESS_MASKS.get(access_mask) if isinstance(access_mask, str) else access_mask
        if not isinstance(mask, int) or isinstance(mask, bool) or mask not in (1, 2, 3):
            raise IRError(
                f"{self.name}.access_ptr: the access mask is 'r', 'w' or 'rw' (or 1, 2, 3), "
                f"got {access_mask!r}"
            )
        if ptr_type != "handle" or content_lanes != 1:
            raise IRError(
                f"{self.name}.access_ptr: only ptr_type='handle' with content_lanes=1 is "
                f"supported, got ptr_type={ptr_type!r}, content_lanes={content_lanes!r}"
            )
        offset = _as_index(offset, "access_ptr offset")
        if extent is None:
            extent = self.default_extent(offset)
        return Call("handle", ACCESS_PTR, [self.data, offset, _as_index(extent, "extent"), mask])

    def default_extent(self, offset: PrimExpr) -> PrimExpr:
        """The elements of the buffer from ``offset`` on: what ``access_ptr`` grants by
        default (with strides, up to the end of the outermost dimension's span)."""
        dims = [self.shape[0] * self.strides[0]] if self.strides else list(self.shape)
        total: PrimExpr = convert(1, dims[0].dtype) if dims else convert(1)
        for dim in dims:
            total = _fold_mul(total, dim)
        if isinstance(offset, IntImm) and offset.value == 0:
            return total
        if isinstance(offset, IntImm) and isinstance(total, IntImm):
            return IntImm(total.dtype, total.value - offset.value)
        return total - offset


def _fold_mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a * b``, folded when both are constants (or one is 1)."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.dtype, a.value * b.value)
    if isinstance(a, IntImm) and a.value == 1:
        return b
    return a * b


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
    offset_factor: int = 0,
) -> Buffer:
    """Declare a new buffer (TVM's ``tir.decl_buffer``)."""
    return Buffer(data, dtype, shape, strides, elem_offset, name, scope, offset_factor)


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
