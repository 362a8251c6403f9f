"""A learned cost model: predicts which candidates are fast, so only those get measured.

Like TVM's XGBoost model, it learns *normalized throughput* rather than seconds: for each
workload, the best time measured so far divided by the candidate's time (1 for the best, near
0 for slow ones, 0 for failures). That keeps the target in [0, 1] whatever the workload's
size. The regressor is scikit-learn's gradient-boosted trees on :func:`extract_features`,
trained again from scratch on everything seen at each :meth:`CostModel.update` (a search
measures hundreds of candidates, not millions, so this takes a fraction of a second).

Candidates are grouped into workloads by their buffer arguments (shapes and dtypes): all
schedules of one function share them. The features of a program are extracted once (they
take tens of milliseconds) and kept by its structural hash: a search asks about the same
programs again and again as its population survives from one round to the next.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor

from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_hash
from mlckit.tir.function import PrimFunc

from .features import extract_features
from .measure import MeasureResult, args_info_of, the_prim_func


class CostModel:
    """``update`` with measured candidates, ``predict`` scores for new ones (higher = faster).

    Until it has been trained on at least two measured candidates, ``predict`` returns random
    scores from a generator seeded with ``seed``: the same sequence in every run.
    """

    def __init__(self, seed: int = 0, n_estimators: int = 100, max_depth: int = 3):
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._params = {"n_estimators": n_estimators, "max_depth": max_depth}
        self._features: list[np.ndarray] = []
        self._secs: list[float] = []
        self._groups: list[tuple] = []
        self._model: GradientBoostingRegressor | None = None
        self._known_features: dict[int, np.ndarray] = {}

    @property
    def trained(self) -> bool:
        return self._model is not None

    def __len__(self) -> int:
        return len(self._secs)

    def update(
        self, funcs: Sequence[PrimFunc | IRModule], results: Sequence[MeasureResult]
    ) -> None:
        """Add measured candidates and train the model again on all of them."""
        if len(funcs) != len(results):
            raise MLCError(
                f"CostModel.update: {len(funcs)} functions but {len(results)} measure results"
            )
        for func, result in zip(funcs, results):
            self._features.append(self._features_of(func))
            self._secs.append(result.median_secs())
            self._groups.append(tuple(args_info_of(the_prim_func(func))))
        if len(self._secs) < 2:
            return
        model = GradientBoostingRegressor(random_state=self.seed, **self._params)
        model.fit(np.stack(self._features), self._targets())
        self._model = model

    def _targets(self) -> np.ndarray:
        """Normalized throughput: the best time of the candidate's workload over its time."""
        secs = np.array(self._secs)
        best: dict[tuple, float] = {}
        for group, value in zip(self._groups, secs):
            best[group] = min(best.get(group, np.inf), value)
        with np.errstate(divide="ignore", invalid="ignore"):
            targets = np.array([best[g] / s for g, s in zip(self._groups, secs)])
        # A failed candidate (infinite time), or a workload with no success yet, scores 0.
        return np.nan_to_num(targets, nan=0.0, posinf=0.0)

    def predict(self, funcs: Sequence[PrimFunc | IRModule]) -> np.ndarray:
        """A score per candidate: higher means predicted faster."""
        if self._model is None:
            return self._rng.random(len(funcs))
        if not funcs:
            return np.zeros(0)
        return self._model.predict(np.stack([self._features_of(f) for f in funcs]))

    def _features_of(self, func: PrimFunc | IRModule) -> np.ndarray:
        key = structural_hash(the_prim_func(func))
        if key not in self._known_features:
            self._known_features[key] = extract_features(func)
        return self._known_features[key]


__all__ = ["CostModel"]
