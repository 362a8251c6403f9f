"""``tir.Schedule``: transform a PrimFunc's loop nests step by step, recording every step.

A schedule holds an IRModule and the name of the function it works on (its
:class:`~mlckit.tir.schedule.state.ScheduleState`); handles (:class:`BlockRV`,
:class:`LoopRV`) name blocks and loops of that function across steps.

The class body of :class:`Schedule` is the table of contents of the schedule API: one method per
primitive, grouped by what it does (queries, loop transformations, compute location, caching,
reduction, blockize, layout, annotation, sampling). Each method says what the primitive does and
hands the work to its implementation, a function of the state in ``primitives/``. The
:func:`primitive` decorator makes each one a step of the schedule: the arguments are checked
against the method's annotations (a BlockRV where a block is expected, an integer where an
``int`` is, a list of them where a ``Sequence`` is: :func:`check_arguments`), the call is
recorded in ``sch.trace`` and, if it raises, the schedule is left exactly as it was and the
error is a :class:`ScheduleError` naming the primitive.

Wherever a block is expected its name does too (``sch.get_loops("matmul")``): the check turns
the name into the handle of ``sch.get_block(name)``, a step of its own, so the trace reads and
replays as TVM's does (``b0 = sch.get_block(name="matmul")``, then ``sch.get_loops(block=b0)``).
"""

from __future__ import annotations

import functools
import inspect
import numbers
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from mlckit.errors import MLCError, ScheduleError
from mlckit.ir.instrument import build_step
from mlckit.ir.module import IRModule

from ..expr import PrimExpr
from ..function import PrimFunc
from . import primitives
from .state import BlockRV, ExprRV, LoopRV, ScheduleState, _short
from .trace import PRIMITIVE_SIGNATURES, SAMPLING_KINDS, Instruction, Trace

Method = TypeVar("Method", bound=Callable[..., Any])


def primitive(method: Method) -> Method:
    """Make the schedule method ``method`` a recorded primitive named after it.

    A call checks its arguments against the method's annotations, runs atomically (on an error
    the schedule is restored and the error names the primitive) and is appended to the trace.
    A sampling primitive (one of ``SAMPLING_KINDS``; each takes ``decision=``) records its other
    arguments with their defaults filled in, and keeps what it drew as the step's decision,
    which a replay passes back as ``decision=``.
    """
    kind = method.__name__
    PRIMITIVE_SIGNATURES[kind] = inspect.signature(method)

    @functools.wraps(method)
    def recorded(self: Schedule, *args: Any, **kwargs: Any) -> Any:
        bound = check_arguments(kind, method, args, kwargs, self.get_block)
        if kind not in SAMPLING_KINDS:
            # Positional arguments fill the first parameters, so they lead bound.args.
            args = tuple(bound.args[1 : len(args) + 1])
            kwargs = {name: bound.arguments[name] for name in kwargs}
            return self._record(kind, method, args, kwargs)
        bound.apply_defaults()
        given = bound.arguments.pop("decision")
        inputs = tuple(bound.arguments.values())[1:]
        return self._record(kind, functools.partial(method, decision=given), inputs, {})

    return cast(Method, recorded)


class Schedule(ScheduleState):
    """A schedule of ``mod`` (an IRModule of PrimFuncs, or one PrimFunc named ``main``)."""

    def __init__(
        self,
        mod: IRModule | PrimFunc,
        *,
        seed: int | None = None,
        debug_mask: str | int = "all",
        error_render_level: str = "detail",
    ):
        super().__init__(mod, seed)
        self.trace = Trace()

    def copy(self) -> Schedule:
        """An independent copy with the same module, trace so far and random state."""
        other = cast(Schedule, super().copy())
        other.trace = self.trace.copy()
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

    # ================================================================== queries
    @primitive
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block named ``name`` (in the PrimFunc ``func_name``, which the schedule then
        works on, when the module has several)."""
        return primitives.queries.get_block(self, name, func_name)

    # Newer TVM spelling (tvm.s_tir.Schedule); recorded as get_block.
    def get_sblock(self, name: str, func_name: str | None = None) -> BlockRV:
        return self.get_block(name, func_name)

    @primitive
    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops enclosing ``block`` up to the block above it, outermost first."""
        return primitives.queries.get_loops(self, block)

    @primitive
    def get_child_blocks(self, parent: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly under a block or a loop (not those inside another block)."""
        return primitives.queries.get_child_blocks(self, parent)

    @primitive
    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """The blocks that write a buffer ``block`` reads."""
        return primitives.queries.get_producers(self, block)

    @primitive
    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """The blocks that read a buffer ``block`` writes."""
        return primitives.queries.get_consumers(self, block)

    # ================================================================== loop transformations
    @primitive
    def split(
        self,
        loop: LoopRV,
        factors: Sequence[int | PrimExpr | None],
        preserve_unit_iters: bool = True,
        disable_predication: bool = False,
    ) -> list[LoopRV]:
        """Split ``loop`` into nested loops of extents ``factors`` (one may be None: inferred).

        ``for i in range(n)`` with factors ``[None, 4]`` becomes ``for i_0 in range(ceil(n/4))``,
        ``for i_1 in range(4)`` with ``i = i_0 * 4 + i_1``; when 4 does not divide ``n`` the
        blocks inside get the predicate ``i_0 * 4 + i_1 < n`` so no iteration runs past the end.
        Each factor is a positive integer or an integer expression (a symbolic extent).
        """
        return primitives.loop_transformation.split(
            self, loop, factors, preserve_unit_iters, disable_predication
        )

    @primitive
    def fuse(self, *loops: LoopRV | Sequence[LoopRV], preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse perfectly nested loops (outermost first) into one loop over their product.

        ``for i in range(4): for j in range(8):`` becomes ``for i_j_fused in range(32):`` with
        ``i = i_j_fused // 8`` and ``j = i_j_fused % 8`` substituted into the body. Block
        bindings are simplified afterwards, which folds a unit-extent loop's iterator to 0
        whatever ``preserve_unit_iters`` says; the flag is accepted so TVM schedules run
        unchanged.
        """
        return primitives.loop_transformation.fuse(
            self, *loops, preserve_unit_iters=preserve_unit_iters
        )

    @primitive
    def reorder(self, *ordered_loops: LoopRV | Sequence[LoopRV]) -> None:
        """Put the given loops in the given order (outermost first) among themselves.

        The loops must lie on one chain of perfectly nested loops under one block scope; loops
        of the chain that are not named stay where they are. Every loop keeps its variable, so
        the handles stay valid.
        """
        return primitives.loop_transformation.reorder(self, *ordered_loops)

    @primitive
    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:
        """Wrap a block (or a loop) in a new loop ``for u in range(1)`` and return it.

        Nothing reads the new loop's variable, so the computation is unchanged; the loop gives
        a block without loops (a 0-d result) or with reduction loops only something to
        ``bind``.
        """
        return primitives.loop_transformation.add_unit_loop(self, block_or_loop)

    @primitive
    def parallel(self, loop: LoopRV) -> None:
        """Run ``loop``'s iterations in parallel threads (``T.parallel``; numba's ``prange``)."""
        return primitives.loop_transformation.parallel(self, loop)

    @primitive
    def vectorize(self, loop: LoopRV) -> None:
        """Mark ``loop`` for SIMD execution (``T.vectorized``)."""
        return primitives.loop_transformation.vectorize(self, loop)

    @primitive
    def unroll(self, loop: LoopRV) -> None:
        """Mark ``loop`` to be unrolled (``T.unroll``); any loop can be, its order is kept."""
        return primitives.loop_transformation.unroll(self, loop)

    @primitive
    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind ``loop`` to a GPU thread axis (``T.thread_binding(n, thread="threadIdx.x")``)."""
        return primitives.loop_transformation.bind(self, loop, thread_axis)

    # ================================================================== compute location
    @primitive
    def compute_at(
        self,
        block: BlockRV,
        loop: LoopRV | str,
        preserve_unit_loops: bool = False,
        index: int = -1,
    ) -> None:
        """Move the producer ``block`` under ``loop`` of its consumers.

        Per iteration of ``loop`` the block computes just the region its consumers under
        ``loop`` read: its new loops (``ax0``, ``ax1``, ...) run over that region, and its iter
        vars are bound to ``region min + loop var``. Loops of extent 1 are left out unless
        ``preserve_unit_loops``. ``index`` picks the position among the statements of
        ``loop``'s body: -1 (default) the last legal one (just before the first consumer), -2
        the first.

        ``loop`` may also be what ``sample_compute_location`` drew: ``"root"`` leaves the block
        where it is and ``"inline"`` inlines it (as TVM's ``compute_at`` does), so a trace
        replays whichever location a changed decision picks.
        """
        return primitives.compute_location.compute_at(self, block, loop, preserve_unit_loops, index)

    @primitive
    def reverse_compute_at(
        self,
        block: BlockRV,
        loop: LoopRV,
        preserve_unit_loops: bool = False,
        index: int = -1,
    ) -> None:
        """Move the consumer ``block`` under ``loop`` of its producers.

        Per iteration of ``loop`` the block computes just the region its producers under
        ``loop`` have written (its iter vars bound to ``region min + loop var`` as in
        ``compute_at``); ``index`` -1 (default) puts it at the last legal position (after the
        producers, at the end of the loop body unless a consumer of its own follows).
        """
        return primitives.compute_location.reverse_compute_at(
            self, block, loop, preserve_unit_loops, index
        )

    @primitive
    def compute_inline(self, block: BlockRV) -> None:
        """Inline the producer ``block`` into every block that reads its output.

        The block must compute each element once, as ``B[v0, v1, ...] = f(...)`` with the store
        indices exactly its iter vars; each load ``B[i, j]`` becomes ``f`` with ``v0, v1``
        replaced by ``i, j``. The block, its loops and the buffer ``B`` disappear.
        """
        return primitives.compute_inline.compute_inline(self, block)

    @primitive
    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline the consumer ``block`` into its only producer.

        The consumer must read the producer's buffer ``B`` at one point ``B[v0, v1, ...]`` made
        of all its iter vars; the producer's store ``B[p] = g`` becomes the consumer's store
        with ``v0, v1, ...`` replaced by ``p`` and the load of ``B`` replaced by ``g``. The
        consumer, its loops and ``B`` disappear; the producer keeps its name and loops.
        """
        return primitives.compute_inline.reverse_compute_inline(self, block)

    # ================================================================== caching
    @primitive
    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str) -> BlockRV:
        """Read the ``read_buffer_index``-th buffer of ``block`` through a copy in
        ``storage_scope``; returns the copy block (``A_shared``).

        The copy block (``A_shared[v0, v1] = A[v0, v1]``) runs over the region the readers
        read, placed after the buffer's producer and before its first reader; every reader of
        ``A`` reads ``A_shared`` instead.
        """
        return primitives.cache.cache_read(self, block, read_buffer_index, storage_scope)

    @primitive
    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:
        """Make ``block`` write its ``write_buffer_index``-th buffer into a new buffer of
        ``storage_scope`` and copy that back; returns the copy block (``Y_local``).

        ``block`` writes ``Y_local`` instead of ``Y``, and the copy block
        (``Y[v0, v1] = Y_local[v0, v1]``) follows it over the region it wrote.
        """
        return primitives.cache.cache_write(self, block, write_buffer_index, storage_scope)

    @primitive
    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Move the ``buffer_index``-th buffer ``block`` writes to ``storage_scope`` (the buffer
        must be allocated in the function, not be one of its parameters)."""
        return primitives.cache.set_scope(self, block, buffer_index, storage_scope)

    # ================================================================== reduction
    @primitive
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split ``block`` into ``<name>_init`` (its init) before ``loop`` and ``<name>_update``.

        The init block gets copies of the loops from ``loop`` down to the block whose variables
        its spatial iter vars are bound to (named ``<loop>_init``); the update block is the
        original without its init, and ``block`` names it from now on. ``loop`` must enclose
        the block and every loop a reduction iter var is bound to. Returns the init block.
        """
        return primitives.reduction.decompose_reduction(self, block, loop)

    @primitive
    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction over ``loop`` into a new buffer ``<name>_rf`` whose extra
        dimension (at ``factor_axis``) is indexed by ``loop``; returns the new ``<block>_rf``
        block.

        For ``B[vi] += A[vi, vk]`` with ``k = k_0 * 4 + k_1``, ``rfactor(k_1, 0)`` computes the
        partial sums ``B_rf[vk_1, vi] += A[vi, vk_0 * 4 + vk_1]`` (a loop ``k_1`` that carries
        no dependence any more) and then ``B[vi] += B_rf[vk_1, vi]``.
        """
        return primitives.rfactor.rfactor(self, loop, factor_axis)

    # ================================================================== blockize and tensorize
    @primitive
    def blockize(self, target_loop: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
        """Make the subtree of ``target_loop`` a new block ``<block>_o``; returns it.

        Each binding splits into a part over the loops above ``target_loop`` and a part over
        it and the loops under it: after ``split(j, [None, 4])``, blockize at ``j_1`` makes the
        outer block iterate over tiles (``vj_o = j_0``) around the original block, now bound to
        ``vj_i = j_1`` and indexing with ``vj = vj_o * 4 + vj_i``. Bindings are simplified
        whatever ``preserve_unit_iters`` says (as in ``fuse``); it is accepted so that TVM
        schedules run unchanged.
        """
        return primitives.blockize.blockize(self, target_loop)

    @primitive
    def tensorize(
        self,
        block_or_loop: BlockRV | LoopRV,
        tensor_intrin: str,
        preserve_unit_iters: bool = True,
    ) -> None:
        """Replace what the block computes with the intrinsic registered as ``tensor_intrin``
        (``tir.TensorIntrin.register``); a loop is blockized first.

        The block's body must be the intrinsic's description up to renaming: its loops and iter
        vars stand for the description's, each description buffer for a region of one of the
        block's buffers (of that shape and storage scope). The body becomes the intrinsic's
        implementation, whose buffers view those regions (``T.match_buffer`` in the block).
        A difference is an error showing the first differing node of both sides.
        ``preserve_unit_iters`` is accepted so that TVM schedules run unchanged.
        """
        primitives.tensorize.tensorize(self, block_or_loop, tensor_intrin)

    # ================================================================== layout
    @primitive
    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int] | str,
        index_map: Callable[..., Any],
        pad_value: Any = None,
    ) -> None:
        """Re-lay out ``buffer`` (``("read" | "write", index)`` of ``block``, or a buffer name)
        by ``index_map``, a function from old indices to the list of new ones.

        With ``lambda i, j: [i // 4, j, i % 4]`` a ``(128, 128)`` buffer gets the shape
        ``(32, 128, 4)`` and every access ``Y[a, b]`` becomes ``Y[a // 4, b, a % 4]``; the map
        must be a bijection (no padding: ``pad_value`` is not supported).
        """
        return primitives.layout.transform_layout(self, block, buffer, index_map, pad_value)

    # ================================================================== annotation
    @primitive
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Attach ``ann_key: ann_val`` to a loop or a block (``annotations={...}`` on the loop,
        ``T.block_attr({...})`` in the block); later passes and the code generator read them."""
        return primitives.loop_transformation.annotate(self, block_or_loop, ann_key, ann_val)

    @primitive
    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove the annotation ``ann_key`` from a loop or a block."""
        return primitives.loop_transformation.unannotate(self, block_or_loop, ann_key)

    # ================================================================== sampling
    # A sampling primitive returns what it drew; its decision goes to the trace (_decided).
    @primitive
    def sample_perfect_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int = 16,
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        """``n`` tile sizes whose product is exactly the extent of ``loop`` (a "perfect"
        tiling: no partial tile, so ``split`` adds no predicate), the innermost at most
        ``max_innermost_factor`` (-1: no limit).

        Every such tiling is equally likely. A ``decision`` (a list of ``n`` sizes) is used as
        it is when it still tiles the loop perfectly; otherwise it is repaired as TVM does: from
        the innermost size outwards, a size that does not divide what is left becomes all of it.
        """
        return self._decided(
            primitives.sampling.sample_perfect_tile(self, loop, n, max_innermost_factor, decision)
        )

    @primitive
    def sample_categorical(
        self, candidates: Sequence[int], probs: Sequence[float], decision: int | None = None
    ) -> ExprRV:
        """One of the integer ``candidates``, drawn with the probabilities ``probs`` (weights:
        they need not sum to 1). The decision is the index of the chosen candidate."""
        return self._decided(
            primitives.sampling.sample_categorical(self, candidates, probs, decision)
        )

    @primitive
    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV | str:
        """Where to compute ``block``: a loop of its consumers' nest where ``compute_at`` is
        legal, ``"root"`` (leave the block where it is) or ``"inline"`` (where
        ``compute_inline`` is legal). Apply the choice with ``compute_at``, which also takes
        ``"root"`` (nothing to do) and ``"inline"`` (it inlines), so that a trace replays
        whatever a changed decision picks::

            sch.compute_at(block, sch.sample_compute_location(block))

        Each candidate is drawn with equal probability. The decision is, as in TVM, the loop's
        position among the loops above the (first) consumer, -1 for root and -2 for inline; a
        decision that is no longer a candidate falls back to the nearest candidate outside it.
        """
        return self._decided(primitives.sampling.sample_compute_location(self, block, decision))

    # ================================================================== recording
    def _record(self, kind: str, body: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Run the primitive ``body``; on failure restore the schedule; on success log it."""
        saved_mod, saved_func = self._mod.copy(), self._func_name
        saved_rng = self._rng.getstate()
        self._decision: Any = None  # what a sampling step drew (set by _decided)
        try:
            with build_step(f"schedule.{kind}"):
                result = body(self, *args, **kwargs)
        except ScheduleError as err:
            self._restore(saved_mod, saved_func, saved_rng)
            if not str(err).startswith(f"{kind}:"):
                raise ScheduleError(f"{kind}: {err}") from None
            raise
        except MLCError as err:
            self._restore(saved_mod, saved_func, saved_rng)
            raise ScheduleError(f"{kind}: {err}") from None
        self.trace.append(Instruction(kind, args, kwargs, result, self._decision))
        return result

    def _decided(self, drawn: tuple[Any, Any]) -> Any:
        """Keep the decision of a sampling step's ``(output, decision)`` for its trace
        instruction; return the output."""
        output, self._decision = drawn
        return output

    def _restore(self, mod: IRModule, func_name: str | None, rng_state: Any) -> None:
        self._mod, self._func_name = mod, func_name
        self._rng.setstate(rng_state)


# ---------------------------------------------------------------------- argument kinds
# A primitive's arguments are checked before it touches the function, so that a block handle
# given for a loop, a float tile size or a string for a list is refused by name instead of
# surfacing later as an AttributeError deep inside. Each primitive's annotations say what it
# takes; these are the kinds they use (anything else is matched with isinstance).
_KIND_NAMES: dict[Any, str] = {
    BlockRV: "a block handle (BlockRV, from sch.get_block) or a block's name",
    LoopRV: "a loop handle (LoopRV, from sch.get_loops or sch.split)",
    int: "an integer",
    float: "a number",
    bool: "True or False",
    str: "a string",
    PrimExpr: "an integer expression (PrimExpr)",
    type(None): "None",
}


def check_arguments(
    kind: str,
    method: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    get_block: Callable[[str], BlockRV] | None = None,
) -> inspect.BoundArguments:
    """Bind ``args``/``kwargs`` to the schedule method ``method(self, ...)`` and check each
    against its annotation; raise ScheduleError naming the primitive, the argument and what it
    expected. A name given where a block is expected becomes ``get_block(name)``."""
    signature, hints = _annotations(method)
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as err:
        params = ", ".join(list(signature.parameters)[1:])
        raise ScheduleError(f"{kind}: {err} (it takes: {params})") from None
    for name, value in list(bound.arguments.items())[1:]:
        hint = hints.get(name, Any)
        if get_block is not None and isinstance(value, str) and _names_a_block(hint):
            value = bound.arguments[name] = get_block(value)
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
def _annotations(method: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    return inspect.signature(method), typing.get_type_hints(method)


def _names_a_block(hint: Any) -> bool:
    """Whether a string given for ``hint`` is a block's name (the hint takes a block, and no
    string of its own, as ``compute_at``'s loop takes ``"root"``)."""
    alternatives = _alternatives(hint)
    return BlockRV in alternatives and str not in alternatives


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
