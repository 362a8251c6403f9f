"""Tuning on a Dask cluster: a ``distributed.Client`` is the builder's and the runner's
executor, and the database it fills is the one the local pools fill (the optional extra
``mlckit[distributed]``: the cluster's test is skipped without it)."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import meta_schedule as ms
from mlckit import te, tir


def matmul(n: int = 64) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def tile(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.reorder(i, j0, k, j1)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    # Two worker processes of one thread each, as a cluster of two small machines would be.
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.mark.slow
def test_a_matmul_tuned_on_a_cluster_gives_a_database_of_valid_records(client, tmp_path):
    distributed = pytest.importorskip("distributed")
    func = matmul()
    builder = ms.Builder(executor=client)
    runner = ms.Runner(executor=client, number=1, repeat=2, min_repeat_ms=0)
    with distributed.get_task_stream(client) as tasks:
        database = ms.tune_tir(
            func,
            "llvm",
            work_dir=tmp_path,
            max_trials=6,
            num_trials_per_iter=3,
            space=tile,
            builder=builder,
            runner=runner,
            progress=False,
        )
    # The cluster's workers built, checked and timed every candidate.
    ran = {task["key"].split("-")[0] for task in tasks.data}
    assert ran == {"_build_one", "_reference_outputs", "_run_one"}
    assert isinstance(database, ms.JSONDatabase)
    records = database.get_all_tuning_records()
    assert len(ms.merge_measurements(records)) > 1
    assert all(r.run_secs and all(s > 0 for s in r.run_secs) for r in records)

    # The work_dir holds the database a local tuning run would read back and resume from; its
    # best record replays and runs here.
    reopened = ms.JSONDatabase(work_dir=tmp_path)
    assert reopened.get_all_tuning_records() == records
    sch = ms.compile_tir(reopened, func, "llvm")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 64)).astype("float32")
    b = rng.uniform(-1, 1, (64, 64)).astype("float32")
    c = mlckit.nd.array(np.zeros((64, 64), "float32"))
    mlckit.build(sch.mod, "llvm")["main"](mlckit.nd.array(a), mlckit.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("measurer", [ms.Builder, ms.Runner])
def test_an_executor_without_submit_is_named(measurer):
    with pytest.raises(
        ms.TuneError,
        match=r"executor must be a concurrent.futures.Executor or a distributed.Client .*not 4",
    ):
        measurer(executor=4)
