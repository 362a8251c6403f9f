"""Features of a scheduled program: what a cost model sees instead of the program itself.

``extract_features(func)`` lowers the function as the backend does, then describes each block
by its loop nest: how many iterations, which loops run in parallel / vectorized / unrolled,
how far apart consecutive innermost iterations access memory, how many bytes one iteration of
each loop touches (:func:`mlckit.tir.analysis.footprint`), and from that an estimate of the
memory traffic for a small (32 KiB) and a large (1 MiB) cache and the arithmetic intensity
(float operations per byte of traffic); and, for a reduction, its *register tile*: the outputs
its innermost reduction loop accumulates into, for how many iterations, and the float
operations per byte of input each iteration reads. The block with the most work is described
in full, the others through sums, so every program gives a vector of the same length
(``FEATURE_NAMES`` names its entries). Counts and sizes are on a ``log2(1 + x)`` scale, so
that a tree model splits them by orders of magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlckit import arith
from mlckit.ir.dtype import bits
from mlckit.ir.module import IRModule
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.analysis import FootprintRow, block_nests, collect_vars, footprint
from mlckit.tir.buffer import Buffer
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt_functor import post_order_visit, substitute
from mlckit.tir.transform import lower_prim_func

from .measure import the_prim_func

_KINDS = ["serial", "parallel", "vectorized", "unrolled", "thread"]
# Caches whose traffic is estimated: a core's L1 data cache and a typical L2.
_CACHES = {"l1": 32 * 1024, "l2": 1024 * 1024}

BLOCK_FEATURES = [
    "iterations",
    "loops",
    "inner_extent",
    *(f"inner_is_{kind}" for kind in _KINDS),
    "parallel_extent",
    "parallel_depth",
    "vectorized_extent",
    "unrolled_extent",
    "flops_per_iteration",
    "flops",
    "inner_bytes",
    "outer_traffic",
    *(f"traffic_{cache}" for cache in _CACHES),
    "intensity_l1",
    "accumulator_bytes",
    "accumulation_length",
    "intensity_registers",
    "stride_0",
    "stride_1",
    "stride_far",
]
TOTAL_FEATURES = ["blocks", "total_iterations", "total_flops", "total_traffic_l1"]
FEATURE_NAMES = [*(f"main.{name}" for name in BLOCK_FEATURES), *TOTAL_FEATURES]


# A buffer access of a block: the buffer, its indices, and whether it is a store.
_Access = tuple[Buffer, tuple[E.PrimExpr, ...], bool]


@dataclass
class _Block:
    features: dict[str, float]
    iterations: int
    flops: int
    traffic_l1: float


def extract_features(func: PrimFunc | IRModule) -> np.ndarray:
    """A fixed-length vector (``len(FEATURE_NAMES)``) describing the scheduled ``func``."""
    lowered = lower_prim_func(the_prim_func(func))
    blocks = [
        _block(lowered, realize, loops, bindings)
        for realize, loops, bindings, _ in block_nests(lowered)
    ]
    main = max(blocks, key=lambda b: (b.flops, b.iterations), default=None)
    values = [main.features[name] if main else 0.0 for name in BLOCK_FEATURES]
    values += [
        len(blocks),
        _log(sum(b.iterations for b in blocks)),
        _log(sum(b.flops for b in blocks)),
        _log(sum(b.traffic_l1 for b in blocks)),
    ]
    return np.array(values, dtype=np.float64)


def _log(x: float) -> float:
    return math.log2(1 + x)


def _extent(loop: S.For) -> int:
    # Static shapes only are tuned; a symbolic extent counts as one iteration.
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else 1


def _block(
    func: PrimFunc, realize: S.BlockRealize, loops: list[S.For], bindings: dict[E.Var, E.PrimExpr]
) -> _Block:
    block = realize.block
    extents = [_extent(loop) for loop in loops]
    iterations = math.prod(extents)
    kinds = [_KINDS[int(loop.kind)] for loop in loops]
    ops = float_ops(block)
    rows = footprint(func, block.name_hint) if loops else []
    totals = [math.inf if row.total is None else row.total for row in rows]
    accesses = _accesses(block)
    access_bytes = sum(_element_bytes(buffer) for buffer, _, _ in accesses)
    traffic = {
        name: _traffic(extents, totals, size, access_bytes) for name, size in _CACHES.items()
    }
    tile = _register_tile(block, loops, extents, rows, accesses, bindings, ops)
    strides = [_inner_stride(buffer, indices, loops, bindings) for buffer, indices, _ in accesses]
    parallel = [i for i, kind in enumerate(kinds) if kind in ("parallel", "thread")]
    features = {
        "iterations": _log(iterations),
        "loops": len(loops),
        "inner_extent": _log(extents[-1] if extents else 1),
        **{f"inner_is_{kind}": float(bool(kinds) and kinds[-1] == kind) for kind in _KINDS},
        "parallel_extent": _log(math.prod(extents[i] for i in parallel)),
        "parallel_depth": parallel[0] / len(loops) if parallel else 1.0,
        "vectorized_extent": _log(
            math.prod(e for e, k in zip(extents, kinds) if k == "vectorized")
        ),
        "unrolled_extent": _log(math.prod(e for e, k in zip(extents, kinds) if k == "unrolled")),
        "flops_per_iteration": _log(ops),
        "flops": _log(ops * iterations),
        "inner_bytes": _log(min(totals[-1], 2.0**62) if totals else access_bytes),
        "outer_traffic": _log(min(extents[0] * totals[0], 2.0**62) if totals else access_bytes),
        **{f"traffic_{name}": _log(value) for name, value in traffic.items()},
        "intensity_l1": _log(ops * iterations / max(traffic["l1"], 1)),
        "accumulator_bytes": _log(tile.bytes),
        "accumulation_length": _log(tile.length),
        "intensity_registers": _log(tile.intensity),
        "stride_0": _share(strides, lambda s: s == 0),
        "stride_1": _share(strides, lambda s: s == 1),
        "stride_far": _share(strides, lambda s: s is None or s > 1),
    }
    return _Block(features, iterations, ops * iterations, traffic["l1"])


@dataclass
class _Tile:
    bytes: float
    length: float
    intensity: float


def _register_tile(
    block: S.Block,
    loops: list[S.For],
    extents: list[int],
    rows: list[FootprintRow],
    accesses: list[_Access],
    bindings: dict[E.Var, E.PrimExpr],
    ops: int,
) -> _Tile:
    """The output tile a reduction accumulates: what the loops inside its innermost reduction
    loop (of more than one iteration) write, how many iterations of that loop and of the
    reduction loops right around it accumulate into it, and the float operations per byte of
    input one of those iterations reads. A tile of a few vectors stays in registers for the
    whole reduction; a single vector makes every multiply-add wait for the one before."""
    written = {buffer.name for buffer, _, store in accesses if store}

    def loop_vars(reduce: bool) -> set[int]:
        return {
            id(var)
            for iv in block.iter_vars
            if (iv.iter_type == E.IterVarType.CommReduce) == reduce
            for var in collect_vars(bindings.get(iv.var, iv.var))
        }

    # A loop of the reduction's iter vars only: its iterations accumulate into the same outputs.
    reduction, spatial = loop_vars(True), loop_vars(False)
    reduces = [
        extent > 1 and id(loop.loop_var) in reduction and id(loop.loop_var) not in spatial
        for loop, extent in zip(loops, extents)
    ]
    if not any(reduces):
        reads = sum(_element_bytes(b) for b, _, store in accesses if not store)
        return _Tile(
            sum(_element_bytes(b) for b, _, store in accesses if store), 1, ops / max(reads, 1)
        )
    level = max(n for n, r in enumerate(reduces) if r)
    length = 1
    for outer in range(level, -1, -1):
        if extents[outer] > 1 and not reduces[outer]:
            break
        length *= extents[outer]
    one_iteration = {n: 2.0**62 if b is None else b for n, b in rows[level].bytes.items()}
    reads = sum(b for n, b in one_iteration.items() if n not in written)
    writes = sum(b for n, b in one_iteration.items() if n in written)
    flops = ops * math.prod(extents[level + 1 :])
    return _Tile(writes, length, flops / max(reads, 1))


def _traffic(extents: list[int], totals: list[float], cache: int, access_bytes: int) -> float:
    """Bytes moved into a cache of ``cache`` bytes: the working set of the outermost loop
    iteration that fits in it, once per iteration of that loop and the loops around it
    (every iteration of the block when not even the innermost one fits)."""
    if not totals:
        return access_bytes
    for level, total in enumerate(totals):
        if total <= cache:
            return min(math.prod(extents[: level + 1]) * total, 2.0**62)
    return min(math.prod(extents) * totals[-1], 2.0**62)


def float_ops(block: S.Block) -> int:
    """Float arithmetic operations (and intrinsic calls) in one iteration of the block."""
    count = 0

    def visit(node: object) -> None:
        nonlocal count
        if isinstance(node, (E.BinaryOpExpr, E.Call)) and node.dtype.startswith(
            ("float", "bfloat")
        ):
            count += 1

    post_order_visit(block.body, visit)
    return count


def _element_bytes(buffer: Buffer) -> int:
    return (bits(buffer.dtype) + 7) // 8


def _accesses(block: S.Block) -> list[_Access]:
    """Every buffer load and store in the block's body, with its indices."""
    found: list[_Access] = []

    def visit(node: object) -> None:
        if isinstance(node, (E.BufferLoad, S.BufferStore)):
            found.append((node.buffer, tuple(node.indices), isinstance(node, S.BufferStore)))

    post_order_visit(block.body, visit)
    return found


def _inner_stride(
    buffer: Buffer,
    indices: tuple[E.PrimExpr, ...],
    loops: list[S.For],
    bindings: dict[E.Var, E.PrimExpr],
) -> int | None:
    """Elements between the addresses of two consecutive innermost-loop iterations (None when
    it is not a constant)."""
    if not loops:
        return 0
    offset: E.PrimExpr = E.IntImm("int32", 0)
    for index, dim in zip(indices, buffer.shape):
        offset = offset * dim + substitute(index, bindings)
    analyzer = arith.Analyzer()
    at = []
    for inner in (0, 1):
        point = {loop.loop_var: E.IntImm(loop.loop_var.dtype, 0) for loop in loops}
        point[loops[-1].loop_var] = E.IntImm(loops[-1].loop_var.dtype, inner)
        value = analyzer.simplify(substitute(offset, point))
        if not isinstance(value, E.IntImm):
            return None
        at.append(value.value)
    return abs(at[1] - at[0])


def _share(values: list[int | None], test: Callable[[int | None], bool]) -> float:
    return sum(1 for v in values if test(v)) / len(values) if values else 0.0


__all__ = ["FEATURE_NAMES", "extract_features"]
