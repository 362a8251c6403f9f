"""Named pass pipelines: ``relax.get_pipeline("default")(mod)`` takes a model written with
high-level operators to a module ``relax.build`` compiles for any target.

The pipelines know no target, as in TVM: they rewrite the graph (legalize each operator to a
PrimFunc, fuse, FuseTIR, plan memory). Making the PrimFuncs fast on a device is the build's
job: ``relax.build(mod, target)`` applies the target's default schedule to every PrimFunc
nobody scheduled, so one pipeline's output builds for ``"llvm"``, ``"cuda"`` or ``"python"``.
"""

from __future__ import annotations

from collections.abc import Callable

from mlckit.errors import MLCError
from mlckit.ir import transform

from . import transform as T


def _zero() -> list[transform.Pass]:
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


def _default() -> list[transform.Pass]:
    # Inference: a batch norm after a convolution becomes new weights and a bias computed
    # from constants, which FoldConstant computes at build. Folding before LegalizeOps also
    # keeps the kernels that only run at build out of the module (and out of the names the
    # per-call kernels get). A linear layer's transposed weight is read as it is stored, by
    # one NT_matmul kernel, rather than folded into a transposed copy.
    return [
        T.FoldBatchnormToConv2D(),
        T.FuseTransposeMatmul(),
        T.FoldConstant(),
        *_zero(),
        T.DeadCodeElimination(),
    ]


def _memory() -> list[transform.Pass]:
    # Explicit allocations, with storage reused between intermediates of static shape.
    return [T.ToNonDataflow(), T.CallTIRRewrite(), T.StaticPlanBlockMemory()]


_PIPELINES: dict[str, Callable[[], list[transform.Pass]]] = {
    "zero": _zero,
    "default": _default,
    "default_build": lambda: [*_default(), *_memory()],
}


def get_pipeline(name: str = "default") -> transform.Pass:
    """``"zero"``: legalize and fuse; ``"default"``: first fold inference batch norms into the
    convolutions before them (FoldBatchnormToConv2D), give each ``matmul(x, permute_dims(w))``
    one kernel reading ``w`` as stored (FuseTransposeMatmul) and compute what depends only on
    constants (FoldConstant), then the zero pipeline, and drop dead code; ``"default_build"``:
    also plan memory (ToNonDataflow, CallTIRRewrite, StaticPlanBlockMemory).

    The default pipelines compile for inference: TVM's default pipeline leaves batch norms
    alone, mlckit's folds them."""
    make = _PIPELINES.get(name)
    if make is None:
        known = ", ".join(sorted(_PIPELINES))
        raise MLCError(f"no relax pipeline named {name!r}; choose one of {known}")
    return transform.Sequential(make(), opt_level=0, name=f"relax.pipeline.{name}")
