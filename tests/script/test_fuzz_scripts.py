"""The "scripts" fuzzing campaign, drawn through hypothesis: mutated TVMScript either parses
and round-trips through the printer, or is refused with an error located in the text."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mlckit.errors import MLCError, ParseError
from mlckit.testing.fuzzing import Outcome
from mlckit.testing.fuzzing.scripts import CAMPAIGN, corpus, located_in_text, mutate, round_trip


@settings(max_examples=250, deadline=None, derandomize=True, database=None)
@given(st.randoms(use_true_random=False))
def test_campaign(rng):
    trial = CAMPAIGN.trial(rng)
    assert not trial.failed, str(trial)


def test_the_corpus_round_trips():
    for text in corpus():
        round_trip(text)


def test_mutations_are_deterministic():
    text = corpus()[0]
    assert mutate(random.Random(3), text) == mutate(random.Random(3), text)


def test_an_unlocated_refusal_fails_the_trial():
    assert located_in_text(ParseError("x", filename="<string>", lineno=3)) is None
    assert located_in_text(ParseError("x")) is not None
    assert located_in_text(MLCError("x")) is not None


def test_the_campaign_both_accepts_and_rejects():
    outcomes = {CAMPAIGN.trial(random.Random(seed)).outcome for seed in range(40)}
    assert {Outcome.ACCEPTED, Outcome.REJECTED} <= outcomes
