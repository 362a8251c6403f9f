"""The "vm_args" fuzzing campaign: every argument the VM is given is computed with like numpy
or refused with a VMError that names it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlckit.testing.fuzzing.vm_args import CAMPAIGN


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.randoms(use_true_random=False))
def test_campaign(rng):
    trial = CAMPAIGN.trial(rng)
    assert not trial.failed, str(trial)
