"""Parameter files: ``save_param_dict(params) -> bytes``, ``load_param_dict(data)`` and
``load_param_dict_from_file(path)``, TVM's names (``tvm.runtime.save_param_dict``).

A trained model's weights travel apart from its code: a dict of named tensors becomes bytes
(write them to a file), and the bytes become the dict again, NDArrays on the CPU, in the order
they were saved. Unlike an exported library, a parameter file holds no code: loading one runs
nothing but NumPy's reader of plain tensors.

The format
----------
A zip archive (see :mod:`mlckit.runtime.archive`) holding ``params.json`` and one ``.npy``
member per tensor. ``params.json`` is the header: the format's name and version and, in order,
each tensor's name, member, dtype and shape. ``{"w0": <float32 (2, 3)>, "step": <int64 ()>}``
is::

    params.json     {"format": "mlckit.params", "version": 1, "tensors": [
                        {"name": "w0", "file": "tensors/0.npy", "dtype": "float32",
                         "shape": [2, 3]},
                        {"name": "step", "file": "tensors/1.npy", "dtype": "int64",
                         "shape": []}]}
    tensors/0.npy   NumPy's header ({'descr': '<f4', 'fortran_order': False,
                    'shape': (2, 3)}), then 24 bytes
    tensors/1.npy   NumPy's header, then 8 bytes

Members are numbered, not named after their tensors, so any name (``"layer/0.weight"``) is
safe. Any dtype NumPy stores without pickling works, 0-d and empty tensors included. Bytes
that are not such an archive, a cut-short or corrupted one, another format or a version this
mlckit does not know, and a tensor that does not match its header are each a
:class:`~mlckit.errors.SerializationError` that says which.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mlckit.errors import SerializationError

from .archive import (
    canonical_json,
    check_tensor,
    open_archive,
    read_manifest,
    read_member,
    tensor_bytes,
    tensor_from_bytes,
    write_archive,
)
from .ndarray import NDArray, cpu

FORMAT = "mlckit.params"
VERSION = 1
_HEADER = "params.json"
_KIND = "an mlckit parameter file"


def save_param_dict(params: dict[str, Any]) -> bytes:
    """The bytes of a parameter file holding ``params`` (names to NDArrays or numpy arrays)."""
    if not isinstance(params, dict):
        raise SerializationError(
            f"save_param_dict takes a dict of names to tensors, not {type(params).__name__}"
        )
    entries, members = [], []
    for index, (name, value) in enumerate(params.items()):
        if not isinstance(name, str):
            raise SerializationError(f"save_param_dict: the name {name!r} is not a string")
        array = _as_array(name, value)
        member = f"tensors/{index}.npy"
        entries.append(
            {"name": name, "file": member, "dtype": array.dtype.name, "shape": list(array.shape)}
        )
        members.append((member, tensor_bytes(array)))
    header = {"format": FORMAT, "version": VERSION, "tensors": entries}
    return write_archive([(_HEADER, canonical_json(header)), *members])


def load_param_dict(data: bytes, label: str = "the parameter bytes") -> dict[str, NDArray]:
    """The dict ``save_param_dict`` saved in ``data``: NDArrays on the CPU, in saved order."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(
            f"load_param_dict takes the bytes save_param_dict returned, not {type(data).__name__}"
        )
    archive = open_archive(bytes(data), label, _KIND)
    header = read_manifest(archive, _HEADER, label, _KIND)
    if header.get("format") != FORMAT:
        raise SerializationError(f"{label} is not {_KIND}: its format is {header.get('format')!r}")
    if header.get("version") != VERSION:
        raise SerializationError(
            f"{label} is a parameter file of version {header.get('version')!r}; this mlckit "
            f"reads version {VERSION}"
        )
    entries = header.get("tensors")
    if not isinstance(entries, list):
        raise SerializationError(f"{label} is corrupted: {_HEADER} lists no tensors")
    params: dict[str, NDArray] = {}
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)):
            raise SerializationError(f"{label} is corrupted: a tensor entry {entry!r} has no name")
        where = f"{label}: tensor {entry['name']!r}"
        array = tensor_from_bytes(read_member(archive, str(entry.get("file")), label), where)
        check_tensor(array, entry, where)
        params[entry["name"]] = NDArray(array, cpu())
    return params


def load_param_dict_from_file(path: str | os.PathLike[str]) -> dict[str, NDArray]:
    """:func:`load_param_dict` of the file at ``path``."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise SerializationError(f"cannot read the parameter file {path}: {err.strerror}") from None
    return load_param_dict(data, f"the parameter file {path}")


def _as_array(name: str, value: Any) -> np.ndarray:
    array = value.numpy() if isinstance(value, NDArray) else value
    if not isinstance(array, np.ndarray):
        raise SerializationError(
            f"save_param_dict: {name!r} is {type(value).__name__}, not an NDArray or numpy array"
        )
    if array.dtype.hasobject:
        raise SerializationError(f"save_param_dict: {name!r} holds Python objects, not numbers")
    return array
