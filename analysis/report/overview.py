"""The top of the report: the verdict strip (run status, accounting, SLOs) and the key-number cards."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_exact, fmt_ms, fmt_rate
from .model import processing_verdict
from .stream import has_stream

__all__ = ["verdict_body", "key_numbers_body", "status_class"]

Summary = Mapping[str, Any]

_FIRST_IDS = 10  # unaccounted ids shown in the verdict; the summary keeps up to 100


def status_class(status: Any) -> str:
    """The CSS class a run status is shown in: completed good, interrupted warn, failed bad."""
    return {"completed": "good", "interrupted": "warn", "failed": "bad"}.get(str(status), "muted")


# --- verdict strip -------------------------------------------------------------------


def _accounting_verdict(summary: Summary) -> str:
    messages = dig(summary, "messages", default={})
    unaccounted = as_number(dig(messages, "unaccounted"))
    if unaccounted is None:
        return '<div class="chip muted">accounting not available in this summary</div>'
    unknown = as_number(dig(messages, "unknown_after_crash")) or 0
    if unknown:
        ids = [str(i) for i in as_list(dig(messages, "unknown_after_crash_ids"))][:_FIRST_IDS]
        shown = ", ".join(f"<code>{esc(i)}</code>" for i in ids)
        return (
            f'<div class="chip warn"><b>{fmt_count(unknown)} message{"" if unknown == 1 else "s"} can not be placed '
            f"after the crash</b>: no census counted what was left in the broker, and the trace rows the killed "
            f"processes held are lost (unknown_after_crash){' — first ids: ' + shown if ids else ''}</div>"
        )
    missing = as_number(dig(messages, "unknown_workers_missing")) or 0
    workers = [str(dig(w, "worker")) for w in as_list(dig(summary, "run", "workers_missing"))]
    if missing or workers:
        return (
            f'<div class="chip warn"><b>the traces of {len(workers)} worker{"" if len(workers) == 1 else "s"} never '
            f"reached the master</b> ({esc(', '.join(workers))}): {fmt_count(missing)} message"
            f"{'' if missing == 1 else 's'} can not be placed (unknown_workers_missing)</div>"
        )
    if unaccounted == 0:
        published = fmt_count(dig(messages, "published"))
        return f'<div class="chip good"><b>✓ every message accounted for</b> ({published} published)</div>'
    ids = [str(i) for i in as_list(dig(messages, "unaccounted_ids"))][:_FIRST_IDS]
    shown = ", ".join(f"<code>{esc(i)}</code>" for i in ids)
    more = f" and {fmt_count(unaccounted - len(ids))} more" if unaccounted > len(ids) else ""
    first = f" — first ids: {shown}{more}" if ids else ""
    return (
        f'<div class="chip bad"><b>✗ {fmt_count(unaccounted)} message'
        f"{'' if unaccounted == 1 else 's'} unaccounted for</b>{first}</div>"
    )


def _slo_verdicts(summary: Summary) -> str:
    slos = [s for s in as_list(summary.get("slo")) if isinstance(s, Mapping)]
    if not slos:
        return '<div class="chip muted">no SLOs defined for this scenario</div>'
    chips = []
    for slo in slos:
        passed = dig(slo, "passed") is True
        value = as_number(dig(slo, "value"))
        detail = f"value {fmt_exact(value)}" if value is not None else esc(dig(slo, "reason", default="no value"))
        chips.append(
            f'<div class="chip {"good" if passed else "bad"}"><b>{"PASS" if passed else "FAIL"}</b> '
            f'<code>{esc(dig(slo, "expr"))}</code> <span class="detail">{detail}</span></div>'
        )
    return "".join(chips)


def _run_status_verdict(summary: Summary) -> str:
    status = dig(summary, "run", "status")
    census_error = dig(summary, "run", "census_error")
    chips = ""
    if status == "running":
        chips += (
            '<div class="chip bad"><b>run did not finish</b>: run.json still says running (its processes were '
            "killed): no census was taken, trace rows the processes held are lost, and the numbers cover only "
            "what was written</div>"
        )
    elif status is not None and status != "completed":
        chips += (
            f'<div class="chip {status_class(status)}"><b>run {esc(status)}</b>: numbers cover only the part that '
            "ran</div>"
        )
    if census_error:
        chips += (
            f'<div class="chip bad"><b>census failed</b>: messages still in the broker are not known by id and '
            f'count as unaccounted <span class="detail">{esc(census_error)}</span></div>'
        )
    return chips


def _channel_detail(event: Mapping[str, Any]) -> Mapping[str, Any]:
    raw = event.get("detail")
    try:
        detail = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return detail if isinstance(detail, Mapping) else {}


def _consumer_timeouts(summary: Summary) -> str:
    """A chip for each consumer whose channel the broker closed because it held a delivery past
    `consumer_timeout` (a `channel_closed` event whose reply says the acknowledgement timed out)."""
    chips = []
    for e in as_list(summary.get("events")):
        if not isinstance(e, Mapping) or e.get("kind") != "channel_closed":
            continue
        detail = _channel_detail(e)
        text = str(detail.get("reply_text") or "")
        if "timed out" not in text:
            continue
        held = as_number(detail.get("unsettled"))
        chips.append(
            f'<div class="chip warn"><b>consumer timeout</b>: <code>{esc(e.get("name"))}</code> held a delivery '
            f"past the broker's consumer_timeout; the broker closed its channel at {fmt_exact(e.get('t_s'))} s "
            f"({esc(detail.get('reply_code'))} {esc(text)})"
            + (f", and requeued the {fmt_count(held)} deliveries it held" if held else "")
            + "</div>"
        )
    return "".join(chips)


def verdict_body(summary: Summary) -> str:
    """The verdict strip's chips: the run's status unless it completed, the accounting, each SLO,
    processing that ran longer than drawn (report.model.processing_verdict), and consumers the
    broker closed for holding a delivery past its consumer_timeout."""
    return (
        f"{_run_status_verdict(summary)}{_accounting_verdict(summary)}{_slo_verdicts(summary)}"
        f"{processing_verdict(summary)}{_consumer_timeouts(summary)}"
    )


# --- key numbers ---------------------------------------------------------------------


def _card(title: str, items: list[tuple[str, str]]) -> str:
    cells = "".join(
        f'<div class="kv"><span class="k">{esc(k)}</span><span class="v">{v}</span></div>' for k, v in items
    )
    return f'<div class="card"><h3>{esc(title)}</h3>{cells}</div>'


def key_numbers_body(summary: Summary) -> str:
    """Four cards: messages, throughput, buffer sojourn and end-to-end latency."""
    m = dig(summary, "messages", default={})
    unaccounted = as_number(dig(m, "unaccounted"))
    cards = [
        _card(
            "Messages",
            [
                ("published", fmt_count(dig(m, "published"))),
                ("acked", fmt_count(dig(m, "acked"))),
                ("discarded", fmt_count(dig(m, "discarded_total"))),
                (
                    ("not yet read", fmt_count(dig(m, "not_yet_read")))
                    if has_stream(summary)
                    else ("left in broker", fmt_count(dig(m, "left_in_broker")))
                ),
                ("unaccounted", f'<span class="{"bad" if unaccounted else ""}">{fmt_count(unaccounted)}</span>'),
            ],
        ),
        _card(
            "Throughput (msg/s, after warm-up)",
            [(k, fmt_rate(dig(summary, "throughput", f"{k}_per_s"))) for k in ("publish", "deliver", "ack")],
        ),
        _card(
            "Buffer sojourn (ms)", [(k, fmt_ms(dig(summary, "sojourn_ms", k))) for k in ("p50", "p95", "p99", "max")]
        ),
        _card(
            "End-to-end latency (ms)",
            [(k, fmt_ms(dig(summary, "latency_ms", "end_to_end", k))) for k in ("p50", "p99")],
        ),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'
