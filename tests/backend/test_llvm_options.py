"""numba's LLVM as set up for kernels (mlckit.backend.llvm_options): SLP vectorizer on, no
scatters, fused multiply-adds allowed; only while a kernel compiles."""

from __future__ import annotations

import platform
import re
import uuid

import numpy as np
import pytest

import mlckit
from mlckit import te, tir, topi
from mlckit.backend import llvm_options
from mlckit.ir import IRModule
from mlckit.tir import PrimFunc

x86_only = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="scatters are an x86 feature"
)


def _matmul(n: int = 64) -> PrimFunc:
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _accumulator_tile_under_k() -> PrimFunc:
    """A 4x32 accumulator tile whose rows sit inside the reduction loop: after LLVM unrolls the
    vector loop, its loop vectorizer would vectorize the row loop with gathers and scatters."""
    sch = tir.Schedule(_matmul())
    block = sch.get_block("T_matmul")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [2, 8, 4])
    j0, j1 = sch.split(j, [2, 32])
    sch.reorder(i0, j0, i1, k, i2, j1)
    writeback = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(writeback, j0)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k)
    return sch.mod["main"]


def _build_fresh(func: PrimFunc, monkeypatch, tmp_path):
    """``func`` built under a name of its own with an empty kernel cache, so that numba really
    compiles it; checked against numpy."""
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(tmp_path))
    name = f"kernel_{uuid.uuid4().hex[:8]}"
    kernel = mlckit.build(IRModule({name: func}), "llvm")[name]
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    c = np.empty((64, 64), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    return kernel


def _slp_settings_while_building(monkeypatch, tmp_path) -> list[bool]:
    """The SLP-vectorizer setting of each LLVM pipeline numba builds while compiling a fresh
    kernel."""
    import numba.core.codegen

    seen: list[bool] = []
    build_pipeline = numba.core.codegen.create_pass_builder

    def recording(*args, slp_vectorize=False, **kwargs):
        seen.append(bool(slp_vectorize))
        return build_pipeline(*args, slp_vectorize=slp_vectorize, **kwargs)

    monkeypatch.setattr(numba.core.codegen, "create_pass_builder", recording)
    _build_fresh(_matmul(), monkeypatch, tmp_path)
    return seen


def test_kernels_are_compiled_with_the_slp_vectorizer(monkeypatch, tmp_path):
    from numba.core import config

    monkeypatch.delenv("NUMBA_SLP_VECTORIZE", raising=False)
    before = config.SLP_VECTORIZE
    assert True in _slp_settings_while_building(monkeypatch, tmp_path)
    assert before == config.SLP_VECTORIZE  # numba's own setting is back for other code


def test_numba_slp_vectorize_in_the_environment_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_SLP_VECTORIZE", "0")
    seen = _slp_settings_while_building(monkeypatch, tmp_path)
    assert seen and True not in seen


def _scatters(kernel) -> list[str]:
    assembly = "\n".join(kernel.func.inspect_asm().values())
    return re.findall(r"\bvp?scatter\w*", assembly)


@x86_only
def test_an_accumulator_tile_under_the_reduction_loop_needs_no_scatters(monkeypatch, tmp_path):
    func = _accumulator_tile_under_k()
    kernel = _build_fresh(func, monkeypatch, tmp_path / "tuned")
    assert _scatters(kernel) == []
    codegen = llvm_options._cpu_codegen()
    assert codegen._tm is not llvm_options._target_machine_without_scatters(codegen)  # restored


@x86_only
def test_numbas_own_target_machine_vectorizes_that_tile_with_scatters(monkeypatch, tmp_path):
    """What the option prevents, on a CPU with AVX-512 gathers and scatters."""
    import llvmlite.binding as llvm

    if "+avx512f" not in llvm.get_host_cpu_features().flatten():
        pytest.skip("the pathology needs AVX-512's scatters")
    monkeypatch.setattr(
        llvm_options, "_target_machine_without_scatters", lambda codegen: codegen._tm
    )
    kernel = _build_fresh(_accumulator_tile_under_k(), monkeypatch, tmp_path / "plain")
    assert _scatters(kernel)


def test_kernels_may_fuse_multiply_and_add():
    """As TVM's LLVM target (FPOpFusion::Fast): a kernel's float multiply and add may become a
    fused multiply-add."""
    source = mlckit.build(_matmul(), "llvm").source("main")
    assert 'fastmath={"contract"}' in source
