"""Text views: highlighted TVMScript as HTML, and the difference of two printed programs.

Highlighting is pygments' Python lexer with inline styles (TVMScript is Python), through the
printer's :func:`mlckit.script.printer.highlight_html`, so a notebook needs no style sheet.
Code never wraps: a long line scrolls inside its box. The styles that say so are written on
each ``<pre>`` (by ``highlight_html``) and diff table, because JupyterLab's own style sheet
makes every ``<pre>`` in an output wrap anywhere, in the middle of a name (``word-break:
break-all``), and a style on the element itself is the one that wins.
"""

from __future__ import annotations

import difflib
import html as htmllib
from dataclasses import dataclass
from typing import Any

from mlckit.script.printer import highlight_html
from mlckit.script.printer.highlight import UNBROKEN

ADDED = "#DCEBFA"  # light blue: colour-blind readers tell it from the orange of removals
REMOVED = "#FBE3D0"
_BOX = "max-height: none; max-width: 100%; overflow-x: auto; font-size: 12px"


def script_text(obj: Any) -> str:
    """What a view shows: a string as it is, any node as its TVMScript."""
    return obj if isinstance(obj, str) else obj.script()


def html(obj: Any, *, collapse_after: int = 80) -> str:
    """``obj``'s TVMScript highlighted as HTML. Longer than ``collapse_after`` lines, each
    function of a module folds away under its name (relax functions open, PrimFuncs closed);
    other long text folds as a whole."""
    lines = script_text(obj).splitlines()
    if len(lines) <= collapse_after:
        return _box(highlight_html("\n".join(lines)))
    header, sections = _split_functions(lines)
    if not sections:
        return _details(f"TVMScript, {len(lines)} lines", highlight_html("\n".join(lines)), False)
    parts = [highlight_html("\n".join(header))] if header else []
    for section in sections:
        decorator = section[0].strip()
        name = next((s.split("def ", 1)[1].split("(")[0] for s in section if "def " in s), "?")
        summary = f"{decorator.split('(')[0]} {name} ({len(section)} lines)"
        code = highlight_html("\n".join(section))
        parts.append(_details(summary, code, "R.function" in decorator))
    return _box("".join(parts))


def _split_functions(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """The lines before a module's first function, and each function's lines (a function
    starts at a decorator indented once, inside ``class Module:``)."""
    header: list[str] = []
    sections: list[list[str]] = []
    for line in lines:
        if line.startswith("    @") and not line.startswith("     "):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            header.append(line)
    return header, sections


def _details(summary: str, body: str, open_: bool) -> str:
    flag = " open" if open_ else ""
    return (
        f'<details{flag}><summary style="cursor: pointer; font-family: monospace">'
        f"{htmllib.escape(summary)}</summary>{body}</details>"
    )


def _box(body: str) -> str:
    return f'<div class="mlckit-script" style="{_BOX}">{body}</div>'


# ------------------------------------------------------------------------------ diffs
@dataclass(frozen=True)
class ScriptDiff:
    """The difference of two printed programs: ``.text`` is a unified diff, ``.html()`` the
    same (or, with ``side_by_side=True``, two columns) with changed lines highlighted."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    names: tuple[str, str] = ("before", "after")
    context: int = 3
    side_by_side: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def text(self) -> str:
        return "\n".join(
            difflib.unified_diff(self.before, self.after, *self.names, n=self.context, lineterm="")
        )

    def __str__(self) -> str:
        return self.text

    # A notebook without HTML (or a terminal) shows the unified diff, not the fields.
    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.html(self.side_by_side)

    def html(self, side_by_side: bool = False) -> str:
        matcher = difflib.SequenceMatcher(None, self.before, self.after, autojunk=False)
        rows: list[str] = []
        for group in matcher.get_grouped_opcodes(self.context):
            first, last = group[0], group[-1]
            hunk = (
                f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
            )
            rows.append(f'<tr><td colspan="6" style="color: #666666">{hunk}</td></tr>')
            for tag, i1, i2, j1, j2 in group:
                old = [(i + 1, self.before[i]) for i in range(i1, i2)]
                new = [(j + 1, self.after[j]) for j in range(j1, j2)]
                if side_by_side:
                    rows += _side_rows(tag, old, new)
                else:
                    rows += _unified_rows(tag, old, new)
        if not rows:
            rows.append('<tr><td style="color: #666666">(no difference)</td></tr>')
        head = " &rarr; ".join(htmllib.escape(n) for n in self.names)
        return (
            f'<div class="mlckit-diff" style="{_BOX}"><div><b>{head}</b></div>'
            f'<table style="border-collapse: collapse; font-family: monospace; {UNBROKEN}">'
            + "".join(rows)
            + "</table></div>"
        )


def _unified_rows(tag: str, old: list[tuple[int, str]], new: list[tuple[int, str]]) -> list[str]:
    if tag == "equal":
        return [
            _row([_num(i), _num(j), _cell(" " + _line(text))])
            for (i, text), (j, _) in zip(old, new)
        ]
    removed = [_row([_num(i), _num(None), _cell("-" + _line(text), REMOVED)]) for i, text in old]
    added = [_row([_num(None), _num(j), _cell("+" + _line(text), ADDED)]) for j, text in new]
    return removed + added


def _side_rows(tag: str, old: list[tuple[int, str]], new: list[tuple[int, str]]) -> list[str]:
    rows = []
    for k in range(max(len(old), len(new))):
        left = old[k] if k < len(old) else None
        right = new[k] if k < len(new) else None
        left_colour = None if tag == "equal" or left is None else REMOVED
        right_colour = None if tag == "equal" or right is None else ADDED
        rows.append(
            _row(
                [
                    _num(left[0] if left else None),
                    _cell(_line(left[1]) if left else "", left_colour),
                    _num(right[0] if right else None),
                    _cell(_line(right[1]) if right else "", right_colour),
                ]
            )
        )
    return rows


def _row(cells: list[str]) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _num(n: int | None) -> str:
    text = "" if n is None else str(n)
    return f'<td style="color: #999999; text-align: right; padding: 0 6px">{text}</td>'


def _cell(content: str, colour: str | None = None) -> str:
    background = f"background: {colour}; " if colour else ""
    return f'<td style="{background}text-align: left; padding: 0 6px">{content}</td>'


def _line(text: str) -> str:
    """One line of TVMScript highlighted (inline styles, no surrounding block)."""
    return highlight_html(text, inline=True)


def diff(
    before: Any,
    after: Any,
    *,
    side_by_side: bool = False,
    context: int = 3,
    names: tuple[str, str] = ("before", "after"),
) -> ScriptDiff:
    """The difference of two programs (nodes or TVMScript strings) as printed TVMScript."""
    return ScriptDiff(
        tuple(script_text(before).splitlines()),
        tuple(script_text(after).splitlines()),
        names,
        context,
        side_by_side,
    )
