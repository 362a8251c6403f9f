"""Search spaces: schedule functions and the default space sample valid programs; mutation
changes one decision."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pytest

import mlckit
from mlckit import relax, te, tir, topi
from mlckit.backend.kernel import wants_fastmath
from mlckit.errors import MLCError, ScheduleError
from mlckit.ir import IRModule
from mlckit.meta_schedule.space import ScheduleFnSpace, default_space, mutate
from mlckit.tir.schedule.trace import SAMPLING_KINDS, Trace


# ---------------------------------------------------------------------- workloads
def matmul(n: int = 64) -> tir.PrimFunc:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def dense_bias_relu() -> tir.PrimFunc:
    """The fused kernel relax makes of relu(linear(x, w, b)): matmul, add and relu in one."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((32, 64), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((48, 64), "float32"))
    bias = relax.Var("b", relax.TensorStructInfo((48,), "float32"))
    with bb.function("main", [x, w, bias]):
        with bb.dataflow():
            y = bb.emit(relax.op.linear(x, w, bias))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    passes = [
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    mod = mlckit.transform.Sequential(passes)(bb.get())
    return mod["fused_matmul_add_relu"]


def conv2d() -> tir.PrimFunc:
    x = te.placeholder((1, 4, 10, 10), "float32", name="X")
    w = te.placeholder((8, 4, 3, 3), "float32", name="W")
    return te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)])


def add() -> tir.PrimFunc:
    a = te.placeholder((64, 128), "float32", name="A")
    b = te.placeholder((64, 128), "float32", name="B")
    return te.create_prim_func([a, b, te.compute((64, 128), lambda i, j: a[i, j] + b[i, j])])


def conv2d_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 8, 10, 10), "float32")
    for ry in range(3):
        for rx in range(3):
            out += np.einsum(
                "nchw,fc->nfhw", padded[:, :, ry : ry + 10, rx : rx + 10], w[:, :, ry, rx]
            )
    return out


def dense() -> tir.PrimFunc:
    """``C[i, j] += A[i, k] * B[j, k]``: both inputs contiguous along the reduction."""
    a = te.placeholder((32, 64), "float32", name="A")
    b = te.placeholder((48, 64), "float32", name="B")
    k = te.reduce_axis((0, 64), name="k")
    c = te.compute((32, 48), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def reference(name: str, inputs: list[np.ndarray]) -> np.ndarray:
    if name == "matmul":
        return inputs[0] @ inputs[1]
    if name == "dense":
        return inputs[0] @ inputs[1].T
    if name == "dense_bias_relu":
        return np.maximum(inputs[0] @ inputs[1] + inputs[2], 0)
    if name == "conv2d":
        return conv2d_numpy(*inputs)
    return inputs[0] + inputs[1]


WORKLOADS = {"matmul": matmul, "dense_bias_relu": dense_bias_relu, "conv2d": conv2d, "add": add}


def check(name: str, func: tir.PrimFunc, sch: tir.Schedule, target: str = "llvm") -> None:
    """Build the schedule's program and compare it with numpy on random inputs."""
    rng = np.random.default_rng(0)
    shapes = [[int(s) for s in func.buffer_map[p].shape] for p in func.params]
    inputs = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
    dev = mlckit.cuda() if target == "cuda" else mlckit.cpu()
    args = [mlckit.nd.array(x, dev) for x in inputs] + [mlckit.nd.empty(shapes[-1], "float32", dev)]
    mlckit.build(sch.mod, target)["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), reference(name, inputs), rtol=1e-4, atol=1e-4)


def decisions(sch: tir.Schedule) -> list:
    return [inst.decision for inst in sch.trace if inst.kind in SAMPLING_KINDS]


# ---------------------------------------------------------------------- ScheduleFnSpace
def stochastic_schedule_mm(sch: tir.Schedule) -> tir.Schedule:
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def test_schedule_fn_space_is_random_per_seed_and_reproducible():
    func = matmul()
    space = ScheduleFnSpace(stochastic_schedule_mm)
    samples = [decisions(space.sample(func, seed)) for seed in range(8)]
    assert len({str(d) for d in samples}) > 1
    assert decisions(space.sample(func, 3)) == samples[3]
    check("matmul", func, space.sample(func, 3))


def test_schedule_fn_space_resamples_after_a_failing_draw():
    def picky(sch: tir.Schedule) -> None:
        (i,) = sch.get_loops(sch.get_block("C"))[:1]
        _, inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=64))
        if sch.get(inner).extent.value != 64:
            raise ScheduleError("only the tiling [1, 64] will do")

    sch = ScheduleFnSpace(picky).sample(matmul(), seed=0)
    assert decisions(sch) == [[1, 64]]


def test_schedule_fn_space_gives_up_with_a_clear_error():
    def never(sch: tir.Schedule) -> None:
        sch.get_block("no_such_block")

    with pytest.raises(ScheduleError, match="no valid program in 16 draws.*no_such_block"):
        ScheduleFnSpace(never).sample(matmul(), seed=0)


# ---------------------------------------------------------------------- the default space
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_default_space_samples_are_valid_programs(name):
    func = WORKLOADS[name]()
    space = default_space("llvm")
    seen = set()
    for seed in range(3):
        sch = space.sample(func, seed)
        seen.add(str(decisions(sch)))
        check(name, func, sch)
        # What a tuning database stores replays to the same program.
        again = tir.Schedule(func)
        Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
        assert again.mod.script() == sch.mod.script()
    assert len(seen) > 1


def test_default_space_tiles_a_matmul_for_the_cpu():
    # 256^3 iterations: more than ALWAYS_PARALLEL_WORK, so the tiles always run in parallel.
    sch = default_space("llvm").sample(matmul(256), seed=0)
    kinds = [inst.kind for inst in sch.trace]
    assert kinds.count("sample_perfect_tile") == 3  # i (3 levels), j beside the vector, k
    assert "sample_categorical" in kinds  # the vector width
    for step in ("split", "reorder", "parallel", "vectorize", "decompose_reduction"):
        assert step in kinds
    text = sch.mod.script()
    assert "T.parallel" in text and "T.vectorized" in text


def test_default_space_draws_serial_or_parallel_for_a_small_nest():
    """Below ALWAYS_PARALLEL_WORK iterations, starting threads may cost more than they save:
    both are drawn, and both compute the same result."""
    func = matmul(32)
    space = default_space("llvm")
    parallel = set()
    for seed in range(8):
        sch = space.sample(func, seed)
        check("matmul", func, sch)
        parallel.add("T.parallel" in sch.mod.script())
    assert parallel == {True, False}


def test_default_space_draws_dot_products_for_a_dense_block():
    func = dense()
    space = default_space("llvm")
    fastmath = set()
    for seed in range(8):
        sch = space.sample(func, seed)
        check("dense", func, sch)
        fastmath.add(wants_fastmath(sch.mod["main"]))
        # The "fastmath" annotation is a traced step: a stored trace replays it.
        again = tir.Schedule(func)
        Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
        assert again.mod.script() == sch.mod.script()
    # Both structures are drawn: dot products (fastmath, k innermost) and vectors along j.
    assert fastmath == {True, False}
    dot = next(
        s
        for s in map(lambda seed: space.sample(func, seed), range(8))
        if wants_fastmath(s.mod["main"])
    )
    text = dot.mod.script()
    assert 'T.block_attr({"fastmath": True})' in text and "T.unroll" in text


def test_default_space_places_a_producer_with_sample_compute_location():
    func = conv2d()
    sch = default_space("llvm").sample(func, seed=0)
    step = next(inst for inst in sch.trace if inst.kind == "sample_compute_location")
    for location in (-2, -1, 0):  # inline, root, the outermost tile loop
        other = tir.Schedule(func)
        sch.trace.with_decision(step, location).apply_to_schedule(other)
        names = [r.block.name_hint for r in other.walk_blocks(other.func.body)]
        assert ("pad_temp" in names) == (location != -2)
        check("conv2d", func, other)


def test_default_space_for_an_unknown_target_is_an_error():
    with pytest.raises(MLCError, match="no default search space for target 'python'"):
        default_space("python")


# ---------------------------------------------------------------------- mutation
@pytest.mark.parametrize("name", ["matmul", "conv2d"])
def test_mutate_changes_one_decision(name):
    func = WORKLOADS[name]()
    sch = default_space("llvm").sample(func, seed=1)
    rng = random.Random(0)
    for _ in range(4):
        neighbour = mutate(sch, func, rng)
        assert neighbour is not None
        before, after = decisions(sch), decisions(neighbour)
        assert len(before) == len(after)
        changed = [n for n, (a, b) in enumerate(zip(before, after)) if a != b]
        # One decision is drawn anew; a later tiling changes only when the loop it tiles changed
        # length (the vector width split off the loop beside it): the replay repairs it.
        assert changed
        for n in changed[1:]:
            assert math.prod(after[n]) != math.prod(before[n])
        check(name, func, neighbour)


def test_mutate_draws_perfect_tilings_within_the_limit():
    func = matmul()
    sch = ScheduleFnSpace(stochastic_schedule_mm).sample(func, 0)
    rng = random.Random(1)
    for _ in range(10):
        (tiling,) = decisions(mutate(sch, func, rng))
        assert tiling != decisions(sch)[0]
        assert tiling[0] * tiling[1] == 64 and tiling[1] <= 16


def test_mutate_takes_a_stored_trace_and_returns_none_without_decisions():
    func = matmul()
    sch = default_space("llvm").sample(func, seed=2)
    neighbour = mutate(sch.trace.as_json(), IRModule({"main": func}), random.Random(0))
    assert neighbour is not None
    assert decisions(neighbour) != decisions(sch)
    plain = tir.Schedule(func)
    plain.get_loops(plain.get_block("C"))
    assert mutate(plain, func, random.Random(0)) is None


# ---------------------------------------------------------------------- cuda
@pytest.fixture
def fast_simulator():
    # The simulator runs each GPU thread as a Python thread; switching between them more
    # often makes it several times faster.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.filterwarnings("ignore:no NVIDIA GPU found")
def test_cuda_space_binds_threads_and_matches_numpy(fast_simulator):
    func = matmul(16)
    space = default_space("cuda")
    for seed in range(2):
        sch = space.sample(func, seed)
        text = sch.mod.script()
        assert 'thread="blockIdx.x"' in text and 'thread="threadIdx.x"' in text
        check("matmul", func, sch, "cuda")
    neighbour = mutate(sch, func, random.Random(0))
    assert neighbour is not None
    check("matmul", func, neighbour, "cuda")


def test_cuda_space_accumulates_each_threads_tile_over_the_reduction():
    """Local blocking: the reduction loop runs between the thread loop and the per-thread
    tile, so a value of A or B a thread reads serves a whole row or column of its tile."""
    func = matmul(64)
    for seed in range(8):
        sch = default_space("cuda").sample(func, seed)
        loops = sch.get_loops(sch.get_block("C_update"))
        names = [sch.get(loop).loop_var.name_hint for loop in loops]
        tags = [sch.get(loop).thread_binding for loop in loops]
        assert tags[0].thread_tag == "blockIdx.x" and tags[1].thread_tag == "threadIdx.x"
        assert names[2] == "k" and all(tag is None for tag in tags[2:]), names
        assert len(names) == 5  # k, then the per-thread tile's i and j


def test_cuda_space_binds_elementwise_nests_with_a_sampled_thread_count():
    sch = default_space("cuda").sample(add(), seed=0)
    (step,) = [inst for inst in sch.trace if inst.kind == "sample_categorical"]
    assert list(step.args[0]) == [32, 64, 128, 256, 512]
    assert 'thread="threadIdx.x"' in sch.mod.script()
