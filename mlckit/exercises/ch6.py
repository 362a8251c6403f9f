"""Chapter 6's exercises: binding a transpose to GPU thread blocks, and a matmul whose threads
each accumulate a 2 x 2 tile of the result in local memory.

Each answer is built for the ``cuda`` target and run on small random inputs against numpy (in
numba's CUDA simulator on a machine without a GPU). Before running, the checker rejects what a
GPU would refuse or what computes the wrong elements: a thread block of more than 1024 threads
(the code generator refuses it), two nested loops bound to the same thread axis. After the
numbers, it checks that the kernel is the one the task asks for: thread-block shape, which loop
feeds ``threadIdx.x``, loops left serial, the local accumulator and each thread's tile.

The programs the exercises start from (``Transpose``, ``Matmul``) are defined here so that the
chapter and the checkers share them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.driver import build
from mlckit.errors import BuildError
from mlckit.runtime import array, cuda
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir import For, IntImm, IterVar, PrimFunc
from mlckit.tir.analysis import block_nests, collect_vars
from mlckit.tir.stmt import BlockRealize

from .checks import as_prim_func, assert_close, build_mismatch, random_inputs
from .core import Mismatch, exercise
from .solutions import ch6 as solutions

# --------------------------------------------------------------------------- the programs


@I.ir_module
class Transpose:
    @T.prim_func
    def main(A: T.Buffer((32, 64), "float32"), B: T.Buffer((64, 32), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j in T.grid(64, 32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi]


@I.ir_module
class Matmul:
    @T.prim_func
    def main(
        A: T.Buffer((32, 32), "float32"),
        B: T.Buffer((32, 64), "float32"),
        C: T.Buffer((32, 64), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(32, 64, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


# ----------------------------------------------------------------- reading a bound kernel


@dataclass(frozen=True)
class _Nest:
    """A block, and the loops around it (outermost first)."""

    realize: BlockRealize
    loops: tuple[For, ...]

    def feeds(self, loop: For) -> tuple[int, ...]:
        """The positions of the block iterators whose bindings use ``loop``'s variable."""
        return tuple(
            position
            for position, value in enumerate(self.realize.iter_values)
            if any(var is loop.loop_var for var in collect_vars(value))
        )

    def host_loops(self) -> list[For]:
        """Loops outside every thread-bound loop: the host runs them, one launch each."""
        first = next((n for n, loop in enumerate(self.loops) if loop.thread_tag), len(self.loops))
        return list(self.loops[:first])

    def thread_serial_loops(self) -> list[For]:
        """Loops inside the thread-bound ones that are not bound: each thread runs them."""
        first = len(self.host_loops())
        return [loop for loop in self.loops[first:] if not loop.thread_tag]


def _nests(func: PrimFunc) -> dict[str, _Nest]:
    """Every block of ``func`` (the implicit root left out) by name, with its loops."""
    return {n.realize.block.name_hint: _Nest(n.realize, tuple(n.loops)) for n in block_nests(func)}


def _extent(loop: For) -> int | None:
    return loop.extent.value if isinstance(loop.extent, IntImm) else None


def _name(loop: For) -> str:
    return loop.loop_var.name_hint


def _thread_extents(nest: _Nest) -> dict[str, int | None]:
    """The number of threads along each ``threadIdx.*`` axis around the block (the largest
    extent bound to it, as the launch has; None when symbolic)."""
    extents: dict[str, int | None] = {}
    for loop in nest.loops:
        if loop.thread_tag.startswith("threadIdx"):
            known, extent = extents.get(loop.thread_tag, 0), _extent(loop)
            extents[loop.thread_tag] = None if None in (known, extent) else max(known, extent)
    return extents


def _shape_text(extents: dict[str, int | None]) -> str:
    """``8 × 8 (threadIdx.y: 8, threadIdx.x: 8)``, the slowest axis first."""
    tags = sorted(extents, reverse=True)
    sizes = " × ".join(str(extents[tag]) for tag in tags)
    return f"{sizes} ({', '.join(f'{tag}: {extents[tag]}' for tag in tags)})"


def _check_launch(func: PrimFunc) -> None:
    """What no GPU runs right and the code generator lets through: a block that depends on two
    nested loops bound to the same thread axis. (It refuses thread blocks of more than 1024
    threads itself.)"""
    for name, nest in _nests(func).items():
        bound: dict[str, For] = {}
        for loop in nest.loops:
            if not loop.thread_tag:
                continue
            outer = bound.get(loop.thread_tag)
            # Nested loops on one axis are one index; that is right only when the block does
            # not depend on the outer loop (a cooperative fetch inside the thread loop).
            if outer is not None and nest.feeds(outer) and nest.feeds(loop):
                raise Mismatch(
                    f"loops {_name(outer)} and {_name(loop)} around block {name!r} are both "
                    f"bound to {loop.thread_tag}, one inside the other: in each thread both "
                    f"take the same value, {loop.thread_tag}, so only the elements where they "
                    "are equal are computed",
                    "bind each loop to an axis of its own: threadIdx.x and threadIdx.y for the "
                    "threads of a block, blockIdx.x and blockIdx.y for the blocks",
                )
            bound[loop.thread_tag] = loop


def _build(func: PrimFunc, hint: Callable[[str], str]) -> Any:
    """The function built for cuda; the code generator's refusal (it names the blocks no
    thread runs) becomes the message, with ``hint(message)`` as the hint."""
    try:
        return build(func, "cuda")
    except BuildError as err:
        raise build_mismatch(err, "your kernel does not build for cuda", hint(str(err))) from None


@contextmanager
def _switching_often() -> Iterator[None]:
    # The simulator runs each GPU thread as a Python thread; switching between them more often
    # makes its barriers and its launches several times faster.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _run(lib: Any, inputs: Sequence[np.ndarray], output: tuple[int, ...]) -> np.ndarray:
    """Call the built kernel on ``inputs`` and an output filled with NaN (elements no thread
    writes stay NaN); return the output."""
    device = cuda()
    args = [array(a, device) for a in inputs]
    result = array(np.full(output, np.nan, "float32"), device)
    with _switching_often():
        lib["main"](*args, result)
    return result.numpy()


def _check_bound(nest: _Nest, block: str) -> None:
    """No loop around the block runs on the host."""
    if nest.host_loops():
        loop = nest.host_loops()[0]
        raise Mismatch(
            f"the numbers are right, but loop {_name(loop)} (extent {_extent(loop)}) around "
            f"block {block!r} runs on the host, outside the kernel: the host launches the "
            f"kernel once per iteration",
            f"bind {_name(loop)} to a blockIdx axis, so that the blocks of one launch cover it",
        )


def _check_threads(nest: _Nest, block: str, want: dict[str, int], task: str) -> None:
    have = _thread_extents(nest)
    if have != want:
        raise Mismatch(
            f"the numbers are right, but block {block!r} runs in thread blocks of "
            f"{_shape_text(have) if have else 'no threads'}; the exercise asks for "
            f"{_shape_text(want)}",
            task,
        )


# ------------------------------------------------------------------------ ch6.bind_transpose

_TRANSPOSE_HINT = (
    "split i and j by 8, reorder to (i_0, j_0, i_1, j_1), bind i_0 and j_0 to blockIdx.y and "
    "blockIdx.x, i_1 and j_1 to threadIdx.y and threadIdx.x"
)


@exercise(
    "ch6.bind_transpose",
    title="Bind a transpose to thread blocks",
    task="""
    `Transpose` holds `main(A, B)`, `B = A.T` for `A` of shape (32, 64): two loops, `i` over
    the 64 rows of `B` and `j` over its 32 columns, that no GPU thread runs yet. Schedule it
    for the GPU so that

    * each thread computes one element of `B`, and every loop is bound to a thread axis;
    * a thread block is 8 × 8 threads: `threadIdx.y` picks the row inside an 8 × 8 tile of
      `B`, `threadIdx.x` the column (so that neighbouring threads write neighbouring
      elements of `B`);
    * `blockIdx.y` and `blockIdx.x` pick the tile: the grid is 8 × 4 blocks.

    The answer is the schedule (or its `sch.mod`): `check("ch6.bind_transpose", sch)`.
    """,
    hints=(
        "A thread block covers an 8 × 8 tile of B, so each of the loops i and j becomes two "
        "loops: one over the tiles and one inside a tile.",
        "`sch.split(i, factors=[None, 8])` and the same for j; `sch.reorder` puts both tile "
        "loops outside both inner loops, then `sch.bind` each of the four loops.",
        _TRANSPOSE_HINT + ".",
    ),
    solution=solutions.bind_transpose,
)
def check_bind_transpose(answer: Any) -> None:
    func = as_prim_func(answer)
    lib = _build(
        func,
        lambda _: (
            "a thread block covers an 8 × 8 tile of B: split i and j by 8, bind the "
            "loops over the tiles to blockIdx and the loops inside a tile to threadIdx"
        ),
    )
    _check_launch(func)
    (a,) = random_inputs([(32, 64)])
    assert_close(_run(lib, [a], (64, 32)), a.T, "B")
    nest = _nests(func).get("B")
    if nest is None:
        raise Mismatch(
            "your program has no block named 'B'", "schedule Transpose without renaming blocks"
        )
    _check_bound(nest, "B")
    if nest.thread_serial_loops():
        loop = nest.thread_serial_loops()[0]
        raise Mismatch(
            f"the numbers are right, but loop {_name(loop)} (extent {_extent(loop)}) runs "
            "serially inside each thread: a thread computes "
            f"{_extent(loop)} elements of B, and the exercise asks for one",
            _TRANSPOSE_HINT,
        )
    _check_threads(
        nest,
        "B",
        {"threadIdx.y": 8, "threadIdx.x": 8},
        "split both i and j by 8 and bind "
        "the inner loops to threadIdx.y (rows) and threadIdx.x (columns)",
    )
    column = next(loop for loop in nest.loops if loop.thread_tag == "threadIdx.x")
    if nest.feeds(column) != (1,):
        raise Mismatch(
            f"the numbers are right, but threadIdx.x (loop {_name(column)}) walks down the "
            "columns of B: threads with neighbouring threadIdx.x, which the GPU groups into "
            "one warp, write elements a row of B (32 floats) apart, where along a row they "
            "would write neighbouring floats, which the GPU combines into fewer memory "
            "transactions",
            "bind the inner loop over j (the columns of B) to threadIdx.x and the one over i "
            "to threadIdx.y",
        )


# --------------------------------------------------------------------------- ch6.local_matmul


def _build_hint(message: str) -> str:
    if "allocated outside every thread-bound loop" in message:
        return (
            "the block that copies C_local to C runs outside the kernel's threads: "
            "sch.reverse_compute_at(C_local, j_1) puts it under the thread loops, so that "
            "each thread writes back its own tile"
        )
    return (
        "start as the chapter's local blocking does: a local accumulator (cache_write), then "
        "split i and j into blocks, threads and each thread's tile, and bind"
    )


@exercise(
    "ch6.local_matmul",
    title="A matmul with a local accumulator per thread",
    task="""
    `Matmul` holds `main(A, B, C)`, `C = A @ B` for `A` of shape (32, 32) and `B` of shape
    (32, 64). Schedule it for the GPU so that

    * each thread computes a 2 × 2 tile of `C`, accumulated in a buffer in `"local"` memory
      (its registers) and written to `C` once, by the thread itself;
    * a thread block is 8 × 16 threads (`threadIdx.y` × `threadIdx.x`, the 16 along the
      columns of `C`), so it computes a 16 × 32 tile of `C`;
    * `blockIdx.y` and `blockIdx.x` pick that tile: the grid is 2 × 2 blocks.

    The answer is the schedule (or its `sch.mod`): `check("ch6.local_matmul", sch)`.
    """,
    hints=(
        "This is the chapter's local blocking with other tile sizes. Start with the local "
        "accumulator: `sch.cache_write(block_C, 0, 'local')`.",
        "Split i into three loops (blocks, threads, the thread's tile) of extents (2, 8, 2) "
        "and j into (2, 16, 2); reorder so that the two tile loops are innermost, below k; "
        "then move the write-back block under the thread loops with reverse_compute_at.",
        "C_local = sch.cache_write(block_C, 0, 'local'); split i into [None, 8, 2] and j into "
        "[None, 16, 2]; reorder(i_0, j_0, i_1, j_1, k, i_2, j_2); reverse_compute_at(C_local, "
        "j_1); bind i_0, j_0, i_1, j_1 to blockIdx.y, blockIdx.x, threadIdx.y, threadIdx.x.",
    ),
    solution=solutions.local_matmul,
)
def check_local_matmul(answer: Any) -> None:
    func = as_prim_func(answer)
    lib = _build(func, _build_hint)
    _check_launch(func)
    nests = _nests(func)
    accumulate = next(
        (
            (name, nest)
            for name, nest in nests.items()
            if any(iv.iter_type == IterVar.CommReduce for iv in nest.realize.block.iter_vars)
        ),
        None,
    )
    if accumulate is None:
        raise Mismatch(
            "your program has no reduction block left", "schedule Matmul; do not rewrite it"
        )
    name, update = accumulate
    target = update.realize.block.writes[0].buffer
    if target.scope == "shared":
        raise Mismatch(
            f"block {name!r} accumulates in {target.name}, in "
            "shared memory, which the threads of a block share; the exercise asks for a "
            "buffer in local memory, private to each thread (its registers)",
            "sch.cache_write(block_C, 0, 'local')",
        )
    if target.scope != "local":
        raise Mismatch(
            f"block {name!r} adds every product into "
            f"{target.name}, in {target.scope or 'global'} memory: each of the 32 additions "
            "into an element is a read and a write of the GPU's slowest memory",
            "accumulate in registers: C_local = sch.cache_write(block_C, 0, 'local') before "
            "the splits",
        )
    # The accumulator is checked before running: a shared one makes the simulator slow.
    a, b = random_inputs([(32, 32), (32, 64)])
    assert_close(_run(lib, [a, b], (32, 64)), a @ b, "C")
    write_back = next(
        (
            (n, nest)
            for n, nest in nests.items()
            if nest.realize.block.writes and nest.realize.block.writes[0].buffer.name == "C"
        ),
        None,
    )
    if write_back is None:
        raise Mismatch("no block writes C", "schedule Matmul; do not rewrite it")
    block, nest = write_back
    _check_bound(nest, block)
    _check_threads(
        nest,
        block,
        {"threadIdx.y": 8, "threadIdx.x": 16},
        "split i by [None, 8, 2] and j "
        "by [None, 16, 2]; bind the middle loops to threadIdx.y and threadIdx.x",
    )
    tile = [1, 1]  # the rows and columns of C that one thread writes
    for loop in nest.thread_serial_loops():
        for axis in nest.feeds(loop):
            tile[axis] *= _extent(loop) or 1
    if tile != [2, 2]:
        raise Mismatch(
            f"the numbers are right, but each thread writes a tile of {tile[0]} × {tile[1]} "
            "elements of C "
            f"(the loops of block {block!r} inside the thread loops); the exercise asks for "
            "2 × 2",
            "split i and j into three loops each, the innermost of extent 2, and "
            "reverse_compute_at the write-back block at the innermost thread loop",
        )
