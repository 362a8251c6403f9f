"""``MetaScheduleApplyDatabase``: give each kernel of a model the best schedule tuning found."""

from __future__ import annotations

from typing import Any

from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.target import Target
from mlckit.tir.function import PrimFunc


def MetaScheduleApplyDatabase(database: Any, target: str | Target = "llvm") -> transform.Pass:
    """Replace every PrimFunc the database has a successful record of (for ``target``) by its
    fastest schedule, marked ``tir.is_scheduled`` so that relax.build's default schedule leaves
    it alone. Kernels without a record stay as they are."""
    target = Target(target)

    def apply(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        updated = mod.copy()
        for gv, func in mod.functions.items():
            if not isinstance(func, PrimFunc) or func.attrs.get("tir.is_scheduled"):
                continue
            sch = database.query_schedule(func, target)
            if sch is not None:
                updated[gv] = sch.mod["main"].with_attr("tir.is_scheduled", True)
        return updated

    return transform.module_pass(apply, opt_level=0, name="relax.MetaScheduleApplyDatabase")
