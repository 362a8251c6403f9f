"""The "bounds" fuzzing campaign: a loop nest that leaves its buffers is a BuildError (constant
sizes) or an MLCError when run (symbolic sizes); one that stays inside builds and computes what
its own loops compute."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlckit.testing.fuzzing.bounds import CAMPAIGN


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.randoms(use_true_random=False))
def test_campaign(rng):
    trial = CAMPAIGN.trial(rng)
    assert not trial.failed, str(trial)
