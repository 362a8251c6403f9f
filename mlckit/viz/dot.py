"""Finding a Graphviz ``dot`` program and rendering with it.

Pictures must work after a plain ``pip install``: the system's ``dot`` (Debian's ``graphviz``
package) is used when there is one, otherwise the ``graphviz-pure`` command that the pip package
of that name installs next to the Python interpreter. The ``graphviz`` bindings run whatever
``graphviz.backend.dot_command.DOT_BINARY`` names, so finding ``graphviz-pure`` points it there;
that also makes a ``graphviz.Digraph`` returned by :func:`mlckit.viz.graph` display itself in a
notebook. With neither program, pictures are skipped with one warning saying how to get one.
"""

from __future__ import annotations

import functools
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "mlckit.viz draws pictures with the Graphviz `dot` program, and none was found; showing text "
    "only. Install one with `pip install graphviz-pure` (no system packages needed) or your "
    "system's Graphviz (`apt-get install graphviz`, `brew install graphviz`, `conda install "
    "graphviz`)."
)


class GraphvizMissingWarning(UserWarning):
    """No Graphviz ``dot`` program was found, so only text views are shown."""


@functools.cache
def dot_program() -> str | None:
    """The path of the ``dot`` program the pictures are rendered with, or None if none exists."""
    from graphviz.backend import dot_command

    configured = str(dot_command.DOT_BINARY)
    if configured != "dot":
        # Somebody chose a program on purpose; respect it if it exists.
        return shutil.which(configured)
    system = shutil.which("dot")
    if system is not None:
        return system
    beside_python = shutil.which("graphviz-pure", path=str(Path(sys.executable).parent))
    pure = beside_python or shutil.which("graphviz-pure")
    if pure is not None:
        dot_command.DOT_BINARY = Path(pure)
    return pure


_warned = False


def warn_missing() -> None:
    """Warn, once per process, that pictures are skipped for want of a ``dot`` program."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(INSTALL_HINT, GraphvizMissingWarning, stacklevel=3)


def render(graph: Any, fmt: str = "svg") -> bytes | None:
    """``graph`` (a ``graphviz.Digraph``) rendered as ``fmt``, or None (with the one warning)
    when there is no ``dot`` program."""
    if dot_program() is None:
        warn_missing()
        return None
    return graph.pipe(format=fmt)
