"""The zip archives that exported libraries and parameter files are: a JSON manifest beside
the members it lists, and tensors as ``.npy`` members.

A zip archive is what both formats share, for what it checks on its own: its central directory
sits at the end, so a file cut short is refused before anything is read, and each member carries
a CRC-32, so a flipped byte is refused when that member is read. The archive is written
deterministically (members in a fixed order, each dated 1980-01-01), so the same content always
gives the same bytes. A tensor is a NumPy ``.npy`` member (a small header with dtype, shape and
order, then the bytes), read back with ``allow_pickle=False``: no tensor can hold Python objects.

Every problem is a :class:`~mlckit.errors.SerializationError` that names the file (``label``)
and what is wrong with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from typing import Any

import numpy as np

from mlckit.errors import SerializationError

_DATE = (1980, 1, 1, 0, 0, 0)
_ZIP_MAGIC = b"PK\x03\x04"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """``value`` as JSON with sorted keys and no spaces: the text a hash of it is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_archive(members: list[tuple[str, bytes]]) -> bytes:
    """A zip archive of ``(name, data)`` members, in order: ``.npy`` members stored (weights
    hardly compress, and a stored member loads without inflating), others deflated."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_DATE)
            stored = name.endswith(".npy")
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def open_archive(data: bytes, label: str, kind: str) -> zipfile.ZipFile:
    """``data`` as a zip archive; ``kind`` says what it should be ("an mlckit library")."""
    if not data.startswith(_ZIP_MAGIC):
        raise SerializationError(f"{label} is not {kind}: it is not a zip archive")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as err:
        raise SerializationError(
            f"{label} is truncated or corrupted (its zip directory cannot be read: {err})"
        ) from None


def read_member(archive: zipfile.ZipFile, name: str, label: str) -> bytes:
    """The bytes of member ``name``; a missing member or a failed CRC check is refused."""
    try:
        return archive.read(name)
    except KeyError:
        raise SerializationError(f"{label} is incomplete: it has no member {name!r}") from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as err:
        raise SerializationError(f"{label} is corrupted: member {name!r} ({err})") from None


def read_manifest(archive: zipfile.ZipFile, member: str, label: str, kind: str) -> dict[str, Any]:
    """The JSON object in ``member``: its absence means the archive is not ``kind``."""
    if member not in archive.namelist():
        raise SerializationError(f"{label} is not {kind}: the zip archive has no {member}")
    try:
        manifest = json.loads(read_member(archive, member, label))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SerializationError(f"{label} is corrupted: {member} is not JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise SerializationError(f"{label} is corrupted: {member} is not a JSON object")
    return manifest


def tensor_bytes(array: np.ndarray) -> bytes:
    """``array`` as a ``.npy`` file, in C order."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array, order="C"), allow_pickle=False)
    return buffer.getvalue()


def tensor_from_bytes(data: bytes, where: str) -> np.ndarray:
    """The array of a ``.npy`` member; ``where`` names it in an error."""
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise SerializationError(f"{where} is not a valid .npy tensor ({err})") from None
    if not isinstance(array, np.ndarray):
        raise SerializationError(f"{where} is not a single tensor")
    return array


def check_tensor(array: np.ndarray, entry: dict[str, Any], where: str) -> None:
    """The dtype and shape a manifest ``entry`` gives for ``array`` are its own."""
    expected = (entry.get("dtype"), entry.get("shape"))
    got = (array.dtype.name, list(array.shape))
    if expected != got:
        raise SerializationError(
            f"{where} holds a {got[0]} tensor of shape {tuple(got[1])}, but the manifest says "
            f"{expected[0]} of shape {tuple(expected[1] or ())}"
        )
