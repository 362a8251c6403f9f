"""The golden-file fixture: missing files fail with advice, --update-golden writes, diffs fail."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py").read_text(encoding="utf-8")

TEST_FILE = """
def test_printed(golden):
    golden("demo/printed", open("actual.txt").read())
"""


def test_golden_workflow(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_printed=TEST_FILE)
    pytester.path.joinpath("actual.txt").write_text("line 1\nline 2\n")

    missing = pytester.runpytest()
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*does not exist*--update-golden*"])

    pytester.runpytest("--update-golden").assert_outcomes(passed=1)
    golden_file = pytester.path / "golden" / "demo" / "printed.txt"
    assert golden_file.read_text() == "line 1\nline 2\n"
    pytester.runpytest().assert_outcomes(passed=1)

    pytester.path.joinpath("actual.txt").write_text("line 1\nline two\n")
    changed = pytester.runpytest()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*-line 2", "*+line two"])
