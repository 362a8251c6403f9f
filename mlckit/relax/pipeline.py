"""Named pass pipelines: ``relax.get_pipeline("default")(mod)`` takes a model written with
high-level operators to a module ``relax.build`` runs; ``get_pipeline(..., target="cuda")``
to one whose kernels run on the GPU."""

from __future__ import annotations

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.target import Target

from . import transform as T


def _zero(target: Target) -> list[transform.Pass]:
    # Lower every operator to TensorIR, then fuse: the passes of TVM's "zero" pipeline. A
    # tuple that legalization builds and nobody reads (batch_norm's moving statistics)
    # would hold on to its fields and keep them from fusing with their consumers, so the
    # trivial bindings and dead code go first.
    return [
        T.LegalizeOps(),
        T.AnnotateTIROpPattern(),
        T.FoldConstant(),
        T.CanonicalizeBindings(),
        T.DeadCodeElimination(),
        T.FuseOps(),
        T.FuseTIR(),
    ]


def _default(target: Target) -> list[transform.Pass]:
    return [*_zero(target), T.DeadCodeElimination(), _loop_schedule(target)]


def _loop_schedule(target: Target) -> transform.Pass:
    if target.kind == "cuda":
        from mlckit.tir.schedule.default_gpu_schedule import (
            MAX_THREADS_PER_BLOCK,
            DefaultGPUSchedule,
        )

        # Every kernel bound to GPU blocks and threads (``cuda -max_num_threads=128`` caps
        # the threads of a block, as TVM's target attribute does).
        threads = int(target.options.get("max_num_threads", MAX_THREADS_PER_BLOCK))
        return DefaultGPUSchedule(threads)
    from mlckit.tir.schedule.default_schedule import DefaultSchedule

    # The loop schedule makes the kernels fast on this CPU (see default_schedule's rules).
    return DefaultSchedule()


def _memory(target: Target) -> list[transform.Pass]:
    # Explicit allocations, with storage reused between intermediates of static shape.
    return [T.ToNonDataflow(), T.CallTIRRewrite(), T.StaticPlanBlockMemory()]


_PIPELINES = {
    "zero": _zero,
    "default": _default,
    "default_build": lambda target: [*_default(target), *_memory(target)],
}


def get_pipeline(name: str = "default", target: str | Target | None = None) -> transform.Pass:
    """``"zero"``: legalize and fuse; ``"default"``: also drop dead code and apply the default
    loop schedule of ``target`` (the CPU schedule, or for ``"cuda"`` the default GPU schedule
    that binds every kernel to blocks and threads); ``"default_build"``: also plan memory
    (ToNonDataflow, CallTIRRewrite, StaticPlanBlockMemory)."""
    make = _PIPELINES.get(name)
    if make is None:
        known = ", ".join(sorted(_PIPELINES))
        raise MLCError(f"no relax pipeline named {name!r}; choose one of {known}")
    passes = make(Target.current_or(target))
    return transform.Sequential(passes, opt_level=0, name=f"relax.pipeline.{name}")
