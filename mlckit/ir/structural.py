"""Structural equality and hashing of IR, modulo variable renaming.

Two nodes are structurally equal when they have the same type and equal structural fields.
Variable-like nodes (``_binds_like_var``: tir.Var, relax.Var, tir.Buffer) are compared by
their role, not their identity: the first time a pair of them is met their definitions are
compared and the pair is recorded; afterwards they are equal only to their recorded partner.
Because traversal follows field order, alpha-equivalent programs meet their variables in the
same order, so renaming a variable never breaks equality while swapping two uses does.
GlobalVars compare by name (a module's functions are keyed by name).
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

import numpy as np

from mlckit.errors import StructuralMismatchError
from mlckit.runtime.ndarray import NDArray

from .module import GlobalVar
from .node import Node


class _Mismatch(Exception):
    def __init__(
        self, path: str, lhs: Any, rhs: Any, reason: str, ancestors: list[tuple[Any, Any]]
    ):
        super().__init__(reason)
        self.path, self.lhs, self.rhs, self.reason = path, lhs, rhs, reason
        # The enclosing (lhs, rhs) node pairs, outermost first.
        self.ancestors = ancestors


class _EqualChecker:
    def __init__(self) -> None:
        self.lhs_to_rhs: dict[int, Any] = {}
        self.rhs_to_lhs: dict[int, Any] = {}
        self.keepalive: list[Any] = []
        self.stack: list[tuple[Any, Any]] = []

    def _fail(self, path: str, lhs: Any, rhs: Any, reason: str) -> _Mismatch:
        return _Mismatch(path, lhs, rhs, reason, list(self.stack))

    def check(self, lhs: Any, rhs: Any, path: str, lhs_node: Any, rhs_node: Any) -> None:
        if lhs is rhs and not isinstance(lhs, Node):
            return
        lhs, rhs = _host(lhs), _host(rhs)
        if isinstance(lhs, Node) or isinstance(rhs, Node):
            self._check_node(lhs, rhs, path, lhs_node, rhs_node)
            return
        if type(lhs) is not type(rhs) and not (_is_number(lhs) and _is_number(rhs)):
            raise self._fail(path, lhs, rhs, f"{type(lhs).__name__} vs {type(rhs).__name__}")
        if isinstance(lhs, (list, tuple)):
            if len(lhs) != len(rhs):
                raise self._fail(path, lhs, rhs, f"{len(lhs)} elements vs {len(rhs)} elements")
            for i, (a, b) in enumerate(zip(lhs, rhs)):
                self.check(a, b, f"{path}[{i}]", lhs_node, rhs_node)
        elif isinstance(lhs, dict):
            if set(lhs) != set(rhs):
                only_l = sorted(map(str, set(lhs) - set(rhs)))
                only_r = sorted(map(str, set(rhs) - set(lhs)))
                raise self._fail(
                    path, lhs, rhs, f"keys differ: only left {only_l}, only right {only_r}"
                )
            for key in sorted(lhs, key=str):
                self.check(lhs[key], rhs[key], f"{path}[{key!r}]", lhs_node, rhs_node)
        elif isinstance(lhs, np.ndarray):
            if (
                lhs.shape != rhs.shape
                or lhs.dtype != rhs.dtype
                or not np.array_equal(lhs, rhs, equal_nan=lhs.dtype.kind == "f")
            ):
                raise self._fail(path, lhs, rhs, "array contents differ")
        elif isinstance(lhs, float) or isinstance(rhs, float):
            if not (lhs == rhs or (math.isnan(lhs) and math.isnan(rhs))):
                raise self._fail(path, lhs, rhs, f"{lhs!r} vs {rhs!r}")
        elif lhs != rhs:
            raise self._fail(path, lhs, rhs, f"{lhs!r} vs {rhs!r}")

    def _check_node(self, lhs: Any, rhs: Any, path: str, lhs_node: Any, rhs_node: Any) -> None:
        if type(lhs) is not type(rhs):
            raise self._fail(path, lhs, rhs, f"{type(lhs).__name__} vs {type(rhs).__name__}")
        if isinstance(lhs, GlobalVar):
            if lhs.name_hint != rhs.name_hint:
                raise self._fail(path, lhs, rhs, f"global {lhs.name_hint!r} vs {rhs.name_hint!r}")
            return
        if lhs._binds_like_var:
            mapped = self.lhs_to_rhs.get(id(lhs))
            if mapped is not None:
                if mapped is not rhs:
                    raise self._fail(path, lhs, rhs, "the two sides use different variables here")
                return
            if id(rhs) in self.rhs_to_lhs:
                raise self._fail(
                    path, lhs, rhs, "the right side reuses a variable the left side does not"
                )
            self.lhs_to_rhs[id(lhs)] = rhs
            self.rhs_to_lhs[id(rhs)] = lhs
            self.keepalive.append((lhs, rhs))
        rhs_fields = dict(rhs.structural_fields())
        self.stack.append((lhs, rhs))
        for name, value in lhs.structural_fields():
            self.check(value, rhs_fields[name], f"{path}.{name}", lhs, rhs)
        self.stack.pop()


def _host(value: Any) -> Any:
    """A tensor held as a value (a module attribute) compares and hashes by its contents."""
    return value.numpy() if isinstance(value, NDArray) else value


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = True) -> bool:
    """Whether ``lhs`` and ``rhs`` are the same program up to variable renaming."""
    try:
        _EqualChecker().check(lhs, rhs, "root", None, None)
    except _Mismatch:
        return False
    return True


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = True) -> None:
    """Raise StructuralMismatchError pointing at the first differing sub-node."""
    try:
        _EqualChecker().check(lhs, rhs, "root", None, None)
    except _Mismatch as err:
        raise StructuralMismatchError(_describe(err)) from None


def _show(value: Any) -> str:
    if isinstance(value, Node):
        try:
            return value.script()
        except Exception:
            return object.__repr__(value)
    return repr(value)


def _describe(err: _Mismatch) -> str:
    lines = [f"structural mismatch at {err.path}: {err.reason}"]
    # Show the innermost differing node and the node around it, as TVMScript.
    nodes = [pair for pair in err.ancestors if pair[0] is not err.lhs]
    if isinstance(err.lhs, Node):
        nodes.append((err.lhs, err.rhs))
    for lhs, rhs in nodes[-2:]:
        lines.append(f"{type(lhs).__name__} on the left:")
        lines.append(_indent(_show(lhs)))
        lines.append("on the right:")
        lines.append(_indent(_show(rhs)))
    if not isinstance(err.lhs, Node):
        lines.append(f"differing value: {err.lhs!r} vs {err.rhs!r}")
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    <empty>"


# ---------------------------------------------------------------------------------- hashing
class _Hasher:
    def __init__(self) -> None:
        self.var_index: dict[int, int] = {}
        self.keepalive: list[Any] = []

    def feed(self, h: "hashlib._Hash", value: Any) -> None:
        value = _host(value)
        if isinstance(value, Node):
            h.update(type(value).__qualname__.encode())
            if isinstance(value, GlobalVar):
                h.update(b"gv:" + value.name_hint.encode())
                return
            if value._binds_like_var:
                index = self.var_index.get(id(value))
                if index is not None:
                    h.update(b"ref" + struct.pack("<q", index))
                    return
                self.var_index[id(value)] = len(self.var_index)
                self.keepalive.append(value)
                h.update(b"def")
            for name, field_value in value.structural_fields():
                h.update(name.encode())
                self.feed(h, field_value)
        elif isinstance(value, (list, tuple)):
            h.update(b"[%d" % len(value))
            for item in value:
                self.feed(h, item)
        elif isinstance(value, dict):
            h.update(b"{%d" % len(value))
            for key in sorted(value, key=str):
                h.update(str(key).encode())
                self.feed(h, value[key])
        elif isinstance(value, np.ndarray):
            h.update(str(value.dtype).encode() + str(value.shape).encode())
            h.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, bool) or value is None:
            h.update(repr(value).encode())
        elif _is_number(value):
            h.update(
                repr(
                    float(value) if isinstance(value, (float, np.floating)) else int(value)
                ).encode()
            )
        else:
            h.update(type(value).__name__.encode() + repr(value).encode())


def structural_hash(node: Any, map_free_vars: bool = True) -> int:
    """A hash consistent with structural_equal: equal programs hash the same."""
    h = hashlib.blake2b(digest_size=8)
    _Hasher().feed(h, node)
    return int.from_bytes(h.digest(), "little", signed=True)
