"""The capacity check on a stream (loadgen.scenario.capacity): every consumer group reads every
message, so each must take the whole offered rate alone; the groups of any other queue share it.
The arithmetic of docs/queueing.md worked out here: per consumer min(prefetch / R, 1 / p) with
R = p + LOOPBACK_ROUND_TRIP_MS (no network section), in msg/s; a saturated consumer's buffer wait
(prefetch - R/p) x p."""

from __future__ import annotations

import pytest

from loadgen.cli import main
from loadgen.scenario import load_scenario
from loadgen.scenario.capacity import LOOPBACK_ROUND_TRIP_MS, capacity_records, capacity_rows, capacity_warnings

OFFERED = 500.0  # msg/s, one producer
DURATION_S = 60

# fast: 50 in flight at R = 1.2 ms allow 41.7/ms, the 1 ms processing 1/ms: 1,000/s
FAST = {"prefetch": 50, "processing_ms": 1.0}
# slow: one in flight at R = 2.2 ms: 1/2.2 per ms, 454.5/s (the prefetch bounds it, below 1 / p = 500/s)
SLOW = {"prefetch": 1, "processing_ms": 2.0}


def _per_consumer_per_s(prefetch: int, processing_ms: float) -> float:
    r = processing_ms + LOOPBACK_ROUND_TRIP_MS
    return min(prefetch / r, 1 / processing_ms) * 1000


def _shown(x: float) -> str:
    """A number as the check prints it: whole and with thousands separators from 100, else 3 digits."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _group(name: str, spec: dict, extra: str = "") -> str:
    return f"  - {{name: {name}, prefetch: {spec['prefetch']}, processing_ms: {spec['processing_ms']}{extra}}}\n"


def _scenario(tmp_path, queue: str, consumers: str, extra: str = ""):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\nqueue: {queue}\nrun: {{duration_s: {DURATION_S}}}\n"
        f"producers: [{{name: p, rate: {OFFERED:g}}}]\nconsumers:\n{consumers}{extra}"
    )
    return load_scenario(path, env={})


STREAM = "{name: sojourn.unit.capacity-stream, type: stream}"
CLASSIC = "{name: sojourn.unit.capacity-classic}"
TWO_GROUPS = _group("fast", FAST) + _group("slow", SLOW)


def test_the_arithmetic_of_the_two_groups_is_what_the_comments_say():
    assert _per_consumer_per_s(**FAST) == pytest.approx(1000)
    assert _per_consumer_per_s(**SLOW) == pytest.approx(1000 / 2.2)  # 454.5/s
    assert _per_consumer_per_s(**SLOW) < OFFERED < _per_consumer_per_s(**FAST)


def test_on_a_stream_each_group_must_take_the_whole_offered_rate_alone(tmp_path):
    fast, slow = capacity_rows(_scenario(tmp_path, STREAM, TWO_GROUPS))
    cap_fast, cap_slow = _per_consumer_per_s(**FAST), _per_consumer_per_s(**SLOW)
    assert (fast.group, slow.group) == ("fast", "slow")
    for row, own in ((fast, cap_fast), (slow, cap_slow)):
        assert row.reads_all is True
        assert row.offered_per_s == OFFERED  # each group is offered every message
        assert row.capacity_per_s == pytest.approx(own)
        assert row.queue_capacity_per_s == pytest.approx(own)  # its own, not the 1,454.5/s of both
        assert row.utilisation == pytest.approx(OFFERED / own)
    assert fast.utilisation == pytest.approx(0.5)
    assert slow.utilisation == pytest.approx(1.1)
    assert fast.backlog_growth_per_s == 0
    assert slow.backlog_growth_per_s == pytest.approx(OFFERED - cap_slow)  # 45.5/s


def test_run_json_records_that_each_group_reads_every_message(tmp_path):
    records = capacity_records(capacity_rows(_scenario(tmp_path, STREAM, TWO_GROUPS)))
    cap_slow = _per_consumer_per_s(**SLOW)
    assert [r["reads_all"] for r in records] == [True, True]
    slow = records[1]
    assert (slow["group"], slow["queue_capacity_per_s"]) == ("slow", pytest.approx(cap_slow))
    assert slow["utilisation"] == pytest.approx(OFFERED / cap_slow)
    assert slow["backlog_growth_per_s"] == pytest.approx(OFFERED - cap_slow)


def test_only_the_group_slower_than_the_offered_rate_is_warned_about_with_how_far_it_falls_behind(tmp_path):
    rows = capacity_rows(_scenario(tmp_path, STREAM, TWO_GROUPS))
    behind = OFFERED - _per_consumer_per_s(**SLOW)  # 45.45/s, 2,727 messages over the 60 s
    (warning,) = capacity_warnings(rows)
    assert warning == (
        f"phase base (0-{DURATION_S} s): the producers offer {_shown(OFFERED)} msg/s to the stream, more than "
        f"consumer group slow can read ({_shown(_per_consumer_per_s(**SLOW))} msg/s): it falls behind by "
        f"{_shown(behind)} msg/s, {_shown(behind * DURATION_S)} messages by the phase's end"
    )
    assert "falls behind by 45.5 msg/s, 2,727 messages" in warning  # the same, as a reader sees it
    assert "fast" not in warning


def test_a_stream_group_that_falls_behind_has_a_full_buffer_though_the_groups_together_would_keep_up(tmp_path):
    # prefetch 10, p = 2.5 ms: R = 2.7 ms, R/p = 1.08 < 10: 1/p = 400/s with (10 - 1.08) x 2.5 = 22.3 ms in
    # the buffer. Beside the fast group a classic queue would take 1,400/s, unsaturated: no wait.
    queued = {"prefetch": 10, "processing_ms": 2.5}
    r = 2.5 + LOOPBACK_ROUND_TRIP_MS
    consumers = _group("fast", FAST) + _group("queued", queued)
    _, on_stream = capacity_rows(_scenario(tmp_path, STREAM, consumers))
    assert on_stream.capacity_per_s == pytest.approx(400)
    assert on_stream.buffer_wait_ms == pytest.approx((10 - r / 2.5) * 2.5)
    _, on_classic = capacity_rows(_scenario(tmp_path, CLASSIC, consumers))
    assert on_classic.queue_capacity_per_s == pytest.approx(1400)
    assert on_classic.buffer_wait_ms == 0


def test_a_group_that_reads_nothing_in_a_phase_is_warned_about_with_the_messages_that_wait_for_it(tmp_path):
    # audit joins at 30 s: for the first 30 s the stream keeps 500 x 30 = 15,000 messages it has not read
    joins_s = 30
    consumers = _group("live", FAST) + _group("audit", FAST, ", count: 0, offset: first")
    timeline = f"timeline:\n  - {{name: audit-joins, start_s: {joins_s}, set: {{consumers.audit.count: 1}}}}\n"
    rows = capacity_rows(_scenario(tmp_path, STREAM, consumers, timeline))
    by = {(r.phase, r.group): r for r in rows}
    assert set(by) == {("base", "live"), ("base", "audit"), ("audit-joins", "live"), ("audit-joins", "audit")}
    idle = by["base", "audit"]
    assert (idle.consumers, idle.capacity_per_s, idle.queue_capacity_per_s) == (0, 0, 0)
    assert idle.backlog_growth_per_s == OFFERED
    assert by["base", "live"].queue_capacity_per_s == pytest.approx(_per_consumer_per_s(**FAST))  # not 0
    assert by["audit-joins", "audit"].queue_capacity_per_s == pytest.approx(_per_consumer_per_s(**FAST))
    waiting = OFFERED * joins_s
    assert capacity_warnings(rows) == [
        f"phase base (0-{joins_s} s): consumer group audit reads nothing (count 0): it reads the "
        f"{_shown(waiting)} messages published meanwhile only if it starts from an offset before them "
        "(offset: first, or an offset or time)"
    ]
    assert "the 15,000 messages" in capacity_warnings(rows)[0]


def test_on_a_classic_queue_the_same_groups_share_the_offered_rate(tmp_path):
    fast, slow = capacity_rows(_scenario(tmp_path, CLASSIC, TWO_GROUPS))
    cap_fast, cap_slow = _per_consumer_per_s(**FAST), _per_consumer_per_s(**SLOW)
    for row, own in ((fast, cap_fast), (slow, cap_slow)):
        assert row.reads_all is False
        assert row.capacity_per_s == pytest.approx(own)
        assert row.queue_capacity_per_s == pytest.approx(cap_fast + cap_slow)  # 1,454.5/s together
        assert row.utilisation == pytest.approx(OFFERED / (cap_fast + cap_slow))
        assert row.backlog_growth_per_s == 0
    assert capacity_warnings([fast, slow]) == []  # the slow group's 454.5/s is no problem when shared


def test_validate_warns_about_the_group_that_falls_behind_the_stream_and_exits_0(tmp_path, capsys):
    s = _scenario(tmp_path, STREAM, TWO_GROUPS)
    assert main(["validate", s.source_path]) == 0
    out = capsys.readouterr()
    assert "capacity check" in out.out
    table = {line.split()[3]: line.split() for line in out.out.splitlines() if line.startswith("  base ")}
    # phase, window, group, offered, capacity, utilisation against its own capacity: 500 / 1,000 and 500 / 454.5
    assert table["fast"][4:8] == ["500", "1,000", "50", "%"]
    assert table["slow"][4:8] == ["500", "455", "110", "%"]
    assert "warning: phase base (0-60 s): the producers offer 500 msg/s to the stream" in out.err
    assert "more than consumer group slow can read (455 msg/s)" in out.err
    assert "consumer group fast" not in out.err
