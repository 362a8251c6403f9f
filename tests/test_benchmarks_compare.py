"""benchmarks/run.py --compare: which rows got worse than the recorded baseline (the comparison
only; no timing is measured here)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_script():
    spec = importlib.util.spec_from_file_location("benchmarks_run", ROOT / "benchmarks/run.py")
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is being made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _run_script()


def row(name, value, unit, goal="", benchmark="models"):
    return dict(benchmark=benchmark, name=name, value=value, unit=unit, goal=goal, ok=None)


BASELINE = [
    row("mlp batch 1: mlckit / torch", 1.20, "x torch", "<= 1.5x"),
    row("mlp batch 1: mlckit", 40.0, "us"),
    row("cold build", 2.0, "s", "<= 3 s"),
    row("tuned", 100.0, "GFLOP/s"),
    row("speedup", 2.0, "x", ">= 1x"),
    row("python / llvm", 50.0, "x"),
    row("gone", 1.0, "x torch"),
    row("other benchmark's row", 1.0, "s", benchmark="mlp"),
]


def names(rows):
    return sorted(r["name"] for r in rows)


def test_each_row_compared_in_its_units_direction():
    rows = [
        row("mlp batch 1: mlckit / torch", 1.56, "x torch", "<= 1.5x"),  # 30% worse
        row("mlp batch 1: mlckit", 40.0, "us"),  # equal
        row("cold build", 1.0, "s", "<= 3 s"),  # better
        row("tuned", 100.0 / 1.3, "GFLOP/s"),  # 30% slower, told in GFLOP/s
        row("speedup", 2.0 / 1.3, "x", ">= 1x"),  # a plain "x": its goal says higher is better
        row("python / llvm", 5.0, "x"),  # neither unit nor goal says which way is better
        row("new row", 9.0, "x torch"),
    ]
    result = run.compare(rows, BASELINE)
    assert names(c.row for c in result.worse) == [
        "mlp batch 1: mlckit / torch",
        "speedup",
        "tuned",
    ]
    assert all(c.factor == pytest.approx(1.3) for c in result.worse)
    assert {c.row["name"]: c.factor for c in result.unchanged_or_better} == {
        "mlp batch 1: mlckit": 1.0,
        "cold build": 0.5,
    }
    assert names(result.new) == ["new row"]
    # Only the rows of benchmarks that ran count as not measured.
    assert names(result.missing) == ["gone"]


def test_worse_by_less_than_the_factor_is_not_listed():
    rows = [row("mlp batch 1: mlckit / torch", 1.45, "x torch", "<= 1.5x")]
    result = run.compare(rows, BASELINE)
    assert result.worse == []
    assert result.unchanged_or_better[0].factor == pytest.approx(1.45 / 1.2)


def test_rows_without_a_number_are_not_compared():
    failed = row("mlp batch 1: mlckit / torch", "", "x torch", "<= 1.5x")
    result = run.compare([failed], BASELINE)
    assert result.worse == result.unchanged_or_better == []


def test_the_same_name_in_another_benchmark_is_another_row():
    rows = [row("cold build", 9.0, "s", "<= 3 s", benchmark="mlp_default")]
    result = run.compare(rows, BASELINE)
    assert names(result.new) == ["cold build"]
    assert result.worse == []


def test_main_with_a_worse_row_fails_only_when_strict(tmp_path, monkeypatch, capsys):
    (tmp_path / "bench_fake.py").write_text(
        "def run():\n    return [dict(name='t', value=2.0, unit='s', goal='', ok=None)]\n"
    )
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps([row("t", 1.0, "s", benchmark="fake")]))
    monkeypatch.setattr(run, "HERE", tmp_path)
    assert run.main(["fake", "--compare", str(baseline)]) == 0
    assert "WORSE 2.00x  fake: t" in capsys.readouterr().out
    assert run.main(["fake", "--compare", str(baseline), "--strict"]) == 1
    sys.modules.pop("bench_fake")  # run.py registers each benchmark it loads


@pytest.mark.parametrize(
    ("text", "cause"),
    [(None, "cannot read"), ("{not json", "cannot read"), ('{"a": 1}', "not a list of rows")],
)
def test_an_unreadable_baseline_is_refused_before_running(tmp_path, capsys, text, cause):
    baseline = tmp_path / "baseline.json"
    if text is not None:
        baseline.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        run.main(["no_such_benchmark", "--compare", str(baseline)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--compare {baseline}" in err and cause in err
