"""Chapter 1's exercises: low-level numpy in destination-passing style, and first PrimFuncs."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mlckit.driver import build
from mlckit.ir import IRModule
from mlckit.tir import IterVar, PrimFunc
from mlckit.tir.stmt import Block
from mlckit.tir.stmt_functor import post_order_visit

from .checks import (
    GARBAGE_FILLS,
    as_prim_func,
    assert_close,
    prim_func_runner,
    program_diff,
    random_inputs,
)
from .core import Mismatch, exercise
from .solutions import ch1 as solutions

# ------------------------------------------------------------------------- shared helpers


def _blocks(func: PrimFunc) -> list[Block]:
    """The blocks of ``func`` that hold computation (the implicit root block left out)."""
    found: list[Block] = []

    def visit(node: Any) -> None:
        if isinstance(node, Block) and node.name_hint != "root":
            found.append(node)

    post_order_visit(func.body, visit)
    return found


def _reduction_axes(block: Block) -> list[str]:
    return [iv.var.name for iv in block.iter_vars if iv.iter_type == IterVar.CommReduce]


def _generated_python(func: PrimFunc, name: str) -> str:
    """The Python the "python" target generates for ``func``, from its ``def`` line on."""
    source = build(IRModule({name: func}), target="python").source(name)
    return source[source.index("def ") :]


def _generated_diff(answer: PrimFunc, target: PrimFunc, name: str) -> Any:
    """The answer's generated Python against the target's: what each program means."""
    return program_diff(
        _generated_python(answer, name),
        _generated_python(target, name),
        names=("yours (generated Python)", "expected (generated Python)"),
    )


# ------------------------------------------------------------ ch1.lnumpy_linear_relu

_LINEAR_SHAPES = ((3, 20), (7, 20), (7,))
_WHOLE_ARRAY_CALLS = {"matmul", "dot", "einsum", "tensordot", "inner", "vdot"}


def _uses_whole_array_product(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s source multiplies whole matrices (``@``, ``np.dot``, ...)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False  # no source to read (a builtin, a lambda typed at a prompt): run it anyway
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name in _WHOLE_ARRAY_CALLS:
                return True
    return False


@contextmanager
def _empty_holds(fill: float) -> Iterator[None]:
    """While the answer runs, ``np.empty`` and ``np.empty_like`` hand out arrays holding
    ``fill`` instead of whatever the memory held: a temporary the answer never sets then
    holds a known value, and two runs with two fills show that the result depends on it."""
    saved = np.empty, np.empty_like

    def empty(shape: Any, dtype: Any = float, order: str = "C", **_: Any) -> np.ndarray:
        return np.full(shape, fill, dtype, order)

    def empty_like(prototype: Any, dtype: Any = None, order: str = "K", **kw: Any) -> np.ndarray:
        return np.full_like(prototype, fill, dtype, order, **kw)

    np.empty, np.empty_like = empty, empty_like
    try:
        yield
    finally:
        np.empty, np.empty_like = saved


def _call_linear_relu(
    answer: Callable[..., Any], x: np.ndarray, w: np.ndarray, b: np.ndarray, fill: float
) -> tuple[Any, np.ndarray]:
    """Run the answer on copies of the inputs and a destination filled with ``fill`` (any
    np.empty it calls holds ``fill`` too)."""
    inputs = [x.copy(), w.copy(), b.copy()]
    z = np.full((x.shape[0], w.shape[0]), fill, dtype="float32")
    try:
        with _empty_holds(fill):
            returned = answer(*inputs, z)
    except IndexError as err:
        raise Mismatch(
            f"your function indexed past the end of an array (IndexError: {err}); the check "
            f"passes X {x.shape}, W {w.shape}, B {b.shape} and Z {z.shape}",
            "read the sizes from the arrays (n, k_size = X.shape; m = W.shape[0]) instead of "
            "writing 128 or 784, and index W as W[j, k]: it is stored (out, in)",
        ) from None
    for name, before, after in zip("XWB", (x, w, b), inputs):
        if not np.array_equal(before, after):
            raise Mismatch(
                f"your function changed its input {name}",
                "in destination-passing style only the destination Z is written; keep "
                "intermediate values in an array of your own (np.empty)",
            )
    return returned, z


# What a typical wrong answer computes instead (from X, W and B), the verdict, the fix.
_LINEAR_MISTAKES: tuple[tuple[Callable[..., np.ndarray], str, str], ...] = (
    (
        lambda x, w, b: x @ w.T + b,
        "Z holds X @ W.T + B: the ReLU is missing",
        "apply the ReLU when writing Z: Z[i, j] = max(..., 0)",
    ),
    (
        lambda x, w, b: np.maximum(x @ w.T, 0),
        "Z holds max(X @ W.T, 0): the bias is missing",
        "add B[j] to each Y[i, j] before the ReLU",
    ),
    (
        lambda x, w, b: np.maximum(x[:, :-1] @ w[:, :-1].T + b, 0),
        "each sum leaves out its last term (k = k_size - 1): the k loop stops one short",
        "loop over range(k_size): it runs from 0 to k_size - 1",
    ),
    (
        lambda x, w, b: np.maximum(x @ w.T + x.shape[1] * b, 0),
        "B[j] is added k_size times: the bias is inside the k loop",
        "add B[j] once, after the k loop, when writing Z[i, j]",
    ),
)
_LINEAR_INIT_HINT = (
    "Z and np.empty hold garbage: accumulate in a temporary that you set to 0 when k == 0, "
    "then write Z[i, j]"
)


@exercise(
    "ch1.lnumpy_linear_relu",
    title="Low-level numpy: a linear layer with its ReLU",
    task="""
    Write `lnumpy_linear_relu(X, W, B, Z)` in low-level numpy and destination-passing style:
    it computes `Z[i, j] = max(sum_k X[i, k] * W[j, k] + B[j], 0)`, the first layer of the
    MLP and its ReLU in one function, with `W` in `(out, in)` layout as in `nn.Linear`.

    * explicit `for` loops over scalars: no `@`, `np.dot` or `np.matmul`;
    * read the sizes from the arrays (`X` is `(n, k)`, `W` is `(m, k)`, `B` is `(m,)`), since
      the check uses other sizes than the MLP's;
    * allocate any temporary yourself with `np.empty`;
    * write the result into the destination `Z` (`(n, m)`, allocated by the caller, holding
      garbage when it arrives) and return nothing.

    The answer is the function: `check("ch1.lnumpy_linear_relu", lnumpy_linear_relu)`.
    """,
    hints=(
        "Start from `lnumpy_linear0` in this chapter: the same loops, with the sizes read from "
        "the arrays, and the ReLU applied before the value is written to Z.",
        "`n, k_size = X.shape` and `m = W.shape[0]`. W is stored (out, in), so the product term "
        "is `X[i, k] * W[j, k]`. Accumulate into a temporary "
        '`Y = np.empty((n, m), dtype="float32")` that you set to 0 when `k == 0`.',
        "After the loops over (i, j, k) that fill Y, a second loop nest over (i, j) does "
        "`Z[i, j] = max(Y[i, j] + B[j], 0)`. The function returns nothing.",
    ),
    solution=solutions.lnumpy_linear_relu,
)
def check_lnumpy_linear_relu(answer: Any) -> None:
    if not callable(answer):
        raise Mismatch(
            f"expected a function lnumpy_linear_relu(X, W, B, Z), got {type(answer).__name__}",
            "pass the function itself, without calling it",
        )
    if _uses_whole_array_product(answer):
        raise Mismatch(
            "your function multiplies whole matrices (@, np.dot, np.matmul ...); the exercise "
            "asks for the loops that such a call hides",
            "write the product as three nested loops over i, j and k that update one scalar "
            "Y[i, j] at a time",
        )
    x, w, b = random_inputs(_LINEAR_SHAPES)
    fill, other_fill = GARBAGE_FILLS["f"]
    returned, z = _call_linear_relu(answer, x, w, b, fill)
    unwritten = (z == fill).all()
    if unwritten and (_call_linear_relu(answer, x, w, b, other_fill)[1] == other_fill).all():
        if returned is not None:
            raise Mismatch(
                "your function returned its result instead of writing it into Z (Z is unchanged)",
                "destination-passing style: the caller allocates Z and passes it in; "
                "assign Z[i, j] = ... inside your loops and return nothing",
            )
        raise Mismatch(
            "your function did not write Z: every element still holds what was there "
            "before the call",
            "loop over every (i, j) of Z and assign Z[i, j]",
        )
    for computes, verdict, fix in _LINEAR_MISTAKES:
        if np.allclose(z, computes(x, w, b), atol=1e-4):
            raise Mismatch(verdict, fix)
    assert_close(
        z,
        np.maximum(x @ w.T + b, 0),
        "Z",
        rerun=lambda fill: _call_linear_relu(answer, x, w, b, fill)[1],
        init_hint=_LINEAR_INIT_HINT,
    )


# ------------------------------------------------------------------------ ch1.bias_relu


def _require_spatial(func: PrimFunc) -> None:
    """Every block axis of an element-wise computation is spatial."""
    for block in _blocks(func):
        reduce = _reduction_axes(block)
        if reduce:
            raise Mismatch(
                f"the numbers are right, but block {block.name_hint!r} marks "
                f"{', '.join(reduce)} as a reduction axis ('R'); each C[vi, vj] is computed "
                "once, from one A[vi, vj], and nothing is summed over",
                'both axes are spatial: vi, vj = T.axis.remap("SS", [i, j])',
            )


@exercise(
    "ch1.bias_relu",
    title="A PrimFunc: add a bias, then ReLU",
    task="""
    Write a PrimFunc `bias_relu(A, B, C)` with `A: T.Buffer((4, 16), "float32")`,
    `B: T.Buffer((16,), "float32")` and the destination `C: T.Buffer((4, 16), "float32")` that
    computes `C[i, j] = max(A[i, j] + B[j], 0)`: the bias `B` is broadcast over the rows, as
    in the MLP's layers. Use one loop nest with one block whose axes say what kind they are.

    The answer is the PrimFunc (or an IRModule holding it):
    `check("ch1.bias_relu", bias_relu)`.
    """,
    hints=(
        "One loop nest `for i, j in T.grid(4, 16):` with one block inside, like `relu0` in "
        "this chapter.",
        'In the block, `vi, vj = T.axis.remap("SS", [i, j])`: both axes are spatial, since '
        "each C[vi, vj] is computed on its own. B holds one value per column, so it is read "
        "as `B[vj]`.",
        "The block's body is `C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))`.",
    ),
    solution=solutions.bias_relu,
)
def check_bias_relu(answer: Any) -> None:
    func = as_prim_func(answer)
    a, b = random_inputs([(4, 16), (16,)])
    run = prim_func_runner(func, [a, b], [((4, 16), "float32")])
    (c,) = run(np.nan)
    if np.allclose(c, np.maximum(a + b[:4, None], 0)):
        raise Mismatch(
            "C[i, j] is computed with B[i]: the bias is broadcast along the wrong axis",
            "B holds one value per column: index it with the column axis, B[vj]",
        )
    if np.allclose(c, a + b):
        raise Mismatch(
            "C holds A + B: the ReLU is missing", "take T.max(..., T.float32(0)) of the sum"
        )
    if np.allclose(c, a):
        raise Mismatch(
            "C holds A: neither the bias nor the ReLU is applied yet",
            "the block's body is C[vi, vj] = T.max(A[vi, vj] + B[...], T.float32(0))",
        )
    assert_close(c, np.maximum(a + b, 0), "C", rerun=lambda fill: run(fill)[0])
    _require_spatial(func)


# -------------------------------------------------------------------------- ch1.row_sum


@exercise(
    "ch1.row_sum",
    title="Read the generated code: fix a row sum",
    task="""
    This PrimFunc should compute the sum of each row, `B[i] = sum_k A[i, k]`, as the low-level
    numpy `lnumpy_row_sum` does, but it gives wrong numbers:

    ```python
    @T.prim_func
    def row_sum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 16):
            with T.block("B"):
                vi, vk = T.axis.remap("SS", [i, k])
                B[vi] = B[vi] + A[vi, vk]


    def lnumpy_row_sum(A, B):
        for i in range(8):
            for k in range(16):
                if k == 0:
                    B[i] = 0
                B[i] = B[i] + A[i, k]
    ```

    Build it for the `"python"` target, read the code mlckit generates for it
    (`lib.source()`), compare it with `lnumpy_row_sum`, and fix the PrimFunc so that its
    generated code does what `lnumpy_row_sum` does. The answer is the fixed PrimFunc:
    `check("ch1.row_sum", row_sum)`.
    """,
    hints=(
        'Print `mlckit.build(row_sum, target="python").source()` and put it beside '
        "`lnumpy_row_sum`: which line does the generated code lack?",
        "B[vi] must start from 0. A block's `with T.init():` gives the value a reduction "
        "starts from, and it runs when every reduction axis of the block is at its first "
        "value, so the block needs a reduction axis too.",
        'Mark vk as a reduction axis, `vi, vk = T.axis.remap("SR", [i, k])`, and add '
        "`with T.init(): B[vi] = T.float32(0)` before the update.",
    ),
    solution=solutions.row_sum,
)
def check_row_sum(answer: Any) -> None:
    func = as_prim_func(answer)
    (a,) = random_inputs([(8, 16)])
    # NaN stands for the garbage B holds before the call: a sum without an init keeps it.
    run = prim_func_runner(func, [a], [((8,), "float32")])
    (b,) = run(np.nan)
    blocks = _blocks(func)
    try:
        if any(block.init is not None for block in blocks) and np.allclose(b, a[:, -1]):
            raise Mismatch(
                "each B[i] holds the last element of its row: your init runs on every "
                "iteration (the generated code has no `if k == 0:`), since the block has no "
                "reduction axis",
                "an init runs when all reduction axes are at their first value; k is summed "
                'over, so mark it "R"',
            )
        assert_close(
            b,
            a.sum(axis=1),
            "B",
            rerun=lambda fill: run(fill)[0],
            init_hint="in the target the block's init sets B[vi] to 0 first: add "
            '`with T.init(): B[vi] = T.float32(0)` and mark vk "R", so it runs when k == 0',
        )
    except Mismatch as wrong:
        raise Mismatch(
            wrong.message, wrong.hint, _generated_diff(func, solutions.row_sum(), "row_sum")
        ) from None
    if not any(_reduction_axes(block) for block in blocks):
        raise Mismatch(
            "the numbers are right, but no block declares a reduction axis, and k is summed "
            "over: a schedule would be free to reorder or parallelize k as if it were not",
            'mark k as a reduction axis: T.axis.remap("SR", [i, k])',
        )
