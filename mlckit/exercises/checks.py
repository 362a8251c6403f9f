"""What checkers are made of: taking an answer apart, running it, comparing it with a reference.

Each helper raises :class:`~mlckit.exercises.core.Mismatch` with a message and a hint a
student can act on ("numerics differ at index (3, 5)", "your j loop is split into (16, 8); the
exercise asks for (32, 4)").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
    args = [array(a, device) for a in inputs]
    if fill is None:
        results = [empty(shape, dtype, device) for shape, dtype in outputs]
    else:
        results = [array(np.full(shape, fill, dtype), device) for shape, dtype in outputs]
    lib[next(iter(lib.function_names()))](*args, *results)
    return [r.numpy() for r in results]


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
    got: Any, expected: np.ndarray, what: str = "the output", rtol: float = 1e-4, atol: float = 1e-4
) -> None:
    """``got`` equals ``expected`` to float tolerance; otherwise name the first bad index."""
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    if got.shape != expected.shape:
        raise Mismatch(
            f"{what} has shape {got.shape}; expected {expected.shape}",
            "check the output buffer's shape and which axes your loops cover",
        )
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    count, total = int(bad.sum()), bad.size
    hint = (
        "every element differs: check the formula (operands, indices, the reduction's init)"
        if count == total
        else "only some elements differ: check loop bounds, the boundary (padding, the last "
        "tile) and which axes are reductions"
    )
    raise Mismatch(
        f"numerics differ at index {index}: got {got[index].item()!r}, "
        f"expected {expected[index].item()!r} "
        f"({count} of {total} elements differ)",
        hint,
    )


def assert_same_program(answer: PrimFunc, target: PrimFunc) -> None:
    """``answer`` is ``target`` up to renaming (attributes such as the function's name aside).

    On a mismatch: the first differing node, a hint from comparing the two loop nests, and the
    diff of the two printed programs.
    """
    answer, target = _without_attrs(answer), _without_attrs(target)
    try:
        assert_structural_equal(answer, target)
    except StructuralMismatchError as err:
        raise Mismatch(
            "your program differs from the target program. " + str(err),
            loop_nest_hint(answer, target),
            program_diff(target, answer),
        ) from None


def program_diff(target: Any, answer: Any, **options: Any) -> Any:
    """``mlckit.viz.diff`` of the target program (or text) and the answer, target first.

    The one import of viz here is inside this function: viz loads graphviz, and importing
    mlckit (which loads the exercises) must not.
    """
    from mlckit.viz import diff

    options.setdefault("names", ("target program", "your program"))
    return diff(target, answer, **options)


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


def loop_nest_hint(answer: PrimFunc, target: PrimFunc) -> str:
    """The first difference of two loop nests, in the words of a schedule."""
    mine, theirs = loop_nest(answer), loop_nest(target)
    if set(mine) != set(theirs):
        only_target = sorted(set(theirs) - set(mine))
        only_mine = sorted(set(mine) - set(theirs))
        return (
            f"the target has blocks {only_target or 'none'} that yours lacks, and yours has "
            f"{only_mine or 'none'} that it lacks: check cache_read/cache_write, "
            "decompose_reduction and compute_inline"
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
                    f"the exercise asks for {_tuple(want)}"
                )
        if [(loop.axis, loop.extent) for loop in my_loops] != [
            (loop.axis, loop.extent) for loop in target_loops
        ]:
            return (
                f"block {block!r}: your loops nest as {_names(my_loops)}; the target's as "
                f"{_names(target_loops)}: check reorder and where compute_at put the block"
            )
        for have, want in zip(my_loops, target_loops):
            if have.kind != want.kind:
                return (
                    f"block {block!r}: your loop {have.name} is {have.kind}; the target's "
                    f"{want.name} is {want.kind}"
                )
    return (
        "the loop nests agree; the difference is inside a block (its iterators, an init, or "
        "the computation): compare the two programs line by line below"
    )


def _tuple(items: tuple[str, ...]) -> str:
    return "(" + ", ".join(items) + ")" if items else "no loop"


def _names(loops: Sequence[Loop]) -> str:
    return "(" + ", ".join(loop.name for loop in loops) + ")"
