"""Lowering passes over TensorIR that run after scheduling, before code generation.

``lower_prim_func`` is what the backend applies to every PrimFunc it compiles;
``CompactBufferAllocation()`` is the same rewrite as a module pass, to look at its result.
``DefaultGPUSchedule()`` (TVM's name for it here) binds unscheduled kernels to GPU threads.
"""

from __future__ import annotations

from mlckit.ir import transform as _transform
from mlckit.ir.instrument import build_step
from mlckit.ir.module import BaseFunc, IRModule

from ..function import PrimFunc
from ..schedule.default_gpu_schedule import DefaultGPUSchedule
from .compact_buffer_allocation import compact_buffer_allocation
from .loop_partition import loop_partition
from .verify_bindings import verify_block_bindings
from .verify_bounds import OutOfBoundsError, verify_buffer_bounds


def lower_prim_func(func: PrimFunc) -> PrimFunc:
    """The lowering the backend applies before generating code, for every target and every
    build path: checks (bindings, then every access against its buffer's shape, adding
    run-time checks where only the run time can tell), then buffer compaction and loop
    partitioning. Each step is a build step (``mlckit.ir.instrument.build_step``) that a
    ``PassTimingInstrument`` times."""
    with build_step("tir.lower.verify_block_bindings"):
        verify_block_bindings(func)
    for name, step in _LOWERING_STEPS:
        with build_step(name):
            func = step(func)
    return func


_LOWERING_STEPS = (
    ("tir.lower.verify_buffer_bounds", verify_buffer_bounds),
    ("tir.lower.compact_buffer_allocation", compact_buffer_allocation),
    ("tir.lower.loop_partition", loop_partition),
)


def CompactBufferAllocation() -> _transform.Pass:
    """Allocate each block-local buffer at the loop that uses it, with the region it touches."""

    def apply(func: BaseFunc, mod: IRModule, ctx: _transform.PassContext) -> BaseFunc:
        return compact_buffer_allocation(func) if isinstance(func, PrimFunc) else func

    return _transform.function_pass(apply, opt_level=0, name="tir.CompactBufferAllocation")


__all__ = [
    "CompactBufferAllocation",
    "DefaultGPUSchedule",
    "OutOfBoundsError",
    "compact_buffer_allocation",
    "loop_partition",
    "lower_prim_func",
    "verify_block_bindings",
    "verify_buffer_bounds",
]
