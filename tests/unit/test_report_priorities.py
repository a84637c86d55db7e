"""The report's per-priority table: shown only when publishes carried a priority."""

from __future__ import annotations

from analysis.report.page import build_page

ROWS = [
    {
        "priority": None,
        "published": 10,
        "acked": 9,
        "discarded": 1,
        "left_in_broker": 0,
        "sojourn_ms": {"p50": 1.0, "p99": 2.0},
        "end_to_end_ms": {"p50": 3.0, "p99": 4.0},
    },
    {
        "priority": 5,
        "published": 1_234,
        "acked": 1_200,
        "discarded": 30,
        "left_in_broker": 4,
        "sojourn_ms": {"p50": 12.5, "p99": 80.25},
        "end_to_end_ms": {"p50": 20.0, "p99": 95.0},
    },
]
FLOW = {
    "p": {
        "blocked_periods": 2,
        "blocked_s": 5.0,
        "publishes_waited": 1_500,
        "blocked_timeout": 7,
        "blocked_ms": {"p50": 120.0, "p99": 1900.0, "max": 2000.0},
    }
}


def test_a_run_with_priorities_gets_a_table_with_every_class():
    page = build_page({"run": {"run_id": "r"}, "priorities": ROWS})
    section = page.split('<section id="priorities">', 1)[1].split("</section>", 1)[0]
    assert "<td>none</td>" in section and "<td>5</td>" in section
    assert "1,234" in section and "80.2" in section
    assert 'href="#priorities"' in page


def test_a_run_without_priorities_has_no_section_and_no_link():
    page = build_page({"run": {"run_id": "r"}})
    assert 'id="priorities"' not in page and 'href="#priorities"' not in page


def test_producer_flow_control_is_shown_only_when_a_producer_was_blocked():
    page = build_page({"run": {"run_id": "r"}, "flow_control": FLOW})
    section = page.split('<section id="flow_control">', 1)[1].split("</section>", 1)[0]
    assert "1,500" in section and ">1,900<" in section and "<td class=num>7</td>" in section
    assert 'href="#flow_control"' in page
    assert 'id="flow_control"' not in build_page({"run": {"run_id": "r"}, "flow_control": {}})
