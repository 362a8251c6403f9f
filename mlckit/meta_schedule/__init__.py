"""Automatic program optimization (TVM's MetaSchedule): search a kernel's schedules, measure
candidates, learn which are fast, and keep the best.

* a **search space**: a schedule function that samples (``sch.sample_perfect_tile``), or the
  target's default space (:mod:`.space`);
* **measuring**: candidates built in parallel worker processes and timed one at a time
  (:mod:`.measure`), or on any ``concurrent.futures.Executor``, or on a Dask cluster
  (``ms.Builder(executor=distributed.Client("tcp://scheduler:8786"))``, with the extra
  ``mlckit[distributed]``; "Tuning on a cluster" in :mod:`.measure` says what the workers
  need and where the timings are taken);
* a **search strategy**: random, or evolutionary with a learned cost model (:mod:`.search`,
  :mod:`.cost_model`, :mod:`.features`);
* a **database** of tuning records in a JSON file (:mod:`.database`);
* ``tune_tir`` / ``compile_tir`` for one kernel, ``tune_relax`` +
  ``relax.transform.MetaScheduleApplyDatabase`` for a whole model; ``tune_tir`` and
  ``tune_relax`` return the database, kept in their ``work_dir`` when given one.

TVM's module names work too, as the MLC course uses them: ``ms.tir_integration.compile_tir``,
``ms.relax_integration.tune_relax``, ``ms.space_generator.ScheduleFn``,
``ms.database.JSONDatabase``.
"""

from . import database, relax_integration, space_generator, tir_integration
from .cost_model import CostModel
from .database import JSONDatabase, TuningRecord, merge_measurements, workload_hash
from .features import extract_features
from .measure import (
    Builder,
    InProcessExecutor,
    MeasureResult,
    Runner,
    TuneError,
    measure,
    the_prim_func,
)
from .relax_integration import extract_tasks, tune_relax
from .search import EvolutionarySearch, RandomSearch
from .space import ScheduleFnSpace, SearchSpace, default_space, mutate
from .tune import (
    best_so_far,
    compile_tir,
    estimate_flops,
    plot_tuning_curves,
    tune_tir,
)

__all__ = [
    "Builder",
    "CostModel",
    "EvolutionarySearch",
    "InProcessExecutor",
    "JSONDatabase",
    "MeasureResult",
    "RandomSearch",
    "Runner",
    "ScheduleFnSpace",
    "SearchSpace",
    "TuneError",
    "TuningRecord",
    "best_so_far",
    "compile_tir",
    "database",
    "default_space",
    "estimate_flops",
    "extract_features",
    "extract_tasks",
    "measure",
    "merge_measurements",
    "mutate",
    "plot_tuning_curves",
    "relax_integration",
    "space_generator",
    "the_prim_func",
    "tir_integration",
    "tune_relax",
    "tune_tir",
    "workload_hash",
]
