"""Assembles report.html: the header, then the navigation and the sections, both read from the one
registry, `sections.SECTIONS`.

The page is one self-contained file: inline CSS, plotly.js inlined once (with the
first chart), no request to any other host, so it opens offline and can be mailed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from ._format import as_number, dig, esc, fmt_seconds, fmt_utc
from .fidelity import behind_banner
from .overview import status_class
from .sections import Section, render_section, shown_sections

__all__ = ["build_page", "Links"]

Summary = Mapping[str, Any]
#: Label -> href (relative to report.html), shown in the header, e.g. {"Locust report": "locust.html"}.
Links = Mapping[str, str]

_SCHEME = re.compile(r"^\s*([a-z][a-z0-9+.-]*):", re.IGNORECASE)
_SAFE_SCHEMES = {"http", "https", "file"}


def _css() -> str:
    return files(__package__).joinpath("report.css").read_text(encoding="utf-8")


# --- header --------------------------------------------------------------------------


def _code_version(value: Any) -> str:
    if isinstance(value, Mapping):
        parts = [f"{k} {v}" for k, v in value.items() if v not in (None, "")]
        return esc(" · ".join(parts)) if parts else esc(None)
    return esc(value)


def _links(links: Links | None) -> str:
    items = []
    for label, href in (links or {}).items():
        scheme = _SCHEME.match(str(href))
        if scheme and scheme.group(1).lower() not in _SAFE_SCHEMES:
            continue  # a javascript: or data: href has no business in a report
        items.append(f'<a href="{esc(href)}">{esc(label)}</a>')
    return f'<p class="links">See also: {" · ".join(items)}</p>' if items else ""


def _header(summary: Summary, links: Links | None) -> str:
    run = dig(summary, "run", default={})
    status = dig(run, "status")
    rows = [
        ("run id", f"<code>{esc(dig(run, 'run_id'))}</code>"),
        ("status", f'<span class="badge {status_class(status)}">{esc(status)}</span>'),
        ("started", esc(fmt_utc(dig(run, "t0_ns")))),
        ("duration", esc(fmt_seconds(dig(run, "duration_s")))),
        ("warm-up", esc(fmt_seconds(dig(run, "warmup_s")))),
        ("broker", f"<code>{esc(dig(run, 'broker_url'))}</code>"),
        ("code version", _code_version(dig(run, "code_version"))),
    ]
    percentiles = _percentiles(dig(summary, "percentiles"))
    if percentiles:
        rows.append(("percentiles", esc(percentiles)))
    meta = "".join(f"<div><dt>{esc(k)}</dt><dd>{v}</dd></div>" for k, v in rows)
    return (
        f'<header><h1><span class="product">sojourn</span> {esc(dig(run, "scenario"))}</h1>'
        f'<dl class="meta">{meta}</dl>{_links(links)}</header>'
    )


def _percentiles(block: Any) -> str | None:
    """summary.json's `percentiles` in words; None for a summary written before it existed."""
    if not isinstance(block, Mapping):
        return None
    if block.get("method") == "exact":
        return "exact"
    relative = as_number(block.get("relative_error"))
    if block.get("method") == "log_histogram" and relative is not None:
        return f"from log buckets: within {relative * 100:.4g} % of the exact value"
    error = as_number(block.get("relative_rank_error"))
    if block.get("method") == "approximate" and error is not None:
        confidence = as_number(block.get("confidence"))
        sure = f" ({confidence * 100:g} % confidence)" if confidence is not None else ""
        return f"approximate: rank within {error * 100:g} % of the exact one's{sure}"
    return str(block.get("method"))


# --- page ----------------------------------------------------------------------------


def _nav(sections: Sequence[Section], summary: Summary) -> str:
    links = " · ".join(f'<a href="#{s.id}">{esc(s.title_for(summary))}</a>' for s in sections)
    return f'<nav class="toc">{links}</nav>'


def build_page(summary: Summary, links: Links | None = None) -> str:
    run = dig(summary, "run", default={})
    title = " · ".join(str(x) for x in ("sojourn", dig(run, "scenario"), dig(run, "run_id")) if x)
    schema = dig(summary, "schema_version")
    footer = (
        f"Rendered by sojourn from summary.json"
        f"{f' (schema_version {schema})' if schema is not None else ''}. "
        f"Self-contained: opens offline."
    )
    sections = shown_sections(summary)
    body = "".join(render_section(section, summary) for section in sections)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_css()}</style></head><body>"
        f"{_header(summary, links)}{_nav(sections, summary)}<main>{behind_banner(summary)}{body}</main>"
        f"<footer>{esc(footer)}</footer></body></html>\n"
    )
