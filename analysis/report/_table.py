"""The HTML table every part of the report draws its rows into: columns named once, numeric ones
right-aligned, and a note in place of a table with no rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ._format import esc

__all__ = ["Column", "html_table"]


class Column(NamedTuple):
    title: str
    numeric: bool = False


def html_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], empty: str, css_class: str = "") -> str:
    """Cells are HTML already (escaped by the caller); numeric columns are right-aligned."""
    if not rows:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th{' class=num' if c.numeric else ''}>{esc(c.title)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = "".join(f"<td{' class=num' if c.numeric else ''}>{cell}</td>" for c, cell in zip(columns, row))
        body.append(f"<tr>{cells}</tr>")
    cls = f' class="{css_class}"' if css_class else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
