"""The tuning database: records round-trip through the JSON-lines file, the best record is
replayed on a fresh schedule, and a function written again finds its records."""

from __future__ import annotations

import json

import pytest

from mlckit import te, tir
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal
from mlckit.meta_schedule.database import JSONDatabase, TuningRecord, workload_hash
from mlckit.script import from_source


def matmul(n: int = 32) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def tiled(func: tir.PrimFunc, seed: int) -> tir.Schedule:
    """A schedule with sampled tile sizes: its trace holds decisions."""
    sch = tir.Schedule(func, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    return sch


def fill(db: JSONDatabase, func: tir.PrimFunc) -> list[tuple[tir.Schedule, TuningRecord]]:
    key = db.commit_workload(func)
    made = []
    for seed, secs in enumerate([[3e-3, 3e-3], [1e-3, 2e-3], None, [2e-3, 2e-3]]):
        sch = tiled(func, seed)
        record = TuningRecord(sch.trace.as_json(), secs, key, "llvm")
        db.commit_tuning_record(record)
        made.append((sch, record))
    return made


def test_records_round_trip_through_the_file(tmp_path):
    path = tmp_path / "db" / "tuning.json"
    func = matmul()
    made = fill(JSONDatabase(path), func)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 5  # the workload once, then one line per record
    assert lines[0]["source"] == func.script()

    db = JSONDatabase(path)
    assert len(db) == 4
    assert db.get_all_tuning_records() == [record for _, record in made]
    top = db.get_top_k(func, "llvm", 3)
    assert [r.median_secs() for r in top] == [1.5e-3, 2e-3, 3e-3]  # fastest first, no failure
    assert db.get_top_k(func, "cuda", 3) == []
    assert_structural_equal(db.get_workload(workload_hash(func)), func)

    best = db.query_schedule(func, "llvm")
    assert_structural_equal(best.mod, made[1][0].mod)
    assert best.trace.as_json() == made[1][1].trace


def test_a_second_run_appends_to_the_same_file(tmp_path):
    path = tmp_path / "tuning.json"
    func = matmul()
    fill(JSONDatabase(path), func)
    fill(JSONDatabase(path), func)  # the workload is stored once
    db = JSONDatabase(path)
    assert len(db) == 8
    assert len(path.read_text().splitlines()) == 9


def test_the_workload_is_found_by_structure():
    func = matmul()
    db = JSONDatabase()
    fill(db, func)
    # The same function, printed and parsed again: other objects, the same structure.
    again = from_source(func.script())
    assert workload_hash(again) == workload_hash(func)
    assert db.has_workload(again)
    assert db.query_schedule(again, "cpu") is not None  # "cpu" is the llvm target
    assert db.query_schedule(matmul(16), "llvm") is None
    assert workload_hash(matmul(16)) != workload_hash(func)


def test_a_memory_database_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = JSONDatabase()
    fill(db, matmul())
    assert len(db) == 4 and list(tmp_path.iterdir()) == []
    assert TuningRecord([], None, "0", "llvm").median_secs() == float("inf")


def test_a_damaged_file_is_reported_with_its_line(tmp_path):
    path = tmp_path / "tuning.json"
    fill(JSONDatabase(path), matmul())
    with path.open("a") as handle:
        handle.write('{"workload": "1", "trace": [\n')
    with pytest.raises(MLCError, match=r"tuning.json:6: not a tuning record"):
        JSONDatabase(path)


def test_records_rank_by_the_median_of_their_repeats():
    """One repeat slowed down by another process does not bury a program that is fast in the
    other two (its mean, 3.7 ms, would rank it after a steady 2 ms)."""
    func = matmul()
    db = JSONDatabase()
    key = db.commit_workload(func)
    steady = TuningRecord(tiled(func, 0).trace.as_json(), [2e-3, 2e-3, 2e-3], key, "llvm")
    unlucky = TuningRecord(tiled(func, 1).trace.as_json(), [9e-3, 1e-3, 1e-3], key, "llvm")
    for record in (steady, unlucky):
        db.commit_tuning_record(record)
    assert db.get_top_k(func, "llvm", 2) == [unlucky, steady]
    assert unlucky.median_secs() == 1e-3


def test_a_program_measured_again_is_ranked_with_all_its_repeats():
    func = matmul()
    sch = tir.Schedule(func)
    trace = sch.trace.as_json()
    other = tir.Schedule(func)
    other.split(other.get_loops(other.get_block("C"))[1], [None, 4])
    key = workload_hash(func)
    db = JSONDatabase(None)
    db.commit_workload(func)
    # Lucky once (1 s), then 3 s twice: the median of the three is 3 s, slower than 2 s.
    db.commit_tuning_record(TuningRecord(trace, [1.0], key, "llvm"))
    db.commit_tuning_record(TuningRecord(other.trace.as_json(), [2.0], key, "llvm"))
    db.commit_tuning_record(TuningRecord(trace, [3.0, 3.0], key, "llvm"))
    db.commit_tuning_record(TuningRecord(trace, None, key, "llvm"))  # a failed re-run
    top = db.get_top_k(func, "llvm", 5)
    assert [r.run_secs for r in top] == [[2.0], [1.0, 3.0, 3.0]]
    assert len(db) == 4
