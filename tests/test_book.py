"""The course book: book.yml, the chapter notebooks against their sources, the staged Jupyter
Book (_toc.yml, _config.yml, generated pages), the glossary and the links to it."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

from mlckit import book
from mlckit.book import BookError, load_book

GLOSSARY_TERMS = [
    "ML compilation",
    "Tensor program",
    "Primitive tensor function",
    "TensorIR",
    "PrimFunc",
    "Buffer",
    "Block",
    "Block iterator",
    "Spatial and reduction axes",
    "Loop nest",
    "Schedule",
    "Schedule primitive",
    "Trace",
    "Working set",
    "Destination-passing style",
    "IRModule",
    "GlobalVar",
    "Relax",
    "Dataflow block",
    "Purity",
    "call_tir",
    "call_dps_packed",
    "Extern function",
    "Struct info",
    "Symbolic shape",
    "BlockBuilder",
    "Tensor expression (te)",
    "Legalization",
    "Operator pattern kind",
    "Operator fusion",
    "FuseTIR",
    "Primitive function",
    "Pass",
    "Virtual machine",
    "Executable",
    "NDArray",
    "BindParams",
    "Storage scope",
    "Tensorization",
    "Tensor intrinsic",
    "Automatic differentiation",
    "Adjoint",
    "Forward mode",
    "Jacobian-vector product (JVP)",
    "Reverse mode",
    "Optimizer",
]
GLOSSARY_LINK = re.compile(r"\]\(glossary\.md#([^)\s]+)\)")
SOURCES = book.chapter_sources()


# ---------------------------------------------------------------------------------------------
# The repository's book


def test_book_yml_validates():
    definition = load_book()
    assert definition.intro == book.CHAPTERS / "README.md"
    assert definition.glossary == book.CHAPTERS / "glossary.md"
    assert [c.number for c in definition.chapters] == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_book_lists_exactly_the_chapters_present():
    written = {c.file.stem for c in load_book().written}
    assert written == {source.stem for source in SOURCES}
    for chapter in load_book().written:
        assert chapter.file.with_suffix(".py").is_file(), chapter.label


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_generated_from_its_source(source: Path):
    notebook = source.with_suffix(".ipynb")
    assert notebook.is_file(), f"{notebook.name} is missing: run `make notebooks`"
    saved = nbformat.read(notebook, as_version=4)
    expected = book.read_source(source)
    cells = [_cell_key(c) for c in saved.cells]
    assert cells == [_cell_key(c) for c in expected.cells], (
        f"{notebook.name} is stale: regenerate it with "
        f"`.venv/bin/python -m mlckit.book notebooks {source.relative_to(book.REPO_ROOT)}`"
    )


def _cell_key(cell) -> tuple:
    # Tags matter too: nbval compares the output of cells tagged "nbval-check-output".
    return cell.cell_type, cell.source, tuple(cell.metadata.get("tags", ()))


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_each_chapter_checks_the_output_of_its_lessons(source: Path):
    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    checked = [c for c in notebook.cells if "nbval-check-output" in c.metadata.get("tags", ())]
    assert len(checked) >= 4, f"{source.name}: tag the cells whose printed output is the lesson"
    for cell in checked:
        assert cell.outputs, f"{source.name}: a checked cell shows nothing:\n{cell.source}"


def test_glossary_has_exactly_the_course_terms():
    text = (book.CHAPTERS / "glossary.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.*)$", text, flags=re.MULTILINE) == GLOSSARY_TERMS


def _markdown_pages() -> dict[str, str]:
    """Every page whose links the book resolves: chapters' markdown cells, intro, glossary."""
    pages = {
        name: (book.CHAPTERS / name).read_text(encoding="utf-8")
        for name in ("README.md", "glossary.md")
    }
    for source in SOURCES:
        cells = book.read_source(source).cells
        pages[source.name] = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    return pages


def test_glossary_links_point_to_headings():
    slugs = book.heading_slugs((book.CHAPTERS / "glossary.md").read_text(encoding="utf-8"))
    assert {book.heading_slug(term) for term in GLOSSARY_TERMS} <= slugs
    for name, text in _markdown_pages().items():
        links = GLOSSARY_LINK.findall(text)
        if name == "glossary.md":
            links = re.findall(r"\]\(#([^)\s]+)\)", text)
        missing = sorted(set(links) - slugs)
        assert not missing, f"{name} links to glossary anchors that do not exist: {missing}"


def test_heading_slug_is_myst_s():
    myst = pytest.importorskip("myst_parser.mdit_to_docutils.base")
    for term in GLOSSARY_TERMS:
        assert book.heading_slug(term) == myst.default_slugify(term)


def test_heading_slugs_skip_code_and_deep_headings():
    text = "# Top\n\n```python\n# a comment\n```\n\n### `call_tir` again\n\n#### Too deep\n"
    assert book.heading_slugs(text) == {"top", "call_tir-again"}


def test_exercises_page_lists_every_exercise():
    if importlib.util.find_spec("mlckit.exercises") is None:
        pytest.skip("mlckit.exercises is not written yet")
    from mlckit.exercises import exercises

    page = book.exercises_page(load_book(), exercises())
    for exercise in exercises():
        assert f'check("{exercise.name}", answer)' in page


# ---------------------------------------------------------------------------------------------
# A small book of our own


@dataclass
class FakeExercise:
    name: str
    chapter: int
    title: str
    task: str


def _notebook(path: Path, *cells: str) -> None:
    """A notebook whose cells are markdown when they start with '#', else code."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell(c) if c.startswith("#") else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    nbformat.write(notebook, path)


BOOK_YML = """\
title: "A small book"
author: "Its authors"
intro: chapters/README.md
chapters:
  - {number: 1, title: "One", file: chapters/01_one.ipynb}
  - {number: 2, title: "Two", planned: true}
  - {number: 3, title: "Three", file: chapters/03_three.ipynb}
glossary: chapters/glossary.md
"""


@pytest.fixture
def small_book(tmp_path: Path) -> Path:
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    (chapters / "README.md").write_text("# A small book\n\nWelcome.\n")
    (chapters / "glossary.md").write_text("# Glossary\n\n## PrimFunc\n\nA function.\n")
    one = "# 1. One\n\nA [PrimFunc](glossary.md#primfunc). <!-- background: a definition -->"
    _notebook(chapters / "01_one.ipynb", one, "1")
    _notebook(chapters / "03_three.ipynb", "# 3. Three", "3")
    (tmp_path / "book.yml").write_text(BOOK_YML)
    return tmp_path / "book.yml"


def test_toc_has_the_written_chapters_only(small_book: Path):
    assert book.toc(load_book(small_book)) == {
        "format": "jb-book",
        "root": "README",
        "parts": [
            {
                "caption": "Chapters",
                "chapters": [
                    {"file": "01_one", "title": "1. One"},
                    {"file": "03_three", "title": "3. Three"},
                ],
            },
            {"caption": "Reference", "chapters": [{"file": "glossary", "title": "Glossary"}]},
        ],
    }


def test_intro_lists_planned_chapters_as_coming(small_book: Path):
    page = book.intro_page(load_book(small_book))
    assert page.startswith("# A small book\n\nWelcome.\n")
    assert "- Chapter 1: [One](01_one.ipynb)\n" in page
    assert "- Chapter 2: Two *(coming)*\n" in page
    assert "- Chapter 3: [Three](03_three.ipynb)\n" in page
    assert "[the glossary](glossary.md)" in page


def test_intro_marker_places_the_chapter_list(small_book: Path):
    intro = small_book.parent / "chapters" / "README.md"
    intro.write_text("# A small book\n\n<!-- chapters -->\n\n## How to run\n")
    page = book.intro_page(load_book(small_book))
    assert page.index("## Chapters") < page.index("- Chapter 3") < page.index("## How to run")
    assert "<!--" not in page


def test_staged_book_is_what_book_yml_says(small_book: Path, tmp_path: Path):
    definition = load_book(small_book)
    src = book.stage(definition, tmp_path / "out" / "src")
    names = {p.name for p in src.iterdir()}
    assert names == {"_config.yml", "_toc.yml", "_static", "README.md", "glossary.md"} | {
        "01_one.ipynb",
        "03_three.ipynb",
    }
    assert yaml.safe_load((src / "_toc.yml").read_text()) == book.toc(definition)
    config = yaml.safe_load((src / "_config.yml").read_text())
    assert config == book.config(definition)
    assert (config["title"], config["author"]) == ("A small book", "Its authors")
    # build() executes the chapters itself (over IPC, see book.execute); Jupyter Book does not.
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["sphinx"]["config"]["myst_heading_anchors"] == 3
    assert config["launch_buttons"]["thebe"] is False
    assert not any(v for k, v in config["launch_buttons"].items() if k.endswith("_url"))
    assert (src / "README.md").read_text() == book.intro_page(definition)
    # Inline code may break on a narrow screen: the style sheet the config names is there.
    (sheet,) = config["sphinx"]["config"]["html_css_files"]
    assert "overflow-wrap: anywhere" in (src / "_static" / sheet).read_text()


def test_exercises_page_groups_by_chapter(small_book: Path):
    exercises = [
        FakeExercise("ch3.b", 3, "Fuse it", "Fuse `a` and `b`."),
        FakeExercise("ch1.a", 1, "Add", "Write an add.\n"),
        FakeExercise("ch3.c", 3, "Split it", "Split a loop."),
    ]
    page = book.exercises_page(load_book(small_book), exercises)
    assert page.index("## Chapter 1: One") < page.index("### Add") < page.index("## Chapter 3")
    assert page.index("### Fuse it") < page.index("### Split it")
    assert 'check("ch3.b", answer)' in page
    assert 'hint("ch1.a", 1)' in page
    assert "Write an add.\n\n```python" in page


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{number: 1,", "{number: 1, pages: 3,"), "chapter 1 ('One'): unknown key 'pages'"),
        (("author:", "authors:"), "book.yml: unknown key 'authors'"),
        (
            ("03_three.ipynb", "03_four.ipynb"),
            "chapter 3 ('Three'): file 'chapters/03_four.ipynb' does not exist",
        ),
        (("number: 2", "number: 1"), "chapter 1 ('Two') appears twice"),
        (("number: 2", "number: 5"), "chapter 3 ('Three') is out of order"),
        (("planned: true", "file: chapters/01_one.ipynb"), "must be named 02_<name>.ipynb"),
        (("planned: true", "planned: false"), "chapter 2 ('Two'): give either file"),
        (('title: "Two", ', ""), "chapters entry 2: missing key 'title'"),
        (("glossary.md", "glossaire.md"), "glossary 'chapters/glossaire.md' does not exist"),
        (("intro: chapters/README.md", "intro: chapters/01_one.ipynb"), "must be a .md file"),
    ],
)
def test_validation_errors_name_the_entry(small_book: Path, change, message):
    small_book.write_text(small_book.read_text().replace(*change, 1))
    with pytest.raises(BookError, match=re.escape(message)):
        load_book(small_book)


def test_missing_notebook_says_how_to_make_it(small_book: Path):
    chapters = small_book.parent / "chapters"
    (chapters / "01_one.ipynb").rename(chapters / "01_one.py")
    with pytest.raises(BookError, match="generate it from 01_one.py with `make notebooks`"):
        load_book(small_book)


def test_build_command_reports_errors(tmp_path: Path, capsys):
    assert book.main(["build", "--book", str(tmp_path / "nope.yml")]) == 1
    assert "error: cannot read the book definition" in capsys.readouterr().err


def test_execute_saves_outputs_and_the_kernel_does_not_warn(tmp_path: Path, capfd):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    book.execute(notebook, tmp_path, "answer.ipynb")
    assert notebook.cells[0].outputs[0]["text"] == "42\n"
    # The kernel's log goes to this process's stderr: over TCP it warned of plain-text traffic.
    assert "without encryption" not in capfd.readouterr().err


def test_execute_names_the_notebook_of_a_failing_cell(tmp_path: Path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
    with pytest.raises(BookError, match="(?s)broken.ipynb: a cell failed:.*ZeroDivisionError"):
        book.execute(notebook, tmp_path, "broken.ipynb")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cell", "builds"),
    [
        ("print('fine')", True),
        ("1 / 0", False),
        ("# See [nothing](glossary.md#no-such-term).", False),
    ],
    ids=["good", "failing-cell", "broken-link"],
)
def test_jupyter_book_build(small_book: Path, tmp_path: Path, cell: str, builds: bool):
    pytest.importorskip("jupyter_book")
    _notebook(small_book.parent / "chapters" / "03_three.ipynb", "# 3. Three", cell)
    definition = load_book(small_book)
    if not builds:
        with pytest.raises(BookError, match="the book did not build"):
            book.build(definition, tmp_path / "out")
        return
    index = book.build(definition, tmp_path / "out")
    assert index.is_file()
    chapter = (index.parent / "01_one.html").read_text(encoding="utf-8")
    assert 'href="glossary.html#primfunc"' in chapter
    # A claim's marker is an HTML comment: not part of the page's text.
    assert "background:" not in re.sub(r"(?s)<!--.*?-->", "", chapter)
    assert "fine" in (index.parent / "03_three.html").read_text(encoding="utf-8")
