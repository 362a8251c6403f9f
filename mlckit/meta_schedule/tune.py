"""``tune_tir``: search a PrimFunc's schedules, measuring candidates; ``compile_tir``: apply the
best one found.

    database = ms.tune_tir(mod, "llvm", work_dir="./tune_tmp", max_trials_global=64)
    sch = ms.compile_tir(database, mod, "llvm")    # the fastest program
    lib = mlckit.build(sch.mod, "llvm")

As in TVM, ``tune_tir`` returns the tuning database: the one kept in ``work_dir`` (made if
missing), the ``database`` given, or a new one in memory. Each iteration asks the strategy for
``num_trials_per_iter`` new programs, builds them in parallel, times them one at a time,
stores every result in the database (failures too, so a broken candidate is skipped, never
retried), and tells the strategy, whose cost model learns from it. Records already in the
database for this function and target are loaded first: a second run on the same work_dir
resumes where the first stopped instead of measuring the same programs again. At the end, the
few fastest programs are measured again, side by side, before one is called the best. A tqdm
bar shows the progress.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mlckit.ir import IRModule
from mlckit.target import Target
from mlckit.tir import PrimFunc, Schedule
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.schedule import Trace

from .database import JSONDatabase, TuningRecord, merge_measurements
from .features import float_ops
from .measure import (
    Builder,
    BuildResult,
    InProcessExecutor,
    Runner,
    TuneError,
    args_info_of,
    measure,
    the_prim_func,
    timed_in_simulator,
)
from .search import EvolutionarySearch, RandomSearch
from .space import ScheduleFnSpace, SearchSpace, default_space

# How many more times ``tune_tir`` measures its fastest programs before the database picks one.
REMEASURE_ROUNDS = 3


def estimate_flops(func: PrimFunc) -> float:
    """Floating-point operations of one call: each block's float arithmetic times the number
    of times the block runs (the product of its loops' extents)."""
    total = 0.0
    stack: list[int] = [1]

    def walk(stmt: S.Stmt) -> None:
        nonlocal total
        if isinstance(stmt, S.For):
            extent = stmt.extent.value if isinstance(stmt.extent, E.IntImm) else 1
            stack.append(stack[-1] * extent)
            walk(stmt.body)
            stack.pop()
        elif isinstance(stmt, S.SeqStmt):
            for s in stmt.seq:
                walk(s)
        elif isinstance(stmt, S.BlockRealize):
            block = stmt.block
            if block.iter_vars:
                total += stack[-1] * float_ops(block)
            walk(block.body)
        elif isinstance(stmt, (S.LetStmt, S.Allocate)):
            walk(stmt.body)
        elif isinstance(stmt, S.IfThenElse):
            walk(stmt.then_case)

    walk(func.body)
    return total


def _space(space: Any, target: Target) -> SearchSpace:
    if space is None:
        return default_space(target)
    if hasattr(space, "sample"):
        return space
    if callable(space):
        return ScheduleFnSpace(space)
    raise TuneError(
        f"space must be a SearchSpace or a schedule function, not {type(space).__name__}"
    )


def open_database(
    work_dir: str | os.PathLike[str] | None, database: JSONDatabase | None
) -> JSONDatabase:
    """The database a tuning run keeps its records in: the one in ``work_dir`` (TVM's form),
    the ``database`` given, or a new one in memory."""
    if database is None:
        return JSONDatabase(None) if work_dir is None else JSONDatabase(work_dir=work_dir)
    if work_dir is not None:
        raise TuneError(
            f"give work_dir={str(work_dir)!r} (tuning keeps its database there) or "
            "database=..., not both"
        )
    if not isinstance(database, JSONDatabase):
        raise TuneError(
            f"database must be an ms.JSONDatabase, not {database!r}; to keep the records in a "
            "folder, pass work_dir=..."
        )
    return database


def tune_tir(
    mod: IRModule | PrimFunc,
    target: str | Target,
    work_dir: str | os.PathLike[str] | None = None,
    max_trials_global: int | None = None,
    *,
    max_trials: int | None = None,
    num_trials_per_iter: int = 16,
    strategy: str = "evolutionary",
    space: SearchSpace | Callable[[Schedule], Any] | None = None,
    database: JSONDatabase | None = None,
    seed: int = 0,
    builder: Builder | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    remeasure_top_k: int = 4,
    remeasure_here: bool = False,
    task_name: str | None = None,
) -> JSONDatabase:
    """Tune one PrimFunc for ``target`` with at most ``max_trials_global`` measurements (or
    ``max_trials``, its short form), and return the database that holds them.

    ``work_dir``: the folder that keeps the database (see :func:`open_database`); or pass
    ``database``. ``strategy``: ``"evolutionary"`` (a cost model guides mutations of trace
    decisions) or ``"random"``. ``space``: a schedule function that samples
    (``sch.sample_perfect_tile`` ...), a :class:`SearchSpace` (``ms.space_generator.ScheduleFn
    (fn)``), or None for the default space of the target. ``task_name`` names the function in
    the progress bar. The trials of this run are the database's newest programs
    (``ms.merge_measurements(database.get_all_tuning_records())`` lists every program once, in
    the order they were first measured).

    When the trials are done, the ``remeasure_top_k`` fastest programs of the database are
    measured ``REMEASURE_ROUNDS`` more times, in turn, and the database ranks each with all
    its repeats (again, until the ``remeasure_top_k`` fastest are all programs measured
    again). A trial is one short measurement on a shared machine, and the fastest of many
    noisy measurements is often one that was lucky; measured again, beside its rivals, it
    shows what it is worth. The program the space hints at (the default schedule's, what an
    untuned build runs) is always among them, so tuning never picks a program that measured
    slower than it. With ``remeasure_here`` they are measured in this process (an
    :class:`InProcessExecutor`), where the program will run, instead of on ``runner``'s
    workers. These measurements are not trials.
    """
    func = the_prim_func(mod)
    target = Target(target)
    if max_trials is not None and max_trials_global not in (None, max_trials):
        raise TuneError(
            f"max_trials is the short form of max_trials_global: give one of them, not "
            f"max_trials_global={max_trials_global} and max_trials={max_trials}"
        )
    trials = max_trials_global if max_trials is None else max_trials
    if trials is None:
        raise TuneError("tune_tir needs max_trials_global (or max_trials): how many to measure")
    if trials < 1 or num_trials_per_iter < 1:
        raise TuneError("max_trials_global and num_trials_per_iter must be at least 1")
    database = open_database(work_dir, database)
    chosen_space = _space(space, target)
    if strategy == "evolutionary":
        search: RandomSearch = EvolutionarySearch(chosen_space, func, seed)
    elif strategy == "random":
        search = RandomSearch(chosen_space, func, seed)
    else:
        raise TuneError(f"unknown strategy {strategy!r}: choose 'evolutionary' or 'random'")
    whash = database.commit_workload(func)
    earlier = [
        r
        for r in merge_measurements(database.get_all_tuning_records())
        if r.workload_hash == whash and r.target == str(target)
    ]
    search.resume(earlier, [_replay(r, func) for r in earlier])

    flops = estimate_flops(func)
    best = min((r.median_secs() for r in earlier), default=math.inf)
    measured = 0
    name = task_name or func.attrs.get("global_symbol", "main")
    with contextlib.ExitStack() as cleanup:
        # Worker pools made here stop here; a builder or runner given is the caller's.
        if builder is None:
            builder = cleanup.enter_context(Builder())
        if runner is None:
            runner = cleanup.enter_context(Runner())
        bar = _progress_bar(trials, name, progress)
        if bar is not None:
            cleanup.callback(bar.close)
        while measured < trials:
            batch = search.next_batch(min(num_trials_per_iter, trials - measured))
            if not batch:
                break  # the space has no program left that was not measured
            # Every candidate's output is checked against the unscheduled function's.
            results = measure(
                [sch.mod["main"] for sch in batch], target, builder, runner, reference=func
            )
            for sch, result in zip(batch, results):
                record = TuningRecord(sch.trace.as_json(), result.run_secs, whash, str(target))
                database.commit_tuning_record(record)
                best = min(best, record.median_secs())
            measured += len(batch)
            search.notify(batch, results)
            if bar is not None:
                bar.update(len(batch))
                if math.isfinite(best):
                    bar.set_postfix_str(f"best {flops / best / 1e9:.1f} GFLOP/s")
        if remeasure_here:
            runner = Runner(
                InProcessExecutor(),
                number=runner.number,
                repeat=runner.repeat,
                min_repeat_ms=runner.min_repeat_ms,
            )
        hinted = [sch.trace.as_json() for sch in search.hinted]
        _remeasure(database, func, target, whash, remeasure_top_k, runner, hinted)
    return database


def _remeasure(
    database: JSONDatabase,
    func: PrimFunc,
    target: Target,
    whash: str,
    top_k: int,
    runner: Runner,
    hinted: Sequence[Any] = (),
) -> None:
    """Measure the ``top_k`` fastest programs of ``func`` again, ``REMEASURE_ROUNDS`` times in
    turn (so that a slow spell of the machine falls on all of them), into ``database``, with
    the ``hinted`` programs (traces as JSON) beside them. A program measured again may turn
    out slower than one measured once that it beat; then the new leaders are measured again,
    until every one of the ``top_k`` has been: the best is never a single lucky measurement
    ranked above the medians of its rivals."""
    if timed_in_simulator(target):
        return
    measured_again: set[str] = set()
    args_info = args_info_of(func)
    while top_k > 0:
        leaders = database.get_top_k(func, target, top_k)
        keys = [record.program_key() for record in leaders]
        leaders += [
            record
            for record in database.get_top_k(func, target, len(database))
            if record.trace in hinted and record.program_key() not in keys
        ]
        keys = [record.program_key() for record in leaders]
        if len(leaders) < 2 or measured_again.issuperset(keys):
            return  # nothing to choose between, or nothing left to check
        measured_again.update(keys)
        programs = [_replay(record, func).mod["main"] for record in leaders]
        # They built before: the runner loads them from the kernel cache.
        builds = [BuildResult(program.script()) for program in programs]
        for _ in range(REMEASURE_ROUNDS):
            for record, result in zip(leaders, runner.run(builds, target, args_info)):
                if result.run_secs:
                    again = TuningRecord(record.trace, result.run_secs, whash, str(target))
                    database.commit_tuning_record(again)


def _progress_bar(total: int, name: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"tuning {name}", unit="trial")


def _replay(record: TuningRecord, func: PrimFunc) -> Schedule:
    sch = Schedule(func)
    Trace.from_json(record.trace).apply_to_schedule(sch)
    return sch


def compile_tir(database: JSONDatabase, mod: IRModule | PrimFunc, target: str | Target) -> Schedule:
    """The fastest schedule the database holds for ``mod``'s PrimFunc on ``target``."""
    func = the_prim_func(mod)
    sch = database.query_schedule(func, Target(target))
    if sch is None:
        raise TuneError(
            f"the database has no successful record of this function for {Target(target)}; "
            "tune it first with tune_tir(mod, target, work_dir=..., max_trials_global=...)"
        )
    return sch


def best_so_far(records: Sequence[TuningRecord], flops: float) -> list[float]:
    """The best GFLOP/s after each trial (0 until a trial succeeds): each program once, in the
    order it was first measured, at the median of all its measurements (a program measured
    again counts as what it is worth, not as its luckiest trial)."""
    curve, best = [], math.inf
    for record in merge_measurements(records):
        best = min(best, record.median_secs())
        curve.append(flops / best / 1e9 if math.isfinite(best) else 0.0)
    return curve


def plot_tuning_curves(runs: Mapping[str, Sequence[TuningRecord]], flops: float, ax: Any = None):
    """Best GFLOP/s so far against trials, one line per run (``{"random": records, ...}``, a
    run's records as ``database.get_all_tuning_records()`` gives them)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, records in runs.items():
        curve = best_so_far(records, flops)
        ax.plot(range(1, len(curve) + 1), curve, label=label)
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax
