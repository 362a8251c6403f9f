"""``python -m mlckit.relax.frontend.torch [PATH]``: write the operator coverage table
(Markdown) to PATH, or print it."""

import sys
from pathlib import Path

from .ops import coverage_markdown

if len(sys.argv) > 1:
    Path(sys.argv[1]).write_text(coverage_markdown())
else:
    print(coverage_markdown(), end="")
