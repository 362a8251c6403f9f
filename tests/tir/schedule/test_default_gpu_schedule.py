"""The default GPU schedule: every block of every legalized operator ends up under a blockIdx.x
and a threadIdx.x loop with its reductions serial inside, by a replayable schedule; the kernels
it produces compute what numpy computes (numba's CUDA simulator runs them without a GPU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.demo import mlp_script
from mlckit.errors import ScheduleError
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.relax.transform.legalize_ops import LegalizeOps
from mlckit.script import from_source
from mlckit.script import tir as T
from mlckit.tir import stmt as S
from mlckit.tir.expr import IterVarType
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule import Schedule
from mlckit.tir.schedule.default_gpu_schedule import (
    DefaultGPUSchedule,
    default_gpu_schedule,
    schedule_for_gpu,
)

op = relax.op
n = tir.Var("n", "int64")


# ------------------------------------------------------------------------------ operators
def legalized(build: Callable[..., relax.Expr], *shapes: tuple[Any, ...]) -> IRModule:
    """The PrimFuncs LegalizeOps makes of ``build`` applied to float32 inputs of ``shapes``."""
    params = [
        relax.Var(f"x{i}", relax.TensorStructInfo(list(s), "float32")) for i, s in enumerate(shapes)
    ]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(build(*params))
        bb.emit_func_output(gv)
    return LegalizeOps()(bb.get())


OPERATORS: dict[str, tuple[Callable[..., relax.Expr], list[tuple[Any, ...]]]] = {
    "add": (op.add, [(4, 8), (4, 8)]),
    "add_broadcast_batch": (op.add, [(n, 8), (8,)]),
    "add_0d": (op.add, [(), ()]),
    "relu": (op.nn.relu, [(n, 8)]),
    "matmul": (op.matmul, [(2, 4, 6), (6, 8)]),
    "dense_batch": (op.nn.dense, [(n, 6), (8, 6)]),
    "linear": (op.nn.linear, [(4, 6), (8, 6), (8,)]),
    "softmax": (op.nn.softmax, [(n, 10)]),
    "softmax_1d": (op.nn.softmax, [(10,)]),
    "log_softmax": (op.nn.log_softmax, [(4, 10)]),
    "layer_norm": (lambda x, g, b: op.nn.layer_norm(x, g, b, [-1]), [(4, 10), (10,), (10,)]),
    "conv2d": (lambda x, w: op.nn.conv2d(x, w, padding=(1, 1)), [(1, 2, 6, 6), (3, 2, 3, 3)]),
    "max_pool2d": (lambda x: op.nn.max_pool2d(x, (2, 2), (2, 2)), [(1, 2, 6, 6)]),
    "avg_pool2d": (lambda x: op.nn.avg_pool2d(x, (2, 2), (2, 2)), [(1, 2, 6, 6)]),
    "sum_all": (op.sum, [(4, 6)]),
    "sum_axis0": (lambda x: op.sum(x, [0]), [(4, 6)]),
    "mean_keepdims": (lambda x: op.mean(x, [1], True), [(4, 6)]),
    "argmax": (lambda x: op.argmax(x, 1), [(4, 6)]),
    "reshape": (lambda x: op.reshape(x, (-1, 2)), [(4, 6)]),
    "flatten": (op.flatten, [(4, 6)]),
    "batch_flatten": (op.nn.batch_flatten, [(n, 2, 3)]),
    "permute_dims": (lambda x: op.permute_dims(x, [1, 0]), [(4, 6)]),
    "concat": (lambda x, y: op.concat((x, y), axis=1), [(4, 6), (4, 2)]),
    "broadcast_to": (lambda x: op.broadcast_to(x, (3, 4, 6)), [(4, 6)]),
}


def prim_funcs(mod: IRModule) -> dict[str, PrimFunc]:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, PrimFunc)}


def blocks_with_loops(func: PrimFunc) -> list[tuple[S.BlockRealize, list[S.For]]]:
    """Every block but the root, with all the loops around it (through enclosing blocks)."""
    found: list[tuple[S.BlockRealize, list[S.For]]] = []

    def visit(stmt: S.Stmt, loops: list[S.For]) -> None:
        if isinstance(stmt, S.For):
            visit(stmt.body, [*loops, stmt])
        elif isinstance(stmt, S.SeqStmt):
            for child in stmt.seq:
                visit(child, loops)
        elif isinstance(stmt, S.BlockRealize):
            if stmt.block.name_hint != "root":
                found.append((stmt, loops))
            visit(stmt.block.body, loops)

    visit(func.body, [])
    return found


def thread_tag(loop: S.For) -> str:
    return loop.thread_binding.thread_tag if loop.thread_binding is not None else ""


def check_bound(func: PrimFunc) -> None:
    """Each block sits under blockIdx.x then threadIdx.x; the loops feeding its reduce iter
    vars are serial and inside the thread loop."""
    assert func.attrs.get("tir.is_scheduled")
    for realize, loops in blocks_with_loops(func):
        tags = [thread_tag(loop) for loop in loops if thread_tag(loop)]
        assert tags == ["blockIdx.x", "threadIdx.x"], realize.block.name_hint
        thread_x = next(i for i, loop in enumerate(loops) if thread_tag(loop) == "threadIdx.x")
        reduce_values = [
            value
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if iv.iter_type == IterVarType.CommReduce
        ]
        used = {id(v) for value in reduce_values for v in tir.analysis.collect_vars(value)}
        for i, loop in enumerate(loops):
            if id(loop.loop_var) in used:
                assert i > thread_x and loop.kind == S.ForKind.SERIAL, realize.block.name_hint


@pytest.mark.parametrize("name", list(OPERATORS))
def test_every_legalized_operator_is_bound(name: str) -> None:
    build, shapes = OPERATORS[name]
    mod = DefaultGPUSchedule()(legalized(build, *shapes))
    for func in prim_funcs(mod).values():
        check_bound(func)
        assert_structural_equal(from_source(func.script()), func)


@pytest.mark.parametrize("name", ["softmax", "conv2d", "sum_all", "add_0d", "dense_batch"])
def test_the_trace_replays_to_the_same_function(name: str) -> None:
    build, shapes = OPERATORS[name]
    for func in prim_funcs(legalized(build, *shapes)).values():
        sch = schedule_for_gpu(func)
        fresh = Schedule(func)
        sch.trace.apply_to_schedule(fresh)
        assert_structural_equal(fresh.func, sch.func)
        assert {inst.kind for inst in sch.trace} >= {"split", "bind"}


def test_elementwise_producers_are_inlined() -> None:
    # conv2d's padding is its own block until the schedule inlines it into the convolution.
    build, shapes = OPERATORS["conv2d"]
    (func,) = prim_funcs(legalized(build, *shapes)).values()
    names = [r.block.name_hint for r, _ in blocks_with_loops(default_gpu_schedule(func))]
    assert names == ["conv2d_nchw"]


def test_small_kernels_launch_no_idle_threads_and_large_ones_blocks_of_256() -> None:
    def extents(func: PrimFunc) -> list[int]:
        (_, loops), *_ = blocks_with_loops(default_gpu_schedule(func))
        return [loop.extent.value for loop in loops if loop.thread_binding is not None]

    small = prim_funcs(legalized(op.add, (4, 8), (4, 8)))["add"]
    large = prim_funcs(legalized(op.add, (40, 30), (40, 30)))["add"]
    assert extents(small) == [1, 32]
    assert extents(large) == [5, 256]  # 1200 elements: the last block's predicate guards 80
    assert extents(default_gpu_schedule(large, max_threads_per_block=64)) == [19, 64]


@T.prim_func
def row_sum(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 16), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i, k in T.grid(n, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


ROW_SUM_SCHEDULED = """
# from mlckit.script import ir as I
# from mlckit.script import tir as T
# from mlckit.script import relax as R

@T.prim_func
def row_sum(a: T.handle, b: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    A = T.match_buffer(a, (n, 16), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i_0 in T.thread_binding((n + T.int64(255)) // T.int64(256), thread="blockIdx.x"):
        for i_1 in T.thread_binding(T.int64(256), thread="threadIdx.x"):
            for k in range(16):
                with T.block("B"):
                    vi = T.axis.spatial(n, i_0 * T.int64(256) + i_1)
                    vk = T.axis.reduce(16, k)
                    T.where(i_0 * T.int64(256) + i_1 < n)
                    with T.init():
                        B[vi] = T.float32(0.0)
                    B[vi] = B[vi] + A[vi, vk]
"""


def test_symbolic_batch_printed_script() -> None:
    scheduled = default_gpu_schedule(row_sum)
    assert scheduled.script().strip() == ROW_SUM_SCHEDULED.strip()


def test_the_schedule_steps() -> None:
    sch = schedule_for_gpu(row_sum)
    assert str(sch.trace) == (
        "b0 = sch.get_block(name='B')\n"
        "l1, l2 = sch.get_loops(block=b0)\n"
        "l3, l4 = sch.split(loop=l1, factors=[None, 256])\n"
        "sch.bind(loop=l3, thread_axis='blockIdx.x')\n"
        "sch.bind(loop=l4, thread_axis='threadIdx.x')"
    )


def test_a_function_bound_by_hand_is_left_alone() -> None:
    sch = Schedule(row_sum)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(i, [None, 32])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    mod = DefaultGPUSchedule()(IRModule({"row_sum": sch.func}))
    assert_structural_equal(mod["row_sum"], sch.func.with_attr("tir.is_scheduled", True))


def test_a_scheduled_function_is_left_alone() -> None:
    marked = row_sum.with_attr("tir.is_scheduled", True)
    mod = DefaultGPUSchedule()(IRModule({"row_sum": marked}))
    assert mod["row_sum"] is marked


@T.prim_func
def scan(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.opaque(8, i)
            B[vi] = A[vi]


def test_a_block_the_rule_cannot_bind_is_named() -> None:
    with pytest.raises(ScheduleError, match=r"cannot bind block 'B' of function 'scan'"):
        DefaultGPUSchedule()(IRModule({"scan": scan}))


@T.prim_func
def row_normalize(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    # The row sum computed at C's row loop (compute_at): one sum per row of C.
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        for k in range(8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] / B[vi]


def test_blocks_sharing_a_loop_are_bound_at_the_shared_loop() -> None:
    func = default_gpu_schedule(row_normalize)
    check_bound(func)
    # One thread per row: its sum, then its 8 quotients.
    ((_, b_loops), (_, c_loops)) = blocks_with_loops(func)
    assert b_loops[:2] == c_loops[:2]
    assert [loop.extent.value for loop in b_loops] == [1, 16, 8]


def test_add_unit_loop() -> None:
    build, shapes = OPERATORS["add_0d"]
    (func,) = prim_funcs(legalized(build, *shapes)).values()
    sch = Schedule(func)
    unit = sch.add_unit_loop(sch.get_block("T_add"))
    loop = sch.get(unit)
    assert (loop.extent.value, loop.body.block.name_hint) == (1, "T_add")
    assert "l1 = sch.add_unit_loop(block_or_loop=b0)" in str(sch.trace)


# ------------------------------------------------------------------------------ pipelines
def test_the_pipeline_schedules_nothing() -> None:
    # relax.get_pipeline knows no target: the build applies the target's schedule.
    mod = relax.get_pipeline("default")(from_source(mlp_script(16, 8, 4)))
    for func in prim_funcs(mod).values():
        assert not func.attrs.get("tir.is_scheduled")
        assert all(
            loop.thread_binding is None for _, loops in blocks_with_loops(func) for loop in loops
        )


def test_tvm_spellings() -> None:
    assert mlckit.tir.transform.DefaultGPUSchedule is DefaultGPUSchedule
    assert mlckit.s_tir.transform.DefaultGPUSchedule is DefaultGPUSchedule


# ------------------------------------------------------------------------------ numerics
def run_on_cuda(func: PrimFunc, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> Any:
    lib = mlckit.build(default_gpu_schedule(func), "cuda")
    dev = mlckit.cuda()
    args = [mlckit.nd.array(a, dev) for a in inputs]
    out = mlckit.nd.empty(out_shape, "float32", dev)
    lib[lib.function_names()[0]](*args, out)
    return out.numpy()


def conv2d_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    # OPERATORS["conv2d"]: 3x3 kernel, padding 1, stride 1.
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2:]
    out = np.zeros((x.shape[0], w.shape[0], height, width), "float32")
    for dy in range(3):
        for dx in range(3):
            window = padded[:, :, dy : dy + height, dx : dx + width]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, dy, dx])
    return out


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
@pytest.mark.parametrize(
    ("name", "shapes", "reference"),
    [
        ("relu", [(5, 8)], lambda x: np.maximum(x, 0)),
        ("matmul", [(2, 4, 6), (6, 8)], lambda a, b: a @ b),
        ("dense_batch", [(3, 6), (8, 6)], lambda a, b: a @ b.T),
        ("softmax", [(3, 10)], lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
        ("sum_all", [(4, 6)], lambda x: x.sum()),
        ("conv2d", [(1, 2, 6, 6), (3, 2, 3, 3)], conv2d_reference),
    ],
)
def test_kernels_match_numpy_on_cuda(name: str, shapes: list[tuple[int, ...]], reference) -> None:
    # The kernels of OPERATORS[name] (some with a symbolic batch n) run on inputs of ``shapes``.
    build, symbolic_shapes = OPERATORS[name]
    (func,) = prim_funcs(legalized(build, *symbolic_shapes)).values()
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype("float32") for s in shapes]
    expected = np.asarray(reference(*inputs), "float32")
    result = run_on_cuda(func, inputs, expected.shape)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def small_cnn(x, w, b, w1, b1) -> relax.Expr:
    y = op.nn.relu(op.add(op.nn.conv2d(x, w), op.reshape(b, (1, 4, 1, 1))))
    y = op.nn.batch_flatten(op.nn.max_pool2d(y, (2, 2), (2, 2)))
    return op.nn.softmax(op.nn.linear(y, w1, b1))


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
def test_fused_cnn_kernels_match_the_reference_interpreter() -> None:
    shapes = [(2, 1, 10, 10), (4, 1, 3, 3), (4,), (5, 64), (5,)]
    mod = relax.get_pipeline("zero")(legalized(small_cnn, *shapes))
    scheduled = DefaultGPUSchedule()(mod)
    rng = np.random.default_rng(0)
    for name, func in prim_funcs(mod).items():
        buffers = [func.buffer_map[p] for p in func.params]
        arrays = [rng.standard_normal([int(d) for d in b.shape]).astype("float32") for b in buffers]
        reference = mlckit.build(func, "python")
        expected = [a.copy() for a in arrays]
        reference["main"](*expected)
        result = run_on_cuda(scheduled[name], arrays[:-1], expected[-1].shape)
        np.testing.assert_allclose(result, expected[-1], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
def test_blocks_sharing_a_loop_match_numpy_on_cuda() -> None:
    a = np.random.default_rng(0).random((16, 8), "float32") + 0.5
    result = run_on_cuda(row_normalize, [a], (16, 8))
    np.testing.assert_allclose(result, a / a.sum(1, keepdims=True), rtol=1e-5)
