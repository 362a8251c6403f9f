"""What a schedule works on: a module, the PrimFunc in it being scheduled, and handles into it.

TensorIR nodes are immutable, so every primitive builds a new function and puts it in the
module; the handles a student holds stay meaningful across steps because they name things by
identity:

* a :class:`BlockRV` names a block by its ``name_hint`` (unique within a function);
* a :class:`LoopRV` names a loop by its loop variable (primitives that keep a loop, such as
  ``reorder`` or ``parallel``, keep its variable; ``split``/``fuse`` make new loops and
  return new handles, and a handle to a loop that no longer exists says so).

:class:`ScheduleState` holds the module and turns handles back into statements
(``block_realize``, ``loop``), finds what encloses a statement (``loops_above``,
``parent_of``) and swaps statements in (``replace``, ``set_func``). The implementation of
every primitive (``primitives/``) is a function of a state, as in TVM, where the primitives
work on a ``ScheduleState``; :class:`~mlckit.tir.schedule.Schedule` adds the API on top: a
checked, recorded, atomic method per primitive.
"""

from __future__ import annotations

import difflib
import itertools
import numbers
import random
from collections.abc import Iterator
from typing import Any

from mlckit.errors import ScheduleError
from mlckit.ir.module import IRModule

from .. import stmt as S
from ..expr import Var
from ..function import PrimFunc
from ..stmt_functor import StmtExprMutator


class BlockRV:
    """A handle to a block of the scheduled function (``sch.get_block("Y")``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


class LoopRV:
    """A handle to a loop of the scheduled function, identified by its loop variable."""

    def __init__(self, loop_var: Var):
        self.loop_var = loop_var

    def __repr__(self) -> str:
        return f"LoopRV({self.loop_var.name_hint!r})"


class ExprRV(int):
    """A sampled integer (``sch.sample_perfect_tile``): usable wherever a number is."""


class ScheduleState:
    """The module being scheduled (an IRModule of PrimFuncs, or one PrimFunc named ``main``),
    the function in it that handles refer to, and the random state sampling draws from."""

    def __init__(self, mod: IRModule | PrimFunc, seed: int | None = None):
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise ScheduleError(
                f"tir.Schedule takes a PrimFunc or an IRModule, not {type(mod).__name__}"
            )
        self._mod = mod.copy()
        prim_funcs = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, PrimFunc)]
        self._func_name: str | None = prim_funcs[0] if len(prim_funcs) == 1 else None
        if "main" in prim_funcs:
            self._func_name = "main"
        self._rng = random.Random(seed)
        self.seed_value = seed

    def copy(self) -> ScheduleState:
        """An independent copy: its own module, the same function worked on and a random
        state that draws what this one would."""
        other = type(self).__new__(type(self))
        other._mod = self._mod.copy()
        other._func_name = self._func_name
        other._rng = random.Random()
        other._rng.setstate(self._rng.getstate())
        other.seed_value = self.seed_value
        return other

    # ------------------------------------------------------------------ the module
    @property
    def mod(self) -> IRModule:
        return self._mod

    @property
    def func_name(self) -> str:
        if self._func_name is None:
            names = [
                gv.name_hint for gv, f in self._mod.functions.items() if isinstance(f, PrimFunc)
            ]
            raise ScheduleError(
                f"the module has several PrimFuncs ({', '.join(names)}); choose one with "
                "sch.work_on(name) or get_block(name, func_name=...)"
            )
        return self._func_name

    @property
    def func(self) -> PrimFunc:
        return self._mod[self.func_name]  # type: ignore[return-value]

    def work_on(self, func_name: str) -> None:
        if func_name not in self._mod or not isinstance(self._mod[func_name], PrimFunc):
            raise ScheduleError(f"work_on: the module has no PrimFunc named {func_name!r}")
        self._func_name = func_name

    # ------------------------------------------------------------------ handles
    def get(self, rv: BlockRV | LoopRV | int) -> Any:
        """The current Block or For a handle names (a sampled value for an ExprRV)."""
        if isinstance(rv, BlockRV):
            return self.block_realize(rv).block
        if isinstance(rv, LoopRV):
            return self.loop(rv)
        if isinstance(rv, numbers.Integral):
            return int(rv)
        raise ScheduleError(
            f"get: expected a block or loop handle or a sampled value, not {_short(rv)}"
        )

    def block_realize(self, rv: BlockRV) -> S.BlockRealize:
        for realize in self.walk_blocks(self.func.body):
            if realize.block.name_hint == rv.name:
                _check_not_in_init(self.func.body, realize)
                return realize
        raise ScheduleError(
            f"no block named {rv.name!r} in function {self.func_name!r}"
            + _did_you_mean(rv.name, [r.block.name_hint for r in self.walk_blocks(self.func.body)])
        )

    def loop(self, rv: LoopRV) -> S.For:
        for node in _walk(self.func.body):
            if isinstance(node, S.For) and node.loop_var is rv.loop_var:
                return node
        raise ScheduleError(
            f"the loop {rv.loop_var.name_hint!r} no longer exists in "
            f"{self.func_name!r} (a split, fuse or inline replaced it)"
        )

    @staticmethod
    def walk_blocks(stmt: S.Stmt) -> Iterator[S.BlockRealize]:
        """Every BlockRealize under ``stmt`` except the root, in program order."""
        for node in _walk(stmt):
            if isinstance(node, S.BlockRealize) and node.block.name_hint != "root":
                yield node

    def loops_above(self, target: S.Stmt) -> list[S.For]:
        """The loops enclosing ``target`` (outermost first), up to the nearest block."""
        path = _path_to(self.func.body, target)
        if path is None:
            raise ScheduleError(
                f"the statement is not in function {self.func_name!r} any more (it was "
                "taken from another schedule or from before an earlier step)"
            )
        loops: list[S.For] = []
        for node in path[:-1]:
            if isinstance(node, S.For):
                loops.append(node)
            elif isinstance(node, S.Block) and node.name_hint != "root":
                loops = []
        return loops

    def parent_of(self, target: S.Stmt) -> S.Stmt | None:
        path = _path_to(self.func.body, target)
        return path[-2] if path and len(path) > 1 else None

    # ------------------------------------------------------------------ rewriting
    def replace(self, old: S.Stmt, new: S.Stmt) -> None:
        """Replace the statement ``old`` (by identity) with ``new`` in the current function."""
        replacer = _Replace(old, new)
        body = replacer.visit(self.func.body)
        if not replacer.done:
            raise ScheduleError(
                f"the statement to replace is not in function {self.func_name!r} any more"
            )
        self._mod[self.func_name] = self.func.with_body(body)

    def set_func(self, func: PrimFunc) -> None:
        self._mod[self.func_name] = func


# ---------------------------------------------------------------------- tree helpers
def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, S.SeqStmt):
        yield from node.seq
    elif isinstance(node, S.For | S.LetStmt | S.Allocate):
        yield node.body
    elif isinstance(node, S.IfThenElse):
        yield node.then_case
        if node.else_case is not None:
            yield node.else_case
    elif isinstance(node, S.BlockRealize):
        yield node.block
    elif isinstance(node, S.Block):
        if node.init is not None:
            yield node.init
        yield node.body


def _walk(stmt: Any) -> Iterator[Any]:
    """Every statement under ``stmt`` (itself included), parents before children."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(_children(node))))


def _walk_until_block(stmt: Any) -> Iterator[S.BlockRealize]:
    """The BlockRealizes directly under ``stmt`` (not inside another block)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, S.BlockRealize):
            yield node
            continue
        stack.extend(reversed(list(_children(node))))


def _path_to(root: Any, target: Any) -> list[Any] | None:
    if root is target:
        return [root]
    for child in _children(root):
        path = _path_to(child, target)
        if path is not None:
            return [root, *path]
    return None


class _Replace(StmtExprMutator):
    def __init__(self, old: S.Stmt, new: S.Stmt):
        self.old, self.new, self.done = old, new, False

    def visit(self, value: Any) -> Any:
        if value is self.old:
            self.done = True
            return self.new
        if isinstance(value, (S.Stmt, tuple, list)):
            return super().visit(value)
        return value  # expressions never contain statements


def _check_not_in_init(body: S.Stmt, realize: S.BlockRealize) -> None:
    """Refuse a block inside another block's ``T.init()`` (blockize puts one there): it runs
    only on the first iteration of the outer reduction, which no primitive accounts for (TVM
    does not even list such blocks)."""
    path = _path_to(body, realize) or []
    for parent, child in itertools.pairwise(path):
        if isinstance(parent, S.Block) and child is parent.init:
            raise ScheduleError(
                f"block {realize.block.name_hint!r} is inside the T.init() of block "
                f"{parent.name_hint!r}, where no primitive can work on it; "
                f"decompose_reduction of block {parent.name_hint!r} first makes its init a "
                "block of its own"
            )


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=2)
    if close:
        return f"; did you mean {' or '.join(map(repr, close))}?"
    return f"; blocks: {', '.join(candidates) or 'none'}"


def _short(value: Any) -> str:
    """A value as an error message quotes it: its repr (cut at 60 characters) and its type."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} (of type {type(value).__name__})"
