"""The TVMScript printer: IR nodes to the text of docs/tvmscript.md.

``script(node, verbose=False, show_meta=False, inline_constants=1, name=None)`` returns the
text; ``show(node, **options)`` prints it (highlighted where that can be seen);
``highlight_html(text)`` colors any TVMScript for HTML displays.
"""

from mlckit.ir.node import register_printer

from .highlight import highlight_html, show
from .printer import script

# Every node's ``script()`` and ``show()`` print through these (the IR does not import its printer).
register_printer(script, show)

__all__ = ["highlight_html", "script", "show"]
