"""Search strategies: which candidates to measure next.

* :class:`RandomSearch` draws fresh samples of the space, as the course's first hand-written
  tuner does.
* :class:`EvolutionarySearch` keeps a population of programs, breeds it by *mutating trace
  decisions* (one tile size, one categorical choice at a time), ranks the offspring with a cost
  model trained on everything measured so far, and measures the most promising ones, with a
  fraction ``eps_greedy`` of fresh random samples so the model is not only asked about what it
  already likes (TVM's MetaSchedule and Ansor work this way). A share ``fresh_share`` of each
  batch is the model's favourites among fresh random samples instead of among offspring: in a
  search of tens of trials, not thousands, the offspring of a few measured programs all look
  alike, and the model, trained on few programs, picks good ones from a wide pool far better
  than it tells near neighbours apart.

Both first measure the programs the space *hints* at, if it has a ``hints(func)`` method
(the default space hints at the default schedule's program: a search's curve starts where the
untuned build stands, and in the search's own measurements it cannot end slower). Both return only
programs not measured before: two schedules that lower to the same program (same structural
hash) count once.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from mlckit.ir import IRModule, structural_hash
from mlckit.tir import PrimFunc, Schedule
from mlckit.tir.schedule.trace import SAMPLING_KINDS

from .cost_model import CostModel
from .database import TuningRecord
from .measure import MeasureResult
from .space import SearchSpace, mutate

# How many times drawing or mutating may fail in a row before a strategy gives up on a batch.
_MAX_FAILED_DRAWS = 64


def program_key(sch: Schedule) -> str:
    """Two schedules are the same candidate when they give the same program."""
    return str(structural_hash(IRModule({"main": sch.mod["main"]})))


@dataclass
class _Seen:
    keys: set[str] = field(default_factory=set)

    def fresh(self, sch: Schedule) -> bool:
        key = program_key(sch)
        if key in self.keys:
            return False
        self.keys.add(key)
        return True


def _has_decisions(sch: Schedule) -> bool:
    return any(inst.kind in SAMPLING_KINDS for inst in sch.trace.instructions)


class RandomSearch:
    """Measure random samples of the space (after the programs the space hints at)."""

    def __init__(self, space: SearchSpace, func: PrimFunc, seed: int = 0):
        self.space = space
        self.func = func
        self.rng = random.Random(seed)
        self.seen = _Seen()
        # A space may name programs worth measuring first (the default space: the program of
        # the default schedule, so that tuning starts from what an untuned build runs).
        hints = getattr(space, "hints", None)
        self.hinted: list[Schedule] = list(hints(func)) if hints is not None else []
        self.hints = list(self.hinted)  # those not proposed yet

    def resume(self, records: Sequence[TuningRecord], schedules: Sequence[Schedule]) -> None:
        """Programs measured by an earlier run are not measured again."""
        for sch in schedules:
            self.seen.fresh(sch)

    def next_batch(self, count: int) -> list[Schedule]:
        batch: list[Schedule] = []
        while self.hints and len(batch) < count:
            hint = self.hints.pop(0)
            if self.seen.fresh(hint):
                batch.append(hint)
        return batch + self._propose(count - len(batch))

    def _propose(self, count: int) -> list[Schedule]:
        """``count`` programs not measured before: random samples."""
        batch: list[Schedule] = []
        failures = 0
        while len(batch) < count and failures < _MAX_FAILED_DRAWS:
            sch = self.space.sample(self.func, self.rng.randrange(1 << 31))
            if self.seen.fresh(sch):
                batch.append(sch)
                failures = 0
            else:
                failures += 1
        return batch

    def notify(self, batch: Sequence[Schedule], results: Sequence[MeasureResult]) -> None:
        """Random search learns nothing from measurements."""


class EvolutionarySearch(RandomSearch):
    """Evolve a population by mutating decisions; measure what the cost model ranks best."""

    def __init__(
        self,
        space: SearchSpace,
        func: PrimFunc,
        seed: int = 0,
        *,
        cost_model: CostModel | None = None,
        population_size: int = 64,
        generations: int = 3,
        eps_greedy: float = 0.05,
        fresh_share: float = 0.75,
        fresh_pool: int = 8,
    ):
        super().__init__(space, func, seed)
        self.cost_model = cost_model if cost_model is not None else CostModel(seed=seed)
        self.population_size = population_size
        self.generations = generations
        self.eps_greedy = eps_greedy
        self.fresh_share = fresh_share
        # How many fresh samples the model chooses from, per program to choose.
        self.fresh_pool = fresh_pool
        # Measured programs with their run time, the best first: the parents of the population.
        self.measured: list[tuple[float, Schedule]] = []
        # Predicted scores by program, for one batch (the model changes only between batches):
        # a program that survives several generations has its features extracted once.
        self._predicted: dict[str, float] = {}

    def resume(self, records: Sequence[TuningRecord], schedules: Sequence[Schedule]) -> None:
        super().resume(records, schedules)
        results = [MeasureResult(r.run_secs, None if r.run_secs else "failed") for r in records]
        self.notify(schedules, results)

    def notify(self, batch: Sequence[Schedule], results: Sequence[MeasureResult]) -> None:
        self.cost_model.update([s.mod["main"] for s in batch], results)
        for sch, result in zip(batch, results):
            if result.run_secs:
                self.measured.append((result.median_secs(), sch))
        self.measured.sort(key=lambda pair: pair[0])

    def _propose(self, count: int) -> list[Schedule]:
        self._predicted = {}
        explore = max(0, min(count, round(count * self.eps_greedy)))
        fresh = min(count - explore, round(count * self.fresh_share))
        population = self._initial_population()
        for _ in range(self.generations):
            population = self._evolve(population)
        batch = self._best_unseen(population, count - explore - fresh)
        batch += self._best_unseen(self._samples(fresh * self.fresh_pool), fresh)
        return batch + super()._propose(count - len(batch))

    def _best_unseen(self, candidates: Sequence[Schedule], count: int) -> list[Schedule]:
        """The ``count`` best predicted of ``candidates`` not measured before."""
        chosen: list[Schedule] = []
        for sch in self._rank(candidates):
            if len(chosen) == count:
                break
            if self.seen.fresh(sch):
                chosen.append(sch)
        return chosen

    def _samples(self, count: int) -> list[Schedule]:
        """Up to ``count`` random samples of the space (fewer if it cannot sample them)."""
        samples: list[Schedule] = []
        failures = 0
        while len(samples) < count and failures < _MAX_FAILED_DRAWS:
            try:
                samples.append(self.space.sample(self.func, self.rng.randrange(1 << 31)))
            except Exception:  # a space that cannot sample this function
                failures += 1
        return samples

    def _initial_population(self) -> list[Schedule]:
        """The best measured programs (up to half the population), then random samples."""
        parents = [sch for _, sch in self.measured[: self.population_size // 2]]
        return parents + self._samples(self.population_size - len(parents))

    def _evolve(self, population: list[Schedule]) -> list[Schedule]:
        """One generation: children mutated from parents picked in proportion to their
        predicted score; the best ``population_size`` of parents and children survive."""
        # A program without decisions (a hint) has no neighbours; it still competes to survive.
        parents = [sch for sch in population if _has_decisions(sch)]
        if not parents:
            return population
        scores = self._scores(parents)
        low = min(scores)
        weights = [s - low + 1e-9 for s in scores]
        children: list[Schedule] = []
        failures = 0
        while len(children) < self.population_size and failures < _MAX_FAILED_DRAWS:
            parent = self.rng.choices(parents, weights=weights)[0]
            child = mutate(parent, self.func, self.rng)
            if child is None:
                failures += 1
            else:
                children.append(child)
        return self._rank(population + children)[: self.population_size]

    def _scores(self, population: Sequence[Schedule]) -> list[float]:
        keys = [program_key(sch) for sch in population]
        new = {key: sch for key, sch in zip(keys, population) if key not in self._predicted}
        if new:
            predicted = self.cost_model.predict([sch.mod["main"] for sch in new.values()])
            for key, p in zip(new, predicted):
                self._predicted[key] = float(p) if math.isfinite(float(p)) else 0.0
        return [self._predicted[key] for key in keys]

    def _rank(self, population: Sequence[Schedule]) -> list[Schedule]:
        """Best predicted first, each program once."""
        unique: dict[str, Schedule] = {}
        for sch in population:
            unique.setdefault(program_key(sch), sch)
        candidates = list(unique.values())
        scores = self._scores(candidates)
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])
        return [candidates[i] for i in order]
