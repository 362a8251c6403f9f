"""tune_tir / compile_tir / tune_relax: the search loop, its records, resuming, and applying the
best schedule (small sizes and few trials: what is checked is behaviour, not speed). The course's
spellings (work_dir, max_trials_global, ...) are in test_course_api.py."""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pytest

import mlckit
from mlckit import meta_schedule as ms
from mlckit import relax, te, tir
from mlckit.ir import IRModule, assert_structural_equal, structural_equal
from mlckit.meta_schedule.tune import estimate_flops
from mlckit.tir.schedule.default_schedule import schedule_for_cpu


def matmul(n: int = 32) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def split_j(sch: tir.Schedule) -> None:
    """The course's stochastic schedule: only j's tiling is sampled."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.reorder(i, j0, k, j1)


def broken_sometimes(sch: tir.Schedule) -> None:
    """A space where half the programs bind a loop to a GPU thread: they cannot build on llvm."""
    split_j(sch)
    if int(sch.sample_categorical([0, 1], [1, 1])) == 1:
        sch.bind(sch.get_loops(sch.get_block("C"))[0], "threadIdx.x")


@pytest.fixture(scope="module")
def measuring():
    # Threads instead of processes: the tests stay fast and behave the same.
    with cf.ThreadPoolExecutor(2) as pool:
        yield ms.Builder(pool), ms.Runner(pool, number=1, repeat=1, min_repeat_ms=0)


def tune(space, measuring, **options) -> list[ms.TuningRecord]:
    """The programs measured by a tuning run into an empty or given database (once each, in the
    order they were first measured, with all their repeats)."""
    builder, runner = measuring
    options.setdefault("max_trials", 4)
    options.setdefault("num_trials_per_iter", 2)
    database = ms.tune_tir(
        matmul(), "llvm", space=space, builder=builder, runner=runner, progress=False, **options
    )
    return ms.merge_measurements(database.get_all_tuning_records())


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_each_trial_is_a_distinct_measured_program(measuring, strategy):
    db = ms.JSONDatabase(None)
    records = tune(split_j, measuring, database=db, strategy=strategy, max_trials=5)
    # j (32) has 5 tilings (inner factor <= 16): 5 trials measure all 5 programs.
    assert len(records) == 5 and all(r.run_secs for r in records)
    programs = [ms.tune._replay(r, matmul()).mod for r in records]
    for a in range(len(programs)):
        assert not any(structural_equal(programs[a], programs[b]) for b in range(a))
    # The 4 fastest were measured again, 3 times each (the 4 new fastest again if the fifth
    # then came among them); the database counts 5 programs.
    stored = db.get_all_tuning_records()
    passes, rest = divmod(len(stored) - 5, 4 * ms.tune.REMEASURE_ROUNDS)
    assert passes in (1, 2) and rest == 0
    assert len(ms.merge_measurements(stored)) == 5


def test_the_fastest_programs_are_measured_again_and_ranked_with_all_their_repeats(measuring):
    db = ms.JSONDatabase(None)
    tune(split_j, measuring, database=db, max_trials=5, remeasure_top_k=2)
    trials, again = db.get_all_tuning_records()[:5], db.get_all_tuning_records()[5:]
    first_pass = again[: 2 * ms.tune.REMEASURE_ROUNDS]
    first_two = [r.trace for r in sorted(trials, key=lambda r: r.median_secs())[:2]]
    assert len(first_pass) == 2 * ms.tune.REMEASURE_ROUNDS
    assert all(r.trace in first_two for r in first_pass)
    # Whatever leads in the end was measured again, never ranked by one measurement alone.
    for leader in db.get_top_k(matmul(), "llvm", 2):
        assert len(leader.run_secs) >= 1 + ms.tune.REMEASURE_ROUNDS  # runner: repeat=1
    quiet = ms.JSONDatabase(None)
    tune(split_j, measuring, database=quiet, max_trials=5, remeasure_top_k=0)
    assert len(quiet) == 5


class ScriptedRunner(ms.Runner):
    """Times set by the test: the n-th program a search measures takes n seconds; measured
    again, the two fastest take 10 s and the others 3.5 s."""

    def __init__(self) -> None:
        super().__init__(number=1, repeat=1, min_repeat_ms=0)
        self.trial_secs: dict[str, float] = {}

    def run(self, builds, target, args_info, reference=None):
        if reference is not None:  # a trial
            for built in builds:
                self.trial_secs[built.source] = float(len(self.trial_secs) + 1)
            return [ms.MeasureResult([self.trial_secs[b.source]], None) for b in builds]
        return [
            ms.MeasureResult([10.0 if self.trial_secs[b.source] <= 2 else 3.5], None)
            for b in builds
        ]


def test_programs_that_lead_after_the_fastest_were_measured_again_are_measured_again(measuring):
    builder, _ = measuring
    db = ms.JSONDatabase(None)
    ms.tune_tir(
        matmul(),
        "llvm",
        space=split_j,
        max_trials=5,
        num_trials_per_iter=5,
        database=db,
        builder=builder,
        runner=ScriptedRunner(),
        remeasure_top_k=2,
        progress=False,
    )
    # Programs 1 and 2 measured again (medians 10 s), then 3 and 4, which now lead.
    rounds = ms.tune.REMEASURE_ROUNDS
    assert len(db) == 5 + 2 * rounds + 2 * rounds
    third_and_fourth = [r.trace for r in db.get_all_tuning_records()[2:4]]
    leaders = db.get_top_k(matmul(), "llvm", 2)
    assert [r.trace for r in leaders] == third_and_fourth
    assert all(r.run_secs == [3.0 + n] + [3.5] * rounds for n, r in enumerate(leaders))


def test_a_failing_candidate_is_recorded_and_skipped(measuring):
    db = ms.JSONDatabase(None)
    records = tune(broken_sometimes, measuring, database=db, strategy="random", max_trials=8)
    failed = [r for r in records if r.run_secs is None]
    assert failed and len(failed) < len(records)
    best = ms.compile_tir(db, matmul(), "llvm")
    assert "bind" not in str(best.trace)


def test_the_space_running_out_ends_the_search(measuring):
    records = tune(split_j, measuring, strategy="random", max_trials=20, num_trials_per_iter=4)
    # j (32) has 5 tilings whose inner factor is at most 16 (the default limit): each once.
    assert len(records) == 5


def test_a_seed_makes_the_search_reproducible(measuring):
    def decisions(seed):
        records = tune(split_j, measuring, strategy="random", seed=seed, max_trials=3)
        return [[step.get("decision") for step in r.trace if "decision" in step] for r in records]

    assert decisions(7) == decisions(7)


def test_compile_tir_gives_the_fastest_record_and_a_second_run_resumes(measuring, tmp_path):
    path = tmp_path / "records.json"
    first = tune(split_j, measuring, database=ms.JSONDatabase(path), max_trials=3)
    reopened = ms.JSONDatabase(path)
    measured = tune(split_j, measuring, database=reopened, max_trials=3)
    # The second run measured only programs the first did not.
    assert [str(r.trace) for r in measured[:3]] == [str(r.trace) for r in first]
    assert len({str(r.trace) for r in measured}) == len(measured) == 5
    # The fastest program counting all its repeats: the trials and the re-measurements of both
    # runs (a program lucky in its one trial may not be it).
    best = min(measured, key=lambda r: r.median_secs())
    sch = ms.compile_tir(reopened, matmul(), "llvm")
    expected = tir.Schedule(matmul())
    tir.schedule.Trace.from_json(best.trace).apply_to_schedule(expected)
    assert_structural_equal(sch.mod, expected.mod)
    lib = mlckit.build(sch.mod, "llvm")
    a, b = np.random.rand(32, 32).astype("float32"), np.random.rand(32, 32).astype("float32")
    c = np.zeros((32, 32), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_the_default_space_measures_the_default_schedule_first(measuring, strategy, tmp_path):
    db = ms.JSONDatabase(tmp_path / "records.json")
    records = tune(None, measuring, database=db, strategy=strategy, max_trials=3)
    # The first trial is the untuned build's program, stored so that it replays.
    stored = ms.JSONDatabase(tmp_path / "records.json").get_all_tuning_records()[0]
    assert records[0].run_secs
    assert_structural_equal(ms.tune._replay(stored, matmul()).mod, schedule_for_cpu(matmul()).mod)
    # The other trials are samples of the space: they carry decisions.
    assert all("decision" in str(r.trace) for r in records[1:])


def test_the_default_schedule_hint_can_be_left_out(measuring):
    space = ms.default_space("llvm", hint_default_schedule=False)
    records = tune(space, measuring, strategy="random", max_trials=2)
    assert all("decision" in str(r.trace) for r in records)
    assert "hint_default_schedule=False" in repr(space)


def test_bad_requests_are_named():
    with pytest.raises(ms.TuneError, match="no successful record"):
        ms.compile_tir(ms.JSONDatabase(None), matmul(), "llvm")
    with pytest.raises(ms.TuneError, match="unknown strategy 'greedy'"):
        ms.tune_tir(matmul(), "llvm", max_trials=1, strategy="greedy")
    with pytest.raises(ms.TuneError, match="tunes one PrimFunc; the module holds 2"):
        ms.tune_tir(IRModule({"a": matmul(), "b": matmul()}), "llvm", max_trials=1)


def test_flops_of_a_matmul():
    assert estimate_flops(matmul(32)) == 2 * 32**3


def matmul_relu_module() -> IRModule:
    x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(bb.emit(relax.op.matmul(x, w)))))
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps()(bb.get())


def test_tune_relax_and_apply_the_database(measuring):
    builder, runner = measuring
    mod = matmul_relu_module()
    db = ms.tune_relax(
        mod, target="llvm", max_trials_per_task=2, builder=builder, runner=runner, progress=False
    )
    tuned = relax.transform.MetaScheduleApplyDatabase(db, "llvm")(mod)
    kernels = [f for f in tuned.functions.values() if isinstance(f, tir.PrimFunc)]
    assert kernels and all(f.attrs.get("tir.is_scheduled") for f in kernels)
    vm = relax.VirtualMachine(relax.build(tuned, "llvm"), mlckit.cpu())
    xs, ws = np.random.rand(4, 16).astype("float32"), np.random.rand(16, 8).astype("float32")
    np.testing.assert_allclose(vm["main"](xs, ws).numpy(), np.maximum(xs @ ws, 0), rtol=1e-5)


def test_tune_relax_measures_each_kernels_leaders_and_default_program_again_here(
    measuring, monkeypatch
):
    builder, runner = measuring
    here: list[str] = []
    submit = ms.InProcessExecutor.submit

    def counted(self, fn, *args, **kwargs):
        here.append(fn.__name__)
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(ms.InProcessExecutor, "submit", counted)
    mod = matmul_relu_module()
    db = ms.tune_relax(
        mod,
        target="llvm",
        max_trials_per_task=3,
        builder=builder,
        runner=runner,
        remeasure_here=True,
        progress=False,
    )
    assert here and set(here) == {"_run_one"}  # the remeasures ran in this process
    programs = ms.merge_measurements(db.get_all_tuning_records())
    for func in (f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)):
        untuned = schedule_for_cpu(func).trace.as_json()
        (record,) = [r for r in programs if r.trace == untuned]
        # Its trial, then REMEASURE_ROUNDS more measurements beside the leaders.
        assert len(record.run_secs) > runner.repeat
