"""Tuning a whole model: every kernel of a (legalized, fused) relax module is a task."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Mapping
from typing import Any

from mlckit.ir import IRModule
from mlckit.relax.transform import BindParams
from mlckit.target import Target
from mlckit.tir import PrimFunc
from mlckit.tir import expr as E

from .database import JSONDatabase
from .measure import Builder, Runner, TuneError
from .tune import open_database, tune_tir


def extract_tasks(mod: IRModule) -> dict[str, PrimFunc]:
    """The kernels to tune: the module's PrimFuncs whose buffers have static shapes (a kernel
    over a symbolic batch ``n`` cannot be timed for every ``n``; it keeps its default schedule)."""
    tasks, dynamic = {}, []
    for gv, func in mod.functions.items():
        if not isinstance(func, PrimFunc) or func.attrs.get("tir.is_scheduled"):
            continue
        shapes = [dim for buffer in func.buffer_map.values() for dim in buffer.shape]
        if all(isinstance(dim, E.IntImm) for dim in shapes):
            tasks[gv.name_hint] = func
        else:
            dynamic.append(gv.name_hint)
    if dynamic:
        warnings.warn(
            f"not tuning {', '.join(dynamic)}: symbolic shapes (fix the batch size to tune them)",
            stacklevel=3,
        )
    return tasks


def tune_relax(
    mod: IRModule,
    params: Mapping[str, Any] | None = None,
    target: str | Target | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    max_trials_global: int | None = None,
    *,
    max_trials_per_task: int | None = None,
    database: JSONDatabase | None = None,
    **options: Any,
) -> JSONDatabase:
    """Tune every kernel of ``mod`` (TVM's signature; ``tune_tir`` options apply to each) and
    return the database; ``relax.transform.MetaScheduleApplyDatabase(database or work_dir,
    target)`` then puts the best schedules into the module before ``relax.build``.

    ``params`` (name -> array) are bound to ``main``'s parameters first, as
    ``relax.transform.BindParams`` does. ``work_dir`` keeps the database (or pass
    ``database``). Each kernel gets ``max_trials_per_task`` trials, and all of them together
    at most ``max_trials_global``, shared evenly; give either or both.

    Trials run in worker processes, but a kernel's speed there can mislead (other threads,
    other caches): the fastest programs of each kernel and its default schedule's program
    (measured first) are measured again in this process, where the model will call them, so
    the database never ranks a program above the untuned one that ran slower here."""
    if isinstance(params, (str, Target)):
        raise TuneError(
            f"tune_relax(mod, params, target, ...): the second argument is the parameters (a "
            f"dict of name -> array, or None), not the target {str(params)!r}; pass "
            "target=... by name"
        )
    if target is None:
        raise TuneError("tune_relax needs a target, such as target='llvm'")
    if max_trials_global is None and max_trials_per_task is None:
        raise TuneError("tune_relax needs max_trials_global or max_trials_per_task")
    database = open_database(work_dir, database)
    if params:
        mod = BindParams("main", dict(params))(mod)
    tasks = extract_tasks(mod)
    per_task = [max_trials_per_task or max_trials_global or 0] * len(tasks)
    if max_trials_global is not None and tasks:
        share, extra = divmod(max_trials_global, len(tasks))
        per_task = [min(p, share + (i < extra)) for i, p in enumerate(per_task)]
    # Kernels run in the model's process: the leaders of each kernel (and its default
    # schedule's program) are measured again here, unless the runner measures on another
    # machine (an executor was given: a cluster's).
    runner = options.get("runner")
    options.setdefault("remeasure_here", runner is None or runner.is_local)
    with contextlib.ExitStack() as cleanup:
        # One builder and one runner for every kernel: worker processes start once.
        if options.get("builder") is None:
            options["builder"] = cleanup.enter_context(Builder())
        if options.get("runner") is None:
            options["runner"] = cleanup.enter_context(Runner())
        for func, trials in zip(tasks.values(), per_task):
            if trials > 0:
                tune_tir(func, target, max_trials_global=trials, database=database, **options)
    return database
