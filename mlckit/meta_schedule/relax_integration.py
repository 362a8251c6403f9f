"""Tuning a whole model: every kernel of a (legalized, fused) relax module is a task."""

from __future__ import annotations

import warnings
from typing import Any

from mlckit.ir import IRModule
from mlckit.target import Target
from mlckit.tir import PrimFunc
from mlckit.tir import expr as E

from .database import JSONDatabase
from .tune import tune_tir


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
    target: str | Target,
    *,
    max_trials_per_task: int,
    database: JSONDatabase | None = None,
    **options: Any,
) -> JSONDatabase:
    """Tune every kernel of ``mod`` (``tune_tir`` options apply to each) and return the
    database; ``relax.transform.MetaScheduleApplyDatabase(database, target)`` then puts the
    best schedules into the module before ``relax.build``."""
    database = database if database is not None else JSONDatabase(None)
    for func in extract_tasks(mod).values():
        tune_tir(func, target, max_trials=max_trials_per_task, database=database, **options)
    return database
