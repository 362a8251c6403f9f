"""``MetaScheduleApplyDatabase``: give each kernel of a model the best schedule tuning found.

The database is the one tuning returned, or the ``work_dir`` tuning kept it in (TVM's form).
``mlckit.meta_schedule`` sits above relax, so relax cannot open a work_dir's database itself:
the meta_schedule package installs its opener here (``register_work_dir_database``) when it is
imported, as the TVMScript printer installs itself in the IR nodes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.target import Target
from mlckit.tir.function import PrimFunc

_open_work_dir: Callable[[str | os.PathLike[str]], Any] | None = None


def register_work_dir_database(opener: Callable[[str | os.PathLike[str]], Any]) -> None:
    """Install how a work_dir becomes a database (``mlckit.meta_schedule`` does, on import)."""
    global _open_work_dir
    _open_work_dir = opener


def _database(database_or_work_dir: Any) -> Any:
    if not isinstance(database_or_work_dir, (str, os.PathLike)):
        return database_or_work_dir
    if _open_work_dir is None:
        raise MLCError(
            f"MetaScheduleApplyDatabase({str(database_or_work_dir)!r}): a work_dir's tuning "
            "database is read by mlckit.meta_schedule; import it first "
            "(from mlckit import meta_schedule as ms)"
        )
    return _open_work_dir(database_or_work_dir)


def MetaScheduleApplyDatabase(database: Any, target: str | Target = "llvm") -> transform.Pass:
    """Replace every PrimFunc the database has a successful record of (for ``target``) by its
    fastest schedule, marked ``tir.is_scheduled`` so that relax.build's default schedule leaves
    it alone. Kernels without a record stay as they are.

    ``database``: a tuning database (what ``ms.tune_relax`` returns), or the work_dir tuning
    kept it in (``MetaScheduleApplyDatabase("./tune_tmp")``), read when the pass runs."""
    target = Target(target)

    def apply(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        opened = _database(database)
        updated = mod.copy()
        for gv, func in mod.functions.items():
            if not isinstance(func, PrimFunc) or func.attrs.get("tir.is_scheduled"):
                continue
            sch = opened.query_schedule(func, target)
            if sch is not None:
                updated[gv] = sch.mod["main"].with_attr("tir.is_scheduled", True)
        return updated

    return transform.module_pass(apply, opt_level=0, name="relax.MetaScheduleApplyDatabase")
