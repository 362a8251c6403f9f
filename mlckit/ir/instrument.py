"""Pass instruments: observe every pass a PassContext runs (TVM's ``tvm.instrument``).

    tracer = PassTracer()
    with PassContext(instruments=[tracer]):
        mod = pipeline(mod)
    for record in tracer.records:
        print(record.name, record.seconds)  # and record.before / record.after modules

``PassTracer`` is what the pass stepper widget replays; ``PrintBeforeAll`` / ``PrintAfterAll``
print the module around each pass; ``PassTimingInstrument`` tabulates the time per pass.

A build does more than run passes: it schedules each kernel, lowers it, writes its code and
has numba compile it. Those steps report themselves with ``build_step(name)`` to every
instrument of the current PassContext that defines ``record_build_step(name, seconds)``, so
that one ``PassTimingInstrument`` around ``relax.build`` shows where a whole build goes::

    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        ex = relax.build(relax.get_pipeline("default")(mod), "llvm")
    print(timing.render())
    # pass or build step               runs   time (ms)
    # build.compile (numba)              11    8641.2
    # relax.pipeline.default              1     225.5
    # build.kernel_source                11     291.0
    # ...

A step inside a pass (FoldConstant compiles kernels) counts in both rows, as a pass inside a
Sequential counts in the Sequential's row.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from .module import IRModule
from .structural import structural_equal
from .transform import PassContext, PassInfo, pass_instrument


@contextlib.contextmanager
def build_step(name: str) -> Iterator[None]:
    """Time the block as the build step ``name`` for the current PassContext's instruments
    that record build steps (nothing is timed when none does)."""
    recorders = [
        i.record_build_step
        for i in PassContext.current().instruments
        if hasattr(i, "record_build_step")
    ]
    if not recorders:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        for record in recorders:
            record(name, elapsed)


@dataclass(frozen=True)
class PassRecord:
    """One pass run: its name, the module before and after, seconds, and nesting depth
    (a pass inside a Sequential has depth 1)."""

    name: str
    before: IRModule
    after: IRModule
    seconds: float
    depth: int

    @property
    def changed(self) -> bool:
        return not structural_equal(self.before, self.after)


@pass_instrument
@dataclass
class PassTracer:
    """Records every pass run (outermost passes too) in order of completion."""

    records: list[PassRecord] = field(default_factory=list)
    _open: list[tuple[IRModule, float]] = field(default_factory=list)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        # Passes never modify their input, so keeping a reference is a faithful snapshot.
        self._open.append((mod, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        before, start = self._open.pop()
        self.records.append(
            PassRecord(info.name, before, mod, time.perf_counter() - start, len(self._open))
        )

    def leaf_records(self) -> list[PassRecord]:
        """The innermost passes only (a Sequential's own record is dropped), in run order."""
        depth = max((r.depth for r in self.records), default=0)
        return [r for r in self.records if r.depth == depth] if depth else list(self.records)


@pass_instrument
@dataclass
class PrintBeforeAll:
    """Print the module before every pass."""

    show_meta: bool = False

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        print(f"# Before {info.name}")
        print(mod.script(show_meta=self.show_meta))


@pass_instrument
@dataclass
class PrintAfterAll:
    """Print the module after every pass."""

    show_meta: bool = False

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        print(f"# After {info.name}")
        print(mod.script(show_meta=self.show_meta))


@pass_instrument
@dataclass
class PassTimingInstrument:
    """Time every pass and build step (``build_step``); ``timings`` sums the seconds by name,
    ``runs`` counts them, ``render()`` gives a table, slowest first."""

    timings: dict[str, float] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    _starts: list[float] = field(default_factory=list)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._starts.append(time.perf_counter())

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.record_build_step(info.name, time.perf_counter() - self._starts.pop())

    def record_build_step(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds
        self.runs[name] = self.runs.get(name, 0) + 1

    def render(self) -> str:
        rows = [f"{'pass or build step':<40}{'runs':>6}{'time (ms)':>12}"]
        for name, seconds in sorted(self.timings.items(), key=lambda kv: -kv[1]):
            rows.append(f"{name:<40}{self.runs[name]:>6}{seconds * 1e3:>12.3f}")
        return "\n".join(rows)


__all__ = [
    "PassRecord",
    "PassTimingInstrument",
    "PassTracer",
    "PrintAfterAll",
    "PrintBeforeAll",
    "build_step",
    "pass_instrument",
]
