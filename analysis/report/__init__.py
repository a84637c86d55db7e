"""report.html: one self-contained page rendered from a summary.json dict alone.

    from analysis.report import render_report
    html = render_report(summary, links={"Locust report": "locust.html"})

A partial or empty summary still renders: missing values show as "–".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .page import Links, build_page

__all__ = ["render_report", "Links"]


def render_report(summary: Mapping[str, Any], *, links: Links | None = None) -> str:
    """The whole page as a string. `links` (label -> href relative to the page) go in the header."""
    if not isinstance(summary, Mapping):
        raise TypeError(f"summary must be a dict (the parsed summary.json), got {type(summary).__name__}")
    return build_page(summary, links)
