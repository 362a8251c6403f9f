"""Exercises of the course's chapters: check an answer, get graded hints, reveal a solution.

>>> from mlckit import exercises
>>> exercises.check("ch2.bmm_relu", sch)     # ✓ or ✗ with what differs and a hint
>>> exercises.hint("ch2.bmm_relu", 1)         # gentlest hint first
>>> exercises.solution("ch2.bmm_relu")        # only when you have tried

Each chapter's exercises live in ``chN.py`` here, their reference solutions in ``solutions/``.
"""

from .core import (
    CheckResult,
    Exercise,
    ExerciseError,
    Mismatch,
    check,
    exercise,
    exercises,
    get_exercise,
    hint,
    solution,
)

__all__ = [
    "CheckResult",
    "Exercise",
    "ExerciseError",
    "Mismatch",
    "check",
    "exercise",
    "exercises",
    "get_exercise",
    "hint",
    "solution",
]
