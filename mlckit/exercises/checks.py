"""What checkers are made of: taking an answer apart, running it, comparing it with a reference.

Each helper raises :class:`~mlckit.exercises.core.Mismatch` with a message and a hint a
student can act on ("numerics differ at index (3, 5)", "your j loop is split into (16, 8); the
exercise asks for (32, 4)").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.driver import build
from mlckit.errors import MLCError, StructuralMismatchError
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.runtime import array, cpu, empty
from mlckit.tir import ForKind, PrimFunc, Schedule
from mlckit.tir.analysis import block_nests
from mlckit.tir.transform import OutOfBoundsError

from .core import Mismatch

# How to give a sum its start, for an answer whose output depends on what it held before.
INIT_HINT = (
    "start each sum from 0: in a block, `with T.init(): ...`; in loops, set the accumulator "
    "to 0 on the first iteration of the reduction loop"
)


def random_inputs(
    shapes: Sequence[tuple[int, ...]], dtype: str = "float32", seed: int = 0
) -> list[np.ndarray]:
    """Reproducible random arrays (uniform in [-1, 1) for floats, [-5, 5) for integers)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [rng.uniform(-1, 1, shape).astype(dtype) for shape in shapes]
    return [rng.integers(-5, 5, shape).astype(dtype) for shape in shapes]


def as_prim_func(answer: Any) -> PrimFunc:
    """The PrimFunc an answer stands for: a PrimFunc, a Schedule, or an IRModule holding one."""
    if isinstance(answer, Schedule):
        answer = answer.mod
    if isinstance(answer, IRModule):
        funcs = {gv.name_hint: f for gv, f in answer.functions.items() if isinstance(f, PrimFunc)}
        if len(funcs) == 1:
            return next(iter(funcs.values()))
        if "main" in funcs:
            return funcs["main"]
        raise Mismatch(
            f"your IRModule holds {len(funcs)} PrimFuncs ({', '.join(funcs) or 'none'}); "
            "the exercise expects exactly one",
            "put the function in a module of its own, or name it main",
        )
    if isinstance(answer, PrimFunc):
        return answer
    raise Mismatch(
        f"expected a PrimFunc, an IRModule or a tir.Schedule, got {type(answer).__name__}",
        "decorate your function with @T.prim_func, or pass the module (MyModule)",
    )


def run_prim_func(
    func: PrimFunc,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[Any],
    fill: float | None = None,
) -> list:
    """Build ``func`` and call it on ``inputs`` and freshly allocated outputs.

    ``outputs`` gives each output as ``(shape, dtype)``; returns the outputs as numpy arrays.
    ``fill`` (say ``float("nan")``) sets the outputs' contents before the call, so that an
    element the function reads before writing it (a reduction without an init) shows up.
    """
    return prim_func_runner(func, inputs, outputs)(fill)


def prim_func_runner(
    func: PrimFunc, inputs: Sequence[np.ndarray], outputs: Sequence[Any]
) -> Callable[[float | None], list]:
    """``func`` built once, as a function of the outputs' contents before the call (see
    :func:`run_prim_func`): :func:`assert_close` calls it again to tell an element never
    written from a sum that starts from garbage."""
    arity = len(inputs) + len(outputs)
    if len(func.params) != arity:
        raise Mismatch(
            f"your function takes {len(func.params)} parameters; the exercise passes {arity} "
            f"({len(inputs)} inputs, then {len(outputs)} output{'s' * (len(outputs) != 1)})",
            "in destination-passing style the outputs are parameters too, after the inputs",
        )
    passed = [(a.shape, str(a.dtype)) for a in inputs] + [(tuple(s), str(d)) for s, d in outputs]
    for index, (param, (shape, dtype)) in enumerate(zip(func.params, passed)):
        buffer = func.buffer_map.get(param)
        if buffer is None:
            continue
        if _static_shape(buffer.shape) not in (None, shape):
            raise Mismatch(
                f"parameter {index} ({buffer.name}) has shape {_shape_text(buffer.shape)}; "
                f"the exercise passes an array of shape {shape}",
                "check the shapes in the T.Buffer annotations",
            )
        if buffer.dtype != dtype:
            raise Mismatch(
                f"parameter {index} ({buffer.name}) has dtype {buffer.dtype}; the exercise "
                f"passes {dtype} arrays",
                "check the dtypes in the T.Buffer annotations",
            )
    try:
        lib = build(func, target="llvm")
    except MLCError as err:
        raise build_mismatch(err, "your function does not build") from None
    device = cpu()
    kernel = lib[next(iter(lib.function_names()))]

    def run(fill: float | None = None) -> list:
        args = [array(a, device) for a in inputs]
        if fill is None:
            results = [empty(shape, dtype, device) for shape, dtype in outputs]
        else:
            results = [array(np.full(shape, fill, dtype), device) for shape, dtype in outputs]
        kernel(*args, *results)
        return [r.numpy() for r in results]

    return run


def build_mismatch(
    err: MLCError, failed: str, hint: str = "the message says where; fix that first"
) -> Mismatch:
    """The Mismatch for an answer that does not build (``failed`` says so). An access outside
    a buffer gets the error's own hint: the loop that takes it there, and the buffer's shape."""
    if isinstance(err, OutOfBoundsError):
        return Mismatch(f"{failed}: {err.problem}", err.hint)
    return Mismatch(f"{failed}: {err}", hint)


def _static_shape(shape: Sequence[Any]) -> tuple[int, ...] | None:
    try:
        return tuple(int(dim.value if hasattr(dim, "value") else dim) for dim in shape)
    except (TypeError, ValueError):
        return None  # symbolic: any size goes


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(getattr(d, "value", d)) for d in shape) + ")"


def assert_close(
    got: Any,
    expected: np.ndarray,
    what: str = "the output",
    rtol: float = 1e-4,
    atol: float = 1e-4,
    *,
    rerun: Callable[[float], np.ndarray] | None = None,
    init_hint: str = INIT_HINT,
) -> None:
    """``got`` equals ``expected`` to float tolerance; otherwise say why it likely does not.

    ``rerun(fill)`` runs the answer again on a destination holding ``fill`` before the call.
    Two runs with two fills tell the two classic mistakes apart from the numbers alone: an
    element that comes back holding the fill both times was never written (a loop bound that
    stops short), and an element that changes with the fill was read before it was set (a sum
    without an init; ``init_hint`` says how to add one). Without ``rerun``, or when neither
    shows, the first wrong element is named.
    """
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    if got.shape != expected.shape:
        raise Mismatch(
            f"{what} has shape {got.shape}; expected {expected.shape}",
            "check the output buffer's shape and which axes your loops cover",
        )
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return
    if rerun is not None:
        _diagnose_prefill(rerun, bad, what, init_hint, expected.dtype.kind)
    index = _first(bad)
    count, total = int(bad.sum()), bad.size
    first = (
        f"first at {_element(what, index)}: got {got[index].item()!r}, "
        f"expected {expected[index].item()!r}"
    )
    if count == total:
        raise Mismatch(
            f"every element of {what} is wrong ({first}): the formula differs, not a boundary",
            "check the operands, their indices and where each sum starts",
        )
    raise Mismatch(
        f"{count} of {total} elements of {what} are wrong{_where(bad)} ({first})",
        "check the loop bounds, the boundary (padding, the last tile) and which axes are "
        "reductions",
    )


# Two contents of a destination before the call (per dtype kind), far from any value an
# exercise computes.
GARBAGE_FILLS = {"f": (7777.0, -3333.0), "i": (1_000_003, -999_983), "u": (1_000_003, 999_983)}


def _diagnose_prefill(
    rerun: Callable[[float], np.ndarray], bad: np.ndarray, what: str, init_hint: str, kind: str
) -> None:
    """Raise the Mismatch for wrong elements never written or read before being set."""
    if kind not in GARBAGE_FILLS:
        return
    (fill_a, fill_b) = GARBAGE_FILLS[kind]
    out_a, out_b = (np.asarray(rerun(fill)) for fill in (fill_a, fill_b))
    kept = bad & (out_a == fill_a) & (out_b == fill_b)
    if kept.any():
        raise Mismatch(
            f"{what} is never written at {int(kept.sum())} of {kept.size} elements"
            f"{_where(kept)}: a loop likely stops one short, and those elements keep what "
            f"{what} held before the call (first {_element(what, _first(kept))})",
            "check each loop's bound: range(n) and T.grid(n) run from 0 to n - 1, so the "
            "extent is the size itself",
        )
    stale = bad & ~np.isclose(out_a, out_b, equal_nan=True)
    if stale.any():
        raise Mismatch(
            f"{what} depends on what it held before the call: each sum starts from that "
            f"garbage instead of 0, so its init is missing ({int(stale.sum())} of "
            f"{stale.size} elements, first {_element(what, _first(stale))})",
            init_hint,
        )


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _element(what: str, index: tuple[int, ...]) -> str:
    """``Z[0, 6]`` for a buffer's name, ``index (0, 6)`` for a description."""
    inside = ", ".join(map(str, index))
    return f"{what}[{inside}]" if what.isidentifier() else f"index ({inside})"


def _where(mask: np.ndarray) -> str:
    """Where the marked elements lie, when they share an edge: ``", all in the last index of
    axis 0 (6)"``; otherwise nothing."""
    where = np.argwhere(mask)
    for axis, size in enumerate(mask.shape):
        for edge, name in ((size - 1, "last"), (0, "first")):
            if size > 1 and (where[:, axis] == edge).all():
                return f", all at the {name} index of axis {axis} ({edge})"
    return ""


def assert_same_program(
    answer: PrimFunc,
    target: PrimFunc,
    *,
    spellings: Sequence[PrimFunc] = (),
    verdict: Callable[[PrimFunc], tuple[str, str] | None] | None = None,
) -> None:
    """``answer`` is ``target`` up to renaming (attributes such as the function's name aside).

    On a mismatch the verdict names the first difference in the words of a schedule
    (``verdict(answer)``, an exercise's own reading, else :func:`loop_nest_hint`), and the
    diff shows the answer against whichever spelling of the target is closest to it (the
    first of ``spellings`` on a tie):
    ``spellings`` are the same program with other loop names (a reference schedule's
    ``j_0, j_1`` where the target printed ``i2_0, i2_1``), so that the diff shows what
    differs rather than every renamed line.
    """
    answer, target = _without_attrs(answer), _without_attrs(target)
    try:
        assert_structural_equal(answer, target)
    except StructuralMismatchError as err:
        cause, fix = (verdict(answer) if verdict else None) or loop_nest_hint(answer, target)
        if cause.startswith(_SAME_NESTS):
            cause += f" ({_last_line(str(err))})"
        diffs = [program_diff(answer, _without_attrs(f)) for f in (*spellings, target)]
        raise Mismatch(cause, fix, min(diffs, key=changed_lines)) from None


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def program_diff(yours: Any, expected: Any, **options: Any) -> Any:
    """``mlckit.viz.diff`` of the answer (``---``, "yours") and what was expected (``+++``):
    a ``+`` line is one to write.

    The one import of viz here is inside this function: viz loads graphviz, and importing
    mlckit (which loads the exercises) must not.
    """
    from mlckit.viz import diff

    options.setdefault("names", ("yours", "expected"))
    options.setdefault("context", 2)
    return diff(yours, expected, **options)


def changed_lines(diff: Any) -> int:
    """How many lines a diff marks as removed or added."""
    return sum(
        line[:1] in "+-" and not line.startswith(("---", "+++")) for line in diff.text.splitlines()
    )


def _without_attrs(func: PrimFunc) -> PrimFunc:
    return PrimFunc(func.params, func.body, func.ret_type, func.buffer_map, {})


# ------------------------------------------------------------------------ loop-nest hints
@dataclass(frozen=True)
class Loop:
    name: str
    extent: str
    kind: str

    @property
    def axis(self) -> str:
        """The loop a split or fuse started from: ``j_0`` and ``j_1`` come from ``j``."""
        return re.sub(r"(_\d+)+$", "", self.name)


def loop_nest(func: PrimFunc) -> dict[str, tuple[Loop, ...]]:
    """For each block, the loops around it, outermost first."""
    return {
        nest.realize.block.name_hint: tuple(
            Loop(loop.loop_var.name, _expr_text(loop.extent), ForKind(loop.kind).name.lower())
            for loop in nest.loops
        )
        for nest in block_nests(func)
    }


def _expr_text(expr: Any) -> str:
    return str(expr.value) if hasattr(expr, "value") else expr.script()


_SAME_NESTS = "the loop nests agree; the difference is inside a block"


def loop_nest_hint(answer: PrimFunc, target: PrimFunc) -> tuple[str, str]:
    """The first difference of two loop nests in the words of a schedule: what differs (a
    verdict), and what to look at."""
    mine, theirs = loop_nest(answer), loop_nest(target)
    if set(mine) != set(theirs):
        only_target = sorted(set(theirs) - set(mine))
        only_mine = sorted(set(mine) - set(theirs))
        return (
            f"the target has blocks {only_target or 'none'} that yours lacks, and yours has "
            f"{only_mine or 'none'} that it lacks",
            "check cache_read/cache_write, decompose_reduction and compute_inline",
        )
    for block, target_loops in theirs.items():
        my_loops = mine[block]
        # Axes named alike in both (a student's hand-written loops may use other names).
        shared_axes = {loop.axis for loop in my_loops} & {loop.axis for loop in target_loops}
        for axis in dict.fromkeys(loop.axis for loop in target_loops if loop.axis in shared_axes):
            want = tuple(loop.extent for loop in target_loops if loop.axis == axis)
            have = tuple(loop.extent for loop in my_loops if loop.axis == axis)
            if want != have:
                return (
                    f"block {block!r}: your {axis} loop is split into extents {_tuple(have)}; "
                    f"the exercise asks for {_tuple(want)}",
                    f"split {axis} with factors=[None, {want[-1]}]"
                    if len(want) == 2
                    else f"split {axis} into the extents {_tuple(want)}",
                )
        if [(loop.axis, loop.extent) for loop in my_loops] != [
            (loop.axis, loop.extent) for loop in target_loops
        ]:
            return (
                f"block {block!r}: your loops nest as {_names(my_loops)}; the target's as "
                f"{_names(target_loops)}",
                "check reorder and where compute_at put the block",
            )
        for have, want in zip(my_loops, target_loops):
            if have.kind != want.kind:
                return (
                    f"block {block!r}: your loop {have.name} is {have.kind}; the target's "
                    f"{want.name} is {want.kind}",
                    f"give {have.name} the kind {want.kind} (parallel, vectorize, unroll)"
                    if want.kind != "serial"
                    else f"leave {have.name} serial",
                )
    return (
        _SAME_NESTS,
        "its iterators, an init or the computation: compare the two in the diff",
    )


def _tuple(items: tuple[str, ...]) -> str:
    return "(" + ", ".join(items) + ")" if items else "no loop"


def _names(loops: Sequence[Loop]) -> str:
    return "(" + ", ".join(loop.name for loop in loops) + ")"
