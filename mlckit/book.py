"""The course book's tooling: chapter notebooks from their text sources, and the HTML book.

Each chapter is written as a jupytext "percent" script, ``chapters/NN_name.py`` (reviewable diffs,
linted like the rest of the code); the notebook students open, ``chapters/NN_name.ipynb``, is
generated from it and executed so that its outputs are saved. ``book.yml`` at the repository
root defines the book: its chapters (written or planned), the intro page, the glossary and
whether to list the exercises::

    python -m mlckit.book notebooks                      # every chapter
    python -m mlckit.book notebooks chapters/02_tensorir.py
    python -m mlckit.book build                          # the HTML book, offline (docs extra)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlckit.errors import MLCError
from mlckit.exercises import Exercise
from mlckit.exercises import exercises as registered_exercises

REPO_ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = REPO_ROOT / "chapters"
BOOK_YML = REPO_ROOT / "book.yml"
BUILD_DIR = REPO_ROOT / "_build" / "book"
# One cell may compile several kernels with numba on a busy 2-core machine.
CELL_TIMEOUT_S = 600
# Headings down to this level get a link anchor (``glossary.md#call_tir``), in the book and here.
HEADING_ANCHORS = 3
EXERCISES_PAGE = "exercises.md"
# The line of the intro that the book replaces by the list of chapters.
INTRO_MARKER = "<!-- chapters -->"
# The book's own style sheet.
# - A long name in running text (``ms.merge_measurements(...)``) does not break, and on a phone
#   it made the whole page wider than the screen: inline code may break anywhere (code blocks
#   scroll instead).
# - A picture stops shrinking at viz.embed.MIN_SCALE and scrolls in its frame beyond it; on a
#   phone's screen it shrinks to fit, whole, and the reader zooms in.
STYLE_SHEET = "mlckit.css"
STYLE = """\
code.literal, code.literal span.pre { white-space: normal; overflow-wrap: anywhere; }
@media (max-width: 600px) { .mlckit-picture img { min-width: 0 !important; } }
"""


class BookError(MLCError):
    """A chapter or the book could not be generated."""


# ---------------------------------------------------------------------------------------------
# Chapter notebooks


def chapter_sources() -> list[Path]:
    """The chapters' text sources, ``chapters/NN_*.py``, in chapter order."""
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.py"))


def read_source(source: Path):
    """The chapter's notebook as jupytext reads it from the percent script (no outputs)."""
    import jupytext

    notebook = jupytext.read(source, fmt="py:percent")
    notebook.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    return notebook


def execute(notebook: Any, cwd: Path, name: str) -> None:
    """Run every cell of ``notebook`` in a fresh kernel started in ``cwd``, saving the outputs
    in it; a failing cell raises a BookError that names the notebook (``name``)."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    # The kernel talks to us over local sockets (IPC) rather than TCP on localhost: no port is
    # opened, and ipykernel has nothing to warn about (over TCP it logs, for every notebook,
    # that the traffic is not encrypted). The sockets are files named after the connection
    # file, which must be an absolute path: the kernel runs in ``cwd``, not in ours. Windows has
    # no IPC sockets in ZeroMQ.
    transport = "tcp" if sys.platform == "win32" else "ipc"
    with tempfile.TemporaryDirectory(prefix="mlckit-kernel-") as sockets:
        manager = KernelManager(
            kernel_name="python3",
            transport=transport,
            connection_file=str(Path(sockets) / "kernel.json"),
        )
        client = NotebookClient(
            notebook,
            km=manager,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": str(cwd)}},
        )
        try:
            # The client shuts down only a kernel whose manager it made itself, unless told.
            client.execute(cleanup_kc=True)
        except CellExecutionError as err:
            raise BookError(f"{name}: a cell failed:\n{err}") from None


def execute_notebook(source: Path) -> Path:
    """Write ``source``'s notebook next to it, executed in the chapters folder, outputs saved."""
    import nbformat

    notebook = read_source(source)
    execute(notebook, source.parent, source.name)
    target = source.with_suffix(".ipynb")
    nbformat.write(notebook, target)
    return target


# ---------------------------------------------------------------------------------------------
# Claims in a chapter's prose, each tied to what shows it
#
# A sentence that says what the page's code does ("runs as written", "tiled and parallel
# loops", "faster") must be shown by a cell next to it or checked by a test. The paragraph that
# makes it carries a marker, an HTML comment that neither Jupyter nor the book renders:
#
#     ... the generated code also checks every argument's shape. <!-- shown-by: shape-checks -->
#
# and a code cell at most NEAR_CELLS cells before or after it is tagged ``shows:shape-checks``
# (``# %% tags=["shows:shape-checks"]`` in the chapter's source) and shows it: an ``assert``,
# an output the notebook tests compare (tag ``nbval-check-output``), or an output on the page
# (a ``print``, a ``show``/``display`` call or a last expression). The other markers:
#
#     <!-- checked-by: tests/course/test_course.py::test_course_notebook_runs -->
#     <!-- background: what the H100's data sheet gives -->
#
# ``checked-by`` names a test that checks the claim; ``background`` says why a sentence with a
# claim phrase states no fact about this page's code (hardware, the wider field).

# Phrases that claim something about the page's code; a paragraph using one needs a marker.
CLAIM_PHRASES = (
    "as written",
    "spelling only",
    "line for line",
    "is the name",
    "tiled",
    "parallel loop",
    "faster",
    "slower",
    "prints",
)
# How far (in cells, either way) the cell that shows a claim may be from the paragraph.
NEAR_CELLS = 3
SHOWS_TAG = "shows:"
_CLAIM = re.compile(r"\b(" + "|".join(map(re.escape, CLAIM_PHRASES)) + r")", re.IGNORECASE)
_MARKER = re.compile(r"<!--\s*([\w-]+):\s*(.*?)\s*-->")
_MARKER_KINDS = ("shown-by", "checked-by", "background")


def paragraphs(markdown: str) -> list[str]:
    """The prose paragraphs of a markdown cell: blocks between blank lines, without headings and
    fenced code."""
    blocks = re.split(r"\n\s*\n", re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "", markdown))
    return [b.strip() for b in blocks if b.strip() and not b.lstrip().startswith("#")]


def claim_phrases(paragraph: str) -> list[str]:
    """The claim phrases in a paragraph's prose (not in its inline code or its markers)."""
    prose = _MARKER.sub("", re.sub(r"`[^`]*`", "", paragraph))
    return [m[1].lower() for m in _CLAIM.finditer(prose)]


def _shows_something(cell: Any) -> bool:
    """Whether a code cell's claim can be seen: it asserts, its output is compared by the
    notebook tests, or it puts something on the page."""
    import ast

    if "nbval-check-output" in cell.metadata.get("tags", []):
        return True
    tree = ast.parse(cell.source)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        return True  # Jupyter displays a cell's last expression
    shown = {"print", "display", "show"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in shown:
                return True
    return False


def _test_exists(reference: str, root: Path) -> bool:
    """Whether ``tests/x.py::test_name`` names a test function defined in that file."""
    file, _, name = reference.partition("::")
    path = root / file
    return (
        file.startswith("tests/")
        and name.startswith("test_")
        and path.is_file()
        and re.search(rf"^def {re.escape(name)}\b", path.read_text(encoding="utf-8"), re.M)
        is not None
    )


def untied_claims(notebook: Any, root: Path = REPO_ROOT) -> list[str]:
    """What is wrong with the ties between a chapter's claims and the cells or tests that show
    them, one sentence each; empty when every claim is tied (see the comment above)."""
    cells = notebook.cells
    problems: list[str] = []
    tagged: dict[str, int] = {}
    for index, cell in enumerate(cells):
        for tag in cell.metadata.get("tags", []):
            if tag.startswith(SHOWS_TAG):
                tagged[tag[len(SHOWS_TAG) :]] = index
    used: set[str] = set()
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        for paragraph in paragraphs(cell.source):
            where = f"markdown cell {index} ({' '.join(paragraph.split()[:8])} ...)"
            markers = _MARKER.findall(paragraph)
            phrases = claim_phrases(paragraph)
            if phrases and not markers:
                problems.append(
                    f"{where}: {phrases[0]!r} makes a claim; tie it with <!-- shown-by: NAME -->"
                    f" (a code cell tagged {SHOWS_TAG}NAME within {NEAR_CELLS} cells), "
                    "<!-- checked-by: tests/FILE.py::TEST --> or <!-- background: WHY -->"
                )
            for kind, value in markers:
                if kind not in _MARKER_KINDS:
                    problems.append(f"{where}: unknown marker {kind!r} (known: {_MARKER_KINDS})")
                elif not value:
                    problems.append(f"{where}: the {kind} marker is empty")
                elif kind == "shown-by":
                    used.add(value)
                    shown_at = tagged.get(value)
                    if shown_at is None or abs(shown_at - index) > NEAR_CELLS:
                        problems.append(
                            f"{where}: no code cell within {NEAR_CELLS} cells is tagged "
                            f"{SHOWS_TAG}{value}"
                        )
                    elif not _shows_something(cells[shown_at]):
                        problems.append(
                            f"code cell {shown_at}, tagged {SHOWS_TAG}{value}, shows nothing: "
                            "assert the claim, tag the cell nbval-check-output or print it"
                        )
                elif kind == "checked-by" and not _test_exists(value, root):
                    problems.append(f"{where}: {value!r} is not a test function in tests/")
    problems += [
        f"code cell {index} is tagged {SHOWS_TAG}{name}, which no paragraph names"
        for name, index in tagged.items()
        if name not in used
    ]
    return problems


# ---------------------------------------------------------------------------------------------
# book.yml


@dataclass(frozen=True)
class Chapter:
    number: int
    title: str
    # The chapter's notebook; None while the chapter is planned (no page yet).
    file: Path | None

    @property
    def planned(self) -> bool:
        return self.file is None

    @property
    def label(self) -> str:
        return f"chapter {self.number} ({self.title!r})"


@dataclass(frozen=True)
class Book:
    title: str
    author: str
    intro: Path
    chapters: tuple[Chapter, ...]
    glossary: Path | None
    exercises: bool

    @property
    def written(self) -> list[Chapter]:
        return [c for c in self.chapters if not c.planned]


_BOOK_KEYS = {"title", "author", "intro", "chapters", "glossary", "exercises"}
_CHAPTER_KEYS = {"number", "title", "file", "planned"}


def load_book(path: Path = BOOK_YML) -> Book:
    """Read and validate ``book.yml``; every file it names must exist (paths are relative to it)."""
    import yaml

    where = path.name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BookError(f"cannot read the book definition {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise BookError(f"{where} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise BookError(f"{where} must be a mapping with the keys {sorted(_BOOK_KEYS)}")
    _check_keys(data, _BOOK_KEYS, {"title", "author", "intro", "chapters"}, where)
    root = path.parent
    entries = data["chapters"]
    if not isinstance(entries, list) or not entries:
        raise BookError(f"{where}: chapters must be a non-empty list")
    chapters: list[Chapter] = []
    for index, entry in enumerate(entries, 1):
        chapters.append(_load_chapter(entry, root, where, index))
        if len(chapters) > 1 and chapters[-1].number <= chapters[-2].number:
            new, previous = chapters[-1], chapters[-2]
            problem = "appears twice" if new.number == previous.number else "is out of order"
            raise BookError(
                f"{where}: {new.label} {problem}: it comes after chapter {previous.number}; "
                "list each chapter once, in increasing order of number"
            )
    glossary = data.get("glossary")
    exercises = data.get("exercises", False)
    if not isinstance(exercises, bool):
        raise BookError(f"{where}: exercises must be true or false, not {exercises!r}")
    return Book(
        title=_text(data["title"], where, "title"),
        author=_text(data["author"], where, "author"),
        intro=_existing(root, data["intro"], where, "intro", ".md"),
        chapters=tuple(chapters),
        glossary=None if glossary is None else _existing(root, glossary, where, "glossary", ".md"),
        exercises=exercises,
    )


def _load_chapter(entry: Any, root: Path, book_yml: str, index: int) -> Chapter:
    where = f"{book_yml}, chapters entry {index}"
    if not isinstance(entry, dict):
        raise BookError(f"{where} must be a mapping like {{number: 1, title: ..., file: ...}}")
    number, title = entry.get("number"), entry.get("title")
    # Name the entry by its number and title as soon as it has them.
    if type(number) is int and number >= 1 and isinstance(title, str):
        where = f"{book_yml}: chapter {number} ({title!r})"
    _check_keys(entry, _CHAPTER_KEYS, {"number", "title"}, where)
    if type(number) is not int or number < 1:
        raise BookError(f"{where}: number must be a positive integer, not {number!r}")
    title = _text(title, where, "title")
    planned = entry.get("planned", False)
    if not isinstance(planned, bool):
        raise BookError(f"{where}: planned must be true or false, not {planned!r}")
    if planned == ("file" in entry):
        raise BookError(f"{where}: give either file: (a written chapter) or planned: true")
    if planned:
        return Chapter(number, title, None)
    file = _existing(root, entry["file"], where, "file", ".ipynb")
    if not file.name.startswith(f"{number:02d}_"):
        raise BookError(f"{where}: file {entry['file']!r} must be named {number:02d}_<name>.ipynb")
    return Chapter(number, title, file)


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BookError(f"{where}: {key} must be a non-empty string, not {value!r}")
    return value


def _existing(root: Path, value: Any, where: str, key: str, suffix: str) -> Path:
    """The file ``value`` names (relative to ``root``), which must exist and end in ``suffix``."""
    file = root / _text(value, where, key)
    if file.suffix != suffix:
        raise BookError(f"{where}: {key} {value!r} must be a {suffix} file")
    if not file.is_file():
        hint = ""
        if suffix == ".ipynb" and file.with_suffix(".py").is_file():
            hint = f"; generate it from {file.with_suffix('.py').name} with `make notebooks`"
        raise BookError(f"{where}: {key} {value!r} does not exist{hint}")
    return file


def _check_keys(data: dict, allowed: set[str], required: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise BookError(f"{where}: unknown key {unknown[0]!r} (known keys: {sorted(allowed)})")
    missing = sorted(required - data.keys())
    if missing:
        raise BookError(f"{where}: missing key {missing[0]!r}")


# ---------------------------------------------------------------------------------------------
# The staged Jupyter Book: generated pages, _toc.yml and _config.yml


def heading_slug(title: str) -> str:
    """The anchor myst gives a heading (``"Dataflow block"`` -> ``dataflow-block``)."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.lower().replace(" ", "-"))


def heading_slugs(markdown: str) -> set[str]:
    """The anchors of a markdown page's headings (levels 1 to HEADING_ANCHORS, outside code)."""
    slugs = set()
    in_fence = False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        match = None if in_fence else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if match and len(match[1]) <= HEADING_ANCHORS:
            # The slug is made from the heading's text, without markdown's code backticks.
            slugs.add(heading_slug(match[2].replace("`", "")))
    return slugs


def staged_name(chapter: Chapter) -> str:
    """The page name (file name without suffix) of a written chapter in the staged book."""
    assert chapter.file is not None
    return chapter.file.stem


def toc(book: Book) -> dict[str, Any]:
    """The staged book's ``_toc.yml`` (jb-book format); planned chapters have no page."""
    parts: list[dict[str, Any]] = [
        {
            "caption": "Chapters",
            "chapters": [
                {"file": staged_name(c), "title": f"{c.number}. {c.title}"} for c in book.written
            ],
        }
    ]
    reference = []
    if book.exercises:
        reference.append({"file": Path(EXERCISES_PAGE).stem, "title": "Exercises"})
    if book.glossary is not None:
        reference.append({"file": book.glossary.stem, "title": "Glossary"})
    if reference:
        parts.append({"caption": "Reference", "chapters": reference})
    return {"format": "jb-book", "root": book.intro.stem, "parts": parts}


def config(book: Book) -> dict[str, Any]:
    """The staged book's ``_config.yml``: executed offline, failing on any cell error."""
    return {
        "title": book.title,
        "author": book.author,
        "copyright": "",
        "only_build_toc_files": True,
        # build() runs every chapter itself (a chapter that no longer runs fails the build), as
        # `notebooks` does, and the book shows the outputs it saved.
        "execute": {"execute_notebooks": "off"},
        # Nothing that needs the network: no launch buttons, no live code, no repository links.
        "launch_buttons": {
            "binderhub_url": "",
            "jupyterhub_url": "",
            "colab_url": "",
            "deepnote_url": "",
            "thebe": False,
        },
        "html": {
            "use_edit_page_button": False,
            "use_repository_button": False,
            "use_issues_button": False,
            # Chapters keep their course numbers (7 follows 3 while 4-6 are planned).
            "use_multitoc_numbering": False,
        },
        "sphinx": {
            "config": {
                "myst_heading_anchors": HEADING_ANCHORS,
                "html_show_copyright": False,
                "html_static_path": ["_static"],
                "html_css_files": [STYLE_SHEET],
                # Live widgets would load their JavaScript from a CDN (and need a kernel to do
                # anything): the book stays offline, and chapters show static HTML instead.
                "nb_ipywidgets_js": {},
                # A failing cell's traceback goes to the build log, not only to the page.
                "nb_execution_show_tb": True,
            }
        },
    }


def intro_page(book: Book) -> str:
    """The intro with the list of chapters (the planned ones marked as coming) in place of its
    ``<!-- chapters -->`` line, or at its end."""
    lines = ["## Chapters", ""]
    for chapter in book.chapters:
        if chapter.planned:
            lines.append(f"- Chapter {chapter.number}: {chapter.title} *(coming)*")
        else:
            link = f"{staged_name(chapter)}.ipynb"
            lines.append(f"- Chapter {chapter.number}: [{chapter.title}]({link})")
    extra = []
    if book.exercises:
        extra.append(f"[the exercises]({EXERCISES_PAGE})")
    if book.glossary is not None:
        extra.append(f"[the glossary]({book.glossary.name})")
    if extra:
        lines += ["", f"The book also has {' and '.join(extra)}."]
    chapters = "\n".join(lines)
    intro = book.intro.read_text(encoding="utf-8").rstrip()
    if INTRO_MARKER in intro:
        return intro.replace(INTRO_MARKER, chapters, 1) + "\n"
    return f"{intro}\n\n{chapters}\n"


def exercises_page(book: Book, exercises: Iterable[Exercise]) -> str:
    """Every exercise, grouped by chapter: its task and how to check an answer."""
    titles = {c.number: c.title for c in book.chapters}
    by_chapter: dict[int, list[Exercise]] = {}
    for exercise in exercises:
        by_chapter.setdefault(exercise.chapter, []).append(exercise)
    lines = [
        "# Exercises",
        "",
        "Each exercise is checked in a notebook or a Python session with `mlckit.exercises`:",
        "`check(name, answer)` tests your answer and says what is wrong, `hint(name, level)` gives",
        "a hint (level 1, then 2, ...), and `solution(name)` shows a solution.",
    ]
    for number in sorted(by_chapter):
        title = titles.get(number)
        lines += ["", f"## Chapter {number}" + (f": {title}" if title else "")]
        for exercise in by_chapter[number]:
            lines += [
                "",
                f"### {exercise.title}",
                "",
                exercise.task.strip(),
                "",
                "```python",
                "from mlckit.exercises import check, hint, solution",
                "",
                f'check("{exercise.name}", answer)  # your answer, as the task describes it',
                f'hint("{exercise.name}", 1)',
                f'solution("{exercise.name}")',
                "```",
            ]
    return "\n".join(lines) + "\n"


def stage(book: Book, dest: Path) -> Path:
    """Write the book's sources into ``dest`` (emptied first): pages, _toc.yml, _config.yml and
    the style sheet."""
    import yaml

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for chapter in book.written:
        assert chapter.file is not None
        shutil.copyfile(chapter.file, dest / chapter.file.name)
    (dest / book.intro.name).write_text(intro_page(book), encoding="utf-8")
    if book.glossary is not None:
        shutil.copyfile(book.glossary, dest / book.glossary.name)
    if book.exercises:
        page = exercises_page(book, registered_exercises())
        (dest / EXERCISES_PAGE).write_text(page, encoding="utf-8")
    for name, content in (("_toc.yml", toc(book)), ("_config.yml", config(book))):
        (dest / name).write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    (dest / "_static").mkdir()
    (dest / "_static" / STYLE_SHEET).write_text(STYLE, encoding="utf-8")
    return dest


def build(book: Book, out: Path = BUILD_DIR) -> Path:
    """Stage the book under ``out/src``, execute every chapter there (a failing cell in any of
    them fails the build, after all are run) and build its HTML; returns the index page."""
    import nbformat

    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        raise BookError(
            'building the book needs Jupyter Book: pip install -e ".[docs]" (`make book` does it)'
        ) from None
    src = stage(book, out / "src")
    failures = []
    for chapter in book.written:
        staged = src / f"{staged_name(chapter)}.ipynb"
        notebook = nbformat.read(staged, as_version=4)
        try:
            execute(notebook, src, staged.name)
        except BookError as err:
            failures.append(str(err))
            continue
        nbformat.write(notebook, staged)
    if failures:
        raise BookError("the book did not build:\n" + "\n".join(failures))
    # -W: a warning (a broken link, a page that does not parse) fails the build; --keep-going:
    # after all of them are reported.
    # jupyter_book has no `python -m` entry point; this is its `jupyter-book` command.
    command = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]
    options = ["build", str(src), "-W", "--keep-going"]
    if subprocess.run([*command, *options], check=False).returncode != 0:
        raise BookError("the book did not build: see the warnings and errors above")
    return src / "_build" / "html" / "index.html"


# ---------------------------------------------------------------------------------------------
# Command line


def _notebooks(paths: Sequence[str]) -> int:
    sources = [Path(p).resolve() for p in paths] or chapter_sources()
    for source in sources:
        start = time.perf_counter()
        target = execute_notebook(source)
        print(f"{target.relative_to(REPO_ROOT)}: {time.perf_counter() - start:.1f} s")
    return 0


def _build(book_yml: str, out: str) -> int:
    start = time.perf_counter()
    index = build(load_book(Path(book_yml).resolve()), Path(out).resolve())
    print(f"The book is built ({time.perf_counter() - start:.0f} s): {index}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlckit.book",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    notebooks = commands.add_parser("notebooks", help="generate and execute chapter notebooks")
    notebooks.add_argument("sources", nargs="*", help="chapters/NN_name.py (default: all)")
    book = commands.add_parser("build", help="build the HTML book (executes every chapter)")
    book.add_argument("--book", default=str(BOOK_YML), help="the book definition (book.yml)")
    book.add_argument("--out", default=str(BUILD_DIR), help="the build folder (_build/book)")
    args = parser.parse_args(argv)
    try:
        if args.command == "notebooks":
            return _notebooks(args.sources)
        return _build(args.book, args.out)
    except MLCError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
