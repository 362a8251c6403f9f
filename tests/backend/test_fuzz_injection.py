"""The "injection" campaign: hostile names through every name that reaches generated code
either compute numpy's result or are refused with an MLCError; none runs as code."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlckit.testing.fuzzing.injection import CAMPAIGN


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(st.randoms(use_true_random=False))
def test_campaign(rng):
    trial = CAMPAIGN.trial(rng)
    assert not trial.failed, str(trial)
