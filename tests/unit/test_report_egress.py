"""The report's egress section, rendered from hand-built summaries (no Spark, no broker)."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import make_summary, section_text, stats


def egress_block() -> dict:
    def entry(name, delivered, discards, share, indications, hwm, mean, priorities, sojourn):
        return {
            "class": name,
            "consumers": 1,
            "delivered": delivered,
            "discards": discards,
            "discard_share": share,
            "in_buffer_at_end": 0,
            "discard_indications": indications,
            "high_water": hwm,
            "mean_length": mean,
            "priorities": priorities,
            "sojourn_ms": sojourn,
        }

    return {
        "sub": {
            "max_depth_units": 40,
            "min_burst": 4,
            "classes": [
                entry(
                    "high",
                    240,
                    0,
                    0.0,
                    137,
                    {"messages": 7, "units": 14},
                    {"messages": 1.96, "units": 3.93},
                    [5, 9],
                    stats(240, 9.4, 62.0, 92.3, 95.9, 17.0),
                ),
                entry(
                    "low",
                    156,
                    404,
                    0.7214,
                    100,
                    {"messages": 20, "units": 40},
                    {"messages": 19.52, "units": 39.04},
                    [1, 1],
                    stats(156, 132.4, 179.0, 199.9, 204.3, 132.0),
                ),
            ],
        }
    }


def test_the_section_shows_each_class_of_each_group():
    summary = make_summary()
    summary["egress"] = egress_block()
    html = render_report(summary)
    text = section_text(html, "egress")
    # group, class, priorities, max depth / min burst, delivered, discards, share, indications,
    # high water, mean, left in buffer, sojourn p50 / p99
    assert "sub high 5–9 40 / 4 240 0 0.0 % 137 7 / 14 2.0 / 3.9 0 9.40 / 92.3" in text
    assert "sub low 1 40 / 4 156 404 72.1 % 100 20 / 40 19.5 / 39.0 0 132 / 200" in text
    assert 'href="#egress"' in html


def test_no_section_and_no_link_without_egress():
    for block in (None, {}):
        summary = make_summary()
        if block is not None:
            summary["egress"] = block
        html = render_report(summary)
        assert 'id="egress"' not in html and 'href="#egress"' not in html
