"""Run mlckit's benchmarks and print one table.

Every ``benchmarks/bench_*.py`` module exposes ``run() -> list[dict]``; each row has

    name   what was measured
    value  the measurement (a number)
    unit   its unit ("s", "ms", "x numpy", ...)
    goal   the target, as text ("< 2 s")
    ok     whether the goal was met (True / False / None when there is no goal)

Usage: ``python benchmarks/run.py [NAME ...] [--json PATH]`` where NAME selects
``bench_NAME.py`` files; ``--json`` also writes the rows to PATH (as recorded figures, such as
the GPU measurements chapter 6 shows, are kept).
Exit status: 0 when every benchmark ran, 1 when one raised; a missed goal shows as ``MISS``
in the table and, with ``--strict``, also makes the status 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
# Measure the working tree this script sits in, even from a plain `python benchmarks/run.py`
# without an installed mlckit.
sys.path.insert(0, str(HERE.parent))
COLUMNS = ("benchmark", "name", "value", "unit", "goal", "ok")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only bench_NAME.py for these NAMEs")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)

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
    if errors:
        return 1
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
