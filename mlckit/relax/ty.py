"""Early Relax's types, accepted as the struct info they stand for.

Early Relax (the API the MLC course is written in) gave a variable a shape and, separately, a
type: ``relax.Var("x", (1, 784), relax.DynTensorType(2, "float32"))`` is a float32 tensor of
rank 2 whose shape is (1, 784). Current Relax (and mlckit) says both with one struct info,
``relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))``. The old spellings still work,
each announcing its replacement once per process with a FutureWarning:

- ``relax.DynTensorType(ndim, dtype)``: ``relax.TensorStructInfo(ndim=ndim, dtype=dtype)``,
  a tensor whose rank and dtype are known and whose shape is not;
- ``relax.Var(name, shape, type)``: ``relax.Var(name, relax.TensorStructInfo(shape, dtype))``;
- ``expr.shape_``: ``expr.struct_info.shape``; ``expr._checked_type_``: the DynTensorType
  (rank and dtype) of ``expr.struct_info``;
- ``relax.const(value, relax.DynTensorType(ndim, dtype))``: ``relax.const(value, dtype)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlckit.errors import IRError, warn_old_spelling
from mlckit.ir.dtype import check_dtype

from .struct_info import StructInfo, TensorStructInfo


@dataclass(frozen=True, init=False)
class DynTensorType:
    """Early Relax's type of a tensor: its rank (-1: unknown) and dtype, not its shape."""

    ndim: int
    dtype: str

    def __init__(self, ndim: int = -1, dtype: str = "float32"):
        warn_old_spelling(
            "relax.DynTensorType(ndim, dtype)",
            "relax.TensorStructInfo(shape, dtype), or TensorStructInfo(ndim=ndim, dtype=dtype) "
            "for a tensor of unknown shape",
        )
        self._fill(ndim, dtype)

    @classmethod
    def of(cls, sinfo: StructInfo, what: str) -> DynTensorType:
        """The type early Relax gave a value of struct info ``sinfo`` (``what`` names the value
        in the error for one that is not a tensor)."""
        if not isinstance(sinfo, TensorStructInfo):
            raise IRError(
                f"{what} is not a tensor: early Relax's type (relax.DynTensorType) describes "
                "tensors only; read expr.struct_info instead"
            )
        typ = object.__new__(cls)
        typ._fill(sinfo.ndim, sinfo.dtype)
        return typ

    def _fill(self, ndim: Any, dtype: Any) -> None:
        if isinstance(ndim, bool) or not isinstance(ndim, int) or ndim < -1:
            raise IRError(
                f"relax.DynTensorType: ndim is the tensor's rank, an int >= 0 (or -1 for "
                f"unknown), got {ndim!r}"
            )
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "dtype", check_dtype(dtype, "relax.DynTensorType dtype"))

    def struct_info(self, shape: Any = None) -> TensorStructInfo:
        """The struct info of a tensor of this type and ``shape`` (None: unknown), which must
        have this type's rank."""
        if shape is None:
            return TensorStructInfo(ndim=self.ndim, dtype=self.dtype)
        if isinstance(shape, StructInfo):
            raise IRError(
                f"{self} with struct info {shape}: a struct info already says the dtype, so it "
                "takes no type; pass it alone, relax.Var(name, struct_info)"
            )
        sinfo = TensorStructInfo(shape, self.dtype)
        if -1 not in (self.ndim, sinfo.ndim) and sinfo.ndim != self.ndim:
            raise IRError(
                f"the shape {_show(shape)} has {sinfo.ndim} dims but its type {self} says "
                f"{self.ndim}"
            )
        return TensorStructInfo(sinfo.shape, self.dtype, self.ndim)

    def __str__(self) -> str:
        return f'relax.DynTensorType({self.ndim}, "{self.dtype}")'


def annotations_struct_info(name: str, shape: Any, type_annotation: Any) -> TensorStructInfo:
    """The struct info of early Relax's ``relax.Var(name, shape, type_annotation)``."""
    if not isinstance(type_annotation, DynTensorType):
        raise IRError(
            f"relax.Var({name!r}, shape, type_annotation): early Relax's third argument is the "
            f"variable's type, a relax.DynTensorType(ndim, dtype); got "
            f"{type(type_annotation).__name__} ({type_annotation!r}). Today one struct info "
            f"says both: relax.Var({name!r}, relax.TensorStructInfo(shape, dtype))"
        )
    # Four frames up: past this function and relax.Var's constructor, to the user's call.
    warn_old_spelling(
        "relax.Var(name, shape, type_annotation)",
        "relax.Var(name, relax.TensorStructInfo(shape, dtype))",
        stacklevel=4,
    )
    try:
        return type_annotation.struct_info(shape)
    except IRError as err:
        raise IRError(f"relax.Var({name!r}, ...): {err}") from None


def _show(shape: Any) -> str:
    return str(tuple(shape)) if isinstance(shape, (list, tuple)) else str(shape)


__all__ = ["DynTensorType"]
