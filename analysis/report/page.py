"""Assembles report.html: header, verdict strip, key numbers, charts and tables.

The page is one self-contained file: inline CSS, plotly.js inlined once (with the
first chart), no request to any other host, so it opens offline and can be mailed.
"""
from __future__ import annotations

import re
from importlib.resources import files
from typing import Any, Callable, Mapping

import plotly.graph_objects as go
import plotly.io as pio

from . import charts, tables
from ._format import (
    as_list, as_number, dig, esc, fmt_count, fmt_exact, fmt_ms, fmt_rate, fmt_seconds, fmt_utc,
)
from .churn import churn_section
from .codel import codel_section
from .egress import egress_section
from .fidelity import behind_banner, fidelity_section
from .model import components_figure, model_section, sojourn_cdf_figure, utilisation_figure
from .network import network_section
from .slow_consumers import slow_consumers_section

__all__ = ["build_page", "Links"]

Summary = Mapping[str, Any]
#: Label -> href (relative to report.html), shown in the header, e.g. {"Locust report": "locust.html"}.
Links = Mapping[str, str]

_FIRST_IDS = 10  # unaccounted ids shown in the verdict; the summary keeps up to 100
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


def _status_class(status: Any) -> str:
    return {"completed": "good", "interrupted": "warn", "failed": "bad"}.get(str(status), "muted")


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
        ("status", f'<span class="badge {_status_class(status)}">{esc(status)}</span>'),
        ("started", esc(fmt_utc(dig(run, "t0_ns")))),
        ("duration", esc(fmt_seconds(dig(run, "duration_s")))),
        ("warm-up", esc(fmt_seconds(dig(run, "warmup_s")))),
        ("broker", f"<code>{esc(dig(run, 'broker_url'))}</code>"),
        ("code version", _code_version(dig(run, "code_version"))),
    ]
    meta = "".join(f"<div><dt>{esc(k)}</dt><dd>{v}</dd></div>" for k, v in rows)
    return (f'<header><h1><span class="product">sojourn</span> {esc(dig(run, "scenario"))}</h1>'
            f'<dl class="meta">{meta}</dl>{_links(links)}</header>')


# --- verdict strip -------------------------------------------------------------------

def _accounting_verdict(summary: Summary) -> str:
    messages = dig(summary, "messages", default={})
    unaccounted = as_number(dig(messages, "unaccounted"))
    if unaccounted is None:
        return '<div class="chip muted">accounting not available in this summary</div>'
    if unaccounted == 0:
        published = fmt_count(dig(messages, "published"))
        return (f'<div class="chip good"><b>✓ every message accounted for</b> '
                f'({published} published)</div>')
    ids = [str(i) for i in as_list(dig(messages, "unaccounted_ids"))][:_FIRST_IDS]
    shown = ", ".join(f"<code>{esc(i)}</code>" for i in ids)
    more = f" and {fmt_count(unaccounted - len(ids))} more" if unaccounted > len(ids) else ""
    first = f" — first ids: {shown}{more}" if ids else ""
    return (f'<div class="chip bad"><b>✗ {fmt_count(unaccounted)} message'
            f'{"" if unaccounted == 1 else "s"} unaccounted for</b>{first}</div>')


def _slo_verdicts(summary: Summary) -> str:
    slos = [s for s in as_list(summary.get("slo")) if isinstance(s, Mapping)]
    if not slos:
        return '<div class="chip muted">no SLOs defined for this scenario</div>'
    chips = []
    for slo in slos:
        passed = dig(slo, "passed") is True
        value = as_number(dig(slo, "value"))
        detail = f"value {fmt_exact(value)}" if value is not None else esc(dig(slo, "reason", default="no value"))
        chips.append(f'<div class="chip {"good" if passed else "bad"}"><b>{"PASS" if passed else "FAIL"}</b> '
                     f'<code>{esc(dig(slo, "expr"))}</code> <span class="detail">{detail}</span></div>')
    return "".join(chips)


def _run_status_verdict(summary: Summary) -> str:
    status = dig(summary, "run", "status")
    if status is None or status == "completed":
        return ""
    return (f'<div class="chip {_status_class(status)}"><b>run {esc(status)}</b>: '
            f'numbers cover only the part that ran</div>')


def _verdict(summary: Summary) -> str:
    return (f'<section id="verdict" class="verdict">{_run_status_verdict(summary)}'
            f'{_accounting_verdict(summary)}{_slo_verdicts(summary)}</section>')


# --- key numbers ---------------------------------------------------------------------

def _card(title: str, items: list[tuple[str, str]]) -> str:
    cells = "".join(f'<div class="kv"><span class="k">{esc(k)}</span><span class="v">{v}</span></div>'
                    for k, v in items)
    return f'<div class="card"><h3>{esc(title)}</h3>{cells}</div>'


def _key_numbers(summary: Summary) -> str:
    m = dig(summary, "messages", default={})
    unaccounted = as_number(dig(m, "unaccounted"))
    cards = [
        _card("Messages", [
            ("published", fmt_count(dig(m, "published"))), ("acked", fmt_count(dig(m, "acked"))),
            ("discarded", fmt_count(dig(m, "discarded_total"))),
            ("left in broker", fmt_count(dig(m, "left_in_broker"))),
            ("unaccounted", f'<span class="{"bad" if unaccounted else ""}">{fmt_count(unaccounted)}</span>'),
        ]),
        _card("Throughput (msg/s, after warm-up)", [
            (k, fmt_rate(dig(summary, "throughput", f"{k}_per_s"))) for k in ("publish", "deliver", "ack")
        ]),
        _card("Buffer sojourn (ms)", [
            (k, fmt_ms(dig(summary, "sojourn_ms", k))) for k in ("p50", "p95", "p99", "max")
        ]),
        _card("End-to-end latency (ms)", [
            (k, fmt_ms(dig(summary, "latency_ms", "end_to_end", k))) for k in ("p50", "p99")
        ]),
    ]
    return f'<section id="numbers"><h2>Key numbers</h2><div class="cards">{"".join(cards)}</div></section>'


# --- charts --------------------------------------------------------------------------

_CHARTS: tuple[tuple[str, str, Callable[[Summary], go.Figure], str], ...] = (
    ("throughput", "Throughput over time", charts.throughput_figure,
     "Messages per one-second window: published (by publish time), delivered (frame read off "
     "the socket) and acked. Delivered below published means the queue is growing; acked below "
     "delivered means consumers are falling behind. Grey band: warm-up, excluded from latency "
     "statistics; coloured bands: timeline phases; dashed lines: events (hover the ▼ markers)."),
    ("sojourn", "Buffer sojourn over time", charts.sojourn_over_time_figure,
     "Buffer sojourn = time a delivery waits in the consumer's client-side buffer (prefetch) "
     "before processing starts. Each point is a percentile over the deliveries that started "
     "processing in that second; gaps are seconds without any. When p50 climbs with p99, the "
     "whole buffer is backing up (prefetch too large for the current processing speed). "
     "Switch to a log axis to see small values next to spikes."),
    ("components", "Latency components over time", components_figure,
     "Per-second means of each part of a delivery's latency, stacked: broker + network (publish → "
     "frame read off the socket), buffer sojourn (client buffer), processing, ack delay (processing "
     "end → ack sent), over the deliveries whose processing ended in that second. The stack's top "
     "is the mean round trip seen by a message; the band that grows when conditions change is where "
     "the latency comes from."),
    ("distribution", "Buffer sojourn distribution", charts.sojourn_histogram_figure,
     "How many deliveries waited how long in the client buffer. A single bar near zero means the "
     "buffer is mostly empty; a hump far to the right is the standing queue that builds when "
     "processing or the network slows down. Dashed lines mark the overall p50 and p99."),
    ("cdf", "Buffer sojourn per consumer (CDF)", sojourn_cdf_figure,
     "For each consumer, the share of its deliveries (after warm-up) that waited at most x ms in its "
     "buffer, from 20 quantiles (5 %, 10 %, ... 100 %). A line far to the right of the others is a "
     "consumer whose prefetch holds work it cannot process in time."),
)


def _chart_div(figure: go.Figure, key: str, with_plotlyjs: bool) -> str:
    return pio.to_html(
        figure, full_html=False, include_plotlyjs=with_plotlyjs, div_id=f"chart-{key}",
        default_height=f"{figure.layout.height or 420}px",
        config={"displaylogo": False, "responsive": True,
                "toImageButtonOptions": {"filename": f"sojourn-{key}"}},
    )


def _model_section(summary: Summary) -> str:
    return model_section(summary, _chart_div(utilisation_figure(summary), "utilisation", False))


def _chart_sections(summary: Summary) -> str:
    sections = []
    for i, (key, title, build, how_to_read) in enumerate(_CHARTS):
        div = _chart_div(build(summary), key, i == 0)
        sections.append(f'<section id="{key}"><h2>{esc(title)}</h2><div class="chart">{div}</div>'
                        f'<p class="howto">{esc(how_to_read)}</p></section>')
    return "".join(sections)


# --- tables --------------------------------------------------------------------------

_TABLES: tuple[tuple[str, str, Callable[[Summary], str], str], ...] = (
    ("latency", "Latency decomposition", tables.latency_table,
     "Where the time goes, per delivery, after warm-up. end_to_end = broker_network + sojourn + "
     "processing, so their means add up; the last column shows each part's share. A sojourn "
     "share near 100 % means the client buffer, not the broker or the work, dominates latency."),
    ("consumers", "Per consumer", tables.consumers_table,
     "Utilisation = time spent processing / the consumer's wall time (first receive to last "
     "settle). Low utilisation with high sojourn elsewhere means the prefetch is spreading work "
     "unevenly; low utilisation everywhere means prefetch is too small for the round trip."),
    ("phases", "Per phase", tables.phases_table,
     "Publishes count in the phase of their intended send time, deliveries in the phase in which "
     "processing started; base is the time outside every named phase."),
    ("accounting", "Accounting", tables.accounting_table,
     "Every published message must end up in exactly one of these terms (first match wins, in "
     "this order). An unaccounted message is a bug in the system under test or in sojourn."),
    ("priorities", "Per priority", tables.priorities_table,
     "Messages by the AMQP priority they were published with (producers[].priority). A queue with "
     "x-max-priority delivers higher priorities first, so their sojourn and end-to-end latency should be "
     "lower; discarded counts every discard reason of the accounting table."),
    ("flow_control", "Producer flow control", tables.flow_control_table,
     "Periods in which the broker blocked producers' connections (connection.blocked: a memory or disk "
     "alarm), summed over each group's connections, and how long publishes waited for the block to lift. "
     "A publish that waited longer than the producer's max_blocked_wait_s was given up and is counted as "
     "discarded (publish_failed_blocked) in the accounting."),
    ("events", "Events", tables.events_table,
     "Every change of conditions during the run, in time order (seconds since the start of the run)."),
)


def _table_sections(summary: Summary) -> str:
    built = ((key, title, build(summary), how_to_read) for key, title, build, how_to_read in _TABLES)
    return "".join(  # a table with nothing to show ("") leaves its section out
        f'<section id="{key}"><h2>{esc(title)}</h2><p class="howto">{esc(how_to_read)}</p>'
        f'<div class="table-wrap{" scroll" if key == "events" else ""}">{html}</div></section>'
        for key, title, html, how_to_read in built if html)


# --- page ----------------------------------------------------------------------------

_OPTIONAL = ("priorities", "flow_control")  # tables shown only when the summary has their block


def _nav(summary: Summary) -> str:
    entries = [("verdict", "Verdict"), ("numbers", "Key numbers")]
    entries += [(key, title) for key, title, _, _ in _CHARTS]
    entries.append(("model", "Queueing-model check"))
    if isinstance(summary.get("egress"), Mapping) and summary.get("egress"):
        entries.append(("egress", "Egress classes"))
    if dig(summary, "consumers_churn", "churn") is True:
        entries.append(("churn", "Consumer churn"))
    entries += [(key, title) for key, title, _, _ in _TABLES if key not in _OPTIONAL or summary.get(key)]
    return '<nav class="toc">' + " · ".join(f'<a href="#{k}">{esc(t)}</a>' for k, t in entries) + "</nav>"


def build_page(summary: Summary, links: Links | None = None) -> str:
    run = dig(summary, "run", default={})
    title = " · ".join(str(x) for x in ("sojourn", dig(run, "scenario"), dig(run, "run_id")) if x)
    schema = dig(summary, "schema_version")
    footer = (f"Rendered by sojourn from summary.json"
              f"{f' (schema_version {schema})' if schema is not None else ''}. "
              f"Self-contained: opens offline.")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_css()}</style></head><body>"
        f"{_header(summary, links)}{_nav(summary)}<main>{behind_banner(summary)}{_verdict(summary)}{_key_numbers(summary)}"
        f"{_chart_sections(summary)}{_model_section(summary)}{network_section(summary)}{codel_section(summary)}{egress_section(summary)}{churn_section(summary)}{fidelity_section(summary, _chart_div)}{slow_consumers_section(summary, _chart_div)}{_table_sections(summary)}</main>"
        f"<footer>{esc(footer)}</footer></body></html>\n"
    )
