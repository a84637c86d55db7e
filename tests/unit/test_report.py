"""report.html as a reader sees it, rendered from hand-built summaries (no Spark, no broker)."""

from __future__ import annotations

import copy
import datetime as dt
import html
import json
import re
import subprocess
import sys

import pytest
from plotly.offline import get_plotlyjs

from analysis.report import render_report

T0 = dt.datetime(2026, 11, 21, 14, 0, 0, tzinfo=dt.timezone.utc)
T0_NS = int(T0.timestamp()) * 1_000_000_000


def stats(count, p50=None, p95=None, p99=None, mx=None, mean=None):
    return {"count": count, "mean": mean, "p50": p50, "p95": p95, "p99": p99, "max": mx}


def make_summary() -> dict:
    """A small but complete summary following docs/summary.md."""
    return {
        "schema_version": 1,
        "run": {
            "run_id": "20261121T140000Z-quickstart-1a2b",
            "scenario": "quickstart",
            "t0_ns": T0_NS,
            "duration_s": 10,
            "warmup_s": 2,
            "broker_url": "amqp://guest:****@127.0.0.1:5672/",
            "status": "completed",
            "code_version": {"sojourn": "0.1.0", "git": "abc1234"},
        },
        "messages": {
            "published": 100,
            "confirmed": 100,
            "acked": 95,
            "discarded": {"publish_nacked": 1, "publish_failed": 0, "consumer_nack_discard": 2},
            "discarded_total": 3,
            "left_in_broker": 2,
            "unaccounted": 0,
            "unaccounted_ids": [],
            "redelivered": 4,
            "duplicates": 0,
        },
        "throughput": {"publish_per_s": 10.0, "deliver_per_s": 9.5, "ack_per_s": 9.5},
        "sojourn_ms": stats(90, 1.5, 8.0, 12.25, 20.0, 2.0),
        "latency_ms": {
            "end_to_end": stats(90, 55.0, 80.0, 99.5, 120.0, 60.0),
            "broker_network": stats(90, 50.0, 52.0, 55.0, 60.0, 50.5),
            "processing": stats(90, 4.0, 6.0, 7.0, 9.0, 4.5),
            "ack_delay": stats(90, 0.1, 0.2, 0.3, 0.4, 0.15),
            "confirm": stats(100, 1.0, 2.0, 3.0, 4.0, 1.2),
        },
        "consumers": [
            {
                "consumer": "main/host:1/0",
                "group": "main",
                "delivered": 60,
                "acked": 58,
                "utilisation": 0.875,
                "sojourn_ms": stats(55, 1.0, 5.0, 9.0, 15.0, 1.5),
                "latency_ms": {"end_to_end": stats(55, 50.0, 70.0, 90.0, 100.0, 55.0)},
            },
            {
                "consumer": "slow/host:2/0",
                "group": "slow",
                "delivered": 40,
                "acked": 37,
                "utilisation": 0.5,
                "sojourn_ms": stats(35, 2.0, 9.0, 14.0, 20.0, 3.0),
                "latency_ms": {"end_to_end": stats(35, 60.0, 90.0, 110.0, 120.0, 65.0)},
            },
        ],
        "phases": [
            {
                "phase": "base",
                "start_s": 0.0,
                "end_s": 5.0,
                "published": 50,
                "acked": 50,
                "throughput": {"publish_per_s": 10.0, "ack_per_s": 10.0},
                "sojourn_ms": stats(45, 1.0, 2.0, 3.0, 4.0, 1.5),
                "latency_ms": {"end_to_end": stats(45, 50.0)},
            },
            {
                "phase": "slow_processing",
                "start_s": 5.0,
                "end_s": 10.0,
                "published": 50,
                "acked": 45,
                "throughput": {"publish_per_s": 10.0, "ack_per_s": 9.0},
                "sojourn_ms": stats(45, 9.0, 15.0, 19.0, 20.0, 9.5),
                "latency_ms": {"end_to_end": stats(45, 70.0)},
            },
        ],
        "windows": [
            {
                "t_s": t,
                "published": 10,
                "delivered": 9,
                "acked": 9,
                "sojourn_ms": {"p50": 1.0 + t, "p95": 2.0 + t, "p99": 3.0 + t, "max": 4.0 + t},
                "latency_ms": {"p50": 50.0, "p99": 90.0},
                "components_ms": {"broker_network": 50.0, "sojourn": 1.0 + t, "processing": 4.0, "ack_delay": 0.2},
            }
            for t in range(10)
        ],
        "sojourn_histogram": {"edges_ms": [0.0, 5.0, 10.0, 15.0, 20.0], "counts": [50, 25, 10, 5]},
        "events": [
            {"t_s": 5.0, "kind": "phase_start", "name": "slow_processing", "source": "runner", "value": None},
            {"t_s": 3.5, "kind": "consumer_join", "name": "slow/host:2/0", "source": "consumer", "value": None},
            {"t_s": 10.0, "kind": "drain_start", "name": "drain", "source": "runner", "value": 30},
        ],
        "slo": [
            {"expr": "sojourn_ms.p99 < 200", "metric": "sojourn_ms.p99", "value": 12.25, "passed": True},
            {
                "expr": "latency_ms.end_to_end.p99 < 50",
                "metric": "latency_ms.end_to_end.p99",
                "value": 99.5,
                "passed": False,
            },
        ],
    }


@pytest.fixture(scope="module")
def page() -> str:
    return render_report(make_summary())


def visible_text(fragment: str) -> str:
    """Tags stripped (inline ones without adding a space), entities decoded, spaces collapsed."""
    fragment = re.sub(r"</?(?:code|b|a)\b[^>]*>", "", fragment)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def section_text(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}"[^>]*>(.*?)</section>', page, re.S)
    assert match, f"no section {section_id!r}"
    return visible_text(match.group(1))


def header_text(page: str) -> str:
    match = re.search(r"<header>(.*?)</header>", page, re.S)
    assert match
    return visible_text(match.group(1))


def figure(page: str, div_id: str) -> tuple[list, dict]:
    """The (data, layout) plotly receives for the chart in `div_id`."""
    call = re.search(rf'Plotly\.newPlot\(\s*"{div_id}",\s*', page)
    assert call, f"no chart {div_id!r}"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(page, call.end())
    layout_start = re.compile(r"\s*,\s*").match(page, end).end()
    layout, _ = decoder.raw_decode(page, layout_start)
    return data, layout


def band_labels(layout: dict) -> list[str]:
    return [s["label"]["text"] for s in layout.get("shapes", []) if s.get("type") == "rect" and "label" in s]


# --- header --------------------------------------------------------------------------


def test_header_names_the_scenario_run_status_and_utc_start(page):
    text = header_text(page)
    assert "quickstart" in text
    assert "20261121T140000Z-quickstart-1a2b" in text
    assert "completed" in text
    assert "2026-11-21 14:00:00.000 UTC" in text
    assert "10 s" in text and "2 s" in text
    assert "sojourn 0.1.0 · git abc1234" in text


@pytest.mark.parametrize(
    "block, shown",
    [
        ({"method": "exact", "interpolation": "linear"}, "percentiles exact"),
        (
            {"method": "approximate", "accuracy": 10000, "relative_rank_error": 0.0001},
            "percentiles approximate: rank within 0.01 % of the exact one's",
        ),
        (
            {
                "method": "approximate",
                "accuracy": 10000,
                "relative_rank_error": 0.0001,
                "kll_k": 32768,
                "confidence": 0.99,
            },
            "percentiles approximate: rank within 0.01 % of the exact one's (99 % confidence)",
        ),
        (  # a summary of today's analysis: every percentile from log buckets
            {"method": "log_histogram", "relative_error": 0.004975, "gamma": 1.01},
            "percentiles from log buckets: within 0.4975 % of the exact value",
        ),
    ],
)
def test_the_header_says_how_the_percentiles_were_computed(block, shown):
    page = render_report({**make_summary(), "percentiles": block})
    assert shown in header_text(page)


def test_a_summary_from_before_the_percentiles_block_says_nothing_of_them(page):
    assert "percentiles" not in header_text(page)


def test_links_given_by_the_caller_appear_in_the_header():
    page = render_report(make_summary(), links={"Locust report": "locust.html"})
    assert '<a href="locust.html">Locust report</a>' in page


def test_a_javascript_link_is_dropped():
    page = render_report(make_summary(), links={"evil": "javascript:alert(1)"})
    assert "javascript:alert" not in page


@pytest.mark.parametrize(
    "url, shown, secret",
    [
        ("amqp://guest:hunter2@rabbit:5672/", "amqp://guest:****@rabbit:5672/", "hunter2"),
        ("amqps://svc:p@ss%2Fw0rd@rabbit.example:5671/vh", "amqps://svc:****@rabbit.example:5671/vh", "w0rd"),
        ("AMQP://u:topsecret@h/", "AMQP://u:****@h/", "topsecret"),
    ],
)
def test_a_password_in_the_broker_url_is_masked(url, shown, secret):
    summary = make_summary()
    summary["run"]["broker_url"] = url
    page = render_report(summary)
    assert secret not in page
    assert shown in header_text(page)


def test_a_password_in_an_event_name_is_masked_in_the_table_and_the_chart():
    summary = make_summary()
    summary["events"].append(
        {"t_s": 4.0, "kind": "broker_reconnect", "name": "amqp://guest:hunter2@rabbit/", "source": "consumer"}
    )
    page = render_report(summary)
    assert "hunter2" not in page
    assert "amqp://guest:****@rabbit/" in section_text(page, "events")


# --- verdict -------------------------------------------------------------------------


def test_a_failing_slo_shows_its_expression_marked_fail(page):
    text = section_text(page, "verdict")
    assert "FAIL latency_ms.end_to_end.p99 < 50 value 99.5" in text
    assert "PASS sojourn_ms.p99 < 200 value 12.25" in text


def test_no_unaccounted_message_says_every_message_accounted_for(page):
    text = section_text(page, "verdict")
    assert "every message accounted for" in text
    assert "messages unaccounted" not in text


def test_unaccounted_messages_are_flagged_with_the_count_and_first_ids():
    summary = make_summary()
    summary["messages"].update(acked=92, unaccounted=3, unaccounted_ids=["m-0007", "m-0042", "m-0099"])
    text = section_text(render_report(summary), "verdict")
    assert "3 messages unaccounted for" in text
    assert "m-0007, m-0042, m-0099" in text
    assert "every message accounted for" not in text


def test_only_the_first_ten_unaccounted_ids_are_listed():
    summary = make_summary()
    ids = [f"m-{i:04d}" for i in range(100)]
    summary["messages"].update(acked=0, unaccounted=150, unaccounted_ids=ids)
    text = section_text(render_report(summary), "verdict")
    assert "m-0009" in text and "m-0010" not in text
    assert "and 140 more" in text


def test_an_interrupted_run_is_called_out():
    summary = make_summary()
    summary["run"]["status"] = "interrupted"
    assert "run interrupted" in section_text(render_report(summary), "verdict")


def test_a_killed_run_says_it_did_not_finish_and_how_many_messages_it_can_not_place():
    summary = make_summary()
    summary["run"]["status"] = "running"
    summary["messages"].update(
        unaccounted=0, unaccounted_ids=[], unknown_after_crash=9, unknown_after_crash_ids=["m-7"]
    )
    text = section_text(render_report(summary), "verdict")
    assert "run did not finish" in text and "no census was taken" in text
    assert "9 messages can not be placed after the crash" in text and "m-7" in text
    assert "every message accounted for" not in text


def test_a_worker_whose_traces_never_arrived_is_named_with_the_messages_it_leaves_unplaced():
    summary = make_summary()
    summary["run"]["workers_missing"] = [{"worker": "host-b-4242", "missing": ["(its manifest)"]}]
    summary["messages"].update(unaccounted=0, unaccounted_ids=[], unknown_workers_missing=31)
    text = section_text(render_report(summary), "verdict")
    assert "traces of 1 worker never reached the master" in text and "host-b-4242" in text
    assert "31 messages can not be placed" in text
    assert "every message accounted for" not in text


def test_a_failed_census_is_called_out_with_its_reason_and_a_good_one_is_not():
    summary = make_summary()
    assert "census failed" not in section_text(render_report(summary), "verdict")
    summary["run"]["census_error"] = "connection to amqp://guest:****@127.0.0.1:5672/ lost"
    text = section_text(render_report(summary), "verdict")
    assert "census failed" in text and "not known by id" in text and "amqp://guest:****@127.0.0.1:5672/ lost" in text


# --- key numbers and tables ----------------------------------------------------------


def test_key_numbers_show_counts_rates_and_percentiles(page):
    text = section_text(page, "numbers")
    for expected in (
        "published 100",
        "acked 95",
        "discarded 3",
        "left in broker 2",
        "unaccounted 0",
        "publish 10.0",
        "deliver 9.50",
        "p50 1.50",
        "p99 12.2",
        "max 20.0",
        "p99 99.5",
    ):
        assert expected in text


def test_latency_table_has_every_segment_of_the_decomposition(page):
    text = section_text(page, "latency")
    for segment in ("end_to_end", "broker_network", "sojourn", "processing", "ack_delay", "confirm"):
        assert segment in text
    assert "count mean (ms) p50 (ms) p95 (ms) p99 (ms) max (ms)" in text


def test_per_consumer_table_lists_each_consumer_with_utilisation_in_percent(page):
    text = section_text(page, "consumers")
    assert "main/host:1/0 main 60 58 87.5 %" in text
    assert "slow/host:2/0 slow 40 37 50.0 %" in text


def test_per_phase_table_lists_each_phase_with_its_span(page):
    text = section_text(page, "phases")
    assert "base 0–5 50 50" in text
    assert "slow_processing 5–10 50 45" in text


def test_accounting_table_shows_the_identity_holds(page):
    text = section_text(page, "accounting")
    assert "publish_nacked 1" in text and "consumer_nack_discard 2" in text
    assert "the identity holds" in text


def test_accounting_table_says_when_the_identity_does_not_hold():
    summary = make_summary()
    summary["messages"]["published"] = 101  # one message more than the terms add up to
    text = section_text(render_report(summary), "accounting")
    assert "does not hold: the terms add up to 100, published is 101" in text


def test_events_are_listed_in_time_order(page):
    text = section_text(page, "events")
    assert text.index("consumer_join") < text.index("phase_start") < text.index("drain_start")


# --- charts --------------------------------------------------------------------------


@pytest.mark.parametrize("chart", ["chart-throughput", "chart-sojourn", "chart-components"])
def test_every_time_chart_shades_named_phases_and_warmup_but_not_base(page, chart):
    _, layout = figure(page, chart)
    labels = band_labels(layout)
    assert "slow_processing" in labels
    assert "warm-up" in labels
    assert "base" not in labels
    band = next(s for s in layout["shapes"] if s.get("label", {}).get("text") == "slow_processing")
    assert (band["x0"], band["x1"]) == (5.0, 10.0)


@pytest.mark.parametrize("chart", ["chart-throughput", "chart-sojourn", "chart-components"])
def test_events_are_marked_with_hover_text_on_every_time_chart(page, chart):
    data, layout = figure(page, chart)
    events = next(trace for trace in data if trace.get("name") == "events")
    assert events["x"] == [3.5, 10.0]  # phase_start is already a band, so not repeated
    assert "consumer_join" in events["hovertext"][0]
    lines = [s["x0"] for s in layout["shapes"] if s.get("type") == "line" and s.get("line", {}).get("dash") == "dash"]
    assert lines == [3.5, 10.0]


def test_throughput_chart_plots_each_window(page):
    data, _ = figure(page, "chart-throughput")
    published = next(trace for trace in data if trace["name"] == "published")
    assert published["x"] == list(range(10))
    assert published["y"] == [10] * 10


def test_sojourn_chart_plots_the_window_percentiles(page):
    data, _ = figure(page, "chart-sojourn")
    p99 = next(trace for trace in data if trace["name"] == "p99")
    assert p99["y"] == [3.0 + t for t in range(10)]


def test_distribution_chart_has_one_bar_per_histogram_bin(page):
    data, _ = figure(page, "chart-distribution")
    bars = next(trace for trace in data if trace["type"] == "bar")
    assert bars["x"] == [0.0, 5.0, 10.0, 15.0]
    assert bars["y"] == [50, 25, 10, 5]


def test_log_spaced_histogram_bins_are_drawn_side_by_side_with_their_ranges():
    summary = make_summary()
    summary["sojourn_histogram"] = {"edges_ms": [0.0, 1.0, 10.0, 100.0, 1000.0], "counts": [5, 50, 30, 2]}
    data, layout = figure(render_report(summary), "chart-distribution")
    bars = next(trace for trace in data if trace["type"] == "bar")
    assert bars["x"] == ["0–1.00", "1.00–10.0", "10.0–100", "100–1,000"]
    assert bars["y"] == [5, 50, 30, 2]
    assert layout["xaxis"]["type"] == "category"


# --- self-contained and safe ---------------------------------------------------------


def test_page_fetches_nothing_from_the_network(page):
    assert 'src="http' not in page
    assert "<link" not in page
    assert "@import" not in page


def test_plotly_js_is_embedded_exactly_once_for_six_charts(page):
    assert page.count(get_plotlyjs()) == 1
    assert page.count("Plotly.newPlot(") == 6  # throughput, sojourn, components, histogram, CDF, utilisation


def test_text_from_the_summary_is_html_escaped():
    summary = make_summary()
    summary["run"]["scenario"] = "<script>alert(1)</script>"
    summary["events"][1]["name"] = "<img src=x onerror=alert(2)>"
    page = render_report(summary)
    assert "<script>alert(1)" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_rendering_twice_gives_the_same_page():
    assert render_report(make_summary()) == render_report(make_summary())


def test_analysis_report_imports_no_load_generator_module():
    code = (
        "import sys, analysis.report; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'locust', 'pika', 'gevent', 'loadgen'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- empty and partial summaries -----------------------------------------------------


def test_an_empty_summary_renders_a_complete_page():
    page = render_report({})
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "accounting not available" in section_text(page, "verdict")
    assert "No per-second windows" in page
    assert page.count(get_plotlyjs()) == 1


def test_zero_deliveries_and_null_percentiles_show_dashes():
    summary = make_summary()
    null = stats(0)
    summary["messages"].update(published=0, acked=0, discarded={}, discarded_total=0, left_in_broker=0)
    summary["sojourn_ms"] = null
    summary["latency_ms"] = dict.fromkeys(summary["latency_ms"], null)
    summary["consumers"] = []
    summary["phases"] = []
    summary["events"] = []
    summary["sojourn_histogram"] = {"edges_ms": [0.0, 1.0], "counts": [0]}
    for window in summary["windows"]:
        window.update(delivered=0, acked=0, sojourn_ms={"p50": None, "p95": None, "p99": None, "max": None})
    page = render_report(summary)
    numbers = section_text(page, "numbers")
    assert "p50 – p95 – p99 – max –" in numbers
    assert "every message accounted for (0 published)" in section_text(page, "verdict")
    assert "No consumer delivered anything." in page
    assert "No events were recorded." in page
    _, layout = figure(page, "chart-sojourn")
    assert band_labels(layout) == ["warm-up"]


def test_missing_keys_and_wrong_types_do_not_raise():
    summary = make_summary()
    summary.update(
        windows=None,
        consumers=[None, "x", {}],
        phases=[{"phase": "odd"}],
        events=[{"kind": "no_time"}, "x"],
        slo=[{"expr": "a < 1"}],
        sojourn_histogram={"edges_ms": [0, 1], "counts": [1, 2, 3]},
    )
    summary["run"] = {"t0_ns": "not a number", "code_version": "0.1.0"}
    summary["messages"] = {"published": None}
    page = render_report(summary)
    assert "cannot be checked" in section_text(page, "accounting")
    assert "FAIL a < 1" in section_text(page, "verdict")


def test_a_summary_that_is_not_a_dict_is_refused():
    with pytest.raises(TypeError, match="summary must be a dict"):
        render_report(json.dumps(make_summary()))


def test_the_caller_summary_is_not_modified():
    summary = make_summary()
    before = copy.deepcopy(summary)
    render_report(summary)
    assert summary == before


def test_the_model_section_sets_the_capacity_check_beside_what_each_phase_measured():
    summary = make_summary()
    assert "Before the run" not in section_text(render_report(summary), "model")  # an older run: no check
    summary["run"]["capacity"] = [
        {
            "phase": "base",
            "start_s": 0.0,
            "end_s": 5.0,
            "group": "main",
            "consumers": 1,
            "offered_per_s": 10.0,
            "capacity_per_s": 200.0,
            "utilisation": 0.05,
            "buffer_wait_ms": 0.0,
            "backlog_growth_per_s": 0.0,
        },
        {
            "phase": "slow_processing",
            "start_s": 5.0,
            "end_s": 10.0,
            "group": "main",
            "consumers": 1,
            "offered_per_s": 10.0,
            "capacity_per_s": 8.0,
            "utilisation": 1.25,
            "buffer_wait_ms": 450.0,
            "backlog_growth_per_s": 2.0,
        },
    ]
    text = section_text(render_report(summary), "model")
    assert "Before the run: the capacity check" in text
    assert "slow_processing" in text and "125" in text and "backlog +2" in text
    assert "450" in text and "9.5" in text  # predicted buffer wait beside the phase's measured sojourn mean


def test_a_consumer_closed_for_holding_a_delivery_past_consumer_timeout_is_named_with_the_time():
    summary = make_summary()
    reply = "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 2000 ms"
    summary["events"] = [
        {
            "t_s": 4.2,
            "kind": "channel_closed",
            "name": "c/host-1/0",
            "source": "c/host-1/0",
            "value": 406.0,
            "detail": json.dumps({"reply_code": 406, "reply_text": reply, "unsettled": 7}),
        },
        {
            "t_s": 6.0,
            "kind": "channel_closed",
            "name": "p/host-1/0",
            "source": "p/host-1/0",
            "value": 404.0,
            "detail": json.dumps({"reply_code": 404, "reply_text": "NOT_FOUND - no exchange 'x'", "unconfirmed": 3}),
        },
    ]
    text = section_text(render_report(summary), "verdict")
    assert "consumer timeout" in text and "c/host-1/0" in text and "at 4.2 s" in text
    assert "timed out" in text and "requeued the 7 deliveries it held" in text
    assert "p/host-1/0" not in text  # a producer's 404 is no consumer timeout
