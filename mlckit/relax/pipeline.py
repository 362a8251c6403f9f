"""Named pass pipelines: ``relax.get_pipeline("default")(mod)`` takes a model written with
high-level operators to a module ``relax.build`` runs."""

from __future__ import annotations

from mlckit.errors import MLCError
from mlckit.ir import transform

from . import transform as T


def _zero() -> list[transform.Pass]:
    # Lower every operator to TensorIR, then fuse: the passes of TVM's "zero" pipeline.
    return [T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FoldConstant(), T.FuseOps(), T.FuseTIR()]


def _default() -> list[transform.Pass]:
    from mlckit.tir.schedule.default_schedule import DefaultSchedule

    # The loop schedule makes the kernels fast on this CPU (see default_schedule's rules).
    return [*_zero(), T.DeadCodeElimination(), DefaultSchedule()]


def _memory() -> list[transform.Pass]:
    # Explicit allocations, with storage reused between intermediates of static shape.
    return [T.ToNonDataflow(), T.CallTIRRewrite(), T.StaticPlanBlockMemory()]


_PIPELINES = {
    "zero": _zero,
    "default": _default,
    "default_build": lambda: [*_default(), *_memory()],
}


def get_pipeline(name: str = "default") -> transform.Pass:
    """``"zero"``: legalize and fuse; ``"default"``: also drop dead code and apply the default
    CPU loop schedule; ``"default_build"``: also plan memory (ToNonDataflow, CallTIRRewrite,
    StaticPlanBlockMemory)."""
    make = _PIPELINES.get(name)
    if make is None:
        known = ", ".join(sorted(_PIPELINES))
        raise MLCError(f"no relax pipeline named {name!r}; choose one of {known}")
    return transform.Sequential(make(), opt_level=0, name=f"relax.pipeline.{name}")
