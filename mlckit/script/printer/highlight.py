"""Showing printed TVMScript: colored in a terminal or a notebook, plain otherwise."""

from __future__ import annotations

import sys
from typing import Any

from .printer import script


def highlight_html(text: str, *, inline: bool = False) -> str:
    """``text`` as a self-contained HTML block with Python syntax colors (inline styles);
    ``inline=True`` gives the colored spans alone, with no surrounding block (one diff line)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    html = highlight(text, PythonLexer(), HtmlFormatter(nowrap=inline, noclasses=True))
    return html.rstrip("\n") if inline else html


def highlight_terminal(text: str) -> str:
    """``text`` with ANSI colors for a terminal."""
    from pygments import highlight
    from pygments.formatters import TerminalFormatter
    from pygments.lexers import PythonLexer

    return highlight(text, PythonLexer(), TerminalFormatter()).rstrip("\n")


def _in_notebook() -> bool:
    # Only a running IPython kernel can display HTML; IPython is not imported just to ask.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def show(node: Any, **options: Any) -> None:
    """Print ``node`` as TVMScript: highlighted in a notebook or a terminal, plain elsewhere."""
    text = script(node, **options)
    if _in_notebook():
        from IPython.display import HTML, display

        display(HTML(highlight_html(text)))
    elif sys.stdout.isatty():
        print(highlight_terminal(text))
    else:
        print(text)
