"""The cost model: random but reproducible scores before training; after training on measured
candidates it ranks a fast kind of schedule above a slow one. The "measurements" are made up
here, so the test does not depend on this machine's speed."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import te, tir
from mlckit.errors import MLCError
from mlckit.meta_schedule.cost_model import CostModel
from mlckit.meta_schedule.measure import MeasureResult


def matmul(n: int = 64) -> tir.PrimFunc:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def fast(factor: int) -> tir.PrimFunc:
    """Tiled, parallel outer loop, vectorized inner loop."""
    sch = tir.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, factor])
    j0, j1 = sch.split(j, [None, factor])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return sch.mod["main"]


def slow(factor: int) -> tir.PrimFunc:
    """Split only, with the reduction innermost."""
    sch = tir.Schedule(matmul())
    sch.split(sch.get_loops(sch.get_block("C"))[1], [None, factor])
    return sch.mod["main"]


def test_scores_before_training_are_reproducible():
    funcs = [fast(4), slow(4), fast(8)]
    first = CostModel(seed=3).predict(funcs)
    assert first.shape == (3,)
    np.testing.assert_array_equal(first, CostModel(seed=3).predict(funcs))
    assert not np.array_equal(first, CostModel(seed=4).predict(funcs))


def test_a_trained_model_ranks_fast_schedules_first():
    funcs, results = [], []
    for n, factor in enumerate([2, 4, 8, 16]):
        funcs += [fast(factor), slow(factor)]
        results += [MeasureResult([1e-4 * (1 + 0.1 * n)]), MeasureResult([1e-2 * (1 + 0.1 * n)])]
    funcs.append(slow(32))
    results.append(MeasureResult(None, "build: failed"))
    model = CostModel(seed=0)
    model.update(funcs[:1], results[:1])
    assert not model.trained  # one candidate teaches nothing yet
    model.update(funcs[1:], results[1:])
    assert model.trained and len(model) == len(funcs)

    seen = model.predict(funcs)
    assert seen[0:8:2].min() > seen[1:8:2].max()
    # Programs it has not seen: the same kinds of schedule with other tile sizes.
    unseen = model.predict([fast(32), slow(64)])
    assert unseen[0] > unseen[1]


def test_results_must_match_functions():
    with pytest.raises(MLCError, match="2 functions but 1 measure results"):
        CostModel().update([fast(4), slow(4)], [MeasureResult([1.0])])


def test_features_are_extracted_once_per_program(monkeypatch):
    from mlckit.meta_schedule import cost_model

    extracted = []
    original = cost_model.extract_features

    def counting(func):
        extracted.append(func)
        return original(func)

    monkeypatch.setattr(cost_model, "extract_features", counting)
    model = CostModel(seed=0)
    model.update([fast(4), slow(4)], [MeasureResult([1e-4]), MeasureResult([1e-2])])
    # The same programs (rebuilt: equal, not identical) and one new one.
    scores = model.predict([fast(4), slow(4), fast(8)])
    assert len(extracted) == 3
    assert scores[0] > scores[1]
