"""Tensors and the operations that produce them (TVM's ``te.Tensor``, ``PlaceholderOp``,
``ComputeOp``).

A tensor expression describes *what* each element of a tensor is, not how loops compute it:
``C = te.compute((n, m), lambda i, j: A[i, j] + B[j])``. Each tensor owns a TensorIR
:class:`~mlckit.tir.Buffer`, and indexing a tensor (``A[i, j]`` or ``A(i, j)``) builds a
``BufferLoad`` of that buffer, so a compute's body is an ordinary PrimExpr.
:func:`mlckit.te.create_prim_func` turns the buffers into function parameters or allocations
and each compute into one block.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from mlckit.errors import IRError
from mlckit.tir.buffer import Buffer, decl_buffer
from mlckit.tir.expr import BufferLoad, IntImm, IterVar, PrimExpr, convert
from mlckit.tir.stmt_functor import post_order_visit

from .reduction import Reduce

# Which tensor each te buffer belongs to, so a compute can find the tensors its body reads.
# The tensor holds its buffer, so the id stays unique for as long as the entry exists.
_TENSOR_OF_BUFFER: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


class Operation:
    """What produces one or more tensors: a placeholder (an input) or a compute."""

    def __init__(self, name: str, tag: str = "", attrs: dict[str, Any] | None = None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.outputs: tuple[Tensor, ...] = ()

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def output(self, index: int) -> Tensor:
        return self.outputs[index]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class PlaceholderOp(Operation):
    """An input tensor: its values come from the caller."""

    def __init__(self, name: str, shape: tuple[PrimExpr, ...], dtype: str):
        super().__init__(name)
        self.outputs = (Tensor(self, 0, decl_buffer(shape, dtype, name)),)


class ComputeOp(Operation):
    """``te.compute``: every element of the outputs given by ``body`` over the ``axis`` domain.

    ``body`` holds one expression per output; for a reduction each is a :class:`Reduce`
    (sharing combiner and reduce axes: a multi-output reduction such as argmax).
    """

    def __init__(
        self,
        name: str,
        tag: str,
        attrs: dict[str, Any] | None,
        axis: Sequence[IterVar],
        body: Sequence[Any],
    ):
        super().__init__(name, tag, attrs)
        self.axis = tuple(axis)
        self.body = tuple(body)
        first = self.body[0]
        self.reduce_axis = first.axis if isinstance(first, Reduce) else ()
        shape = tuple(iv.dom.extent for iv in self.axis)
        names = [name] if len(self.body) == 1 else [f"{name}_v{i}" for i in range(len(body))]
        self.outputs = tuple(
            Tensor(self, i, decl_buffer(shape, value.dtype, buffer_name))
            for i, (value, buffer_name) in enumerate(zip(self.body, names))
        )
        self._inputs = _tensors_read_by(self.body)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)


class Tensor:
    """One output of an operation: a shape, a dtype and the buffer that holds its values."""

    def __init__(self, op: Operation, value_index: int, buffer: Buffer):
        self.op = op
        self.value_index = value_index
        self.buffer = buffer
        _TENSOR_OF_BUFFER[id(buffer)] = self

    @property
    def shape(self) -> tuple[PrimExpr, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return len(self.buffer.shape)

    @property
    def name(self) -> str:
        return self.buffer.name

    def __getitem__(self, indices: Any) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IRError(
                f"tensor {self.name!r} has {self.ndim} dimensions (shape "
                f"{shape_text(self.shape)}) but is indexed with {len(indices)} indices"
            )
        # A reduce axis stands for its variable (``A[i, k]``, as in TVM); a Python int index
        # takes the dtype of its dimension (int64 dims get int64 indices).
        return BufferLoad(
            self.buffer,
            [
                i.var if isinstance(i, IterVar) else convert(i, dim.dtype)
                for i, dim in zip(indices, self.shape)
            ],
        )

    def __call__(self, *indices: Any) -> BufferLoad:
        return self[indices]

    def __len__(self) -> int:
        if self.ndim == 0:
            raise IRError(f"tensor {self.name!r} is a scalar (0-d) and has no length")
        dim = self.shape[0]
        if not isinstance(dim, IntImm):
            raise IRError(f"tensor {self.name!r} has a symbolic first dimension {dim.script()}")
        return dim.value

    def __iter__(self):
        raise IRError(
            f"te tensors cannot be iterated; index them with a Python tuple (tensor {self.name!r})"
        )

    def __bool__(self) -> bool:
        # Without this Python would fall back to __len__, which raises for symbolic shapes.
        return True

    def __repr__(self) -> str:
        return f"Tensor(shape={shape_text(self.shape)}, op.name={self.op.name!r})"


def shape_text(shape: Sequence[PrimExpr]) -> str:
    """A shape as its script spelling: ``(n, 4)``, ``(3,)``."""
    return "(" + ", ".join(d.script() for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _tensors_read_by(body: Sequence[Any]) -> tuple[Tensor, ...]:
    """The te tensors whose buffers the expressions load from, in order of first load."""
    found: dict[int, Tensor] = {}
    unknown: list[Buffer] = []

    def fvisit(node: Any) -> None:
        if isinstance(node, BufferLoad) and id(node.buffer) not in found:
            tensor = _TENSOR_OF_BUFFER.get(id(node.buffer))
            if tensor is None:
                unknown.append(node.buffer)
            else:
                found[id(node.buffer)] = tensor

    for value in body:
        parts = [*value.source, value.condition] if isinstance(value, Reduce) else [value]
        for part in parts:
            post_order_visit(part, fvisit)
    if unknown:
        raise IRError(
            f"te.compute reads buffer {unknown[0].name!r}, which is not a te tensor; "
            "index te.placeholder / te.compute results instead"
        )
    return tuple(found.values())
