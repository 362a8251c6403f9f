"""Shipping a compiled model: ``Executable.export_library(path)`` writes one file holding
everything the VM needs to run it, and ``mlckit.runtime.load_module(path)`` (TVM's name) reads
it back as an Executable for ``relax.VirtualMachine(lib, dev)``.

Loading runs no compiler pass and parses no TVMScript: the file holds the *generated code*, the
kernels' Python (what ``ex.source("linear")`` shows) and the VM's Python of each relax function,
and numba compiles the kernel sources as a build does, through the kernel cache: a process that
loads a file whose kernels it (or an earlier process) compiled before takes their machine code
from the cache. Shipping sources rather than machine code keeps a file usable under another
numba, NumPy or Python version (they are recorded, not required) and on another CPU.

**A library file is code, like a pickle: load only files from a trusted source.** Loading one
runs the Python it holds. Its hashes detect damage, not malice: whoever can write the file can
write matching hashes.

The format
----------
A zip archive (see :mod:`mlckit.runtime.archive`: its directory and CRCs catch a cut-short or
damaged file before anything runs) rather than one JSON document, because a model's weights are
most of its bytes: as ``.npy`` members they are stored raw and loaded without decoding, where
JSON would grow them by a third in base64. Sources are members of their own, so ``unzip -p``
shows each. The course MLP (``mlckit.demo.mlp_script`` through ``relax.get_pipeline
("default")``, weights bound) exports as (the manifest spaced out and in reading order here;
the file has it on one line, keys sorted)::

    manifest.json                 the JSON manifest below
    kernels/linear.py             the kernel module kernel_source wrote: imports, @njit, loops
    kernels/fused_linear_relu.py
    vm/main.py                    def main(x): check_tensor(...); fused_linear_relu(...); ...
    constants/0.npy ... 3.npy     w0 (128, 784), b0, w1, b1 as .npy tensors

    {"format": "mlckit.library", "format_version": 1, "kind": "relax.Executable",
     "versions": {"mlckit": "0.1.0", "codegen": "6", "numba": "0.68.1",
                  "python": "3.11.7", "numpy": "2.4.6"},
     "files": {"kernels/linear.py": "9f2c...", "vm/main.py": "41d0...", ...},
     "target": "llvm", "cuda_simulator": null,
     "python_names": {"linear": "linear", "main": "main", ...},
     "kernels": [{"name": "linear", "function": "linear", "file": "kernels/linear.py",
                  "signature": [{"name": "X", "dtype": "float32", "ndim": 2,
                                 "shape": ["n", "k"], "written": false}, ...]}, ...],
     "functions": [{"name": "main", "file": "vm/main.py", "params": ["x"], "written": []}],
     "pool_slots": ["main: lv1", "main: out"],
     "constants": [{"file": "constants/0.npy", "dtype": "float32", "shape": [128, 784]}, ...],
     "sha256": "77be..."}

``files`` holds the sha256 of each part (a kernel, a relax function's VM code, a constant); the
manifest's own ``sha256`` is that of the manifest without it (keys sorted, no spaces), so it
covers every part's hash too: the hash of the whole. Writing is deterministic, so one
executable always gives the same bytes.

This module is the envelope: the archive, the manifest's common keys, the versions and the
hashes. What a kind of library holds (the keys after ``files`` above) is written and read by
the layer that knows it, :mod:`mlckit.relax.vm.library`, which registers each kind with
:func:`register_library_kind`: ``"relax.Executable"`` (``relax.build``) and
``"runtime.Module"`` (``mlckit.build``'s Module of PrimFuncs, ``lib["f"](a, b)``, which exports
and loads back the same way).

Loading checks, in order, and refuses with a :class:`~mlckit.errors.SerializationError` naming
what is wrong: a file that is not a zip archive or has no manifest (not an mlckit library); a
cut-short or damaged archive; a ``format_version`` this mlckit does not read; a kind of library
it cannot load; an mlckit or code generator version other than this one's (the VM code calls
the runtime's helpers by name, and the kernels are that generator's: both versions are named);
a manifest whose hash does not match; a part whose hash does not match (named by its member,
``kernels/linear.py``). Every part is checked before any of the file's code runs.

What the file does not carry: the IRModule (pass it with ``mlckit.ir.save_json`` where it is
needed, e.g. ``relax.training.Trainer`` reads the training module's attributes), Python
functions the code calls by name (``register_func``, registered externs: register them before
running), and C libraries kernels call (``pragma_import_llvm``): a kernel whose code binds one
is refused at export.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.errors import SerializationError

from .archive import canonical_json, open_archive, read_manifest, read_member, sha256, write_archive

FORMAT = "mlckit.library"
FORMAT_VERSION = 1
_MANIFEST = "manifest.json"
_KIND = "an mlckit library"

# Adds a member (a name stem, a suffix, the bytes) and returns the member's name.
AddPart = Callable[[str, str, bytes], str]


@dataclass(frozen=True)
class LibraryKind:
    """A kind of library: the objects it is written from and how to write and read them.

    ``write(obj, add_part)`` adds the object's parts and returns its manifest keys; ``load(
    manifest, contents, label)`` builds the object from the manifest and the members' checked
    bytes (by member name), ``label`` naming the file in errors. ``versions()`` are recorded in
    the file; those named in ``required`` must be this process's to load it."""

    name: str
    type: type
    write: Callable[[Any, AddPart], dict[str, Any]]
    load: Callable[[dict[str, Any], dict[str, bytes], str], Any]
    versions: Callable[[], dict[str, str]]
    required: tuple[str, ...] = ()


_KINDS: dict[str, LibraryKind] = {}


def register_library_kind(kind: LibraryKind) -> None:
    _KINDS[kind.name] = kind


def export_library(lib: Any, path: str | os.PathLike[str]) -> None:
    """Write ``lib`` (what ``relax.build`` or ``mlckit.build`` returned) to ``path`` as one
    library file."""
    kind = next((k for k in _KINDS.values() if isinstance(lib, k.type)), None)
    if kind is None:
        raise SerializationError(f"export_library cannot write {type(lib).__name__}")
    members: list[tuple[str, bytes]] = []
    files: dict[str, str] = {}

    def add_part(stem: str, suffix: str, data: bytes) -> str:
        file, copy = f"{stem}{suffix}", 1
        while file in files:  # two PrimFuncs of a Module may share a Python name
            file, copy = f"{stem}_{copy}{suffix}", copy + 1
        members.append((file, data))
        files[file] = sha256(data)
        return file

    fields = kind.write(lib, add_part)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind.name,
        "versions": {**_versions(), **kind.versions()},
        "files": files,
        **fields,
    }
    manifest["sha256"] = sha256(canonical_json(manifest))
    data = write_archive([(_MANIFEST, canonical_json(manifest)), *members])
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as err:
        raise SerializationError(f"cannot write the library {path}: {err.strerror}") from None


def load_module(path: str | os.PathLike[str]) -> Any:
    """What the library file at ``path`` holds: an Executable, for ``relax.VirtualMachine(lib,
    dev)``, or a runtime Module of PrimFuncs (``lib["f"](a, b)``).

    The file's code runs: load only files from a trusted source."""
    label = f"the library {os.fspath(path)}"
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise SerializationError(f"cannot read {label}: {err.strerror}") from None
    archive = open_archive(data, label, _KIND)
    manifest = read_manifest(archive, _MANIFEST, label, _KIND)
    if manifest.get("format") != FORMAT:
        raise SerializationError(
            f"{label} is not {_KIND}: its format is {manifest.get('format')!r}"
        )
    if manifest.get("format_version") != FORMAT_VERSION:
        raise SerializationError(
            f"{label} has library format version {manifest.get('format_version')!r}; this "
            f"mlckit reads version {FORMAT_VERSION}"
        )
    kind = _KINDS.get(manifest.get("kind"))  # type: ignore[arg-type]
    if kind is None:
        raise SerializationError(
            f"{label} holds a {manifest.get('kind')!r}, which this mlckit cannot load"
        )
    _check_versions(manifest, kind, label)
    unhashed = {key: value for key, value in manifest.items() if key != "sha256"}
    if manifest.get("sha256") != sha256(canonical_json(unhashed)):
        raise SerializationError(f"{label} was modified: the hash of its manifest does not match")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise SerializationError(f"{label} is corrupted: its manifest lists no files")
    # Every part is checked before any code runs.
    contents: dict[str, bytes] = {}
    for file, digest in files.items():
        contents[file] = read_member(archive, file, label)
        if sha256(contents[file]) != digest:
            raise SerializationError(f"{label}: the hash of {file} does not match")
    try:
        return kind.load(manifest, contents, label)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        # Only a hand-made manifest whose hash was recomputed gets here.
        raise SerializationError(
            f"{label} is corrupted: its manifest lacks or mistypes a field ({err!r})"
        ) from None


def _versions() -> dict[str, str]:
    # The package's version: mlckit/__init__ sets it, and this layer cannot import the package
    # (it is loaded first, so it is there whenever a function here runs).
    return {
        "mlckit": sys.modules["mlckit"].__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def _check_versions(manifest: dict[str, Any], kind: LibraryKind, label: str) -> None:
    versions = manifest.get("versions")
    if not isinstance(versions, dict):
        raise SerializationError(f"{label} is corrupted: its manifest records no versions")
    mine = {**_versions(), **kind.versions()}
    required = ("mlckit", *kind.required)
    if any(versions.get(what) != mine[what] for what in required):
        raise SerializationError(
            f"{label} was written by {_describe(versions, required)}; this is "
            f"{_describe(mine, required)}: export it again with this mlckit"
        )


def _describe(versions: dict[str, Any], names: tuple[str, ...]) -> str:
    """``mlckit 0.1.0 (codegen 6)``."""
    extra = ", ".join(f"{name} {versions.get(name)}" for name in names[1:])
    return f"mlckit {versions.get('mlckit')}" + (f" ({extra})" if extra else "")
