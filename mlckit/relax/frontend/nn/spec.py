"""Input specifications for ``Module.export_tvm``: what each argument of a method looks like.

>>> spec = {"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}}

A dim given as a string is symbolic: it becomes a ``tir.Var`` of that name, shared by every
input of the same function, so ``("n", 784)`` exports a function for any batch size.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype
from mlckit.relax.struct_info import TensorStructInfo
from mlckit.tir.expr import Var


class SpecError(MLCError):
    """The ``spec`` given to ``export_tvm`` does not match the module's methods."""


class Tensor:
    """The shape and dtype of one tensor input: ``Tensor((1, 784), "float32")``; a str dim
    (``"n"``) names a symbolic size."""

    def __init__(self, shape: Sequence[int | str], dtype: str = "float32") -> None:
        if isinstance(shape, (int, str)):
            shape = (shape,)
        for dim in shape:
            is_size = isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0
            if not (is_size or (isinstance(dim, str) and dim.isidentifier())):
                raise SpecError(
                    f"spec.Tensor({tuple(shape)!r}): each dim must be a non-negative int or "
                    f"a name such as 'n' for a symbolic size, got {dim!r}"
                )
        self.shape: tuple[int | str, ...] = tuple(shape)
        self.dtype = check_dtype(dtype)

    def as_struct_info(self, symbols: dict[str, Var]) -> TensorStructInfo:
        """The relax struct info; ``symbols`` holds (and collects) the function's tir Vars
        by name, so that equal names are the same variable."""
        dims: list[int | Var] = []
        for d in self.shape:
            if isinstance(d, str) and d not in symbols:
                symbols[d] = Var(d, "int64")
            dims.append(symbols[d] if isinstance(d, str) else d)
        return TensorStructInfo(dims, self.dtype)

    def __repr__(self) -> str:
        return f'spec.Tensor({self.shape!r}, "{self.dtype}")'
