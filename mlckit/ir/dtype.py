"""Data types, spelled as TVM spells them ("float32", "int64", "bool", "handle")."""

from __future__ import annotations

import difflib

import numpy as np

from mlckit.errors import IRError

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64")
UINT_DTYPES = ("uint8", "uint16", "uint32", "uint64")
SCALAR_DTYPES = FLOAT_DTYPES + INT_DTYPES + UINT_DTYPES + ("bool",)
ALL_DTYPES = (*SCALAR_DTYPES, "handle", "void")


def check_dtype(dtype: object, what: str = "dtype") -> str:
    """Return ``dtype`` as a canonical string, or raise IRError naming the valid choices."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str) or dtype not in ALL_DTYPES:
        close = difflib.get_close_matches(dtype, ALL_DTYPES, n=1) if isinstance(dtype, str) else []
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise IRError(f"unknown {what} {dtype!r}; {hint}expected one of {', '.join(SCALAR_DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES or dtype in UINT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    if dtype == "bool":
        return 1
    return int("".join(ch for ch in dtype if ch.isdigit()))


def to_numpy(dtype: str) -> np.dtype:
    return np.dtype(dtype)
