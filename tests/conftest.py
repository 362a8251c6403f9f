"""Shared pytest configuration: golden-file checks for printed IR.

Use the ``golden`` fixture to compare text (usually ``mod.script()``) with
``tests/golden/<name>.txt``::

    def test_fuse_ops_prints(golden):
        golden("relax/fuse_ops_mlp", after.script())

Run ``pytest --update-golden`` to (re)write the golden files from what the code prints now,
then review the change with ``git diff tests/golden``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

import pytest

# pytester lets tests/test_golden.py check the --update-golden workflow end to end.
pytest_plugins = ("pytester",)

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="write tests/golden/*.txt from the current output instead of comparing with them",
    )


def check_golden(name: str, text: str, *, update: bool = False) -> None:
    """Compare ``text`` with ``tests/golden/<name>.txt``; write the file instead when ``update``."""
    path = GOLDEN_DIR / f"{name}.txt"
    # One trailing newline, so editors that add or strip it do not make a golden file fail.
    text = text.rstrip("\n") + "\n"
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(
            f"golden file {path.relative_to(GOLDEN_DIR.parent.parent)} does not exist; "
            "create it with `pytest --update-golden` and review it before committing",
            pytrace=False,
        )
    expected = path.read_text(encoding="utf-8")
    if expected != text:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"golden/{name}.txt",
                tofile="actual",
            )
        )
        pytest.fail(
            f"output differs from golden/{name}.txt "
            f"(run `pytest --update-golden` if the change is intended):\n{diff}",
            pytrace=False,
        )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)``: check ``text`` against ``tests/golden/<name>.txt``."""
    update = bool(request.config.getoption("--update-golden"))

    def check(name: str, text: str) -> None:
        check_golden(name, text, update=update)

    return check
