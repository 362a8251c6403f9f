"""Pictures in HTML that fit their column and survive an untrusted notebook.

A rendered picture is an SVG document. Written into HTML as it is (an inline ``<svg>``), it
has two problems:

* JupyterLab shows the HTML of a notebook it does not trust (any notebook a student opens that
  they did not run themselves) through a sanitizer that drops ``<svg>`` and keeps its text, so
  the picture becomes a run of labels;
* Graphviz writes a fixed size (``width="806pt"``), so a wide picture overflows a book's
  ~780-pixel column and its right side is cut off.

So a picture is written as an ``<img>`` whose source is the SVG itself as a data URI (the
sanitizer keeps those), scaled to the column, inside a frame that scrolls. Scaling alone would
shrink a wide picture on a phone until its text cannot be read, so it shrinks to at most
:data:`MIN_SCALE` of its size and the frame scrolls beyond that. For an SVG of 806pt x 382pt
(1075 x 509 pixels, at 4/3 pixels a point)::

    <div class="mlckit-picture" style="overflow-x: auto; max-width: 100%">
      <img src="data:image/svg+xml;base64,PD94bWwg..." alt="loop nest of linear0: ..."
           style="max-width: 100%; height: auto; min-width: 645px">
    </div>

In a 780-pixel column the picture is drawn 780 pixels wide (72%), in a 380-pixel one 645
pixels wide (60%), scrolled. The book's style sheet (``mlckit.book.STYLE``) lifts that floor
on a phone's screen, narrower than 600 pixels, where the reader zooms into a picture shown
whole. The ``alt`` text carries the picture's labels, so that a reader
without the picture (or a search of the page's source) still finds what it shows. The same
SVG always gives the same HTML: saved notebook outputs do not change from run to run.

:class:`Digraph` is a ``graphviz.Digraph`` that a notebook shows this way as well.
"""

from __future__ import annotations

import base64
import html as htmllib
import re
from typing import Any

import graphviz

# The smallest scale a picture is shrunk to before its frame scrolls instead: Graphviz's
# 12-point labels stay about 10 pixels high.
MIN_SCALE = 0.6
# Long enough to name every node of a pass's picture, short enough for a screen reader.
MAX_ALT = 600

_PIXELS_PER_UNIT = {"pt": 4 / 3, "px": 1.0, "in": 96.0, "": 1.0}
_ROOT = re.compile(r"<svg\b[^>]*>", re.S)
_LENGTH = r'\s{}="([0-9.]+)(pt|px|in|)"'
_TEXT = re.compile(r"<text\b[^>]*>(.*?)</text>", re.S)


def svg_size(svg: str) -> tuple[float, float] | None:
    """The width and height in CSS pixels that ``svg``'s root element asks for, or None."""
    root = _ROOT.search(svg)
    if root is None:
        return None
    size = []
    for name in ("width", "height"):
        found = re.search(_LENGTH.format(name), root.group(0))
        if found is None:
            return None
        size.append(float(found.group(1)) * _PIXELS_PER_UNIT[found.group(2)])
    return size[0], size[1]


def svg_labels(svg: str) -> list[str]:
    """The texts an SVG draws (node and edge labels), in order, each once."""
    labels: dict[str, None] = {}
    for found in _TEXT.finditer(svg):
        text = " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())
        if text:
            labels[text] = None
    return list(labels)


def alt_text(description: str, svg: str) -> str:
    """``description``, then the picture's labels, at most :data:`MAX_ALT` characters."""
    labels = " ".join(svg_labels(svg))
    text = f"{description}: {labels}" if labels else description
    return text if len(text) <= MAX_ALT else text[: MAX_ALT - 1] + "…"


def svg_image(svg: str, description: str) -> str:
    """``svg`` (a whole SVG document) as HTML: a scaled ``<img>`` in a scrolling frame (see the
    module doc); ``description`` says in words what it is (``"loop nest of linear0"``)."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    size = svg_size(svg)
    min_width = "" if size is None else f"; min-width: {round(size[0] * MIN_SCALE)}px"
    alt = htmllib.escape(alt_text(description, svg), quote=True)
    return (
        '<div class="mlckit-picture" style="overflow-x: auto; max-width: 100%">'
        f'<img src="data:image/svg+xml;base64,{data}" alt="{alt}" '
        f'style="max-width: 100%; height: auto{min_width}"></div>'
    )


_DATA_URI = re.compile(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"')


def embedded_svgs(html: str) -> list[str]:
    """The SVG documents that :func:`svg_image` wrote into ``html``, in order (to read a saved
    output's pictures back)."""
    return [base64.b64decode(data).decode("utf-8") for data in _DATA_URI.findall(html)]


class Digraph(graphviz.Digraph):
    """A ``graphviz.Digraph`` that a notebook also shows as HTML (:func:`svg_image`): the
    picture fits the column and survives an untrusted notebook, where JupyterLab shows neither
    SVG output nor inline ``<svg>``. Everything else is graphviz's own."""

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(include, exclude, **kwargs)
        if (include is None or "text/html" in include) and "text/html" not in (exclude or ()):
            svg = bundle.get("image/svg+xml") or self.pipe(format="svg", encoding="utf-8")
            bundle["text/html"] = svg_image(svg, "picture")
        return bundle
