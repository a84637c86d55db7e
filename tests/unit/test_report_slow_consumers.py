"""The report's slow-consumers section, rendered from hand-built summaries (no Spark, no broker)."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import figure, make_summary, section_text


def consumer(name, minutes, worst):
    sampled = sum(m[1] for m in minutes)
    slow = sum(m[2] for m in minutes)
    return {
        "consumer": name,
        "group": name.split("/")[0],
        "seconds_sampled": sampled,
        "slow_seconds": slow,
        "share": slow / sampled,
        "worst_minute": {"minute": worst[0], "share": worst[1]},
        "minutes": [{"minute": m, "sampled": n, "slow": s, "share": s / n} for m, n, s in minutes],
    }


def page_with(block, depth) -> str:
    summary = make_summary()
    summary["slow_consumers"] = block
    summary["queue_depth"] = depth
    return render_report(summary)


BLOCK = {
    "samples": 120,
    "source": "declare",
    "sample_took_ms": {"p50": 0.9, "max": 5.4},
    # deliberately not worst first: the never-slow consumer must still come after the slow one
    "consumers": [
        consumer("fast/w/0", [(0, 60, 0), (1, 60, 0)], (0, 0.0)),
        consumer("slow/w/0", [(0, 60, 30), (1, 60, 54)], (1, 0.9)),
    ],
    "excluded": [{"consumer": "auto/w/0", "group": "auto", "reason": "auto_ack"}],
}
DEPTH = [
    {"t_s": 1.0, "ready": 5, "unacked": None, "consumers": 2},
    {"t_s": 2.0, "ready": 9, "unacked": None, "consumers": 2},
]


def test_consumers_with_slow_seconds_come_first_with_a_share_per_minute():
    text = section_text(page_with(BLOCK, DEPTH), "slow_consumers")
    assert "slow/w/0 slow 120 84 70.0 % 90.0 % (min 1) 50.0 % 90.0 %" in text
    assert "fast/w/0 fast 120 0 0.0 % 0.0 % (min 0) 0.0 % 0.0 %" in text
    assert text.index("slow/w/0") < text.index("fast/w/0")
    assert "Left out (no prefetch window): auto/w/0 (auto_ack)" in text
    assert "120 samples from declare; each took 0.90 ms (median), 5.40 ms at most" in text


def test_the_queue_depth_chart_draws_ready_and_leaves_out_unknown_unacked():
    data, _layout = figure(page_with(BLOCK, DEPTH), "chart-queue-depth")
    lines = {trace["name"]: trace for trace in data if trace.get("mode") == "lines"}
    assert set(lines) == {"ready"}
    assert lines["ready"]["y"] == [5, 9]


def test_unacked_is_drawn_when_the_management_api_gave_it():
    depth = [{**p, "unacked": 3} for p in DEPTH]
    data, _layout = figure(page_with(BLOCK, depth), "chart-queue-depth")
    assert "unacked (management API)" in {trace["name"] for trace in data}


def test_a_run_without_samples_has_no_section():
    assert 'id="slow_consumers"' not in page_with({}, [])
    assert 'id="slow_consumers"' not in render_report(make_summary())  # an older summary without the blocks
