"""The cuda target: bound loops become numba.cuda kernels (numba's simulator without a GPU)."""

from __future__ import annotations

import builtins
import sys

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference
from mlckit.errors import BuildError, MLCError, VMError
from mlckit.meta_schedule import ScheduleFnSpace
from mlckit.script import tir as T
from mlckit.testing.fuzzing import CANARY, canary_payload
from mlckit.testing.gpu_schedules import SGEMM_CHOICES, sgemm_space, shared_memory_matmul


@pytest.fixture(autouse=True)
def _fast_simulator():
    # The simulator runs each GPU thread as a Python thread; switching between them more
    # often makes its barriers several times faster.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(interval)


@T.prim_func
def vector_add(a: T.handle, b: T.handle, c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]


def bound_vector_add(threads: int = 32) -> tir.Schedule:
    sch = tir.Schedule(vector_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, threads])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch


def test_vector_add_launches_one_thread_per_element():
    lib = mlckit.build(bound_vector_add().mod, "cuda")
    source = lib.source("main")
    assert "i_1 = cuda.threadIdx.x" in source and "i_0 = cuda.blockIdx.x" in source
    # The grid is computed from n when the function is called.
    assert "main_kernel0[((n + 31) // 32,), (32,)](A, B, C, n)" in source
    dev = mlckit.cuda()
    for n in (32, 45):  # 45: the last block's extra threads skip the work
        a, b = np.random.rand(n).astype("float32"), np.random.rand(n).astype("float32")
        c = mlckit.nd.empty((n,), "float32", dev)
        lib["main"](mlckit.nd.array(a, dev), mlckit.nd.array(b, dev), c)
        assert c.device == dev
        np.testing.assert_allclose(c.numpy(), a + b)


@T.prim_func
def copy_64x32(A: T.Buffer((64, 32), "float32"), B: T.Buffer((64, 32), "float32")):
    for i, j in T.grid(64, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]


def test_more_threads_per_block_than_a_gpu_runs_is_refused():
    sch = tir.Schedule(copy_64x32)
    sch.bind(sch.fuse(*sch.get_loops(sch.get_block("B"))), "threadIdx.x")
    with pytest.raises(BuildError, match="block of 2048 threads; the target runs at most 1024"):
        mlckit.build(sch.mod, "cuda")


def test_a_target_with_fewer_threads_per_block_refuses_a_larger_block():
    sch = tir.Schedule(copy_64x32)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.bind(j, "threadIdx.x")  # 32 threads: fine for a target of 32, not of 16
    mlckit.build(sch.mod, "cuda -max_num_threads=32")
    with pytest.raises(BuildError, match="block of 32 threads; the target runs at most 16"):
        mlckit.build(sch.mod, "cuda -max_num_threads=16")


def test_unbound_loops_are_named_with_how_to_bind_them():
    with pytest.raises(BuildError, match=r"block 'C' under loops \(i\) is bound to no thread"):
        mlckit.build(vector_add, "cuda")
    with pytest.raises(BuildError, match=r'sch.bind\(i0, "blockIdx.x"\)'):
        mlckit.build(vector_add, "cuda")


N = 32


@T.prim_func
def matmul(
    A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")
):
    for i, j, k in T.grid(N, N, N):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_shared_memory_tiled_matmul_matches_numpy():
    lib = mlckit.build(shared_memory_matmul(matmul).mod, "cuda")
    source = lib.source("main")
    # Each thread block holds an (8, 4) tile of A and a (4, 8) tile of B; each thread a 2x2
    # accumulator.
    assert "A_shared = cuda.shared.array((8, 4), dtype=np.float32)" in source
    assert "B_shared = cuda.shared.array((4, 8), dtype=np.float32)" in source
    assert "C_local = cuda.local.array((2, 2), dtype=np.float32)" in source
    # One barrier after the tiles are fetched, one before the next k_0 overwrites them.
    assert source.count("cuda.syncthreads()") == 2
    assert "main_kernel0[(4, 4), (16,)](A, B, C)" in source
    dev = mlckit.cuda()
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    c = mlckit.nd.empty((N, N), "float32", dev)
    lib["main"](mlckit.nd.array(a, dev), mlckit.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_one_thread_block_covering_the_whole_matmul():
    # Loops of one iteration (blockIdx of extent 1) must not stop buffer compaction.
    sch = shared_memory_matmul(matmul, local=(8, 8), block=(4, 4), tile_k=8, vector=4)
    lib = mlckit.build(sch.mod, "cuda")
    assert "A_shared = cuda.shared.array((32, 8), dtype=np.float32)" in lib.source("main")
    assert "C_local = cuda.local.array((8, 8), dtype=np.float32)" in lib.source("main")
    dev = mlckit.cuda()
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    c = mlckit.nd.empty((N, N), "float32", dev)
    lib["main"](mlckit.nd.array(a, dev), mlckit.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_interleaved_shared_tiles_are_read_at_neighbouring_words():
    # Each thread owns 2x2 adjacent outputs; the tiles are stored (k, row % 2, row // 2), so in
    # a step of k neighbouring threads read neighbouring words, and the layout's % and // fold
    # into the loop variables.
    sch = shared_memory_matmul(matmul, local=(2, 2), block=(4, 4), tile_k=4, interleaved=True)
    source = mlckit.build(sch.mod, "cuda").source("main")
    assert "A_shared = cuda.shared.array((4, 2, 4), dtype=np.float32)" in source
    assert "A_shared[k_1, i_2, i_1_j_1_fused // 4]" in source
    assert "B_shared[k_1, j_2, i_1_j_1_fused % 4]" in source
    dev = mlckit.cuda()
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    c = mlckit.nd.empty((N, N), "float32", dev)
    mlckit.build(sch.mod, "cuda")["main"](mlckit.nd.array(a, dev), mlckit.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_sgemm_space_draws_its_knobs_and_the_program_matches_numpy():
    sch = ScheduleFnSpace(sgemm_space).sample(matmul, seed=3)
    drawn = [inst.decision for inst in sch.trace if inst.kind == "sample_categorical"]
    assert len(drawn) == len(SGEMM_CHOICES)
    assert all(0 <= d < len(c) for d, c in zip(drawn, SGEMM_CHOICES.values()))
    dev = mlckit.cuda()
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    c = mlckit.nd.empty((N, N), "float32", dev)
    mlckit.build(sch.mod, "cuda")["main"](mlckit.nd.array(a, dev), mlckit.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_a_shared_buffer_outside_every_thread_loop_is_refused():
    sch = tir.Schedule(matmul)
    sch.cache_read(sch.get_block("C"), 0, "shared")
    for name in ("C", "A_shared"):
        loops = sch.get_loops(sch.get_block(name))
        fused = sch.fuse(*loops[:2]) if name == "C" else sch.fuse(*loops)
        outer, inner = sch.split(fused, [None, 32])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    with pytest.raises(BuildError, match="the shared buffer 'A_shared' is allocated outside"):
        mlckit.build(sch.mod, "cuda")


def test_the_mlp_runs_on_the_gpu_with_the_default_gpu_schedule():
    from mlckit.demo import mlp_script
    from mlckit.script import from_source

    ex = relax.build(from_source(mlp_script()), "cuda")
    # Intermediates are allocated on the device and stay there between kernels.
    assert "lv0 = cuda.device_array((n, 128), dtype=np.float32)" in ex.vm_source()
    vm = relax.VirtualMachine(ex, mlckit.cuda())
    params = mlp_params()
    images = fashion_mnist().images[::150]
    x = mlckit.nd.array(images.reshape(len(images), 784).astype("float32") / 255, mlckit.cuda())
    out = vm["main"](x, params["w0"], params["b0"], params["w1"], params["b1"])
    assert out.device == mlckit.cuda()
    np.testing.assert_allclose(out.numpy(), mlp_reference(images), rtol=1e-4, atol=1e-4)
    with pytest.raises(VMError, match="built for cuda and cannot run on cpu"):
        relax.VirtualMachine(ex, mlckit.cpu())


def test_device_arrays_copy_in_and_out():
    dev = mlckit.cuda()
    host = np.arange(6, dtype="float32").reshape(2, 3)
    x = mlckit.nd.array(host, dev)
    assert x.on_gpu and x.shape == (2, 3) and x.dtype == "float32"
    np.testing.assert_array_equal(x.numpy(), host)
    x.copyfrom(host * 2)
    np.testing.assert_array_equal(np.asarray(x), host * 2)
    np.testing.assert_array_equal(x.copyto(mlckit.cpu()).numpy(), host * 2)
    with pytest.raises(MLCError, match="DLPack is available for cpu tensors only"):
        np.from_dlpack(x)


def test_a_thread_tag_is_checked_exactly_before_it_reaches_the_kernel():
    """A tag was checked by its first part and last letter, then pasted as ``cuda.<tag>``."""
    a = tir.decl_buffer((4,), "float32", "A")
    i = tir.Var("i", "int32")
    tag = f"threadIdx.x if {canary_payload()} else cuda.threadIdx.x"
    binding = tir.IterVar(tir.Range(0, 4), tir.Var("t", "int32"), tir.IterVar.ThreadIndex, tag)
    store = tir.BufferStore(a, tir.FloatImm("float32", 1.0), [i])
    loop = tir.For(i, 0, 4, tir.ForKind.THREAD_BINDING, store, thread_binding=binding)
    func = tir.PrimFunc([a.data], loop, buffer_map={a.data: a})
    with pytest.raises(BuildError, match="bind loops to blockIdx.x/y/z or threadIdx.x/y/z"):
        mlckit.build(func, "cuda")
    assert not hasattr(builtins, CANARY)


def test_names_the_generated_module_uses_are_not_taken():
    """A buffer named ``cuda`` shadowed the module inside the kernel; a kernel named ``cuda``
    replaced it for the host function."""
    from mlckit import te
    from mlckit.tir.schedule.default_gpu_schedule import DefaultGPUSchedule

    a = te.placeholder((4,), "float32", name="cuda")
    b = te.compute((4,), lambda i: a[i] * 2, name="numba_cuda")
    mod = DefaultGPUSchedule()(mlckit.IRModule({"cuda": te.create_prim_func([a, b])}))
    lib = mlckit.build(mod, "cuda")
    dev = mlckit.cuda()
    x, out = np.arange(4, dtype="float32"), mlckit.nd.empty((4,), "float32", dev)
    lib["cuda"](mlckit.nd.array(x, dev), out)
    np.testing.assert_array_equal(out.numpy(), x * 2)
