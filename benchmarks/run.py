"""Run mlckit's benchmarks and print one table.

Every ``benchmarks/bench_*.py`` module exposes ``run() -> list[dict]``; each row has

    name   what was measured
    value  the measurement (a number)
    unit   its unit ("s", "ms", "x numpy", ...)
    goal   the target, as text ("< 2 s")
    ok     whether the goal was met (True / False / None when there is no goal)

Usage: ``python benchmarks/run.py [NAME ...] [--json PATH] [--compare BASELINE] [--strict]``
where NAME selects ``bench_NAME.py`` files; ``--json`` also writes the rows to PATH (as recorded
figures, such as the GPU measurements chapter 6 shows, are kept).

``--compare BASELINE`` reads rows written by ``--json`` before and lists every row that got
more than 25% worse since. Which way is worse comes from the row's unit (``UNIT_DIRECTION``:
times and "x torch"-like ratios are better lower, GFLOP/s higher), else from the comparison in
its goal ("<= 2x": lower, ">= 3x": higher); a row with neither is not compared. A row is worse
by the factor new / old where lower is better and old / new where higher is better, so a
program 30% slower counts alike as a time or a GFLOP/s. For example, with the baseline row
``mlp batch 1: mlckit / torch = 1.20 x torch``, a run measuring 1.56 is 1.30x worse and is
listed; 1.45 (1.21x) is not. Rows are matched by benchmark and name; rows of the benchmarks
that ran but missing from the baseline, and the baseline's rows this run lacks, are listed too.

Exit status: 0 when every benchmark ran, 1 when one raised; a missed goal shows as ``MISS``
in the table and, with ``--strict``, also makes the status 1, as does a row listed as worse
than the baseline.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
# Measure the working tree this script sits in, even from a plain `python benchmarks/run.py`
# without an installed mlckit.
sys.path.insert(0, str(HERE.parent))
COLUMNS = ("benchmark", "name", "value", "unit", "goal", "ok")
# A row got worse when it moved this factor the wrong way since the baseline.
WORSE_FACTOR = 1.25
# Which way is better, by unit: -1 lower, +1 higher.
UNIT_DIRECTION = {
    "s": -1,
    "ms": -1,
    "us": -1,
    "x torch": -1,
    "x numpy": -1,
    "x static": -1,
    "GFLOP/s": +1,
}
# A goal's comparison says the same where the unit does not (a plain "x").
GOAL_DIRECTION = {"<": -1, ">": +1}


def discover(selected: list[str]) -> list[Path]:
    files = sorted(HERE.glob("bench_*.py"))
    if selected:
        files = [f for f in files if f.stem.removeprefix("bench_") in selected]
    return files


def load(path: Path) -> ModuleType:
    # Loaded from their files, so the benchmarks folder needs no __init__.py.
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered under its name first: a benchmark that hands its own functions to worker
    # processes (bench_tune) pickles them by module and name.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_ok(ok: Any) -> str:
    return {True: "ok", False: "MISS"}.get(ok, "-")


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [
        [
            str(r.get("benchmark", "")),
            str(r.get("name", "")),
            format_value(r.get("value", "")),
            str(r.get("unit", "")),
            str(r.get("goal", "")),
            format_ok(r.get("ok")),
        ]
        for r in rows
    ]
    widths = [max(len(c) for c in [h, *(row[i] for row in cells)]) for i, h in enumerate(COLUMNS)]
    numeric = {2}  # right-align the value column

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(
            v.rjust(w) if i in numeric else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths))
        ).rstrip()

    print(line(COLUMNS))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))


def direction(row: dict[str, Any]) -> int | None:
    """-1 when lower values of ``row`` are better, +1 when higher ones are, None when unknown."""
    unit = row.get("unit", "")
    if unit in UNIT_DIRECTION:
        return UNIT_DIRECTION[unit]
    return GOAL_DIRECTION.get(str(row.get("goal", "")).strip()[:1])


def key(row: dict[str, Any]) -> tuple[str, str]:
    return (str(row.get("benchmark", "")), str(row.get("name", "")))


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


@dataclass
class Change:
    """A row measured now and in the baseline: ``factor`` > 1 is how many times worse it got,
    < 1 how many times better."""

    row: dict[str, Any]
    baseline: float
    factor: float


@dataclass
class Comparison:
    worse: list[Change] = field(default_factory=list)
    unchanged_or_better: list[Change] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)


def compare(
    rows: list[dict[str, Any]], baseline: list[dict[str, Any]], worse_factor: float = WORSE_FACTOR
) -> Comparison:
    """``rows`` against ``baseline`` (both as ``--json`` writes them): the rows worse by more
    than ``worse_factor``, the others compared, the rows the baseline lacks, and the baseline's
    rows of the benchmarks in ``rows`` that ``rows`` lacks."""
    before = {key(r): r for r in baseline}
    now = {key(r) for r in rows}
    ran = {r.get("benchmark") for r in rows}
    result = Comparison()
    for r in rows:
        old = before.get(key(r))
        if old is None:
            result.new.append(r)
            continue
        sign = direction(r)
        if sign is None or not (is_number(r.get("value")) and is_number(old.get("value"))):
            continue
        factor = (r["value"] / old["value"]) ** -sign
        changes = result.worse if factor > worse_factor else result.unchanged_or_better
        changes.append(Change(r, old["value"], factor))
    result.missing = [r for r in baseline if r.get("benchmark") in ran and key(r) not in now]
    return result


def read_baseline(path: Path) -> list[dict[str, Any]]:
    """The rows ``--json`` wrote to ``path``; ValueError naming the file when it holds none."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"--compare {path}: cannot read its rows ({err})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"--compare {path}: not a list of rows as --json writes them")
    return rows


def print_comparison(comparison: Comparison, path: Path) -> None:
    compared = len(comparison.worse) + len(comparison.unchanged_or_better)
    print(
        f"\ncompared with {path}: {compared} rows, {len(comparison.worse)} more than "
        f"{WORSE_FACTOR:g}x worse"
    )
    for change in comparison.worse:
        r = change.row
        print(
            f"  WORSE {change.factor:.2f}x  {r.get('benchmark')}: {r.get('name')}  "
            f"{format_value(change.baseline)} -> {format_value(r['value'])} {r.get('unit', '')}"
        )
    for label, listed in (
        ("not in the baseline", comparison.new),
        ("not measured", comparison.missing),
    ):
        for r in listed:
            print(f"  {label}: {r.get('benchmark')}: {r.get('name')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only bench_NAME.py for these NAMEs")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a goal is missed or a row is worse than the baseline",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="BASELINE",
        help=f"list the rows more than {WORSE_FACTOR:g}x worse than in this --json file",
    )
    args = parser.parse_args(argv)

    try:
        # Read before the benchmarks run (minutes), so that a wrong file fails at once.
        baseline = read_baseline(args.compare) if args.compare else None
    except ValueError as err:
        parser.error(str(err))
    files = discover(args.names)
    if not files:
        print(f"no benchmarks matched {args.names or 'bench_*.py'} in {HERE}", file=sys.stderr)
        return 1

    rows: list[dict[str, Any]] = []
    errors = 0
    for path in files:
        bench = path.stem.removeprefix("bench_")
        print(f"running {path.name} ...", file=sys.stderr, flush=True)
        try:
            results = load(path).run()
        except Exception:
            errors += 1
            print(f"{path.name} failed:\n{traceback.format_exc()}", file=sys.stderr)
            rows.append({"benchmark": bench, "name": "(error)", "ok": False})
            continue
        rows.extend({"benchmark": bench, **r} for r in results)

    print()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    missed = sum(1 for r in rows if r.get("ok") is False)
    if baseline is not None:
        comparison = compare(rows, baseline)
        print_comparison(comparison, args.compare)
        missed += len(comparison.worse)
    if errors:
        return 1
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
