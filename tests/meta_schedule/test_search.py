"""The search strategies' choices, with a cost model whose scores the test sets: what a batch
of the evolutionary search is made of (no program is built or timed here)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlckit import meta_schedule as ms
from mlckit import te, tir, topi
from mlckit.meta_schedule.cost_model import CostModel
from mlckit.meta_schedule.search import EvolutionarySearch, program_key
from mlckit.tir import stmt as S
from mlckit.tir.stmt_functor import post_order_visit


def matmul(n: int = 64) -> tir.PrimFunc:
    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def vector_width(func: tir.PrimFunc) -> int:
    widths = [0]

    def visit(node: object) -> None:
        if isinstance(node, S.For) and node.kind == S.ForKind.VECTORIZED:
            widths.append(int(node.extent.value))

    post_order_visit(func.body, visit)
    return max(widths)


class WidestVectorFirst(CostModel):
    """Predicts that the wider the vectorized loop, the faster the program."""

    def predict(self, funcs: Sequence[tir.PrimFunc]) -> np.ndarray:
        return np.array([float(vector_width(f)) for f in funcs])


def test_the_fresh_share_of_a_batch_is_the_models_favourites_among_fresh_samples():
    func = matmul()
    space = ms.default_space("llvm", hint_default_schedule=False)
    search = EvolutionarySearch(
        space,
        func,
        seed=0,
        cost_model=WidestVectorFirst(),
        fresh_share=1.0,
        fresh_pool=4,
        eps_greedy=0.0,
    )
    pool = [space.sample(func, seed) for seed in range(16)]
    search._samples = lambda count: pool[:count]  # type: ignore[method-assign]
    batch = search.next_batch(4)
    # Four from the pool of 4 x 4 samples: the widest vectors among them.
    assert {program_key(s) for s in batch} <= {program_key(s) for s in pool}
    chosen = sorted(vector_width(s.mod["main"]) for s in batch)
    assert chosen == sorted(vector_width(s.mod["main"]) for s in pool)[-4:]
