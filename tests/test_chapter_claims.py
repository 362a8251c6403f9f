"""Every claim a chapter makes about its code is tied to a cell that shows it or a test that
checks it (the markers are described in mlckit/book.py and chapters/README.md)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from mlckit import book

CHAPTERS = book.chapter_sources()


@pytest.mark.parametrize("source", CHAPTERS, ids=[s.stem for s in CHAPTERS])
def test_every_claim_in_the_chapter_is_tied(source: Path):
    problems = book.untied_claims(book.read_source(source))
    assert not problems, f"{source.name}:\n" + "\n".join(problems)


def _notebook(*cells: str | tuple[str, list[str]]):
    """Markdown cells are strings; code cells are (code, tags)."""
    notebook = nbformat.v4.new_notebook()
    for cell in cells:
        if isinstance(cell, str):
            notebook.cells.append(nbformat.v4.new_markdown_cell(cell))
        else:
            code, tags = cell
            notebook.cells.append(nbformat.v4.new_code_cell(code, metadata={"tags": tags}))
    return notebook


SHAPES = "# Text\n\nThe kernel is tiled. <!-- shown-by: tiles -->"
CODE = ("x = 1", [])


@pytest.mark.parametrize(
    "cells",
    [
        ("Nothing claimed here.", CODE),
        (SHAPES, ("assert 'j_0' in src", ["shows:tiles"])),
        (SHAPES, ("src = 1\nsrc", ["shows:tiles"])),
        (SHAPES, ("print(src)", ["shows:tiles"])),
        (SHAPES, ("src = source()", ["shows:tiles", "nbval-check-output"])),
        (("print(src)", ["shows:tiles"]), CODE, SHAPES),
        ("`parallel loops` in code make no claim.\n\n```python\nfaster()\n```",),
        (
            "# It runs as written. <!-- checked-by: tests/test_chapter_claims.py::test_tied_claims_pass -->",
        ),
        ("GPUs are faster at this. <!-- background: the hardware, not this page -->",),
    ],
    ids=[
        "no-claim",
        "assert",
        "last-expression",
        "print",
        "checked-output",
        "cell-before",
        "code-only",
        "test",
        "background",
    ],
)
def test_tied_claims_pass(cells):
    assert book.untied_claims(_notebook(*cells)) == []


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        (("It is 3x faster.", CODE), "'faster' makes a claim; tie it with"),
        ((SHAPES, ("print(1)", [])), "no code cell within 3 cells is tagged shows:tiles"),
        (
            (SHAPES, CODE, CODE, CODE, ("print(1)", ["shows:tiles"])),
            "no code cell within 3 cells is tagged shows:tiles",
        ),
        ((SHAPES, ("src = source()", ["shows:tiles"])), "tagged shows:tiles, shows nothing"),
        (
            ("Runs as written. <!-- checked-by: tests/nope.py::test_x -->",),
            "'tests/nope.py::test_x' is not a test function in tests/",
        ),
        (("It is faster. <!-- shwon-by: x -->",), "unknown marker 'shwon-by'"),
        (("It is faster. <!-- background: -->",), "the background marker is empty"),
        (("Text.", ("print(1)", ["shows:orphan"])), "tagged shows:orphan, which no paragraph"),
    ],
    ids=[
        "no-marker",
        "no-cell",
        "cell-too-far",
        "cell-shows-nothing",
        "no-such-test",
        "misspelt-marker",
        "empty-reason",
        "orphan-tag",
    ],
)
def test_untied_claims_are_named(cells, problem: str):
    problems = book.untied_claims(_notebook(*cells))
    assert len(problems) == 1 and problem in problems[0], problems


def test_a_problem_names_the_cell_and_the_paragraph():
    (problem,) = book.untied_claims(_notebook(CODE, "# Intro\n\nThis kernel is slower."))
    assert problem.startswith("markdown cell 1 (This kernel is slower. ...)")
