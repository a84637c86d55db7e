"""The report's CoDel section, rendered from hand-built summaries (no Spark, no broker)."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import make_summary, section_text, stats


def codel_block() -> dict:
    return {
        "consumers": [
            {
                "consumer": "fast/host:1/0",
                "group": "fast",
                "codel_on": True,
                "decided": 4000,
                "nacks": 0,
                "requeued": 0,
                "discarded": 0,
                "nack_share": 0.0,
                "dropping_s": 0.0,
                "acked_requeued_from_others": 1234,
                "sojourn_before_ms": stats(4000, 0.1, 1.0, 15.0, 20.0, 0.5),
                "sojourn_after_ms": stats(0),
            },
            {
                "consumer": "slow/host:1/0",
                "group": "slow",
                "codel_on": True,
                "decided": 4700,
                "nacks": 2991,
                "requeued": 2990,
                "discarded": 1,
                "nack_share": 0.6364,
                "dropping_s": 12.5,
                "acked_requeued_from_others": 0,
                "sojourn_before_ms": stats(900, 0.06, 0.1, 0.19, 0.3, 0.07),
                "sojourn_after_ms": stats(3700, 150.0, 165.0, 172.9, 180.0, 140.0),
            },
        ],
        "totals": {
            "nacks": 2991,
            "requeued": 2990,
            "discarded": 1,
            "nack_share": 0.345,
            "dropping_s": 12.5,
            "requeued_messages": 1500,
            "requeued_acked_by_other": 1234,
            "requeued_acked_by_same": 266,
            "requeued_not_acked": 0,
        },
    }


def with_codel(block) -> str:
    summary = make_summary()
    summary["codel"] = block
    return render_report(summary)


def test_the_section_shows_each_consumers_nacks_and_sojourn_before_and_after():
    text = section_text(with_codel(codel_block()), "codel")
    # slow: nacks, requeued, discarded, share, time dropping, before p50 / p99, after p50 / p99, handoffs
    assert "slow/host:1/0 slow on 2,991 2,990 1 63.6 % 12.5 0.060 / 0.190 150 / 173 0" in text
    assert "fast/host:1/0 fast on 0 0 0 0.0 % 0 0.100 / 15.0 – / – 1,234" in text


def test_the_section_says_where_requeued_messages_went():
    text = section_text(with_codel(codel_block()), "codel")
    assert "In total 2,991 nacks (2,990 requeued, 1 discarded): 34.5 % of the deliveries CoDel decided on." in text
    assert (
        "Of the 1,500 messages requeued, 1,234 were then acked by another consumer, "
        "266 by the consumer that requeued them, and 0 never"
    ) in text


def test_the_section_explains_before_and_after():
    text = section_text(with_codel(codel_block()), "codel")
    assert "'Before' is every delivery that left the buffer before the consumer's first nack" in text


def test_nothing_is_rendered_without_a_codel_block():
    assert 'id="codel"' not in render_report(make_summary())


def test_nothing_is_rendered_when_no_consumer_had_codel():
    assert 'id="codel"' not in with_codel({"consumers": [], "totals": {"nacks": 0}})


def test_a_malformed_block_renders_nothing_rather_than_failing():
    assert 'id="codel"' not in with_codel("not a block")
    assert 'id="codel"' not in with_codel({"consumers": None})


def test_a_partial_consumer_row_shows_dashes():
    page = with_codel({"consumers": [{"consumer": "c/h:1/0"}]})
    text = section_text(page, "codel")
    assert "c/h:1/0 – – – – – – – – / – – / – –" in text
    assert "In total" not in text  # no totals: no totals line
