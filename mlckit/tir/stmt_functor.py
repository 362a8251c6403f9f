"""Generic traversal of TensorIR: visitors, mutators, ``post_order_visit`` and ``substitute``.

:class:`StmtExprVisitor` and :class:`StmtExprMutator` walk every field of every TensorIR node
(expressions, statements, ranges, iter vars, buffer regions, annotations). Each node kind has
a method named after it, ``visit_<snake_case_name>_`` (``visit_buffer_load_``,
``visit_for_``, ``visit_block_realize_``, ...); override the ones you need and call the base
method (or :meth:`generic_visit`) to continue into the children.

Two conventions, as in TVM:

* Variables at their *definition* (``For.loop_var``, ``IterVar.var``, ``LetStmt.var``,
  ``Let.var``, ``Allocate.buffer_var``) are not visited as uses; their uses inside the body
  are.
* A :class:`~mlckit.tir.buffer.Buffer` is a leaf: it reaches :meth:`visit_buffer`, which by
  default does nothing (visitor) or returns the buffer (mutator). Override it to look inside
  buffer shapes, as :func:`substitute` does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mlckit.ir.node import Node

from . import expr as _expr
from . import stmt as _stmt
from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .expr import (
    BinaryOpExpr,
    BufferLoad,
    Call,
    Cast,
    CmpExpr,
    IterVar,
    Let,
    Not,
    PrimExpr,
    Range,
    Select,
    SizeVar,
    Var,
    convert,
)
from .stmt import Allocate, For, LetStmt, Stmt

# Fields that define a variable rather than use it.
_DEFINITIONS: dict[type, tuple[str, ...]] = {
    For: ("loop_var",),
    IterVar: ("var",),
    LetStmt: ("var",),
    Let: ("var",),
    Allocate: ("buffer_var",),
}
# Non-expression, non-statement nodes that hold expressions and are walked like them.
_AUX_NODES = (Range, IterVar, BufferRegion, MatchBufferRegion)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _node_kinds() -> list[type]:
    abstract = (PrimExpr, BinaryOpExpr, CmpExpr, Stmt)
    kinds = []
    for module in (_expr, _stmt):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, (PrimExpr, Stmt))
                and value.__module__ == module.__name__
                and value not in abstract
            ):
                kinds.append(value)
    return kinds + list(_AUX_NODES)


_NODE_KINDS = _node_kinds()


@functools.cache  # asked for each node visited
def method_name(kind: type) -> str:
    """The visitor method for a node kind: ``BufferLoad`` -> ``visit_buffer_load_``."""
    return f"visit_{_snake(kind.__name__)}_"


def _fields(node: Node) -> list[tuple[str, Any]]:
    skip = _DEFINITIONS.get(type(node), ())
    return [(name, value) for name, value in node.structural_fields() if name not in skip]


def _dispatch(obj: Any, node: Node) -> Callable[[Node], Any]:
    # The first class in the node's MRO with a visitor method: subclasses of node kinds
    # (say a user's own Var subclass) reach their base kind's method.
    for kind in type(node).__mro__:
        method = getattr(obj, method_name(kind), None)
        if method is not None:
            return method
    return obj.generic_visit


class StmtExprVisitor:
    """Walks a TensorIR tree; subclasses override ``visit_<kind>_`` methods."""

    def __call__(self, node: Any) -> None:
        self.visit(node)

    def visit(self, value: Any) -> None:
        """Visit any field value: a node, a tuple/list/dict of them, or a plain value."""
        if isinstance(value, Buffer):
            self.visit_buffer(value)
        elif isinstance(value, (PrimExpr, Stmt, *_AUX_NODES)):
            _dispatch(self, value)(value)
        elif isinstance(value, (tuple, list)):
            for item in value:
                self.visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.visit(item)

    def visit_expr(self, expr: PrimExpr) -> None:
        self.visit(expr)

    def visit_stmt(self, stmt: Stmt) -> None:
        self.visit(stmt)

    def visit_buffer(self, buffer: Buffer) -> None:
        """Buffers are leaves by default (see the module docstring)."""

    def generic_visit(self, node: Node) -> None:
        for _, value in _fields(node):
            self.visit(value)

    def visit_size_var_(self, op: SizeVar) -> None:
        self.visit_var_(op)


class StmtExprMutator:
    """Rebuilds a TensorIR tree bottom-up; a node none of whose children changed is kept.

    Expressions are rebuilt through their constructors (so dtypes are recomputed when an
    operand's dtype changes); statements and other nodes through ``with_fields``.
    """

    def __call__(self, node: Any) -> Any:
        return self.visit(node)

    def visit(self, value: Any) -> Any:
        if isinstance(value, Buffer):
            return self.visit_buffer(value)
        if isinstance(value, (PrimExpr, Stmt, *_AUX_NODES)):
            return _dispatch(self, value)(value)
        if isinstance(value, (tuple, list)):
            items = [self.visit(item) for item in value]
            if all(a is b for a, b in zip(items, value)):
                return value
            return type(value)(items)
        if isinstance(value, dict):
            new = {key: self.visit(item) for key, item in value.items()}
            if all(new[key] is value[key] for key in value):
                return value
            return new
        return value

    def visit_expr(self, expr: PrimExpr) -> PrimExpr:
        return self.visit(expr)

    def visit_stmt(self, stmt: Stmt) -> Stmt:
        return self.visit(stmt)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        """Buffers are leaves by default (see the module docstring)."""
        return buffer

    def generic_visit(self, node: Node) -> Node:
        changes = {}
        for name, value in _fields(node):
            new = self.visit(value)
            if new is not value:
                changes[name] = new
        if not changes:
            return node
        if isinstance(node, PrimExpr):
            return _rebuild_expr(node, changes)
        return node.with_fields(**changes)

    def visit_size_var_(self, op: SizeVar) -> PrimExpr:
        return self.visit_var_(op)


def _rebuild_expr(e: PrimExpr, changes: dict[str, Any]) -> PrimExpr:
    def get(name: str) -> Any:
        return changes.get(name, getattr(e, name))

    if isinstance(e, BinaryOpExpr):
        return type(e)(get("a"), get("b"), span=e.span)
    if isinstance(e, Cast):
        return Cast(e.dtype, get("value"), span=e.span)
    if isinstance(e, Not):
        return Not(get("a"), span=e.span)
    if isinstance(e, Select):
        return Select(get("condition"), get("true_value"), get("false_value"), span=e.span)
    if isinstance(e, Let):
        return Let(e.var, get("value"), get("body"), span=e.span)
    if isinstance(e, Call):
        return Call(e.dtype, e.op, get("args"), span=e.span)
    if isinstance(e, BufferLoad):
        return BufferLoad(get("buffer"), get("indices"), span=e.span)
    return e.with_fields(**changes)


def _install_default_methods() -> None:
    # Every node kind gets a visit method that continues into the children, so an override
    # can always call ``super().visit_for_(op)``.
    for cls in (StmtExprVisitor, StmtExprMutator):
        for kind in _NODE_KINDS:
            name = method_name(kind)
            if name not in vars(cls):
                setattr(cls, name, lambda self, op: self.generic_visit(op))


_install_default_methods()


# ---------------------------------------------------------------------------- helpers
class _OrderVisitor(StmtExprVisitor):
    def __init__(self, fvisit: Callable[[Node], Any], pre: bool) -> None:
        self.fvisit = fvisit
        self.pre = pre
        self.seen: set[int] = set()
        self.keep: list[Node] = []

    def visit(self, value: Any) -> None:
        if not isinstance(value, (PrimExpr, Stmt)):
            super().visit(value)
            return
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        self.keep.append(value)
        if self.pre:
            if self.fvisit(value) is not False:
                super().visit(value)
        else:
            super().visit(value)
            self.fvisit(value)


def post_order_visit(node: Any, fvisit: Callable[[Node], Any]) -> None:
    """Call ``fvisit`` on every statement and expression under ``node``, children first.

    Each node object is visited once, even when it is shared.
    """
    _OrderVisitor(fvisit, pre=False).visit(node)


def pre_order_visit(node: Any, fvisit: Callable[[Node], Any]) -> None:
    """Call ``fvisit`` on every statement and expression, parents first; when it returns
    False the node's children are skipped."""
    _OrderVisitor(fvisit, pre=True).visit(node)


class _Substituter(StmtExprMutator):
    def __init__(self, lookup: Callable[[Var], PrimExpr | None]) -> None:
        self.lookup = lookup
        self.buffers: dict[int, tuple[Buffer, Buffer]] = {}

    def visit_var_(self, op: Var) -> PrimExpr:
        new = self.lookup(op)
        return op if new is None else new

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        # A buffer whose shape mentions a substituted variable is replaced by one new buffer,
        # shared by every reference, as TVM's Substitute does.
        hit = self.buffers.get(id(buffer))
        if hit is not None:
            return hit[1]
        changes = {}
        for name in ("data", "shape", "strides", "elem_offset"):
            value = getattr(buffer, name)
            new = self.visit(value)
            if new is not value:
                changes[name] = new
        new_buffer = buffer.with_fields(**changes) if changes else buffer
        self.buffers[id(buffer)] = (buffer, new_buffer)
        return new_buffer


class RenewDefs(StmtExprMutator):
    """A copy in which every variable the code defines (loop variables, block iter vars, let
    variables) is a new Var, and each use follows its definition: two copies of one loop nest
    in a function then share no variable (TVM's ``renew_defs``)."""

    def __init__(self) -> None:
        self.renamed: dict[int, Var] = {}

    def fresh(self, var: Var) -> Var:
        if id(var) not in self.renamed:
            self.renamed[id(var)] = type(var)(var.name_hint, var.dtype)
        return self.renamed[id(var)]

    def visit_var_(self, op: Var) -> PrimExpr:
        return self.renamed.get(id(op), op)

    def visit_for_(self, op: For) -> Stmt:
        loop_var = self.fresh(op.loop_var)
        return self.generic_visit(op).with_fields(loop_var=loop_var)

    def visit_iter_var_(self, op: IterVar) -> IterVar:
        var = self.fresh(op.var)
        return self.generic_visit(op).with_fields(var=var)

    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        var = self.fresh(op.var)
        return self.generic_visit(op).with_fields(var=var)


def renew_defs(stmt: Stmt) -> Stmt:
    """``stmt`` with new variables for everything it defines (see :class:`RenewDefs`)."""
    return RenewDefs().visit(stmt)


def substitute(node: Any, vmap: Mapping[Var, Any] | Callable[[Var], Any]) -> Any:
    """Replace variables in a statement or expression (or a Range, a tuple of them, ...).

    ``vmap`` maps Vars to expressions (Python numbers are converted to the var's dtype), or is
    a function from a Var to its replacement or None.
    """
    if callable(vmap):
        func = vmap

        def lookup(var: Var) -> PrimExpr | None:
            value = func(var)
            return None if value is None else convert(value, var.dtype)
    else:
        table = {id(var): (var, convert(value, var.dtype)) for var, value in vmap.items()}
        if not table:
            return node

        def lookup(var: Var) -> PrimExpr | None:
            hit = table.get(id(var))
            return None if hit is None else hit[1]

    return _Substituter(lookup).visit(node)


class _IRTransformer(StmtExprMutator):
    def __init__(
        self, preorder: Callable | None, postorder: Callable | None, kinds: tuple[type, ...] | None
    ) -> None:
        self.preorder = preorder
        self.postorder = postorder
        self.kinds = kinds

    def visit(self, value: Any) -> Any:
        enabled = isinstance(value, (PrimExpr, Stmt)) and (
            self.kinds is None or isinstance(value, self.kinds)
        )
        if enabled and self.preorder is not None:
            replaced = self.preorder(value)
            if replaced is not None:
                return replaced
        result = super().visit(value)
        if enabled and self.postorder is not None:
            replaced = self.postorder(result)
            if replaced is not None:
                return replaced
        return result


def ir_transform(
    node: Any,
    preorder: Callable[[Node], Any] | None,
    postorder: Callable[[Node], Any] | None,
    only_enable: Sequence[str | type] | None = None,
) -> Any:
    """Rewrite with callbacks, as TVM's ``tir.stmt_functor.ir_transform``.

    ``preorder(node)`` runs before a node's children: a non-None result replaces the node and
    its children are not visited. ``postorder(node)`` runs on the node rebuilt from its
    visited children: a non-None result replaces it. ``only_enable`` restricts the callbacks to
    some node kinds (classes, or names such as ``"tir.For"`` / ``"For"``).
    """
    kinds = None
    if only_enable is not None:
        by_name = {kind.__name__: kind for kind in _node_kinds()}
        kinds = tuple(
            kind if isinstance(kind, type) else by_name[kind.removeprefix("tir.")]
            for kind in only_enable
        )
    return _IRTransformer(preorder, postorder, kinds).visit(node)
