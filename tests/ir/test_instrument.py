"""Build steps: what a build does besides running passes is timed by PassTimingInstrument."""

from __future__ import annotations

import mlckit
from mlckit import tir
from mlckit.ir.instrument import PassTimingInstrument, PassTracer, build_step
from mlckit.ir.transform import PassContext
from mlckit.script import tir as T


@T.prim_func
def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)


def test_a_build_step_is_timed_and_counted_by_name():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        for _ in range(2):
            with build_step("codegen"):
                pass
    assert timing.runs == {"codegen": 2} and timing.timings["codegen"] >= 0
    row = next(line for line in timing.render().splitlines() if line.startswith("codegen"))
    assert row.split()[1] == "2"


def test_a_build_step_reaches_only_instruments_that_record_steps():
    tracer = PassTracer()  # records passes, has no record_build_step
    with PassContext(instruments=[tracer]), build_step("codegen"):
        pass
    assert tracer.records == []
    with build_step("codegen"):  # no PassContext: nothing to tell
        pass


def test_timing_a_build_shows_scheduling_lowering_code_generation_and_compilation():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        sch = tir.Schedule(add_one)
        sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
        mlckit.build(sch.mod, "llvm")
    assert timing.runs["schedule.split"] == 1
    assert timing.runs["schedule.get_block"] == 1
    for step in (
        "tir.lower.verify_block_bindings",
        "tir.lower.verify_buffer_bounds",
        "tir.lower.compact_buffer_allocation",
        "tir.lower.loop_partition",
        "build.kernel_source",
        "build.compile (numba)",
    ):
        assert timing.runs[step] == 1, step
