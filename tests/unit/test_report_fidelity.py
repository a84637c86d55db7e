"""The report's publish-lateness banner and replay-fidelity section, from hand-built summaries
(no Spark, no broker)."""

from __future__ import annotations

import re

from plotly.offline import get_plotlyjs

from analysis.report import render_report
from tests.unit.test_report import figure, make_summary, section_text, visible_text


def lateness(count, p50, p99, mx, p999=None):
    return {"count": count, "mean": p50, "p50": p50, "p95": p99, "p99": p99, "max": mx, "p99_9": p999}


def synthetic(p99=0.4, mx=2.5, behind=False):
    return {
        "replayed": False,
        "lateness_ms": lateness(1000, 0.12, p99, mx),
        "late_share": {"over_1_ms": 0.004, "over_10_ms": 0.0},
        "behind": behind,
        "replay": None,
    }


def replayed(behind=True):
    return {
        "replayed": True,
        "lateness_ms": lateness(5, 100.0, 648.0, 650.0, 649.8),
        "late_share": {"over_1_ms": 0.8, "over_10_ms": 0.6},
        "behind": behind,
        "replay": {
            "config": {
                "source": "traces/orders.csv",
                "format": "csv",
                "rows": 3,
                "speed": 2.0,
                "window": [0, None],
                "loop": True,
                "split": "key",
            },
            "published": 5,
            "distinct": 4,
            "duplicates": 1,
            "expected": 6,
            "missing": 2,
            "per_second": {"t_s": [0, 1, 2, 3], "intended": [3, 1, 0, 1], "published": [1, 3, 0, 1]},
            "per_second_max_diff": 2,
            "per_second_correlation": -0.1818,
            "inter_arrival_ms": {
                "ks_distance": 0.5,
                "faithful": False,
                "intended": {"count": 4, "mean": 725.0, "p10": 120.0, "p50": 550.0, "p90": 1470.0, "p99": 1767.0},
                "published": {"count": 4, "mean": 726.25, "p10": 80.0, "p50": 575.0, "p90": 1493.5, "p99": 1683.85},
            },
        },
    }


def page_with(fidelity) -> str:
    summary = make_summary()
    summary["fidelity"] = fidelity
    return render_report(summary)


def banner(page: str) -> str | None:
    match = re.search(r'<div class="banner"[^>]*>(.*?)</div>', page, re.S)
    return visible_text(match.group(1)) if match else None


# --- banner --------------------------------------------------------------------------


def test_a_group_that_fell_behind_gets_a_banner_at_the_top_naming_it_and_its_lateness():
    page = page_with({"orders": replayed(behind=True), "steady": synthetic()})
    text = banner(page)
    assert text is not None
    assert (
        "The load generator could not keep up: producer group orders published p99 648 ms late "
        "(max 650 ms, 60.0 % of its publishes over 10 ms)"
    ) in text
    assert "under-state the offered load" in text and "steady" not in text
    assert page.index('class="banner"') < page.index('id="verdict"')


def test_every_group_behind_is_named_in_the_banner():
    text = banner(page_with({"a": synthetic(p99=12.0, behind=True), "b": synthetic(mx=1500.0, behind=True)}))
    assert "producer group a published p99 12.0 ms late" in text
    assert "producer group b published p99 0.400 ms late (max 1,500 ms" in text


def test_no_banner_when_every_group_kept_up():
    assert banner(page_with({"orders": replayed(behind=False), "steady": synthetic()})) is None


def test_no_banner_and_no_section_without_a_fidelity_block():
    for block in (None, {}, "nonsense"):
        page = page_with(block)
        assert banner(page) is None and 'id="fidelity"' not in page


# --- section -------------------------------------------------------------------------


def test_a_run_without_replay_has_a_compact_publish_lateness_table_and_no_chart():
    page = page_with({"steady": synthetic(), "slow": synthetic(p99=25.0, mx=40.0, behind=True)})
    text = section_text(page, "fidelity")
    assert text.startswith("Publish lateness")
    assert "slow synthetic 1,000 0.120 25.0 – 40.0 0.4 % 0.0 % behind" in text  # no p99.9: an older summary
    assert "steady synthetic 1,000 0.120 0.400 – 2.50 0.4 % 0.0 % on time" in text
    assert "Replay:" not in text
    assert page.count("Plotly.newPlot(") == 6  # only the report's usual charts


def test_the_replay_section_lists_lateness_counts_and_gaps_per_group():
    text = section_text(page_with({"orders": replayed(), "steady": synthetic()}), "fidelity")
    assert text.startswith("Replay fidelity")
    assert "orders replay 5 100 648 650 650 80.0 % 60.0 % behind" in text
    # source, rows, speed, window, loop, expected, published, distinct, duplicates, missing, max diff,
    # per-second correlation
    assert "Replay: orders" in text
    assert "traces/orders.csv 3 2× 0–end s yes 6 5 4 1 2 2 -0.182" in text
    assert "distributions (to 0.1 ms): 0.500 (kept at ≤ 0.05): the publishes bunched or spread" in text
    assert "intended (what the file asked for) 4 725 120 550 1,470 1,767" in text
    assert "actual publishes 4 726 80.0 575 1,494 1,684" in text


def test_missing_and_duplicated_rows_are_flagged():
    page = page_with({"orders": replayed()})
    assert '<span class="bad">2</span>' in page and '<span class="warn">1</span>' in page


def test_the_chart_puts_intended_and_published_rates_side_by_side_per_second():
    page = page_with({"orders": replayed(), "steady": synthetic()})
    data, layout = figure(page, "chart-fidelity-0")
    bars = {trace["name"]: trace for trace in data if trace.get("type") == "bar"}
    assert list(bars["intended (file)"]["x"]) == [0, 1, 2, 3]
    assert list(bars["intended (file)"]["y"]) == [3, 1, 0, 1]
    assert list(bars["published"]["y"]) == [1, 3, 0, 1]
    assert layout["barmode"] == "group"
    assert page.count(get_plotlyjs()) == 1
    assert page.index(get_plotlyjs()) < page.index('"chart-fidelity-0"')


def test_a_partial_replay_entry_renders_with_dashes():
    page = page_with({"orders": {"replayed": True, "replay": {}}})
    text = section_text(page, "fidelity")
    assert "Replay: orders" in text and "No data" not in text
    assert "Producer group orders published no replayed row" in page
