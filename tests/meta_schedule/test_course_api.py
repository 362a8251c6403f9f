"""Tuning as the MLC course (and TVM) spells it: ``ms.tune_tir(mod=..., target=...,
max_trials_global=..., space=ms.space_generator.ScheduleFn(fn), work_dir=...)`` returning the
database kept in work_dir, ``ms.tir_integration.compile_tir``, ``ms.relax_integration.tune_relax``
with ``relax.transform.MetaScheduleApplyDatabase(work_dir)``, ``vm.module.time_evaluator`` and a
target's ``--num-cores``."""

from __future__ import annotations

import concurrent.futures as cf
import importlib

import numba
import numpy as np
import pytest

import mlckit
from mlckit import meta_schedule as ms
from mlckit import relax, te, tir
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal
from mlckit.meta_schedule.measure import BuildResult, TensorInfo


def matmul(n: int = 32) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def stochastic_schedule_mm(sch: tir.Schedule) -> tir.Schedule:
    """The course's stochastic schedule (j has 5 tilings with an inner factor up to 16)."""
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_0, j_1 = sch.split(loop=j, factors=sch.sample_perfect_tile(loop=j, n=2))
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


@pytest.fixture(scope="module")
def measuring():
    # Threads instead of processes: the tests stay fast and behave the same.
    with cf.ThreadPoolExecutor(2) as pool:
        yield {
            "builder": ms.Builder(pool),
            "runner": ms.Runner(pool, number=1, repeat=1, min_repeat_ms=0),
            "progress": False,
        }


def tune_in(work_dir, measuring, trials: int = 3) -> ms.JSONDatabase:
    return ms.tune_tir(
        mod=mlckit.IRModule({"main": matmul()}),
        target="llvm --num-cores=1",
        max_trials_global=trials,
        num_trials_per_iter=trials,
        space=ms.space_generator.ScheduleFn(stochastic_schedule_mm),
        work_dir=str(work_dir),
        task_name="main",
        **measuring,
    )


def programs(database: ms.JSONDatabase) -> list[str]:
    """Each measured program's trace once, in the order they were first measured."""
    return [str(r.trace) for r in ms.merge_measurements(database.get_all_tuning_records())]


def test_tune_tir_keeps_its_database_in_work_dir_and_a_second_run_resumes(measuring, tmp_path):
    first = tune_in(tmp_path / "tune_tmp", measuring)
    assert isinstance(first, ms.database.JSONDatabase)
    assert first.path == tmp_path / "tune_tmp" / ms.database.DATABASE_FILE
    assert first.path.is_file() and len(programs(first)) == 3

    second = tune_in(tmp_path / "tune_tmp", measuring)
    # The second run read the first's records and measured only the two programs left.
    assert programs(second)[:3] == programs(first)
    assert len(programs(second)) == 5 == len(set(programs(second)))
    reopened = ms.database.JSONDatabase(work_dir=tmp_path / "tune_tmp")
    assert programs(reopened) == programs(second)


def test_compile_tir_gives_the_best_schedule_of_a_work_dir(measuring, tmp_path):
    tune_in(tmp_path, measuring)
    database = ms.database.JSONDatabase(work_dir=tmp_path)
    sch_tuned = ms.tir_integration.compile_tir(database, matmul(), target="llvm --num-cores=1")
    best = database.get_top_k(matmul(), "llvm --num-cores=1", 1)[0]
    expected = tir.Schedule(matmul())
    tir.schedule.Trace.from_json(best.trace).apply_to_schedule(expected)
    assert_structural_equal(sch_tuned.mod, expected.mod)
    assert "sample_perfect_tile" in str(sch_tuned.trace)
    a, b = np.random.rand(32, 32).astype("float32"), np.random.rand(32, 32).astype("float32")
    c = np.zeros((32, 32), "float32")
    mlckit.build(sch_tuned.mod, "llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    # The records are of the target tuned for.
    with pytest.raises(ms.TuneError, match="no successful record"):
        ms.tir_integration.compile_tir(database, matmul(), "llvm")


def test_the_default_space_resumes_from_the_records_of_another_space(measuring, tmp_path):
    tune_in(tmp_path, measuring)
    database = ms.tune_tir(matmul(), "llvm --num-cores=1", tmp_path, 2, **measuring)
    assert len(programs(database)) == 5  # the 3 of the course's space, then 2 more


def test_max_trials_is_the_short_form_of_max_trials_global(measuring):
    database = ms.tune_tir(
        matmul(), "llvm", max_trials=2, space=stochastic_schedule_mm, **measuring
    )
    assert database.path is None and len(programs(database)) == 2


def test_bad_work_dirs_and_arguments_are_named(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    with pytest.raises(ms.TuneError, match="work_dir '.*notes.txt' is a file"):
        ms.tune_tir(matmul(), "llvm", work_dir=a_file, max_trials_global=1)
    with pytest.raises(ms.TuneError, match="give work_dir='.*' .* or database=..., not both"):
        ms.tune_tir(
            matmul(), "llvm", tmp_path, 1, database=ms.JSONDatabase(tmp_path / "other.json")
        )
    with pytest.raises(ms.TuneError, match="database must be an ms.JSONDatabase, not 'json'"):
        ms.tune_tir(matmul(), "llvm", max_trials_global=1, database="json")
    with pytest.raises(ms.TuneError, match="give one of them, not max_trials_global=4 and"):
        ms.tune_tir(matmul(), "llvm", max_trials_global=4, max_trials=2)
    with pytest.raises(ms.TuneError, match="needs max_trials_global"):
        ms.tune_tir(matmul(), "llvm", work_dir=tmp_path)
    with pytest.raises(ms.TuneError, match="not both"):
        ms.JSONDatabase(tmp_path / "a.json", work_dir=tmp_path)
    with pytest.raises(ms.TuneError, match="the second argument is the parameters"):
        ms.relax_integration.tune_relax(linear_relu(), "llvm", max_trials_global=1)
    with pytest.raises(ms.TuneError, match="needs a target"):
        ms.relax_integration.tune_relax(linear_relu(), max_trials_global=1)
    with pytest.raises(ms.TuneError, match="needs max_trials_global or max_trials_per_task"):
        ms.relax_integration.tune_relax(linear_relu(), None, "llvm", tmp_path)
    apply = relax.transform.MetaScheduleApplyDatabase(tmp_path / "empty")
    with pytest.raises(ms.TuneError, match="'.*empty' holds no tuning database"):
        apply(linear_relu())
    assert issubclass(ms.TuneError, MLCError)


def linear_relu() -> mlckit.IRModule:
    x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(bb.emit(relax.op.matmul(x, w)))))
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps()(bb.get())


def test_tune_relax_into_a_work_dir_and_apply_it_by_its_name(measuring, tmp_path):
    mod = linear_relu()
    w = np.random.rand(16, 8).astype("float32")
    database = ms.relax_integration.tune_relax(
        mod=mod,
        params={"w": w},
        target="llvm",
        work_dir=str(tmp_path),
        max_trials_global=3,
        max_trials_per_task=1,
        **measuring,
    )
    # Two kernels (matmul, relu), one trial each: the global limit is not reached.
    assert len(programs(database)) == 2
    tuned = relax.transform.MetaScheduleApplyDatabase(str(tmp_path))(mod)
    kernels = [f for f in tuned.functions.values() if isinstance(f, tir.PrimFunc)]
    assert kernels and all(f.attrs.get("tir.is_scheduled") for f in kernels)
    vm = relax.VirtualMachine(relax.build(tuned, "llvm"), mlckit.cpu())
    x = np.random.rand(4, 16).astype("float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), np.maximum(x @ w, 0), rtol=1e-5)

    # The course times the model through the VM's runtime module.
    assert vm.module["main"](x, w).numpy().shape == (4, 8)
    timer = vm.module.time_evaluator("main", mlckit.cpu(), number=3)
    assert timer(x, w).mean > 0


def test_max_trials_global_is_shared_between_the_kernels(measuring, tmp_path):
    database = ms.relax_integration.tune_relax(
        linear_relu(), None, "llvm", tmp_path, 2, **measuring
    )
    assert len(programs(database)) == 2  # one trial for each of the two kernels


def numba_threads_while_timed(monkeypatch, target: str) -> tuple[set[int], int]:
    """The thread counts numba reported while a candidate was timed for ``target``, and the
    runner thread's count afterwards."""
    seen: set[int] = set()

    def kernel(*args) -> None:
        seen.add(numba.get_num_threads())

    # The module, not the function ms.measure that the package exports under its name.
    measure_module = importlib.import_module("mlckit.meta_schedule.measure")
    monkeypatch.setattr(measure_module, "_load", lambda source, target: kernel)
    with cf.ThreadPoolExecutor(1) as pool:
        runner = ms.Runner(pool, number=1, repeat=2, min_repeat_ms=0)
        [result] = runner.run([BuildResult("unused")], target, [TensorInfo("float32", (2,))])
        assert result.run_secs, result.error
        after = pool.submit(numba.get_num_threads).result()
    return seen, after


def test_num_cores_sets_numba_threads_while_a_candidate_is_measured(monkeypatch):
    default = numba.config.NUMBA_NUM_THREADS
    assert numba_threads_while_timed(monkeypatch, "llvm --num-cores=1") == ({1}, default)
    assert numba_threads_while_timed(monkeypatch, "llvm") == ({default}, default)
    # More cores than numba has threads: all of them.
    assert numba_threads_while_timed(monkeypatch, "llvm --num-cores=4096") == ({default}, default)
