"""Campaign "bounds": small PrimFuncs whose loops may run past the ends of their buffers.

Each case is a TVMScript function: one or two loops (maybe a reduction, maybe the first loop
split with its ``T.where``, extents constant or symbolic: ``n``, ``n + 1``, ``n - 1``, ``m``)
around one block that writes ``B`` from ``A`` read at shifted or scaled indices (``A[v + 1]``,
``A[v - 1]``, ``A[v * 2]``, ``A[v // 2]``), maybe guarded as TVM pads (or by a guard one too
loose)
(``T.if_then_else(0 <= r < N, A[r], -1)``). The case runs its own loops in Python, so it knows
which indices the program touches for the sizes it is run with, and what ``B`` must hold:

* out of bounds, constant sizes: building must raise a BuildError;
* out of bounds, symbolic sizes: building may raise a BuildError only if the program is out
  of bounds for every size where its loops run at all; otherwise running must raise an
  MLCError;
* in bounds: it must build (a rejected valid program is as wrong as a missed access), run,
  and leave in ``B`` what the case computed.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from mlckit.driver import build
from mlckit.errors import BuildError, MLCError
from mlckit.runtime import array
from mlckit.script import from_source

from . import Trial, WrongResult, judge

NAME = "bounds"
# Sizes the symbolic variables take when the case runs, and the sizes over which "out of
# bounds for every size" is decided.
RUN_SIZES = range(1, 7)
ALL_SIZES = range(0, 9)
LLVM_SHARE = 0.1


@dataclass(frozen=True)
class Size:
    """A constant, or a symbolic variable plus a constant (``n``, ``n + 1``, ``m - 1``)."""

    const: int = 0
    var: str | None = None

    def text(self) -> str:
        if self.var is None:
            return str(self.const)
        if self.const == 0:
            return self.var
        return f"{self.var} {'+' if self.const > 0 else '-'} {abs(self.const)}"

    def value(self, sizes: dict[str, int]) -> int:
        return self.const + (sizes[self.var] if self.var else 0)


@dataclass(frozen=True)
class Index:
    """An index computed from one block iter var: ``v``, ``v + c``, ``v - c``, ``v * c``,
    ``v // c``."""

    op: str = ""
    c: int = 0

    def text(self, v: str) -> str:
        return v if not self.op else f"{v} {self.op} {self.c}"

    def value(self, v: int) -> int:
        ops = {"": lambda: v, "+": lambda: v + self.c, "-": lambda: v - self.c}
        ops |= {"*": lambda: v * self.c, "//": lambda: v // self.c}
        return ops[self.op]()


@dataclass
class Case:
    extents: list[Size]  # one per loop; with ``reduce`` the last loop is a reduction
    reduce: bool
    a_shape: list[Size]
    b_shape: list[Size]
    reads: list[Index]  # A's index on each axis, from the iter var of the same axis
    writes: list[Index]  # B's index on each axis
    # A is read only where ``0 <= index < dim + slack``: 0 keeps it inside A, 1 lets its end
    # through; None: unguarded.
    guard: int | None
    split: tuple[int, int] | None  # loop 0 split by a factor; predicate ``< extent + slack``
    target: str
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def symbolic(self) -> list[str]:
        return sorted({s.var for s in self.a_shape + self.b_shape if s.var})

    # ------------------------------------------------------------------ the program
    def script(self) -> str:
        names = [f"v{axis}" for axis in range(len(self.extents))]
        a = [r.text(v) for r, v in zip(self.reads, names)]
        b = [w.text(v) for w, v in zip(self.writes, names)]
        load = f"A[{', '.join(a)}]"
        if self.guard is not None:
            inside = " and ".join(
                f"{r} >= 0 and {r} < {Size(d.const + self.guard, d.var).text()}"
                for r, d in zip(a, self.a_shape)
            )
            load = f"T.if_then_else({inside}, {load}, T.float32(-1))"
        store = f"B[{', '.join(b)}]"
        value = f"{store} + {load}" if self.reduce else f"{load} * T.float32(2) + T.float32(1)"
        kinds = "S" * (len(self.extents) - self.reduce) + "R" * self.reduce
        lines = ["@T.prim_func", "def main(a: T.handle, b: T.handle):"]
        lines += [f"    {var} = T.int64()" for var in self.symbolic]
        lines += [
            f'    A = T.match_buffer(a, ({", ".join(d.text() for d in self.a_shape)},), "float32")',
            f'    B = T.match_buffer(b, ({", ".join(d.text() for d in self.b_shape)},), "float32")',
        ]
        body = []
        if self.split is None:
            loops = [f"i{axis}" for axis in range(len(self.extents))]
            grid = ", ".join(e.text() for e in self.extents)
            body.append(f"for {', '.join(loops)} in T.grid({grid}):")
            block = [f'    {", ".join(names)} = T.axis.remap("{kinds}", [{", ".join(loops)}])']
        else:
            factor, slack = self.split
            outer = -(-self.extents[0].value({}) // factor)
            rest = [f"i{axis}" for axis in range(1, len(self.extents))]
            grid = ", ".join([str(outer), str(factor), *(e.text() for e in self.extents[1:])])
            body.append(f"for {', '.join(['i0_o', 'i0_i', *rest])} in T.grid({grid}):")
            kind = {"S": "spatial", "R": "reduce"}
            block = [f"    v0 = T.axis.spatial({self.extents[0].text()}, i0_o * {factor} + i0_i)"]
            block += [
                f"    v{axis} = T.axis.{kind[kinds[axis]]}({self.extents[axis].text()}, i{axis})"
                for axis in range(1, len(self.extents))
            ]
            block.append(
                f"    T.where(i0_o * {factor} + i0_i < {self.extents[0].value({}) + slack})"
            )
        if self.reduce:
            block += ["    with T.init():", f"        {store} = T.float32(0)"]
        block.append(f"    {store} = {value}")
        body += ['    with T.block("B"):', *("    " + line for line in block)]
        lines += ["    " + line for line in body]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ what it does
    def iterations(self, sizes: dict[str, int]) -> Iterator[tuple[int, ...]]:
        ranges = [range(max(e.value(sizes), 0)) for e in self.extents]
        if self.split is not None:
            factor, slack = self.split
            extent = self.extents[0].value(sizes)
            outer = -(-extent // factor)
            ranges[0] = range(min(outer * factor, extent + slack))
        return itertools.product(*ranges)

    def run(
        self, sizes: dict[str, int], a: np.ndarray | None, b: np.ndarray | None
    ) -> tuple[bool, bool]:
        """Run the loops on ``a`` and ``b`` (in place; None: only look at the indices).
        Returns (whether some iteration runs, whether some access is out of bounds)."""
        a_shape = [d.value(sizes) for d in self.a_shape]
        b_shape = [d.value(sizes) for d in self.b_shape]
        ran = False
        for point in self.iterations(sizes):
            ran = True
            read = tuple(r.value(v) for r, v in zip(self.reads, point))
            write = tuple(w.value(v) for w, v in zip(self.writes, point))
            slack = 0 if self.guard is None else self.guard
            passes = self.guard is None or all(0 <= i < d + slack for i, d in zip(read, a_shape))
            if not all(0 <= i < d for i, d in zip(write, b_shape)):
                return ran, True
            if passes and not all(0 <= i < d for i, d in zip(read, a_shape)):
                return ran, True
            if b is None or a is None:
                continue
            loaded = a[read] if passes else np.float32(-1)
            if self.reduce:
                if point[-1] == 0:
                    b[write] = 0
                b[write] = b[write] + loaded
            else:
                b[write] = loaded * np.float32(2) + np.float32(1)
        return ran, False

    def always_out_of_bounds(self) -> bool:
        """Out of bounds for every size (in ALL_SIZES) at which some iteration runs."""
        verdicts = []
        for values in itertools.product(ALL_SIZES, repeat=len(self.symbolic)):
            sizes = dict(zip(self.symbolic, values))
            ran, out = self.run(sizes, None, None)
            if ran:
                verdicts.append(out)
        return bool(verdicts) and all(verdicts)


# ---------------------------------------------------------------------------- generation
def _index(rng: random.Random) -> Index:
    return rng.choice([Index()] * 3 + [Index("+", 1), Index("-", 1), Index("*", 2), Index("//", 2)])


def _near(rng: random.Random, size: Size, symbolic: bool) -> Size:
    """A loop extent around ``size``: equal, one more, one less (or, symbolic, another var)."""
    options = [size] * 3 + [Size(size.const + 1, size.var), Size(size.const - 1, size.var)]
    if symbolic and size.var == "n":
        options.append(Size(0, "m"))
    choice = rng.choice(options)
    return choice if choice.var or choice.const >= 0 else size


def generate(rng: random.Random) -> Case:
    rank = rng.choice([1, 1, 2])
    reduce = rank == 2 and rng.random() < 0.3
    symbolic = rng.random() < 0.35
    if symbolic:
        a_shape = [rng.choice([Size(0, "n"), Size(1, "n")]) for _ in range(rank)]
        b_shape = [rng.choice([Size(0, "n"), Size(0, "m")]) for _ in range(rank - reduce)]
        if not any(d.var == "m" for d in b_shape):
            b_shape[-1] = Size(0, "m") if rng.random() < 0.3 else b_shape[-1]
        if Size(0, "n") not in a_shape + b_shape:
            # The generated code reads a size off a dimension that is just that size.
            a_shape[0] = Size(0, "n")
    else:
        a_shape = [Size(rng.randint(1, 8)) for _ in range(rank)]
        b_shape = [Size(rng.randint(1, 8)) for _ in range(rank - reduce)]
    # Loop extents around B's shape (A's for the reduction axis), read indices from a family.
    bases = b_shape + a_shape[len(b_shape) :]
    defined = {d.var for d in a_shape + b_shape if d.var}
    extents = []
    for base in bases:
        extent = _near(rng, base, symbolic)
        extents.append(extent if extent.var is None or extent.var in defined else base)
    reads = [_index(rng) for _ in range(rank)]
    writes = [Index() if rng.random() < 0.8 else _index(rng) for _ in range(rank - reduce)]
    split = None
    if not symbolic and extents[0].const > 1 and rng.random() < 0.3:
        split = (rng.choice([2, 3, 4]), rng.choice([0, 0, 1]))
    case = Case(
        extents=extents,
        reduce=reduce,
        a_shape=a_shape,
        b_shape=b_shape,
        reads=reads,
        writes=writes,
        guard=rng.choice([None, None, None, None, 0, 0, 1]),
        split=split,
        target="llvm" if rng.random() < LLVM_SHARE else "python",
    )
    case.sizes = {var: rng.choice(RUN_SIZES) for var in case.symbolic}
    return case


# ---------------------------------------------------------------------------- one trial
def _check(case: Case) -> None:
    sizes = case.sizes
    _, out_of_bounds = case.run(sizes, None, None)
    func = from_source(case.script())
    try:
        lib = build(func, target=case.target)
    except BuildError as err:
        # Symbolic sizes: rejecting is right only when no size where the loops run keeps the
        # program in bounds (whatever the sizes of this run).
        if case.symbolic and not case.always_out_of_bounds():
            raise WrongResult(
                f"rejected at build time, but some sizes keep it in bounds: {err}"
            ) from None
        if not case.symbolic and not out_of_bounds:
            raise WrongResult(f"a program in bounds was rejected: {err}") from None
        raise
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, [d.value(sizes) for d in case.a_shape]).astype("float32")
    b = np.full([d.value(sizes) for d in case.b_shape], 7, dtype="float32")
    expected = b.copy()
    try:
        lib["main"](array(a), out := array(b))
    except MLCError as err:
        if not out_of_bounds:
            raise WrongResult(f"a program in bounds for {sizes} failed when run: {err}") from None
        if not case.symbolic:
            raise WrongResult(
                f"out of bounds with constant sizes, found only at run time: {err}"
            ) from None
        raise
    if out_of_bounds:
        raise WrongResult(f"an access out of bounds for {sizes} ran without an error")
    case.run(sizes, a, expected)
    got = out.numpy()
    if not np.allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True):
        raise WrongResult(f"B differs from the loops' result:\n{got}\nexpected\n{expected}")


@dataclass(frozen=True)
class BoundsCampaign:
    name: str = NAME

    def trial(self, rng: random.Random) -> Trial:
        case = generate(rng)
        text = f"{case.script()}# target {case.target}, sizes {case.sizes or 'constant'}\n"
        return judge(self.name, text, lambda: _check(case))


CAMPAIGN = BoundsCampaign()

__all__ = ["CAMPAIGN", "Case", "generate"]
