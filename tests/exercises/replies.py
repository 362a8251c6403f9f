"""What every reply to a wrong answer must be: a verdict first, short, with a labelled diff."""

from __future__ import annotations

import re

from mlckit.exercises import CheckResult
from mlckit.exercises.core import REPLY_LIMIT


def first_sentence(text: str) -> str:
    """``text`` up to its first full stop (one that ends a sentence) or line break."""
    return re.split(r"\.(?:\s|$)|\n", text, maxsplit=1)[0]


def assert_verdict(result: CheckResult, *cause: str) -> None:
    """``result`` fails, and its reply starts with a sentence naming the cause (each of
    ``cause`` in it), stays under the limit in plain text, and folds a diff labelled yours and
    expected in a notebook."""
    assert not result, str(result)
    text = str(result)
    assert len(text) < REPLY_LIMIT, f"{len(text)} characters:\n{text}"
    assert text.startswith(f"✗ {result.exercise}: {result.message}")
    sentence = first_sentence(result.message)
    for words in cause:
        assert words in sentence, f"{words!r} not in the first sentence {sentence!r}"
    if result.diff is not None and result.diff.changed:
        assert result.diff.text.startswith("--- yours"), result.diff.text[:80]
        assert "\n+++ expected" in result.diff.text
        assert text.count("--- yours") == 1
        assert "<details>" in result._repr_html_()
