"""Showing printed TVMScript: colored in a terminal or a notebook, plain otherwise."""

from __future__ import annotations

import sys
from typing import Any

from .printer import script

# Code never wraps: a long line scrolls in its block. JupyterLab's style sheet makes every <pre>
# of an output wrap anywhere, in the middle of a name (word-break: break-all); a style on the
# element itself is the one that wins.
UNBROKEN = "white-space: pre; word-break: normal; overflow-wrap: normal"


def highlight_html(text: str, *, inline: bool = False) -> str:
    """``text`` as a self-contained HTML block with Python syntax colors (inline styles), in a
    ``<pre>`` that scrolls rather than wraps; ``inline=True`` gives the colored spans alone,
    with no surrounding block (one diff line)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    html = highlight(text, PythonLexer(), HtmlFormatter(nowrap=inline, noclasses=True))
    if inline:
        return html.rstrip("\n")
    return html.replace('<pre style="', f'<pre style="{UNBROKEN}; overflow-x: auto; ', 1)


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
