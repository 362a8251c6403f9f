"""Chapter 8's exercises: the description of a tensor intrinsic, and the schedule that
tensorizes a matmul with one.

Both are about ``MatmulNN``, a 64 x 64 x 64 matmul ``C = A @ B`` with ``B`` in its own layout
(rows along ``k``), and the accelerator's second instruction, ``mma16``: ``C += A @ B`` on
16 x 16 tiles in the scopes ``global.A_reg``, ``global.B_reg`` and ``global.accumulator``.
The instruction is registered here as the tensor intrinsic ``ch8_mma16`` (the reference
description with an implementation that calls the extern ``ch8_mma16``, a numba kernel), so
that the chapter's second exercise can tensorize with it.

The checkers run the answer (the description on its own tiles, the schedule's program on the
whole matmul) against numpy, then check what the numbers cannot show: that the description
fits the tiles ``tensorize`` will meet (its error, which shows the first difference, becomes
the message), and that the tensorized program computes through the instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlckit.driver import build
from mlckit.errors import MLCError, ScheduleError
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.tir import Call, PrimFunc, Schedule, StringImm, TensorIntrin
from mlckit.tir.op import CALL_EXTERN, register_extern
from mlckit.tir.stmt_functor import post_order_visit

from .checks import as_prim_func, assert_close, build_mismatch, random_inputs, run_prim_func
from .core import Mismatch, exercise
from .solutions import ch8 as solutions

INTRINSIC = "ch8_mma16"
# What each of the description's parameters stands for: name, scope.
OPERANDS = (("A", "global.A_reg"), ("B", "global.B_reg"), ("C", "global.accumulator"))

# --------------------------------------------------------------------------- the programs


@I.ir_module
class MatmulNN:
    @T.prim_func
    def main(
        A: T.Buffer((64, 64), "float32"),
        B: T.Buffer((64, 64), "float32"),
        C: T.Buffer((64, 64), "float32"),
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(64, 64, 64):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def mma16_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
    sa = T.var("int32")
    sb = T.var("int32")
    sc = T.var("int32")
    A = T.match_buffer(
        a, (16, 16), "float32", offset_factor=16, strides=[sa, 1], scope="global.A_reg"
    )
    B = T.match_buffer(
        b, (16, 16), "float32", offset_factor=16, strides=[sb, 1], scope="global.B_reg"
    )
    C = T.match_buffer(
        c, (16, 16), "float32", offset_factor=16, strides=[sc, 1], scope="global.accumulator"
    )
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        T.evaluate(
            T.call_extern(
                "int32", "ch8_mma16", C.access_ptr("w"), A.access_ptr("r"), B.access_ptr("r")
            )
        )


@register_extern(INTRINSIC)
def mma16(C: Any, A: Any, B: Any) -> int:
    """The accelerator's instruction, in software: C += A @ B on 16 x 16 tiles."""
    for i in range(16):
        for k in range(16):
            a = A[i, k]
            for j in range(16):
                C[i, j] += a * B[k, j]
    return 0


TensorIntrin.register(INTRINSIC, solutions.mma16_desc(), mma16_impl)

# ------------------------------------------------------------------------ ch8.mma16_desc


def _check_operands(desc: PrimFunc) -> None:
    """Three parameters, each a 16 x 16 float32 tile in the scope of its operand."""
    if len(desc.params) != 3:
        raise Mismatch(
            f"your description takes {len(desc.params)} parameters; the instruction has three "
            "operands, A, B and C, in that order",
            "keep the signature of the starting code: (a: T.handle, b: T.handle, c: T.handle)",
        )
    for index, (param, (name, scope)) in enumerate(zip(desc.params, OPERANDS)):
        buffer = desc.buffer_map.get(param)
        if buffer is None:
            raise Mismatch(
                f"parameter {index} ({param.name_hint}) is not matched to a buffer",
                f"{name} = T.match_buffer({param.name_hint}, (16, 16), 'float32', "
                f"offset_factor=16, scope={scope!r})",
            )
        shape = tuple(getattr(dim, "value", dim) for dim in buffer.shape)
        if shape != (16, 16) or buffer.dtype != "float32":
            raise Mismatch(
                f"parameter {index} ({buffer.name}) is a {buffer.dtype} buffer of shape {shape}; "
                "the instruction works on 16 x 16 float32 tiles",
                "every operand is T.match_buffer(..., (16, 16), 'float32', ...)",
            )
        if buffer.scope != scope:
            raise Mismatch(
                f"parameter {index} ({buffer.name}) is in scope {buffer.scope!r}; the "
                f"instruction's operand {name} is in {scope!r}",
                f"T.match_buffer(..., scope={scope!r}): tensorize matches each of the "
                "description's buffers only with a buffer of the same scope",
            )


def _staged_tile(mod: Any) -> Schedule:
    """The reference schedule of ``mod`` up to ``tensorize``, and the tile block's handle."""
    sch = Schedule(mod)
    i, j, k = sch.get_loops("matmul")
    i_0, i_1 = sch.split(i, factors=[None, 16])
    j_0, j_1 = sch.split(j, factors=[None, 16])
    k_0, k_1 = sch.split(k, factors=[None, 16])
    sch.reorder(i_0, j_0, k_0, i_1, j_1, k_1)
    tile = sch.blockize(i_1)
    for index, (_, scope) in enumerate(OPERANDS[:2]):
        sch.compute_at(sch.cache_read(tile, index, scope), k_0)
    sch.reverse_compute_at(sch.cache_write(tile, 0, OPERANDS[2][1]), j_0)
    sch.decompose_reduction(tile, k_0)
    return sch


def _run_matmul(func: PrimFunc) -> None:
    a, b = random_inputs([(64, 64), (64, 64)])
    (c,) = run_prim_func(func, [a, b], [((64, 64), "float32")])
    assert_close(c, a @ b, "C")


@exercise(
    "ch8.mma16_desc",
    title="Describe the instruction mma16",
    task="""
    The accelerator has a second instruction, `mma16`: `C += A @ B` on 16 × 16 tiles, with
    `B` in its own layout (`B[k, j]`, no transpose), `A` in `"global.A_reg"`, `B` in
    `"global.B_reg"` and `C` in `"global.accumulator"`. Write its description: a PrimFunc of
    three parameters `(a, b, c)`, each matched to a 16 × 16 float32 buffer of its scope
    (`offset_factor=16`), whose body computes what the instruction computes.

    The check runs your description on random tiles, then tensorizes `MatmulNN` (`C = A @ B`)
    with it: `check("ch8.mma16_desc", mma16_desc)`.
    """,
    hints=(
        "Start from the chapter's `tmm16_desc`: the operands and their scopes are the same; "
        "only what the body computes differs.",
        "tmm16 reads `B[vjj, vkk]` (B transposed); for `C += A @ B`, the element of `B` "
        "that multiplies `A[vii, vkk]` into `C[vii, vjj]` is in row `vkk`.",
        "The body is `C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vkk, vjj]` in a "
        "`T.grid(16, 16, 16)` with iterators `T.axis.remap('SSR', [i, j, k])`, inside a root "
        "block that reads C, A and B and writes C.",
    ),
    solution=solutions.mma16_desc,
)
def check_mma16_desc(answer: Any) -> None:
    desc = as_prim_func(answer)
    _check_operands(desc)
    a, b, c = random_inputs([(16, 16)] * 3)
    try:
        tile = build(desc, target="llvm")
    except MLCError as err:
        raise build_mismatch(err, "your description does not build") from None
    got = c.copy()
    tile[next(iter(tile.function_names()))](a, b, got)
    if np.allclose(got, c + a @ b.T, rtol=1e-4, atol=1e-4):
        raise Mismatch(
            "your description computes C += A @ B.T, the chapter's tmm16; mma16 reads B in "
            "its own layout and computes C += A @ B",
            "which element of B multiplies A[vii, vkk] into C[vii, vjj] in A @ B?",
        )
    assert_close(got, c + a @ b, "C")
    TensorIntrin.register("ch8_your_mma16", desc, mma16_impl, override=True)
    sch = _staged_tile(MatmulNN)
    try:
        sch.tensorize("matmul_o_update", "ch8_your_mma16")
    except ScheduleError as err:
        raise Mismatch(
            f"your description computes the right tiles, but tensorize refuses it: {err}",
            "the description must be written as the block it replaces is: one loop nest "
            "T.grid(16, 16, 16) around one block with iterators 'SSR' and no init",
        ) from None
    _run_matmul(as_prim_func(sch))


# ---------------------------------------------------------------------- ch8.tensorize_mma16


def _extern_calls(func: PrimFunc, name: str) -> int:
    """How many places in ``func`` call the extern ``name``."""
    found = []

    def visit(node: Any) -> None:
        if (
            isinstance(node, Call)
            and node.op is CALL_EXTERN
            and isinstance(node.args[0], StringImm)
            and node.args[0].value == name
        ):
            found.append(node)

    post_order_visit(func.body, visit)
    return len(found)


@exercise(
    "ch8.tensorize_mma16",
    title="Tensorize a matmul with mma16",
    task="""
    `MatmulNN` holds `main(A, B, C)`, `C = A @ B` for 64 × 64 matrices. The tensor intrinsic
    `"ch8_mma16"` (registered when `mlckit.exercises.ch8` is imported) describes the
    accelerator's instruction `C += A @ B` on 16 × 16 tiles, with `A` in `"global.A_reg"`,
    `B` in `"global.B_reg"` and `C` in `"global.accumulator"`, and calls it. Schedule
    `MatmulNN` so that every multiply-add goes through the instruction: the program must
    compute `A @ B` and call `ch8_mma16` in place of the tiles' scalar loops.

    The answer is the schedule (or its `sch.mod`): `check("ch8.tensorize_mma16", sch)`.
    """,
    hints=(
        "Follow the chapter's steps for tmm16: tiles of 16 × 16 × 16, a block per tile, the "
        "operands in the instruction's scopes, no init in the tile, then tensorize.",
        "split i, j and k by 16 and reorder to (i_0, j_0, k_0, i_1, j_1, k_1); "
        "`tile = sch.blockize(i_1)`; cache_read the tile's reads 0 and 1 into "
        "'global.A_reg' and 'global.B_reg' (compute_at k_0), cache_write its write 0 into "
        "'global.accumulator' (reverse_compute_at j_0).",
        "then `sch.decompose_reduction(tile, k_0)` and `sch.tensorize(tile, 'ch8_mma16')`.",
    ),
    solution=solutions.tensorize_mma16,
)
def check_tensorize_mma16(answer: Any) -> None:
    func = as_prim_func(answer)
    _run_matmul(func)
    if _extern_calls(func, INTRINSIC) == 0:
        scopes = {
            buffer.scope
            for buffer in _allocated_buffers(func)
            if buffer.scope.startswith("global.")
        }
        missing = [scope for _, scope in OPERANDS if scope not in scopes]
        raise Mismatch(
            "your program computes A @ B, but with its own multiply-adds: it never calls the "
            f"instruction {INTRINSIC}",
            (
                f"the instruction reads and writes the scopes {', '.join(missing)}, which your "
                "program has no buffer in: cache_read and cache_write the tile block into them"
                if missing
                else f"decompose_reduction(tile, k_0), then sch.tensorize(tile, {INTRINSIC!r})"
            ),
        )


def _allocated_buffers(func: PrimFunc) -> list[Any]:
    """The buffers the program allocates (the blocks' alloc_buffers)."""
    found: list[Any] = []

    def visit(node: Any) -> None:
        found.extend(getattr(node, "alloc_buffers", ()))

    post_order_visit(func.body, visit)
    return found
