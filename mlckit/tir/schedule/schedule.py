"""``tir.Schedule``: transform a PrimFunc's loop nests step by step, recording every step.

A schedule holds an IRModule and the name of the function it works on. TensorIR nodes are
immutable, so every primitive builds a new function and puts it in the module; the handles a
student holds stay meaningful across steps because they name things by identity:

* a :class:`BlockRV` names a block by its ``name_hint`` (unique within a function);
* a :class:`LoopRV` names a loop by its loop variable (primitives that keep a loop, such as
  ``reorder`` or ``parallel``, keep its variable; ``split``/``fuse`` make new loops and
  return new handles, and a handle to a loop that no longer exists says so).

Every primitive is a function registered with :func:`primitive` (in ``primitives/``); the
registration wraps it so that its arguments are checked against the function's annotations
(a BlockRV where a block is expected, an integer where an ``int`` is, a list of them where a
``Sequence`` is: :func:`check_arguments`), a call is recorded in ``sch.trace`` and, if it
raises, the schedule is left exactly as it was and the error is a :class:`ScheduleError`
naming the primitive.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import numbers
import random
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mlckit.errors import MLCError, ScheduleError
from mlckit.ir.module import IRModule

from .. import stmt as S
from ..expr import PrimExpr, Var
from ..function import PrimFunc
from ..stmt_functor import StmtExprMutator
from .trace import Instruction, Trace


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


class Schedule:
    """A schedule of ``mod`` (an IRModule of PrimFuncs, or one PrimFunc named ``main``)."""

    def __init__(
        self,
        mod: IRModule | PrimFunc,
        *,
        seed: int | None = None,
        debug_mask: str | int = "all",
        error_render_level: str = "detail",
    ):
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
        self.trace = Trace()
        self._rng = random.Random(seed)
        self.seed_value = seed

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

    def copy(self) -> Schedule:
        other = Schedule.__new__(Schedule)
        other._mod = self._mod.copy()
        other._func_name = self._func_name
        other.trace = self.trace.copy()
        other._rng = random.Random()
        other._rng.setstate(self._rng.getstate())
        other.seed_value = self.seed_value
        return other

    def seed(self, seed: int) -> None:
        self._rng.seed(seed)
        self.seed_value = seed

    def fork_seed(self) -> int:
        return self._rng.randrange(1 << 31)

    def show(self, **options: Any) -> None:
        self._mod.show(**options)

    def __repr__(self) -> str:
        return f"<tir.Schedule of {self._func_name or 'a module'}: {len(self.trace)} steps>"

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

    # ------------------------------------------------------------------ basic queries
    # (get_block, get_loops, ... are registered below like every other primitive)

    # Newer TVM spelling (tvm.s_tir.Schedule).
    def get_sblock(self, name: str, func_name: str | None = None) -> BlockRV:
        return self.get_block(name, func_name)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ recording
    def _record(self, kind: str, impl: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Run primitive ``impl``; on failure restore the schedule; on success log it."""
        saved_mod, saved_func = self._mod.copy(), self._func_name
        saved_rng = self._rng.getstate()
        try:
            result = impl(self, *args, **kwargs)
        except ScheduleError as err:
            self._restore(saved_mod, saved_func, saved_rng)
            if not str(err).startswith(f"{kind}:"):
                raise ScheduleError(f"{kind}: {err}") from None
            raise
        except MLCError as err:
            self._restore(saved_mod, saved_func, saved_rng)
            raise ScheduleError(f"{kind}: {err}") from None
        self.trace.append(Instruction(kind, args, kwargs, result))
        return result

    def _restore(self, mod: IRModule, func_name: str | None, rng_state: Any) -> None:
        self._mod, self._func_name = mod, func_name
        self._rng.setstate(rng_state)


def primitive(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(sch, ...)`` as the schedule method ``kind`` (recorded, atomic)."""

    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(impl)
        def method(self: Schedule, *args: Any, **kwargs: Any) -> Any:
            check_arguments(kind, impl, args, kwargs)
            return self._record(kind, impl, args, kwargs)

        setattr(Schedule, kind, method)
        return impl

    return register


# ---------------------------------------------------------------------- argument kinds
# A primitive's arguments are checked before it touches the function, so that a block handle
# given for a loop, a float tile size or a string for a list is refused by name instead of
# surfacing later as an AttributeError deep inside. Each primitive's annotations say what it
# takes; these are the kinds they use (anything else is matched with isinstance).
_KIND_NAMES: dict[Any, str] = {
    BlockRV: "a block handle (BlockRV, from sch.get_block)",
    LoopRV: "a loop handle (LoopRV, from sch.get_loops or sch.split)",
    int: "an integer",
    float: "a number",
    bool: "True or False",
    str: "a string",
    PrimExpr: "an integer expression (PrimExpr)",
    type(None): "None",
}


def check_arguments(
    kind: str, impl: Callable[..., Any], args: tuple, kwargs: dict
) -> inspect.BoundArguments:
    """Bind ``args``/``kwargs`` to ``impl(sch, ...)`` and check each against its annotation;
    raise ScheduleError naming the primitive, the argument and what it expected."""
    signature, hints = _annotations(impl)
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as err:
        params = ", ".join(list(signature.parameters)[1:])
        raise ScheduleError(f"{kind}: {err} (it takes: {params})") from None
    for name, value in list(bound.arguments.items())[1:]:
        hint = hints.get(name, Any)
        variadic = signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL
        for i, item in enumerate(value if variadic else (value,)):
            if not _matches(item, hint):
                which = f"argument {i + 1} ({name})" if variadic else f"argument {name!r}"
                raise ScheduleError(
                    f"{kind}: {which} must be {_kind_name(hint)}, not {_short(item)}"
                    + _wrong_element(item, hint)
                )
    return bound


@functools.cache
def _annotations(impl: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    return inspect.signature(impl), typing.get_type_hints(impl)


def _alternatives(hint: Any) -> tuple[Any, ...]:
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return typing.get_args(hint) if union else (hint,)


def _matches(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    alternatives = _alternatives(hint)
    if len(alternatives) > 1:
        return any(_matches(value, h) for h in alternatives)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return (
            isinstance(value, (tuple, list))
            and len(value) == len(args)
            and all(map(_matches, value, args))
        )
    if origin in (Sequence, list):  # a str is a Sequence too, but never a list of anything
        return isinstance(value, (tuple, list)) and all(_matches(v, args[0]) for v in value)
    if hint is Callable or origin is Callable:
        return callable(value)
    if hint is int:  # numpy integers and sampled values (ExprRV) count; True does not
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is bool:
        return isinstance(value, numbers.Integral)
    return isinstance(value, hint)


def _kind_name(hint: Any) -> str:
    alternatives = _alternatives(hint)
    if len(alternatives) > 1:
        return " or ".join(_kind_name(h) for h in alternatives)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return f"a pair ({', '.join(_kind_name(h) for h in args)})"
    if origin in (Sequence, list):
        return f"a list (each element {_kind_name(args[0])})"
    if hint is Callable or origin is Callable:
        return "a function"
    return _KIND_NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def _wrong_element(value: Any, hint: Any) -> str:
    """Which element of a list is wrong, when a list parameter refuses a list."""
    if not isinstance(value, (tuple, list)):
        return ""
    for option in _alternatives(hint):
        if typing.get_origin(option) in (Sequence, list):
            element = typing.get_args(option)[0]
            wrong = [i for i, item in enumerate(value) if not _matches(item, element)]
            if wrong:
                return f"; element {wrong[0]} is {_short(value[wrong[0]])}"
    return ""


def _short(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} (of type {type(value).__name__})"


# ---------------------------------------------------------------------- the queries
@primitive("get_block")
def _get_block(sch: Schedule, name: str, func_name: str | None = None) -> BlockRV:
    if func_name is not None:
        sch.work_on(func_name)
    rv = BlockRV(name)
    sch.block_realize(rv)  # raises when there is no such block
    return rv


@primitive("get_loops")
def _get_loops(sch: Schedule, block: BlockRV) -> list[LoopRV]:
    realize = sch.block_realize(block)
    return [LoopRV(loop.loop_var) for loop in sch.loops_above(realize)]


@primitive("get_child_blocks")
def _get_child_blocks(sch: Schedule, parent: BlockRV | LoopRV) -> list[BlockRV]:
    if isinstance(parent, BlockRV):
        body = sch.block_realize(parent).block.body
    else:
        body = sch.loop(parent).body
    children = []
    for node in _walk_until_block(body):
        children.append(BlockRV(node.block.name_hint))
    return children


@primitive("get_producers")
def _get_producers(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    return _get_neighbours(sch, block, "producers")


@primitive("get_consumers")
def _get_consumers(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    return _get_neighbours(sch, block, "consumers")


def _get_neighbours(sch: Schedule, block: BlockRV, direction: str) -> list[BlockRV]:
    """Blocks writing what ``block`` reads (producers) or reading what it writes (consumers)."""
    realize = sch.block_realize(block)
    mine = realize.block.reads if direction == "producers" else realize.block.writes
    buffers = {id(region.buffer) for region in mine}
    result = []
    for other in sch.walk_blocks(sch.func.body):
        if other is realize:
            continue
        theirs = other.block.writes if direction == "producers" else other.block.reads
        if any(id(region.buffer) in buffers for region in theirs):
            result.append(BlockRV(other.block.name_hint))
    return result


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
    import difflib

    close = difflib.get_close_matches(name, candidates, n=2)
    if close:
        return f"; did you mean {' or '.join(map(repr, close))}?"
    return f"; blocks: {', '.join(candidates) or 'none'}"
