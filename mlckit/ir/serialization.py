"""IR as JSON text: ``save_json(node) -> str`` and ``load_json(text)``, TVM's names.

Any IR object round-trips: an IRModule, a tir.PrimFunc, a relax Function, an expression, a
struct info, a buffer, a schedule's trace, or a tuple or dict of them. The text is a *graph*
of objects with a root, and pickling a node goes through it (``Node.__reduce__``), so modules
cross process boundaries without printing and re-parsing TVMScript.

The format
----------
The document has four keys: ``format`` (``"mlckit.ir"``), ``version`` (:data:`VERSION`),
``root`` (a value) and ``nodes`` (a list of entries). Every object that has an identity (an IR
node, a tensor, a trace step or handle) is one entry, stored once and referred to by its index
``{"ref": i}``; a variable used twice is two references to one entry, so ``load_json`` gives
back one variable object used twice, which structural equality and the passes rely on. An
entry is ``{"type": name, "fields": {field: value, ...}}``. Everything else is a value,
written so that no two Python values share a spelling:

==========================================  ===============================================
Python value                                JSON
==========================================  ===============================================
``None``, ``bool``, ``int``, ``str``        itself
finite ``float``                            a number with a point or exponent (``1.0``)
``nan``, ``inf``, ``-inf``                  ``{"float": "nan"}``, ...
``tuple``                                   an array
``list``                                    ``{"list": [...]}``
``dict`` with string keys                   ``{"dict": {...}}``, in insertion order
any other ``dict``                          ``{"map": [[key, value], ...]}``, in order
an object with an identity                  ``{"ref": index}``
an enum member (``tir.ForKind.SERIAL``)     ``{"enum": ["tir.ForKind", "SERIAL"]}``
a numpy scalar, a numpy dtype               ``{"numpy": ["float32", 0.5]}``, ``{"dtype": ...}``
a source location (``Span``)                ``{"span": [file, line, col, end_col]}``
==========================================  ===============================================

A tensor (a relax Constant's data, an NDArray in a module attribute such as a training
module's ``optim_state``) is an entry whose fields are its dtype, shape, device and its bytes
in C order, little-endian, base64-encoded.

Type names are registered, never imported: the loader looks a name up in a table of the
classes it knows and refuses any other, so, unlike a pickle, the text names no code to run.
The table holds every node class of the IR's modules (``mlckit.ir``, ``mlckit.tir``,
``mlckit.relax``) under ``<dialect>.<class>`` (``relax.Var``, ``tir.Var``, ``ir.GlobalVar``),
the enums defined there, the tensors, and what the dialects register with
:func:`register_object` (a schedule's trace, its steps, handles and sampled values). An
operator is stored by its name and loaded as the one registered Op of that name, its
attributes (the inference and legalization functions) included.

Fields are stored by name, all of them: the structural ones and the cached slots that
structural equality ignores. A relax expression's ``struct_info_`` (set by normalization) and
a GlobalVar's are kept, so a loaded module builds and runs without being normalized again;
so are a PrimExpr's ``dtype``, variables' and buffers' names, and spans (errors about a loaded
module still point at the TVMScript it was parsed from). The loader rebuilds each object field
by field without calling its constructor, so the loaded node is the saved one, not a
re-normalized version of it.

Writing walks the graph depth first from the root in field order; an object gets its index the
first time it is met, before its fields. Dicts keep their insertion order (the printer and the
passes iterate in it; the IR holds no unordered collection), so the same node always gives
the same text, and a loaded node saves to the same text again. Reading is two passes: allocate
every entry's object, then fill each one's fields, so a reference may point anywhere in the
list.

A worked example: ``i * i + 1`` for ``i = tir.Var("i", "int32")`` saves as (spaced out here;
``save_json`` writes one line)::

    {"format": "mlckit.ir", "version": 1, "root": {"ref": 0}, "nodes": [
      {"type": "tir.Add", "fields": {"span": null, "dtype": "int32",
                                     "a": {"ref": 1}, "b": {"ref": 3}}},
      {"type": "tir.Mul", "fields": {"span": null, "dtype": "int32",
                                     "a": {"ref": 2}, "b": {"ref": 2}}},
      {"type": "tir.Var", "fields": {"span": null, "dtype": "int32", "name_hint": "i",
                                     "type_annotation": "int32"}},
      {"type": "tir.IntImm", "fields": {"span": null, "dtype": "int32", "value": 1}}]}

The walk meets the Add first (entry 0), then its ``a``, the Mul (1), whose ``a`` is ``i`` (2);
the Mul's ``b`` is ``i`` again, already entry 2, so it is the reference ``{"ref": 2}``; last
comes the Add's ``b`` (3). Loading allocates four objects, fills their fields, and returns
entry 0, whose Mul multiplies one variable object by itself.

Anything the loader cannot trust is a :class:`~mlckit.errors.SerializationError` saying which:
text that is not JSON or is cut short, another format, a version this mlckit does not know, an
unknown type name, an entry with a missing or an extra field, a reference to no entry, a value
of no known spelling. ``save_json`` refuses, with the same error and the path to it, what JSON
cannot hold: a Python function, such as the index map a trace's ``transform_layout`` step
received.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import enum
import gc
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.errors import MLCError, SerializationError
from mlckit.runtime.ndarray import NDArray, aligned_copy, array, device

from .module import IRModule
from .node import Node, Span, register_serializer
from .op import Op

FORMAT = "mlckit.ir"
VERSION = 1

# The modules whose node classes and enums are known by dialect and class name.
_DIALECTS = ("ir", "tir", "relax")


@dataclass(frozen=True)
class _Kind:
    """How one registered class is stored: its name, the fields its entry holds and, for an
    object made from its fields at once (an Op, a tensor, a sampled value), how to read them
    out and build it back; other objects are allocated first and filled in (``build`` None)."""

    name: str
    cls: type
    fields: tuple[str, ...]
    read: Callable[[Any], dict[str, Any]] | None = None
    build: Callable[[dict[str, Any]], Any] | None = None
    label: Callable[[Any], str] | None = None


_REGISTERED: list[_Kind] = []
_TABLES: dict[str, Any] = {}  # built on first use: by class, by name, enums by class and name


def register_object(
    name: str,
    cls: type,
    fields: tuple[str, ...] | None = None,
    *,
    read: Callable[[Any], dict[str, Any]] | None = None,
    build: Callable[[dict[str, Any]], Any] | None = None,
    label: Callable[[Any], str] | None = None,
) -> None:
    """Make ``save_json``/``load_json`` know ``cls`` (which is no IR node) as ``name``.

    ``fields`` default to the dataclass fields. An object built at once from its fields gives
    ``read`` (object -> fields) and ``build`` (fields -> object); ``label`` names an object in
    error messages (a trace step: ``sch.split``)."""
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(cls))
    _REGISTERED.append(_Kind(name, cls, fields, read, build, label))
    _TABLES.clear()


def _subclasses(base: type) -> list[type]:
    found, stack = [], [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def _dialect_name(cls: type) -> str | None:
    parts = cls.__module__.split(".")
    if len(parts) > 1 and parts[0] == "mlckit" and parts[1] in _DIALECTS:
        return f"{parts[1]}.{cls.__qualname__}"
    return None


def _node_kind(name: str, cls: type) -> _Kind:
    if cls is IRModule:  # not a dataclass: its mapping and attributes are plain attributes
        return _Kind(name, cls, ("span", "functions", "attrs", "global_infos"))
    if cls is Op:  # one registered object per name, with functions as attributes
        return _Kind(
            name, cls, ("name",), lambda op: {"name": op.name}, lambda f: Op.get(f["name"])
        )
    return _Kind(name, cls, tuple(f.name for f in dataclasses.fields(cls)))


def _tables() -> dict[str, Any]:
    if _TABLES:
        return _TABLES
    kinds = [_node_kind(name, cls) for cls in _subclasses(Node) if (name := _dialect_name(cls))]
    kinds += [_tensor_kind("runtime.NDArray", NDArray), _tensor_kind("numpy.ndarray", np.ndarray)]
    kinds += _REGISTERED
    by_name: dict[str, _Kind] = {}
    for kind in kinds:
        if kind.name in by_name and by_name[kind.name].cls is not kind.cls:
            raise SerializationError(
                f"two classes are registered as {kind.name!r}: "
                f"{by_name[kind.name].cls.__module__} and {kind.cls.__module__}"
            )
        by_name[kind.name] = kind
    enums = {cls: name for cls in _subclasses(enum.Enum) if (name := _dialect_name(cls))}
    _TABLES.update(
        by_class={kind.cls: kind for kind in by_name.values()},
        by_name=by_name,
        enum_names=enums,
        enums={name: cls for cls, name in enums.items()},
    )
    return _TABLES


# ------------------------------------------------------------------------------ tensors
def _tensor_kind(name: str, cls: type) -> _Kind:
    on_device = cls is NDArray

    def read(tensor: Any) -> dict[str, Any]:
        host = tensor.numpy() if on_device else tensor
        data = np.ascontiguousarray(host, dtype=host.dtype.newbyteorder("<"))
        fields = {"dtype": host.dtype.name, "shape": host.shape}
        if on_device:
            fields["device"] = (tensor.device.device_type, tensor.device.device_id)
        fields["data"] = base64.b64encode(data.tobytes()).decode("ascii")
        return fields

    def build(fields: dict[str, Any]) -> Any:
        host = _tensor_data(fields)
        if not on_device:
            return aligned_copy(host)
        device_type, device_id = fields["device"]
        return array(host, device(device_type, device_id))

    names = ("dtype", "shape", "device", "data") if on_device else ("dtype", "shape", "data")
    return _Kind(name, cls, names, read, build)


def _tensor_data(fields: dict[str, Any]) -> np.ndarray:
    try:
        dtype = np.dtype(fields["dtype"]).newbyteorder("<")
        shape = tuple(fields["shape"])
        raw = base64.b64decode(fields["data"], validate=True)
        return np.frombuffer(raw, dtype).reshape(shape).astype(dtype.newbyteorder("="))
    except (TypeError, ValueError) as err:  # binascii.Error is a ValueError
        raise SerializationError(
            f"a tensor of dtype {fields['dtype']!r} and shape {fields['shape']!r} has "
            f"unreadable data ({err})"
        ) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Saving and loading allocate a few small dicts per node, none in a cycle; left running,
    Python's cycle collector would walk the whole heap again and again meanwhile (save plus load
    of a 2,000-binding module took twice as long)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ------------------------------------------------------------------------------ writing
class _Unstorable(Exception):
    """Raised where save_json meets a value JSON cannot hold; each enclosing object and
    container adds its step to ``path`` on the way out."""

    def __init__(self, what: str, why: str):
        super().__init__(what)
        self.what, self.why = what, why
        self.path: list[str] = []
        self.owner = ""


_PLAIN = frozenset({str, int, bool, type(None)})


class _Writer:
    def __init__(self) -> None:
        tables = _tables()
        self.kinds: dict[type, _Kind] = tables["by_class"]
        self.enum_names: dict[type, str] = tables["enum_names"]
        self.index: dict[int, int] = {}
        self.entries: list[dict[str, Any]] = []
        self.alive: list[Any] = []  # ids are only unique while their objects live

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _PLAIN:
            return v
        kind = self.kinds.get(t)
        if kind is not None:
            ref = self.index.get(id(v))
            return {"ref": self.entry(v, kind) if ref is None else ref}
        if t is tuple:
            return self.items(v)
        if t is float:
            return v if math.isfinite(v) else {"float": repr(v)}
        if t is list:
            return {"list": self.items(v)}
        if t is dict:
            return self.mapping(v)
        return self.other(v)

    def items(self, values: Any) -> list[Any]:
        out = []
        for i, item in enumerate(values):
            try:
                out.append(self.value(item))
            except _Unstorable as err:
                err.path.append(f"[{i}]")
                raise
        return out

    def mapping(self, d: dict) -> dict[str, Any]:
        if all(type(k) is str for k in d):
            out = {}
            for k, item in d.items():
                try:
                    out[k] = self.value(item)
                except _Unstorable as err:
                    err.path.append(f"[{k!r}]")
                    raise
            return {"dict": out}
        return {"map": self.items([(k, item) for k, item in d.items()])}

    def other(self, v: Any) -> Any:
        name = self.enum_names.get(type(v))
        if name is not None:
            return {"enum": [name, v.name]}
        if isinstance(v, np.generic):
            return {"numpy": [v.dtype.name, self.value(v.item())]}
        if isinstance(v, np.dtype):
            return {"dtype": v.name}
        if type(v) is Span:
            return {"span": [v.filename, v.lineno, v.col, v.end_col]}
        if callable(v):
            name = getattr(v, "__qualname__", type(v).__name__)
            raise _Unstorable(f"a Python function ({name})", "JSON holds data, not code")
        what = f"a {type(v).__module__}.{type(v).__qualname__}"
        raise _Unstorable(what, "it is no type mlckit knows how to save")

    def entry(self, obj: Any, kind: _Kind) -> int:
        i = len(self.entries)
        self.index[id(obj)] = i
        self.alive.append(obj)
        record: dict[str, Any] = {"type": kind.name}
        self.entries.append(record)
        values = kind.read(obj) if kind.read else {f: getattr(obj, f) for f in kind.fields}
        fields = {}
        for name, value in values.items():
            try:
                fields[name] = self.value(value)
            except _Unstorable as err:
                err.path.append(f".{name}")
                if not err.owner and kind.label is not None:
                    err.owner = f" (in {kind.label(obj)})"
                raise
        record["fields"] = fields
        return i


def save_json(node: Any) -> str:
    """``node`` (any IR object, or a tuple, list or dict of them) as JSON text; see the module
    docstring for the format. The same node always gives the same text."""
    writer = _Writer()
    try:
        with _collector_paused():
            root = writer.value(node)
            document = {"format": FORMAT, "version": VERSION, "root": root, "nodes": writer.entries}
            return json.dumps(document, separators=(",", ":"), allow_nan=False)
    except _Unstorable as err:
        where = "root" + "".join(reversed(err.path))
        raise SerializationError(
            f"save_json: cannot store {err.what} at {where}{err.owner}: {err.why}"
        ) from None
    except RecursionError:
        raise SerializationError("save_json: the IR is nested too deeply to store") from None


# ------------------------------------------------------------------------------ reading
class _Reader:
    def __init__(self, document: dict[str, Any]) -> None:
        tables = _tables()
        self.enums: dict[str, type] = tables["enums"]
        self.entries: list[Any] = document["nodes"]
        self.root = document["root"]
        self.objects: list[Any] = [None] * len(self.entries)
        self.tags = {
            "ref": self.ref,
            "list": self.items,
            "dict": self.dict_,
            "map": self.map_,
            "float": _special_float,
            "enum": self.enum_,
            "numpy": self.numpy_scalar,
            "dtype": np.dtype,
            "span": lambda fields: Span(*fields),
        }

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _PLAIN or t is float:
            return v
        if t is list:
            return tuple([self.value(item) for item in v])
        if t is dict and len(v) == 1:
            ((tag, payload),) = v.items()
            decode = self.tags.get(tag)
            if decode is not None:
                try:
                    return decode(payload)
                except (TypeError, ValueError) as err:
                    raise SerializationError(f"{_short(v)} is malformed ({err})") from None
        raise SerializationError(f"{_short(v)} is no value save_json writes")

    def items(self, items: Any) -> list[Any]:
        if type(items) is not list:
            raise SerializationError(f"expected a JSON array, got {_short(items)}")
        return [self.value(item) for item in items]

    def ref(self, index: Any) -> Any:
        if type(index) is not int or not 0 <= index < len(self.objects):
            raise SerializationError(
                f"the reference {{'ref': {index!r}}} points to no entry "
                f"(there are {len(self.objects)})"
            )
        obj = self.objects[index]
        if obj is None:
            raise SerializationError(
                f"the reference to entry {index} is used before that entry is made (an "
                "operator, tensor or sampled value holds no references)"
            )
        return obj

    def dict_(self, payload: Any) -> dict[str, Any]:
        if type(payload) is not dict:
            raise SerializationError(f"a dict must be a JSON object, got {_short(payload)}")
        return {k: self.value(item) for k, item in payload.items()}

    def map_(self, payload: Any) -> dict[Any, Any]:
        pairs = self.items(payload)
        if not all(type(p) is tuple and len(p) == 2 for p in pairs):
            raise SerializationError(f"a map is a list of [key, value] pairs: {_short(payload)}")
        return dict(pairs)

    def enum_(self, payload: Any) -> enum.Enum:
        name, member = payload if type(payload) is list and len(payload) == 2 else (None, None)
        cls = self.enums.get(name)  # type: ignore[arg-type]
        if cls is None or member not in cls.__members__:
            raise SerializationError(f"{_short(payload)} is no enum member mlckit knows")
        return cls[member]

    def numpy_scalar(self, payload: Any) -> np.generic:
        dtype, value = payload
        return np.dtype(dtype).type(self.value(value))

    def read(self, kinds: dict[str, _Kind]) -> None:
        checked = [_checked_entry(i, entry, kinds) for i, entry in enumerate(self.entries)]
        for i, (kind, _) in enumerate(checked):
            if kind.build is None:
                self.objects[i] = kind.cls.__new__(kind.cls)
        setattr_ = object.__setattr__
        for i, (kind, fields) in enumerate(checked):
            if kind.build is None:
                continue
            try:
                self.objects[i] = kind.build({f: self.value(v) for f, v in fields.items()})
            except (MLCError, TypeError, ValueError) as err:  # Op.get's: no such operator
                raise SerializationError(f"entry {i} ({kind.name}): {err}") from None
        for i, (kind, fields) in enumerate(checked):
            if kind.build is not None:
                continue
            obj = self.objects[i]
            try:
                for name in kind.fields:
                    setattr_(obj, name, self.value(fields[name]))
            except SerializationError as err:
                raise SerializationError(f"entry {i} ({kind.name}), field {name}: {err}") from None


def _checked_entry(i: int, entry: Any, kinds: dict[str, _Kind]) -> tuple[_Kind, dict]:
    if type(entry) is not dict or entry.keys() != {"type", "fields"}:
        raise SerializationError(
            f"entry {i} must be an object with the keys 'type' and 'fields', got {_short(entry)}"
        )
    kind = kinds.get(entry["type"]) if type(entry["type"]) is str else None
    if kind is None:
        raise SerializationError(
            f"entry {i} has the type {entry['type']!r}, which is no type mlckit knows"
        )
    fields = entry["fields"]
    if type(fields) is not dict:
        raise SerializationError(f"entry {i} ({kind.name}): 'fields' must be a JSON object")
    if fields.keys() != set(kind.fields):
        missing = [f for f in kind.fields if f not in fields]
        extra = [f for f in fields if f not in kind.fields]
        parts = [f"missing {', '.join(missing)}"] if missing else []
        parts += [f"extra {', '.join(extra)}"] if extra else []
        raise SerializationError(
            f"entry {i} ({kind.name}) has the wrong fields: {'; '.join(parts)} "
            f"(a {kind.name} has {', '.join(kind.fields)})"
        )
    return kind, fields


def _special_float(text: Any) -> float:
    if text not in ("nan", "inf", "-inf"):
        raise SerializationError(f"{{'float': {text!r}}}: only nan, inf and -inf are spelled so")
    return float(text)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_json(text: str | bytes) -> Any:
    """The IR object :func:`save_json` wrote as ``text``, with the same sharing: an object
    referred to twice in the text is one object."""
    with _collector_paused():
        reader = _Reader(_document(text))
        try:
            reader.read(_tables()["by_name"])
            return reader.value(reader.root)
        except SerializationError as err:
            raise SerializationError(f"load_json: {err}") from None
        except RecursionError:
            raise SerializationError("load_json: the IR is nested too deeply to load") from None


def _document(text: str | bytes) -> dict[str, Any]:
    """The parsed document, once its format, version and keys are checked."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SerializationError(f"load_json: not JSON, or cut short ({err})") from None
    if type(document) is not dict or document.get("format") != FORMAT:
        raise SerializationError(
            f"load_json: not mlckit IR: the text must be a JSON object with format {FORMAT!r}"
        )
    version = document.get("version")
    if version != VERSION:
        raise SerializationError(
            f"load_json: format version {version!r} is unknown to this mlckit, which reads "
            f"version {VERSION}"
        )
    if document.keys() != {"format", "version", "root", "nodes"}:
        raise SerializationError(
            "load_json: the document must have the keys format, version, root and nodes, "
            f"got {', '.join(document)}"
        )
    if type(document["nodes"]) is not list:
        raise SerializationError("load_json: 'nodes' must be a JSON array")
    return document


register_serializer(save_json, load_json)

__all__ = ["FORMAT", "VERSION", "load_json", "register_object", "save_json"]
