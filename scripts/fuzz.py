"""Run mlckit's fuzzing campaigns for a time budget and print a table of their outcomes.

The test suite draws a few hundred cases from each campaign (mlckit/testing/fuzzing); this
script draws as many as its budget allows, sharing the time evenly between the campaigns by
running them in turn, and prints how many trials ended in each outcome. Any trial that is not
"accepted" (result checked) or "rejected" (a clear MLCError) is a defect; the first few of each
campaign are printed in full so they can be reproduced.

    python scripts/fuzz.py --minutes 10
    python scripts/fuzz.py --minutes 1 --campaign scripts --seed 7

The exit status is 1 when any trial failed.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import random
import sys
import time
import warnings

from mlckit.testing.fuzzing import FAILURES, Outcome, Trial

CAMPAIGNS = ("scripts", "schedules", "injection", "vm_args", "bounds")
SHOWN_FAILURES = 3


def load(name: str):
    return importlib.import_module(f"mlckit.testing.fuzzing.{name}").CAMPAIGN


def run(names: list[str], seconds: float, seed: int) -> dict[str, list[Trial]]:
    """Run the campaigns in turn, one trial each, until ``seconds`` have passed."""
    campaigns = [load(name) for name in names]
    rngs = {c.name: random.Random(f"{seed}:{c.name}") for c in campaigns}
    spent = dict.fromkeys(rngs, 0.0)
    trials: dict[str, list[Trial]] = {c.name: [] for c in campaigns}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # The campaign that has used the least time goes next, so slow ones get their share.
        campaign = min(campaigns, key=lambda c: spent[c.name])
        start = time.monotonic()
        trials[campaign.name].append(campaign.trial(rngs[campaign.name]))
        spent[campaign.name] += time.monotonic() - start
    return trials


def table(trials: dict[str, list[Trial]]) -> str:
    columns = list(Outcome)
    header = ["campaign", "trials", *(o.value for o in columns)]
    rows = [header]
    totals = collections.Counter()
    for name, done in trials.items():
        counts = collections.Counter(t.outcome for t in done)
        totals.update(counts)
        rows.append([name, str(len(done)), *(str(counts[o]) for o in columns)])
    rows.append(["all", str(sum(map(len, trials.values()))), *(str(totals[o]) for o in columns)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="time budget (default 10)")
    parser.add_argument("--campaign", action="append", choices=CAMPAIGNS, help="repeatable")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = args.campaign or list(CAMPAIGNS)
    # Mutated scripts make Python warn about odd literals; the verdicts are what matter here.
    warnings.simplefilter("ignore")
    trials = run(names, args.minutes * 60, args.seed)
    print(table(trials))
    failed = [t for done in trials.values() for t in done if t.outcome in FAILURES]
    by_campaign = collections.defaultdict(list)
    for trial in failed:
        by_campaign[trial.campaign].append(trial)
    for name, shown in by_campaign.items():
        print(f"\n=== {name}: {len(shown)} failed; the first {min(len(shown), SHOWN_FAILURES)}")
        for trial in shown[:SHOWN_FAILURES]:
            print(f"\n{trial}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
