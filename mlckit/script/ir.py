"""TVMScript's module namespace: ``from mlckit.script import ir as I``."""

from __future__ import annotations

import base64
import binascii
import math
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
    dtype = check_dtype(dtype, "I.tensor dtype")
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise MLCError(f"I.tensor: the shape is a tuple of non-negative integers, got {shape!r}")
    if not isinstance(b64, str):
        raise MLCError(f"I.tensor: the data is a base64 string, got {b64!r}")
    shape = tuple(shape)
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MLCError(f"I.tensor: the data is not valid base64 ({err})") from None
    np_dtype = np.dtype(dtype).newbyteorder("<")
    count = math.prod(shape)
    if len(raw) != count * np_dtype.itemsize:
        raise MLCError(
            f"I.tensor: {len(raw)} bytes of data do not make a {dtype} tensor of "
            f"shape {shape} ({count * np_dtype.itemsize} bytes)"
        )
    return array(np.frombuffer(raw, dtype=np_dtype).astype(dtype).reshape(shape))


@statement("I", 'I.module_attrs({"key": value})', in_class_body=True)
def module_attrs(attrs: dict) -> None:
    """Attributes of the IRModule, written in the class body."""
