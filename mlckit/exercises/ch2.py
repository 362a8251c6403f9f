"""Chapter 2's exercises: a broadcast add, a 2-D convolution, and scheduling ``bmm_relu``
until it is the target program.

``MyBmmRelu`` (the batched matmul + ReLU as written) and ``TargetModule`` (the program the
schedule must reach) are the MLC course's; the notebook prints both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir import For, ForKind, IntImm, IterVar, PrimFunc
from mlckit.tir.analysis import block_nests, collect_vars
from mlckit.tir.stmt import Block, BlockRealize

from .checks import (
    as_prim_func,
    assert_close,
    assert_same_program,
    prim_func_runner,
    random_inputs,
)
from .core import Mismatch, exercise
from .solutions import ch2 as solutions

# --------------------------------------------------------------------- reading a loop nest


@dataclass(frozen=True)
class _Nest:
    """A block, and the loops around it (outermost first)."""

    realize: BlockRealize
    loops: tuple[For, ...]

    @property
    def block(self) -> Block:
        return self.realize.block

    def axes_of(self, loop: For) -> tuple[int, ...]:
        """The positions of the block iterators whose bindings use ``loop``'s variable."""
        return tuple(
            position
            for position, value in enumerate(self.realize.iter_values)
            if any(var is loop.loop_var for var in collect_vars(value))
        )


def _nests(func: PrimFunc) -> dict[str, _Nest]:
    """Every block of ``func`` (the implicit root left out) by name, with its loops."""
    return {n.realize.block.name_hint: _Nest(n.realize, tuple(n.loops)) for n in block_nests(func)}


def _extent(loop: For) -> int | str:
    return loop.extent.value if isinstance(loop.extent, IntImm) else loop.extent.script()


def _kind(loop: For) -> str:
    return ForKind(loop.kind).name.lower()


def _check_axis_kinds(func: PrimFunc) -> None:
    """Each block axis that picks the element the block writes is spatial; the others are
    reduction axes (all their values add into the same element)."""
    for name, nest in _nests(func).items():
        block = nest.block
        if not block.writes:
            continue
        written = {
            id(var)
            for region in block.writes
            for rng in region.region
            for var in collect_vars(rng.min)
        }
        target = block.writes[0].buffer.name
        for iv in block.iter_vars:
            axis = iv.var.name_hint
            if iv.iter_type == IterVar.DataPar and id(iv.var) not in written:
                raise Mismatch(
                    f"the numbers are right, but block {name!r} declares {axis} spatial while "
                    f"the element of {target} it writes does not depend on {axis}: every value "
                    f"of {axis} adds into the same element, which makes {axis} a reduction axis",
                    "declare it with T.axis.reduce (an 'R' in T.axis.remap): schedules rely on "
                    "the kinds, and would let parallel or vectorize split the sum",
                )
            if iv.iter_type == IterVar.CommReduce and id(iv.var) in written:
                raise Mismatch(
                    f"the numbers are right, but block {name!r} declares {axis} a reduction "
                    f"axis while it picks the element of {target} that the block writes: "
                    f"{axis} is spatial",
                    "declare it with T.axis.spatial (an 'S' in T.axis.remap)",
                )


# Integer outputs start as this value: a sum that never sets its start (no T.init) keeps it.
_GARBAGE = 1_000_003

# ---------------------------------------------------------------------- ch2.broadcast_add


@exercise(
    "ch2.broadcast_add",
    title="Broadcast add",
    task="""
    Write a PrimFunc `add(A, B, C)` with `A: T.Buffer((4, 4), "int64")`,
    `B: T.Buffer((4,), "int64")` and the destination `C: T.Buffer((4, 4), "int64")` that
    computes what numpy's `A + B` computes: `B` is *broadcast*, added to every row of `A`.
    Write the loops and the block yourself; each axis of the block says whether it is
    spatial or a reduction.

    The answer is the PrimFunc, or an IRModule holding it: `check("ch2.broadcast_add", MyAdd)`.
    """,
    hints=(
        "Numpy's broadcasting lines up the *last* axes: B, of shape (4,), runs along the "
        "columns of A. Print `np.arange(16).reshape(4, 4) + np.arange(4)` to see it.",
        "One loop nest `for i, j in T.grid(4, 4):` with one block; both axes are spatial, "
        '`vi, vj = T.axis.remap("SS", [i, j])`, and B is read with the column axis.',
        "The block's body is `C[vi, vj] = A[vi, vj] + B[vj]`.",
    ),
    solution=solutions.broadcast_add,
)
def check_broadcast_add(answer: Any) -> None:
    func = as_prim_func(answer)
    a, b = random_inputs([(4, 4), (4,)], "int64")
    run = prim_func_runner(func, [a, b], [((4, 4), "int64")])
    (c,) = run(_GARBAGE)
    if np.array_equal(c, a + b[:, None]):
        raise Mismatch(
            "C[i, j] is A[i, j] + B[i]: B is broadcast along the wrong axis",
            "numpy lines up the last axes, so B runs along the columns: read it as B[vj]",
        )
    if np.array_equal(c, a):
        raise Mismatch("C holds A: B is not added", "the body is C[vi, vj] = A[vi, vj] + B[...]")
    assert_close(c, a + b, "C", rerun=lambda fill: run(fill)[0])
    _check_axis_kinds(func)


# ----------------------------------------------------------------------------- ch2.conv2d

_N, _CI, _H, _W, _CO, _K = 1, 1, 8, 8, 2, 3
_OUT = (_N, _CO, _H - _K + 1, _W - _K + 1)


def conv2d_reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``out[n, co, h, w] = sum_{ci, kh, kw} data[n, ci, h + kh, w + kw] * weight[co, ci, kh, kw]``
    (stride 1, no padding: a deep-learning convolution, which does not flip the kernel)."""
    k = weight.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(data, (k, k), axis=(2, 3))
    return np.einsum("nchwpq,ocpq->nohw", windows, weight)


@exercise(
    "ch2.conv2d",
    title="A 2-D convolution",
    task="""
    Write a PrimFunc `conv(data, weight, out)` for the convolution of a deep-learning layer
    (stride 1, no padding), with `N, CI, H, W, CO, K = 1, 1, 8, 8, 2, 3`:
    `data: T.Buffer((N, CI, H, W), "int64")`, `weight: T.Buffer((CO, CI, K, K), "int64")` and
    the destination `out: T.Buffer((N, CO, H - K + 1, W - K + 1), "int64")`, that is
    (1, 2, 6, 6), where `out[n, co, h, w]` is the sum over `ci`, `kh` and `kw` of
    `data[n, ci, h + kh, w + kw] * weight[co, ci, kh, kw]`.

    The answer is the PrimFunc, or an IRModule holding it: `check("ch2.conv2d", MyConv)`.
    """,
    hints=(
        "Seven loops: four over the output's axes (n, co, h, w), which are spatial, and three "
        "that the sum runs over (ci, kh, kw), which are reduction axes.",
        'One block with `vn, vco, vh, vw, vci, vkh, vkw = T.axis.remap("SSSSRRR", '
        "[n, co, h, w, ci, kh, kw])`; each sum starts from zero with "
        "`with T.init(): out[vn, vco, vh, vw] = T.int64(0)`.",
        "The update is `out[vn, vco, vh, vw] = out[vn, vco, vh, vw] + "
        "data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, vkh, vkw]`.",
    ),
    solution=solutions.conv2d,
)
def check_conv2d(answer: Any) -> None:
    func = as_prim_func(answer)
    data, weight = random_inputs([(_N, _CI, _H, _W), (_CO, _CI, _K, _K)], "int64")
    run = prim_func_runner(func, [data, weight], [(_OUT, "int64")])
    (out,) = run(_GARBAGE)
    expected = conv2d_reference(data, weight)
    if not out.any():
        raise Mismatch(
            "every element of out is 0: nothing is summed into it yet",
            "add the three reduction axes ci, kh, kw to the loops and the block, and add "
            "data[...] * weight[...] into out[vn, vco, vh, vw] on each of their iterations",
        )
    if np.array_equal(out - expected, np.full(_OUT, _GARBAGE)):
        raise Mismatch(
            "each sum starts from what `out` held before the call, not from 0",
            "give the block an init, `with T.init(): out[vn, vco, vh, vw] = T.int64(0)`; it "
            "runs when every reduction axis is at its first value",
        )
    if np.array_equal(out, conv2d_reference(data, weight[:, :, ::-1, ::-1])):
        raise Mismatch(
            "your convolution flips the kernel, as the convolution of signal processing does",
            "a deep-learning conv2d slides the kernel as it is: "
            "data[vn, vci, vh + vkh, vw + vkw] * weight[vco, vci, vkh, vkw]",
        )
    assert_close(out, expected, "out", rerun=lambda fill: run(fill)[0])
    _check_axis_kinds(func)


# --------------------------------------------------------------------------- ch2.bmm_relu


@I.ir_module
class MyBmmRelu:
    @T.prim_func
    def bmm_relu(
        A: T.Buffer((16, 128, 128), "float32"),
        B: T.Buffer((16, 128, 128), "float32"),
        C: T.Buffer((16, 128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((16, 128, 128), "float32")
        for n, i, j, k in T.grid(16, 128, 128, 128):
            with T.block("Y"):
                vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
                with T.init():
                    Y[vn, vi, vj] = T.float32(0)
                Y[vn, vi, vj] = Y[vn, vi, vj] + A[vn, vi, vk] * B[vn, vk, vj]
        for n, i, j in T.grid(16, 128, 128):
            with T.block("C"):
                vn, vi, vj = T.axis.remap("SSS", [n, i, j])
                C[vn, vi, vj] = T.max(Y[vn, vi, vj], T.float32(0))


@I.ir_module
class TargetModule:
    @T.prim_func
    def bmm_relu(
        A: T.Buffer((16, 128, 128), "float32"),
        B: T.Buffer((16, 128, 128), "float32"),
        C: T.Buffer((16, 128, 128), "float32"),
    ):
        T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((16, 128, 128), "float32")
        for i0 in T.parallel(16):
            for i1, i2_0 in T.grid(128, 16):
                for ax0_init in T.vectorized(8):
                    with T.block("Y_init"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + ax0_init)
                        Y[n, i, j] = T.float32(0)
                for ax1_0 in T.serial(32):
                    for ax1_1 in T.unroll(4):
                        for ax0 in T.serial(8):
                            with T.block("Y_update"):
                                n, i = T.axis.remap("SS", [i0, i1])
                                j = T.axis.spatial(128, i2_0 * 8 + ax0)
                                k = T.axis.reduce(128, ax1_0 * 4 + ax1_1)
                                Y[n, i, j] = Y[n, i, j] + A[n, i, k] * B[n, k, j]
                for i2_1 in T.vectorized(8):
                    with T.block("C"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + i2_1)
                        C[n, i, j] = T.max(Y[n, i, j], T.float32(0))


# The axes of Y's block iterators (n, i, j, k), and how the target splits j and k.
_AXES = "nijk"
_SPLITS = {"j": (16, 8), "k": (32, 4)}
_ORDER = ("n", "i", "j", "k", "k", "j")
_ACTION = {
    "vectorized": "sch.vectorize({loop})",
    "unrolled": "sch.unroll({loop})",
    "serial": "leave {loop} serial",
}


def _walks(nest: _Nest, loop: For) -> str:
    """The axis (or fused axes) of Y's iterators that ``loop`` walks, as ``"j"`` or ``"i+j"``."""
    return "+".join(_AXES[p] for p in nest.axes_of(loop)) or "-"


def _bmm_verdict(func: PrimFunc) -> tuple[str, str] | None:
    """What differs between a schedule of ``MyBmmRelu`` and ``TargetModule``, and the step
    that fixes it: the first of the split factors, the loop order, where C is, whether the
    batch loop is parallel, where Y_init is, and the other loop kinds that differs. The batch
    loop's kind comes before decompose_reduction because mlckit refuses ``parallel`` on it
    once Y is split in two. None when none of these differs (the generic verdict then says
    what does)."""
    nests = _nests(func)
    update = nests.get("Y_update", nests.get("Y"))
    if update is None or "C" not in nests or len(update.realize.iter_values) != len(_AXES):
        return None
    name = update.block.name_hint
    for axis, want in _SPLITS.items():
        have = tuple(_extent(loop) for loop in update.loops if _walks(update, loop) == axis)
        split = f"sch.split({axis}, factors=[None, {want[1]}])"
        if len(have) == 1:
            return (
                f"block {name!r}: your {axis} loop is not split (one loop of extent "
                f"{have[0]}); the exercise asks for extents {want}",
                split,
            )
        if have != want:
            return (
                f"block {name!r}: your {axis} loop is split into extents "
                f"({', '.join(map(str, have))}); the exercise asks for {want}",
                f"{split} on the unsplit loop (start again from MyBmmRelu)",
            )
    order = tuple(_walks(update, loop) for loop in update.loops)
    if order != _ORDER:
        return (
            f"the loops around block {name!r} walk the axes ({', '.join(order)}), outermost "
            f"first; the target's walk ({', '.join(_ORDER)})",
            "sch.reorder(j_0, k_0, k_1, j_1)",
        )
    n, j_0, k_0 = update.loops[0], update.loops[2], update.loops[3]
    c_loops = nests["C"].loops
    if len(c_loops) != 4 or c_loops[2] is not j_0:
        return (
            "block C runs in a loop nest of its own, not under Y's j_0 loop (i2_0 in the target)",
            "sch.reverse_compute_at(block_C, j_0) computes the ReLU of each 8-wide tile of Y "
            "right after the tile, while it is still in the cache",
        )
    if _kind(n) != "parallel":
        batch = n.loop_var.name_hint
        return (
            f"your batch loop {batch} is {_kind(n)}; in the target it is parallel",
            "mlckit refuses parallel on it once decompose_reduction has split Y in two: start "
            f"again from MyBmmRelu and call sch.parallel({batch}) before decompose_reduction"
            if "Y_init" in nests
            else f"sch.parallel({batch}), before decompose_reduction (after it, mlckit refuses "
            f"parallel on {batch}: two blocks then write Y under it)",
        )
    if "Y_init" not in nests:
        return (
            "block Y still sets Y to 0 inside its reduction (its T.init()); the target sets "
            "it in a block Y_init of its own, before the k_0 loop",
            "sch.decompose_reduction(block_Y, k_0)",
        )
    init_loops = nests["Y_init"].loops
    if len(init_loops) != 4 or init_loops[2] is not j_0:
        return (
            f"block Y_init is not right before the k_0 loop (loop {k_0.loop_var.name_hint})",
            "decompose the reduction at k_0: sch.decompose_reduction(block_Y, k_0)",
        )
    target = _nests(as_prim_func(TargetModule))
    for block in ("Y_init", "Y_update", "C"):
        for have, want in zip(nests[block].loops, target[block].loops):
            if _kind(have) != _kind(want):
                loop = have.loop_var.name_hint
                return (
                    f"block {block!r}: your loop {loop} (extent {_extent(have)}) is "
                    f"{_kind(have)}; in the target it is {_kind(want)}",
                    _ACTION.get(_kind(want), "sch.parallel({loop})").format(loop=loop),
                )
    return None


@exercise(
    "ch2.bmm_relu",
    title="Schedule bmm_relu until it is the target program",
    task="""
    `MyBmmRelu` holds `bmm_relu`, a batched matrix multiplication followed by a ReLU
    (`C[n] = max(A[n] @ B[n], 0)` for 16 pairs of 128x128 matrices), written as plain loops.
    Transform it with a `tir.Schedule` until it is `TargetModule`'s program: the same loops,
    splits, loop kinds and blocks (the loops' names may differ).

    Start from `sch = tir.Schedule(MyBmmRelu)` and use the primitives of this chapter
    (`split`, `reorder`, `reverse_compute_at`, `decompose_reduction`) and the loop kinds
    (`parallel`, `vectorize`, `unroll`). mlckit checks `parallel` more strictly than TVM: it
    accepts a loop only while one block writes `Y` under it, so mark the batch loop parallel
    *before* `decompose_reduction` splits `Y` into two blocks.

    The answer is the schedule (or its `sch.mod`): `check("ch2.bmm_relu", sch)`.
    """,
    hints=(
        "Read the target from the outside in: which loops of Y were split, and by what "
        "factors? Which block moved under which loop? Which blocks are new?",
        "j is split by 8 and k by 4, the split loops are ordered (j_0, k_0, k_1, j_1), C is "
        "computed under j_0 with reverse_compute_at, and the reduction is decomposed at k_0.",
        "split(j, [None, 8]), split(k, [None, 4]), reorder(j_0, k_0, k_1, j_1), "
        "reverse_compute_at(block_C, j_0), parallel(n), decompose_reduction(block_Y, k_0), "
        "then vectorize the innermost loops of Y_init and of C, and unroll k_1.",
    ),
    solution=solutions.bmm_relu,
)
def check_bmm_relu(answer: Any) -> None:
    func = as_prim_func(answer)
    a, b = random_inputs([(16, 128, 128), (16, 128, 128)])
    run = prim_func_runner(func, [a, b], [((16, 128, 128), "float32")])
    (c,) = run(np.nan)
    assert_close(c, np.maximum(a @ b, 0), "C", rerun=lambda fill: run(fill)[0])
    assert_same_program(
        func,
        as_prim_func(TargetModule),
        # The reference schedule's loop names (n, j_0, ...) are the ones a student's get.
        spellings=[as_prim_func(solutions.bmm_relu())],
        verdict=_bmm_verdict,
    )
