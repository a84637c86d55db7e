"""The report's consumer-churn section and crash markers, rendered from hand-built summaries."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import figure, make_summary, section_text


def _group(name: str, crashes: int, requeued: int, then: dict) -> dict:
    return {
        "group": name,
        "joins": 2,
        "rejoins": 1,
        "clean_leaves": 1,
        "crashes": crashes,
        "connections_lost": 0,
        "requeued_crashed": requeued,
        "requeued_unsettled": 0,
        "redelivered": requeued,
        "processed_twice": crashes,
        "acked_twice": 0,
        "held_messages": sum(then.values()),
        "held_unaccounted": then.get("unaccounted", 0),
        "held_then": then,
    }


def churn_block(churn: bool = True, then_b: dict | None = None) -> dict:
    a, b = _group("a", 1, 17, {"acked": 17}), _group("b", 0, 0, then_b or {})
    totals = {k: a[k] + b[k] for k in a if k not in ("group", "held_then")}
    totals["held_then"] = {**a["held_then"], **b["held_then"]}
    return {"churn": churn, "nothing_lost": totals["held_unaccounted"] == 0, "groups": [a, b], "totals": totals}


def _summary(churn: bool = True, then_b: dict | None = None) -> dict:
    summary = make_summary()
    summary["consumers_churn"] = churn_block(churn, then_b)
    summary["events"].append(
        {"t_s": 6.0, "kind": "consumer_crash", "name": "a/host:1/0", "source": "a/host:1/0", "value": 17.0}
    )
    return summary


def test_a_run_with_a_crash_lists_it_per_group_with_a_total_row():
    text = section_text(render_report(_summary()), "churn")
    assert "nothing lost to churn" in text and "17 messages" in text
    assert "acked 17" in text and "all" in text


def test_a_held_message_that_ended_unaccounted_turns_the_verdict_red():
    page = render_report(_summary(then_b={"unaccounted": 2}))
    assert "2 of the 19 messages a requeued delivery held ended unaccounted" in section_text(page, "churn")


def test_a_run_without_churn_has_no_section_and_no_nav_entry():
    page = render_report(_summary(churn=False))
    assert 'id="churn"' not in page and 'href="#churn"' not in page


def test_crashes_get_their_own_markers_on_the_throughput_chart():
    data, _ = figure(render_report(_summary()), "chart-throughput")
    (crashes,) = [trace for trace in data if trace.get("name") == "consumer crash"]
    assert crashes["x"] == [6.0]
