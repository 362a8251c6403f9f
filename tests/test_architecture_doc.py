"""docs/architecture.md stays complete and its picture stays current.

Every package and top-level module under ``mlckit/`` must have its sentence (written as
`` `mlckit/<name>/` `` or `` `mlckit/<name>.py` ``), and the committed ``architecture.dot`` must
be what ``scripts/architecture.py`` draws from its table now. The SVG is not rendered here
(slow, and its bytes vary with the Graphviz version); the DOT text is what can go stale.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "architecture_script", ROOT / "scripts/architecture.py"
    )
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is being made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_package_and_module_has_its_sentence():
    text = (DOCS / "architecture.md").read_text()
    package = ROOT / "mlckit"
    names = [f"mlckit/{d.name}/" for d in package.iterdir() if (d / "__init__.py").is_file()]
    names += [f"mlckit/{f.name}" for f in package.glob("*.py") if f.name != "__init__.py"]
    missing = sorted(name for name in names if f"`{name}`" not in text)
    assert not missing, f"docs/architecture.md says nothing about {', '.join(missing)}"


def test_the_committed_picture_is_the_one_the_table_draws():
    assert (DOCS / "architecture.dot").read_text() == _generator().dot_source(), (
        "docs/architecture.dot is stale: python scripts/architecture.py"
    )


def test_the_picture_is_committed_and_linked():
    assert (DOCS / "architecture.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "](architecture.svg)" in (DOCS / "architecture.md").read_text()
