"""The exercise registry, and what ``check``, ``hint`` and ``solution`` give back.

An exercise is a name (``"ch2.bmm_relu"``), a task, a checker, graded hints and a reference
solution. A checker raises :class:`Mismatch` to say what is wrong; :func:`check` turns that (and
any other failure of the student's code) into a :class:`CheckResult`, so a wrong answer never
ends in a traceback.
"""

from __future__ import annotations

import difflib
import html
import importlib
import inspect
import pkgutil
import textwrap
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import MLCError


class ExerciseError(MLCError):
    """An exercise name or hint level that does not exist."""


class Mismatch(Exception):
    """Raised by a checker: the answer is wrong. ``hint`` says what to look at; ``diff`` (a
    :class:`mlckit.viz.text.ScriptDiff`) shows the answer against the target program."""

    def __init__(self, message: str, hint: str | None = None, diff: Any = None):
        super().__init__(message)
        self.message, self.hint, self.diff = message, hint, diff


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    # Markdown: what to write, what the answer is (a function, a Schedule, an IRModule ...).
    task: str
    checker: Callable[[Any], None] = field(repr=False)
    hints: tuple[str, ...] = field(repr=False)
    # Builds the reference answer; its source is what solution() reveals.
    solution: Callable[[], Any] = field(repr=False)

    @property
    def chapter(self) -> int:
        return int(self.name.split(".", 1)[0].removeprefix("ch"))


_REGISTRY: dict[str, Exercise] = {}


def exercise(
    name: str, *, title: str, task: str, hints: tuple[str, ...], solution: Callable[[], Any]
) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Register the decorated checker as exercise ``name``."""

    def register(checker: Callable[[Any], None]) -> Callable[[Any], None]:
        if name in _REGISTRY:
            raise ExerciseError(f"exercise {name!r} is defined twice")
        _REGISTRY[name] = Exercise(
            name, title, inspect.cleandoc(task), checker, tuple(hints), solution
        )
        return checker

    return register


_LOADED = False


def _load_chapters() -> None:
    # Chapter modules register their exercises on import; load them on first use so that
    # ``import mlckit.exercises`` stays cheap.
    global _LOADED
    if _LOADED:
        return
    package = importlib.import_module(__package__)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("ch") and info.name[2:].isdigit():
            importlib.import_module(f"{__package__}.{info.name}")
    _LOADED = True


def exercises(chapter: int | None = None) -> list[Exercise]:
    """Every exercise (of one chapter), in chapter order then in the order they were defined."""
    _load_chapters()
    found = [e for e in _REGISTRY.values() if chapter is None or e.chapter == chapter]
    return sorted(found, key=lambda e: e.chapter)


def get_exercise(name: str) -> Exercise:
    _load_chapters()
    if name in _REGISTRY:
        return _REGISTRY[name]
    close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
    suggestion = f"; did you mean {close[0]!r}?" if close else ""
    raise ExerciseError(
        f"no exercise named {name!r}{suggestion} (mlckit.exercises.exercises() lists them)"
    )


# A reply longer than this (in plain text) is trimmed: its diff keeps the hunks that fit.
REPLY_LIMIT = 1200
_FOLD_NOTE = "diff, yours against expected (print(result.diff) shows all of it):"


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer; true when it passed. Displays itself in a notebook.

    A wrong answer reads as a verdict (``message``: what is wrong, in one or two sentences),
    then what to do (``hint``), then the diff of the answer against what was expected, folded
    in a notebook and cut to the hunks that fit in :data:`REPLY_LIMIT` characters in text.
    """

    exercise: str
    passed: bool
    message: str
    hint: str | None = None
    diff: Any = field(default=None, repr=False)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        lines = [f"{'✓' if self.passed else '✗'} {self.exercise}: {self.message}"]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        head = "\n".join(lines)
        if self.diff is None or not self.diff.changed:
            return head
        room = REPLY_LIMIT - 50 - len(head) - len(_FOLD_NOTE)
        return "\n".join([head, _FOLD_NOTE, _trimmed(self.diff.text, room)])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#b3261e"
        mark = "✓ correct" if self.passed else "✗ not yet"
        parts = [
            f'<div class="mlckit-check" style="border-left: 4px solid {colour}; '
            'padding: 4px 10px">',
            f'<b style="color: {colour}">{mark}</b> <code>{html.escape(self.exercise)}</code>',
            f'<div style="white-space: pre-wrap">{html.escape(self.message)}</div>',
        ]
        if self.hint:
            parts.append(f"<div><b>hint:</b> {html.escape(self.hint)}</div>")
        if self.diff is not None and self.diff.changed:
            left, right = self.diff.names
            parts.append(
                '<details><summary style="cursor: pointer">the difference: '
                f"{html.escape(left)} (left) and {html.escape(right)} (right)</summary>"
                f"{self.diff.html(side_by_side=True)}</details>"
            )
        return "".join(parts) + "</div>"


def _trimmed(diff_text: str, room: int) -> str:
    """The unified diff's header and as many whole hunks as fit in ``room`` characters; the
    first hunk is cut by lines if even it does not fit. Ends by saying what was left out."""
    lines = diff_text.splitlines()
    header, body = lines[:2], lines[2:]
    hunks: list[list[str]] = []
    for line in body:
        if line.startswith("@@") or not hunks:
            hunks.append([])
        hunks[-1].append(line)
    kept = list(header)
    used = sum(len(line) + 1 for line in header)
    for number, hunk in enumerate(hunks):
        size = sum(len(line) + 1 for line in hunk)
        if used + size <= room:
            kept += hunk
            used += size
            continue
        if number == 0:
            for line in hunk:
                if used + len(line) + 1 > room:
                    break
                kept.append(line)
                used += len(line) + 1
        left = len(body) - (len(kept) - len(header))
        kept.append(f"... ({left} more diff lines)")
        break
    return "\n".join(kept)


def check(name: str, answer: Any) -> CheckResult:
    """Check ``answer`` to exercise ``name``; never raises for a wrong or broken answer."""
    exercise = get_exercise(name)
    try:
        exercise.checker(answer)
    except Mismatch as wrong:
        return CheckResult(name, False, wrong.message, wrong.hint, wrong.diff)
    except MLCError as err:
        return CheckResult(
            name,
            False,
            f"checking your answer raised {type(err).__name__}: {err}",
            "the message above says where; fix that first",
        )
    except Exception as err:  # the student's own code failed while being run
        where = _student_frame(err)
        return CheckResult(
            name,
            False,
            f"running your answer raised {type(err).__name__}: {err}{where}",
            "run your answer on its own first, and read the error it gives",
        )
    return CheckResult(name, True, "correct: your answer matches the reference.")


def _student_frame(err: BaseException) -> str:
    """`` (at file:line)`` for the innermost frame outside mlckit, if there is one."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "/mlckit/" not in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {frame.filename}:{frame.lineno}: {frame.line})"


@dataclass(frozen=True)
class Text:
    """A hint or a solution: text that displays as markdown in a notebook."""

    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


def hint(name: str, level: int = 1) -> Text:
    """Hint number ``level`` (1 = gentlest) for exercise ``name``."""
    exercise = get_exercise(name)
    count = len(exercise.hints)
    if not 1 <= level <= count:
        raise ExerciseError(
            f"{name} has hints 1 to {count}; there is no hint {level}. "
            f"mlckit.exercises.solution({name!r}) shows a full solution."
        )
    more = (
        f" (hint {level} of {count})"
        if level < count
        else f" (last hint; solution({name!r}) shows a full solution)"
    )
    return Text(f"**Hint {level}:** {exercise.hints[level - 1]}{more}")


def solution(name: str) -> Text:
    """A reference solution's source code: reveal it only when you have tried."""
    source = textwrap.dedent(inspect.getsource(get_exercise(name).solution))
    return Text(f"```python\n{source.rstrip()}\n```")
