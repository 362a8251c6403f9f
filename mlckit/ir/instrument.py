"""Pass instruments: observe every pass a PassContext runs (TVM's ``tvm.instrument``).

    tracer = PassTracer()
    with PassContext(instruments=[tracer]):
        mod = pipeline(mod)
    for record in tracer.records:
        print(record.name, record.seconds)  # and record.before / record.after modules

``PassTracer`` is what the pass stepper widget replays; ``PrintBeforeAll`` / ``PrintAfterAll``
print the module around each pass; ``PassTimingInstrument`` tabulates the time per pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .module import IRModule
from .structural import structural_equal
from .transform import PassInfo, pass_instrument


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
    """Time every pass; ``render()`` gives a table, slowest first."""

    timings: dict[str, float] = field(default_factory=dict)
    _starts: list[float] = field(default_factory=list)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._starts.append(time.perf_counter())

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        elapsed = time.perf_counter() - self._starts.pop()
        self.timings[info.name] = self.timings.get(info.name, 0.0) + elapsed

    def render(self) -> str:
        rows = [f"{'pass':<32}{'time (ms)':>12}"]
        for name, seconds in sorted(self.timings.items(), key=lambda kv: -kv[1]):
            rows.append(f"{name:<32}{seconds * 1e3:>12.3f}")
        return "\n".join(rows)


__all__ = [
    "PassRecord",
    "PassTimingInstrument",
    "PassTracer",
    "PrintAfterAll",
    "PrintBeforeAll",
    "pass_instrument",
]
