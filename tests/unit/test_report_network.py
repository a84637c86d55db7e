"""The report's network section and outage marks, rendered from hand-built summaries (no Spark, no broker)."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import band_labels, figure, make_summary, section_text


def link(latency_ms, jitter_ms=0.0, bandwidth=None, measured=None):
    return {"latency_ms": latency_ms, "jitter_ms": jitter_ms, "bandwidth_bytes_per_s": bandwidth, "measured": measured}


def measured(delay_p50, late_p99):
    return {
        "proxies": 1,
        "count": 1000,
        "bytes": 100_000,
        "dropped": 0,
        "error_p50_ms": 0.05,
        "error_p99_ms": late_p99,
        "error_max_ms": 3.0,
        "delay_p50_ms": delay_p50,
        "delay_p99_ms": delay_p50 + 1,
        "delay_mean_ms": delay_p50,
    }


def network_block() -> dict:
    return {
        "periods": [
            {
                "start_s": 0.0,
                "end_s": 4.0,
                "phase": "base",
                "down": False,
                "reset": False,
                "upstream": link(50, measured=measured(50.1, 0.4)),
                "downstream": link(50),
            },
            {
                "start_s": 4.0,
                "end_s": 6.0,
                "phase": "slow",
                "down": False,
                "reset": False,
                "upstream": link(100, 5, 50_000),
                "downstream": link(100),
            },
            {
                "start_s": 6.0,
                "end_s": 7.0,
                "phase": "cut",
                "down": True,
                "reset": False,
                "upstream": link(50),
                "downstream": link(50),
            },
            {
                "start_s": 7.0,
                "end_s": 12.345,
                "phase": "rst",
                "down": False,
                "reset": True,
                "upstream": link(50),
                "downstream": link(50),
            },
        ],
        "proxy": {"upstream": {**measured(61.0, 0.4), "proxies": 2}, "downstream": {**measured(61.0, 1.7)}},
    }


def page_with(block) -> str:
    summary = make_summary()
    summary["network"] = block
    return render_report(summary)


def test_the_section_lists_each_period_with_its_settings_state_and_measured_delay():
    text = section_text(page_with(network_block()), "network")
    assert "0–4 base up 50 ms 50 ms 50.1 / 0.400 –" in text
    assert "4–6 slow up 100 ms + 0–5, ≤ 50 kB/s 100 ms" in text
    assert "6–7 cut down" in text
    assert "7–12.3 rst reset at start" in text


def test_the_proxys_self_measurement_flags_a_p99_over_a_millisecond():
    page = page_with(network_block())
    assert "upstream 2 1,000 100,000 0 0.050 0.400 3.00 61.0 61.0" in section_text(page, "network")
    assert '<span class="good">0.400</span>' in page and '<span class="warn">1.70</span>' in page


def test_time_charts_show_outages_as_bands_resets_as_lines_and_each_periods_latency():
    for chart in ("chart-throughput", "chart-sojourn", "chart-components"):
        _data, layout = figure(page_with(network_block()), chart)
        labels = band_labels(layout)
        assert "network down" in labels
        assert "net ↑50 ↓50 ms" in labels and "net ↑100 ↓100 ms" in labels
        resets = [s for s in layout["shapes"] if s.get("name") == "connections reset"]
        assert [(s["x0"], s["type"]) for s in resets] == [(7.0, "line")]


def test_a_run_without_the_proxy_has_no_network_section_and_no_marks():
    for block in (None, {}, {"periods": []}):
        page = page_with(block)
        assert 'id="network"' not in page
        _data, layout = figure(page, "chart-throughput")
        assert "network down" not in band_labels(layout)
