"""Campaigns that try mlckit as a careless student or a fuzzer would, and judge each outcome.

A campaign draws one *case* from a ``random.Random`` (a mutated script, a schedule sequence, a
hostile name, a wrong VM argument), tries it, and says what happened as a :class:`Trial`. Only
two outcomes are acceptable: the input was ACCEPTED and its result checked against a reference
(numpy, or the unscheduled program), or it was REJECTED with an :class:`~mlckit.MLCError` that
tells the student where and why. Everything else is a defect:

* WRONG: the program ran and its numbers differ from the reference;
* CODE_RUN: text from a name or a script was executed (an injected payload set the canary);
* HANG: the trial ran past its time limit;
* RAW: an exception that is not an MLCError (a bare ``KeyError``, numba's typing errors, ...).

The same campaigns serve two masters. The test suite draws a bounded number of cases through
hypothesis (``st.randoms()``), so every run is reproducible; ``scripts/fuzz.py`` runs them for a
time budget and prints a table of outcomes. For example::

    >>> import random
    >>> from mlckit.testing.fuzzing import injection
    >>> trial = injection.CAMPAIGN.trial(random.Random(0))
    >>> trial.outcome in (Outcome.ACCEPTED, Outcome.REJECTED)
    True
"""

from __future__ import annotations

import builtins
import contextlib
import enum
import random
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from mlckit.errors import MLCError

__all__ = [
    "CANARY",
    "FAILURES",
    "Campaign",
    "Outcome",
    "Trial",
    "WrongResult",
    "canary_payload",
    "judge",
]


class Outcome(str, enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    WRONG = "wrong result"
    CODE_RUN = "code executed"
    HANG = "hang"
    RAW = "raw exception"


FAILURES = frozenset({Outcome.WRONG, Outcome.CODE_RUN, Outcome.HANG, Outcome.RAW})


@dataclass(frozen=True)
class Trial:
    """One case tried: what it was (enough to reproduce it by hand) and what happened."""

    campaign: str
    outcome: Outcome
    case: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def __str__(self) -> str:
        return f"[{self.campaign}] {self.outcome.value}: {self.detail}\n--- case ---\n{self.case}"


class Campaign(Protocol):
    """A generator of cases and their judge; ``trial`` never raises."""

    name: str

    def trial(self, rng: random.Random) -> Trial: ...


class WrongResult(Exception):  # a verdict on the code under test, not an error in it
    """Raised by a campaign's check when a program ran and its result differs from the reference."""


class _Hang(BaseException):
    """Raised by the alarm inside a trial that ran past its limit (BaseException: not caught)."""


# An injected payload sets this attribute on ``builtins``; seeing it set means a name or a
# script was executed as code. The payload is a plain expression so it fits anywhere text does.
CANARY = "_mlckit_fuzz_canary"


def canary_payload() -> str:
    """A Python expression that, if ever evaluated, sets the canary."""
    return f"__import__('builtins').__setattr__('{CANARY}', 1)"


def _canary_tripped() -> bool:
    if hasattr(builtins, CANARY):
        delattr(builtins, CANARY)
        return True
    return False


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the body after ``seconds`` (main thread on Unix only; elsewhere no limit)."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def judge(
    campaign: str,
    case: str,
    action: Callable[[], object],
    *,
    check_error: Callable[[MLCError], str | None] | None = None,
    timeout_s: float | None = 60.0,
) -> Trial:
    """Run ``action`` and classify what happened.

    ``action`` returns normally when the case was accepted and its result matched the
    reference, raises :class:`WrongResult` when it did not, and raises an MLCError when
    mlckit refused the input. ``check_error`` may still fail a refusal (it returns what is
    wrong with the error, e.g. a ParseError without a location, or None when it is fine).
    """
    _canary_tripped()
    try:
        with _time_limit(timeout_s):
            action()
    except _Hang:
        return Trial(campaign, Outcome.HANG, case, f"ran past {timeout_s} s")
    except WrongResult as err:
        outcome, detail = Outcome.WRONG, str(err)
    except MLCError as err:
        problem = check_error(err) if check_error else None
        if problem is None:
            outcome, detail = Outcome.REJECTED, f"{type(err).__name__}: {err}"
        else:
            outcome, detail = Outcome.RAW, f"{problem}: {type(err).__name__}: {err}"
    except Exception as err:  # classifying every escape is the point
        last = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{last.filename}:{last.lineno}"
        outcome, detail = Outcome.RAW, f"{type(err).__name__}: {err} (at {where})"
    else:
        outcome, detail = Outcome.ACCEPTED, ""
    if _canary_tripped():
        return Trial(campaign, Outcome.CODE_RUN, case, "an injected payload ran")
    return Trial(campaign, outcome, case, detail)
