"""TVMScript's module namespace: ``from mlckit.script import ir as I``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype
from mlckit.ir.module import GlobalVar
from mlckit.runtime.ndarray import NDArray, array

from .parser.decorator import ir_module
from .parser.markers import statement

__all__ = ["GlobalVar", "ir_module", "module_attrs", "tensor"]


def tensor(dtype: str, shape: Any, b64: str) -> NDArray:
    """A constant tensor of a metadata section: its bytes (little-endian, C order) in base64."""
    dtype = check_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MLCError(f"I.tensor: the data is not valid base64 ({err})") from None
    np_dtype = np.dtype(dtype).newbyteorder("<")
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) != count * np_dtype.itemsize:
        raise MLCError(
            f"I.tensor: {len(raw)} bytes of data do not make a {dtype} tensor of "
            f"shape {shape} ({count * np_dtype.itemsize} bytes)"
        )
    return array(np.frombuffer(raw, dtype=np_dtype).astype(dtype).reshape(shape))


@statement("I", 'I.module_attrs({"key": value})')
def module_attrs(attrs: dict) -> None:
    """Attributes of the IRModule, written in the class body."""
