"""Every section of report.html, in page order: one registry drives both the page's body and its
navigation, so the navigation links exactly the sections the page shows.

A section is an id (its anchor), a title (its heading and its link), what it renders inside
`<section id=...><h2>title</h2>...</section>`, and when it is shown at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from . import charts, tables
from ._format import esc
from .charts import chart_div
from .churn import churn_body, has_churn
from .codel import codel_body, has_codel
from .egress import egress_body, has_egress
from .fidelity import fidelity_body, fidelity_title, has_fidelity
from .model import components_figure, model_body, sojourn_cdf_figure
from .network import has_network, network_body
from .outcomes import has_outcomes, outcomes_body
from .overview import key_numbers_body, verdict_body
from .single_active import has_single_active, single_active_body
from .slow_consumers import has_queue_samples, slow_consumers_body
from .stream import has_stream, stream_body

__all__ = ["Section", "SECTIONS", "shown_sections", "render_section"]

Summary = Mapping[str, Any]
#: A section's content (what goes under its heading), from the summary alone.
Render = Callable[[Summary], str]
#: Whether the summary has what a section shows; a section not shown has no link either.
Shown = Callable[[Summary], bool]


def _always(summary: Summary) -> bool:
    return True


@dataclass(frozen=True)
class Section:
    id: str
    title: str | Callable[[Summary], str]  # a callable where the title depends on the run
    render: Render
    shown: Shown = _always
    heading: bool = True  # the verdict strip is chips alone, with no heading
    css_class: str = ""

    def title_for(self, summary: Summary) -> str:
        return self.title(summary) if callable(self.title) else self.title


def render_section(section: Section, summary: Summary) -> str:
    """`<section id="ID"><h2>TITLE</h2>CONTENT</section>`: the one place a section is wrapped."""
    css_class = f' class="{section.css_class}"' if section.css_class else ""
    heading = f"<h2>{esc(section.title_for(summary))}</h2>" if section.heading else ""
    return f'<section id="{section.id}"{css_class}>{heading}{section.render(summary)}</section>'


def shown_sections(summary: Summary) -> list[Section]:
    """The sections this summary's page shows, in page order."""
    return [section for section in SECTIONS if section.shown(summary)]


def _chart(
    section_id: str,
    title: str,
    figure: Callable[[Summary], go.Figure],
    how_to_read: str,
    *,
    with_plotlyjs: bool = False,
) -> Section:
    """A section holding one chart (`<div id="chart-SECTION_ID">`), then how to read it."""

    def render(summary: Summary) -> str:
        return (
            f'<div class="chart">{chart_div(figure(summary), section_id, with_plotlyjs)}</div>'
            f'<p class="howto">{esc(how_to_read)}</p>'
        )

    return Section(section_id, title, render)


def _table(
    section_id: str, title: str, table: Render, how_to_read: str, *, shown: Shown = _always, scroll: bool = False
) -> Section:
    """A section holding how to read a table, then the table (in a scrolling box when long)."""

    def render(summary: Summary) -> str:
        return (
            f'<p class="howto">{esc(how_to_read)}</p>'
            f'<div class="table-wrap{" scroll" if scroll else ""}">{table(summary)}</div>'
        )

    return Section(section_id, title, render, shown)


SECTIONS: tuple[Section, ...] = (
    Section("verdict", "Verdict", verdict_body, heading=False, css_class="verdict"),
    Section("numbers", "Key numbers", key_numbers_body),
    # plotly.js is inlined once, with the page's first chart: throughput is always shown, first.
    _chart(
        "throughput",
        "Throughput over time",
        charts.throughput_figure,
        "Messages per one-second window: published (by publish time), delivered (frame read off "
        "the socket) and acked. Delivered below published means the queue is growing; acked below "
        "delivered means consumers are falling behind. Grey band: warm-up, excluded from latency "
        "statistics; coloured bands: timeline phases; dashed lines: events (hover the ▼ markers).",
        with_plotlyjs=True,
    ),
    _chart(
        "sojourn",
        "Buffer sojourn over time",
        charts.sojourn_over_time_figure,
        "Buffer sojourn = time a delivery waits in the consumer's client-side buffer (prefetch) "
        "before processing starts. Each point is a percentile over the deliveries that started "
        "processing in that second; gaps are seconds without any. When p50 climbs with p99, the "
        "whole buffer is backing up (prefetch too large for the current processing speed). "
        "Switch to a log axis to see small values next to spikes.",
    ),
    _chart(
        "components",
        "Latency components over time",
        components_figure,
        "Per-second means of each part of a delivery's latency, stacked: broker + network (publish → "
        "bytes at the consumer's socket), socket wait (bytes at the socket → read by the process; the "
        "first part of the sojourn, shown where the kernel stamped arrivals), buffer sojourn (client "
        "buffer), processing, ack delay (processing end → ack sent), over the deliveries whose "
        "processing ended in that second. The stack's top is the mean round trip seen by a message; "
        "the band that grows when conditions change is where the latency comes from.",
    ),
    _chart(
        "distribution",
        "Buffer sojourn distribution",
        charts.sojourn_histogram_figure,
        "How many deliveries waited how long in the client buffer. A single bar near zero means the "
        "buffer is mostly empty; a hump far to the right is the standing queue that builds when "
        "processing or the network slows down. Dashed lines mark the overall p50 and p99.",
    ),
    _chart(
        "cdf",
        "Buffer sojourn per consumer (CDF)",
        sojourn_cdf_figure,
        "For each consumer, the share of its deliveries (after warm-up) that waited at most x ms in its "
        "buffer, from 20 quantiles (5 %, 10 %, ... 100 %). A line far to the right of the others is a "
        "consumer whose prefetch holds work it cannot process in time.",
    ),
    Section("model", "Queueing-model check", model_body),
    Section("network", "Network impairment", network_body, has_network),
    Section("codel", "CoDel", codel_body, has_codel),
    Section("egress", "Egress classes", egress_body, has_egress),
    Section("churn", "Consumer churn", churn_body, has_churn),
    Section("outcomes", "Consumer outcomes", outcomes_body, has_outcomes),
    Section("single_active", "Single active consumer", single_active_body, has_single_active),
    Section("stream", "Stream", stream_body, has_stream),
    Section("fidelity", fidelity_title, fidelity_body, has_fidelity),
    Section("slow_consumers", "Slow consumers", slow_consumers_body, has_queue_samples),
    _table(
        "latency",
        "Latency decomposition",
        tables.latency_table,
        "Where the time goes, per delivery, after warm-up. end_to_end = broker_network + sojourn + "
        "processing, so their means add up; the last column shows each part's share. A sojourn "
        "share near 100 % means the client buffer, not the broker or the work, dominates latency. "
        "socket_wait is the part of the sojourn the bytes spent in the socket before the process read "
        "them (kernel receive stamps; empty where the platform gave none).",
    ),
    _table(
        "consumers",
        "Per consumer",
        tables.consumers_table,
        "Utilisation = time spent processing / the consumer's wall time (first receive to last "
        "settle). Low utilisation with high sojourn elsewhere means the prefetch is spreading work "
        "unevenly; low utilisation everywhere means prefetch is too small for the round trip.",
    ),
    _table(
        "phases",
        "Per phase",
        tables.phases_table,
        "Publishes count in the phase of their intended send time, deliveries in the phase in which "
        "processing started; base is the time outside every named phase.",
    ),
    _table(
        "accounting",
        "Accounting",
        tables.accounting_table,
        "Every published message must end up in exactly one of these terms (first match wins, in "
        "this order). An unaccounted message is a bug in the system under test or in sojourn.",
    ),
    _table(
        "priorities",
        "Per priority",
        tables.priorities_table,
        "Messages by the AMQP priority they were published with (producers[].priority). A queue with "
        "x-max-priority delivers higher priorities first, so their sojourn and end-to-end latency should be "
        "lower; discarded counts every discard reason of the accounting table.",
        shown=tables.has_priorities,
    ),
    _table(
        "flow_control",
        "Producer flow control",
        tables.flow_control_table,
        "Periods in which the broker blocked producers' connections (connection.blocked: a memory or disk "
        "alarm), summed over each group's connections, and how long publishes waited for the block to lift. "
        "A publish that waited longer than the producer's max_blocked_wait_s was given up and is counted as "
        "discarded (publish_failed_blocked) in the accounting.",
        shown=tables.has_flow_control,
    ),
    _table(
        "events",
        "Events",
        tables.events_table,
        "Every change of conditions during the run, in time order (seconds since the start of the run).",
        scroll=True,
    ),
)
