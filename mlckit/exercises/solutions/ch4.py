"""Reference solutions of chapter 4's exercises (automatic program optimization)."""

from __future__ import annotations

from mlckit import tir


def stochastic_tile_ij():
    def stochastic_tile_ij(sch: tir.Schedule) -> tir.Schedule:
        block_C = sch.get_block("C", "main")
        i, j, k = sch.get_loops(block=block_C)
        # One random perfect tiling per loop: each seed draws other tile sizes.
        i_factors = sch.sample_perfect_tile(loop=i, n=2)
        j_factors = sch.sample_perfect_tile(loop=j, n=2)
        i_0, i_1 = sch.split(loop=i, factors=i_factors)
        j_0, j_1 = sch.split(loop=j, factors=j_factors)
        # A tile of C (i_1 x j_1) is computed while k runs over the whole reduction.
        sch.reorder(i_0, j_0, k, i_1, j_1)
        return sch

    return stochastic_tile_ij
