"""Chapter 4's exercise: a stochastic schedule function, the search space of a tuner.

The answer is a function of a ``tir.Schedule``. The checker runs it on fresh schedules of
``TileMatmul`` with several seeds, as a tuner does, and reads what came out: the trace must
draw the tilings of the loops the task names with ``sample_perfect_tile`` (each sampling step
names its loop), different seeds must give different programs, each program must compute
``A @ B``, and the loops must end in the order the task asks for.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlckit.errors import ScheduleError
from mlckit.ir import IRModule, structural_hash
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir import PrimFunc, Schedule

from .checks import assert_close, loop_nest, random_inputs, run_prim_func
from .core import Mismatch, exercise
from .solutions import ch4 as solutions


@I.ir_module
class TileMatmul:
    @T.prim_func
    def main(
        A: T.Buffer((64, 32), "float32"),
        B: T.Buffer((32, 96), "float32"),
        C: T.Buffer((64, 96), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(64, 96, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


# Seeds the checker samples with; the programs of the first few are built and run.
SEEDS = tuple(range(8))
RUN_SEEDS = 3
SAMPLED_LOOPS = ("i", "j")
ORDER = ("i", "j", "k", "i", "j")
ORDER_TEXT = "(i_0, j_0, k, i_1, j_1)"


def _sample(answer: Any, seed: int) -> Schedule:
    """What a tuner does with a schedule function: run it on a fresh seeded schedule."""
    sch = Schedule(TileMatmul, seed=seed)
    try:
        result = answer(sch)
    except ScheduleError as err:
        raise Mismatch(
            f"with seed {seed}, your function stopped with a schedule error: {err}",
            "a function of the space must work for every draw: split with the sampled factors "
            "themselves, and get the loops from the block after each split",
        ) from None
    if result is not None and not isinstance(result, Schedule):
        raise Mismatch(
            f"your function returned a value of type {type(result).__name__}; a schedule "
            "function changes the schedule it is given and returns it (or nothing)",
            "end it with `return sch`",
        )
    return sch


def _sampled_loops(sch: Schedule) -> list[tuple[str, int]]:
    """(loop name, n) of each sample_perfect_tile step of the trace, in order."""
    return [
        (inst.args[0].loop_var.name_hint, int(inst.args[1]))
        for inst in sch.trace.instructions
        if inst.kind == "sample_perfect_tile"
    ]


def _check_sampling(sch: Schedule) -> None:
    sampled = _sampled_loops(sch)
    if not sampled:
        raise Mismatch(
            "the trace of your schedule has no sample_perfect_tile step: it splits with fixed "
            "factors, so every seed gives the same program and the space has only one",
            "draw the factors: `i_factors = sch.sample_perfect_tile(loop=i, n=2)`, then "
            "`sch.split(loop=i, factors=i_factors)`",
        )
    names = [name for name, _ in sampled]
    for name, n in sampled:
        if name in SAMPLED_LOOPS and n != 2:
            raise Mismatch(
                f"your trace samples a tiling of {name} into {n} loops (n={n}); the exercise "
                "asks for 2",
                f"sch.sample_perfect_tile(loop={name}, n=2)",
            )
    missing = [loop for loop in SAMPLED_LOOPS if loop not in names]
    if missing:
        others = sorted(set(names) - set(SAMPLED_LOOPS))
        extra = f" (it samples {', '.join(others)} instead)" if others else ""
        raise Mismatch(
            f"your trace samples the tiling of {', '.join(sorted(set(names)))} but not of "
            f"{' and '.join(missing)}{extra}; the exercise asks for a sampled tiling of both i "
            "and j",
            f"add `sch.sample_perfect_tile(loop={missing[0]}, n=2)` on the loop "
            f"{missing[0]} of block C, before splitting it",
        )


def _program(sch: Schedule) -> PrimFunc:
    return sch.mod["main"]


def _check_order(func: PrimFunc) -> None:
    nest = loop_nest(func)
    loops = nest.get("C", nest.get("C_update"))
    if loops is None:
        raise Mismatch(
            "your program has no block named 'C' (or 'C_update')",
            "schedule TileMatmul; do not rename its block",
        )
    if tuple(loop.axis for loop in loops) != ORDER:
        names = "(" + ", ".join(loop.name for loop in loops) + ")"
        raise Mismatch(
            f"the programs compute the right numbers, but block C's loops nest as {names}; "
            f"the exercise asks for {ORDER_TEXT}: the inner i_1 x j_1 tile of C is computed "
            "while k runs, so it stays in cache",
            "split both loops, then `sch.reorder(i_0, j_0, k, i_1, j_1)`",
        )


@exercise(
    "ch4.stochastic_tile_ij",
    title="A search space that tiles i and j",
    task="""
    `TileMatmul` computes `C = A @ B` for `A` of shape (64, 32) and `B` of shape (32, 96),
    with loops `i`, `j`, `k` around block `"C"`. Write a *stochastic schedule function*
    `stochastic_tile_ij(sch)`, the search space of a tuner, that

    * draws a tiling of `i` into 2 loops and a tiling of `j` into 2 loops with
      `sch.sample_perfect_tile` (each seed draws other tile sizes),
    * splits `i` and `j` with the drawn factors, and
    * orders the loops `(i_0, j_0, k, i_1, j_1)`, so that one `i_1 x j_1` tile of `C` is
      computed while `k` runs over the whole reduction,

    and returns the schedule. The answer is the function itself:
    `check("ch4.stochastic_tile_ij", stochastic_tile_ij)`. The checker samples it with
    several seeds, as `tune_tir` would, and runs the programs against numpy.
    """,
    hints=(
        "Start from the chapter's `stochastic_schedule_mm`: it samples only j. Here i gets "
        "the same treatment, and the reorder changes.",
        "`sch.sample_perfect_tile(loop=i, n=2)` returns two numbers whose product is 64; "
        "pass them to `sch.split(loop=i, factors=...)`, and the same for j (96).",
        "i_factors = sch.sample_perfect_tile(loop=i, n=2); j_factors = "
        "sch.sample_perfect_tile(loop=j, n=2); i_0, i_1 = sch.split(loop=i, factors=i_factors); "
        "j_0, j_1 = sch.split(loop=j, factors=j_factors); sch.reorder(i_0, j_0, k, i_1, j_1).",
    ),
    solution=solutions.stochastic_tile_ij,
)
def check_stochastic_tile_ij(answer: Any) -> None:
    if isinstance(answer, (Schedule, IRModule, PrimFunc)) or not callable(answer):
        raise Mismatch(
            f"expected a schedule function (a function of a tir.Schedule), got "
            f"{type(answer).__name__}",
            "pass the function itself, `stochastic_tile_ij`, without calling it",
        )
    samples = [_sample(answer, seed) for seed in SEEDS]
    _check_sampling(samples[0])
    programs: dict[int, PrimFunc] = {}
    for sch in samples:
        programs.setdefault(structural_hash(IRModule({"main": _program(sch)})), _program(sch))
    if len(programs) == 1:
        raise Mismatch(
            f"your trace samples tilings, but all {len(SEEDS)} seeds give the same program: "
            "the drawn factors are not what the loops are split by",
            "split with the sampled factors: `sch.split(loop=i, factors=i_factors)`",
        )
    a, b = random_inputs([(64, 32), (32, 96)])
    for seed, sch in zip(SEEDS[:RUN_SEEDS], samples):
        decisions = [inst.decision for inst in sch.trace.instructions if inst.decision is not None]
        (c,) = run_prim_func(_program(sch), [a, b], [((64, 96), "float32")], fill=np.nan)
        try:
            assert_close(c, a @ b, "C")
        except Mismatch as wrong:
            raise Mismatch(
                f"the program of seed {seed} (tilings {decisions}) is wrong: {wrong.message}",
                wrong.hint,
            ) from None
    for func in programs.values():
        _check_order(func)
