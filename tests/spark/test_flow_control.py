"""Producer flow control: blocked periods from events, blocked publishes from the publish trace."""

from __future__ import annotations

import pytest

from analysis.cube import cube
from analysis.summary.flow_control import blocked_periods, flow_control_block, flow_control_projections

S = 1_000_000_000


def test_blocked_periods_pair_blocks_with_unblocks_and_run_to_the_end():
    events = [
        (5 * S, "connection_unblocked", "p/w/0"),  # unblock without block: ignored
        (10 * S, "connection_blocked", "p/w/0"),
        (11 * S, "connection_blocked", "p/w/0"),
        (13 * S, "connection_unblocked", "p/w/0"),
        (20 * S, "connection_blocked", "p/w/0"),  # never unblocked
        (12 * S, "connection_blocked", "p/w/1"),
        (12 * S + 5, "connection_unblocked", "p/w/1"),
    ]
    assert blocked_periods(events, end_ns=25 * S) == {
        "p/w/0": [(10 * S, 13 * S), (20 * S, 25 * S)],
        "p/w/1": [(12 * S, 12 * S + 5)],
    }


def test_the_block_sums_periods_and_waits_per_group(frame):
    publishes = frame(
        "publish",
        dict(message_id="a", producer="p/w/0", producer_group="p", intended_ns=0, publish_ns=0, blocked_ms=100.0),
        dict(message_id="b", producer="p/w/0", producer_group="p", intended_ns=0, publish_ns=0, blocked_ms=300.0),
        dict(
            message_id="c",
            producer="p/w/1",
            producer_group="p",
            intended_ns=0,
            publish_ns=0,
            blocked_ms=2000.0,
            outcome="blocked_timeout",
        ),
        dict(message_id="d", producer="p/w/1", producer_group="p", intended_ns=0, publish_ns=0),
        dict(message_id="e", producer="q/w/0", producer_group="q", intended_ns=0, publish_ns=0),
    )
    events = (  # the events' rows, as the job reads them
        dict(ts_ns=10 * S, kind="connection_blocked", source="p/w/0"),
        dict(ts_ns=12 * S, kind="connection_unblocked", source="p/w/0"),
        dict(ts_ns=11 * S, kind="connection_blocked", source="p/w/1"),
        dict(ts_ns=11 * S, kind="phase_start", source="runner"),
    )
    block = flow_control_block(cube(publishes, flow_control_projections()), events, end_ns=14 * S)
    assert set(block) == {"p"}  # q was never blocked: not listed
    p = block["p"]
    assert (p["blocked_periods"], p["blocked_s"], p["first_blocked_ns"]) == (2, 5.0, 10 * S)  # 2 s + 3 s
    assert (p["publishes_waited"], p["blocked_timeout"]) == (3, 1)
    assert p["blocked_ms"]["count"] == 3 and p["blocked_ms"]["p50"] == pytest.approx(300.0)
    assert p["blocked_ms"]["max"] == pytest.approx(2000.0)
