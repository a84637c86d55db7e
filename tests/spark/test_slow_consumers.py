"""Slow consumers: window full while the queue had messages ready, per sampled second."""

from __future__ import annotations

import json

import pytest

from analysis.events.queue import queue_samples
from analysis.summary.deliveries import delivery_rollup
from analysis.summary.slow_consumers import consumer_spans, slow_consumers_block as _block
from analysis.transforms import mark_measured, with_delivery_latencies

S = 1_000_000_000
T0 = 1_000 * S


def _sample(t_s: float, ready: int, unacked=None, consumers=3) -> dict:
    return dict(
        ts_ns=T0 + int(t_s * S),
        kind="queue_sample",
        source="sampler",
        name="q",
        value=float(ready),
        detail=json.dumps({"unacked": unacked, "consumers": consumers, "source": "declare", "took_ms": 1.5}),
    )


def _d(consumer: str, rx_s: float, settle_s: float | None, prefetch: int = 2, outcome: str = "ack") -> dict:
    return dict(
        message_id=f"{consumer}-{rx_s}",
        consumer=consumer,
        consumer_group=consumer.split("/")[0],
        receive_ns=T0 + int(rx_s * S),
        settle_ns=None if settle_s is None else T0 + int(settle_s * S),
        outcome=outcome if settle_s is not None or outcome != "ack" else "unsettled",
        prefetch=prefetch,
        # two phases, so that the spans rolled up from the cube's cells per phase have cells to combine
        phase="base" if rx_s < 0.55 else "busy",
    )


def _rollup(deliveries, sample_times=()):
    """The deliveries' cube as the job rolls it up."""
    prepared = deliveries.transform(with_delivery_latencies).transform(mark_measured(T0, "receive_ns"))
    return delivery_rollup(prepared, T0, [], (T0, T0 + 100 * S), sample_times)


def _activity(deliveries):
    """The deliveries' rows per consumer, as the job rolls them up from its cube."""
    return _rollup(deliveries).activity()


def slow_consumers_block(deliveries, events, t0_ns):
    """The block as the job computes it: from the cube's rows (keyed by the queue samples' times)
    and the events' rows."""
    event_rows = [r.asDict() for r in events.collect()]
    times = [s["ts_ns"] for s in queue_samples(event_rows)]
    rollup = _rollup(deliveries, times)
    return _block(event_rows, t0_ns, rollup.activity(), rollup.cells("outstanding") if times else [])


def _event(kind: str, t_s: float, name: str, value=None, detail=None) -> dict:
    return dict(
        ts_ns=T0 + int(t_s * S),
        kind=kind,
        source=name,
        name=name,
        value=value,
        detail=json.dumps(detail) if detail else None,
    )


# Samples at 1..10 s; nothing ready at 1..5 s, 4 ready at 6..10 s.
SAMPLES = [_sample(t, 0 if t <= 5 else 4) for t in range(1, 11)]


@pytest.fixture(scope="module")
def block(frame):
    deliveries = frame(
        "delivery",
        *(
            # A: both of its 2 slots held from 0.5 s to 20 s: full at every sample, slow at 6..10 -> 5/10
            _d("a/w/0", 0.5, 20),
            _d("a/w/0", 0.6, 20),
            # B: full only from 5.5 s to 8.5 s -> slow at 6, 7, 8 -> 3/10
            _d("b/w/0", 0.5, 20),
            _d("b/w/0", 5.5, 8.5),
            # C: full at 2..5 s, when nothing was ready: never slow (sampled 1..5 in its span, 0.5-5.5 s)
            _d("c/w/0", 0.5, 5.5),
            _d("c/w/0", 1.5, 5.5),
            # F, prefetch 1: received exactly at 6 s (counts at 6), settled exactly at 8 s (not at 8)
            # span 6..8 s -> samples 6, 7, 8 -> slow at 6 and 7 -> 2/3
            _d("f/w/0", 6, 8, prefetch=1),
            # I and J, prefetch 1, one sample each in their spans: I received exactly at 9 s (full
            # there: slow), J settled exactly at 10 s (empty there: not slow)
            _d("i/w/0", 9, 9.5, prefetch=1),
            _d("j/w/0", 9.2, 10, prefetch=1),
            # G, prefetch 1: never settled; its leave at 7.5 s ends it -> samples 1..7, slow at 6, 7 -> 2/7
            _d("g/w/0", 0.5, None, prefetch=1),
            # H: prefetch 3 with 2 held until 20 s; a phase narrows it to 2 at 8.5 s -> slow at 9, 10 -> 2/10
            _d("h/w/0", 0.5, 20, prefetch=3),
            _d("h/w/0", 0.6, 20, prefetch=3),
            # excluded: auto-ack, and prefetch 0 (unlimited)
            _d("d/w/0", 0.5, 0.5, prefetch=2, outcome="auto_ack"),
            _d("e/w/0", 0.5, 20, prefetch=0),
        ),
    )
    events = frame(
        "event",
        *SAMPLES,
        _event("consumer_join", 0.5, "g/w/0", detail={"prefetch": 1, "ack_mode": "manual"}),
        _event("consumer_leave", 7.5, "g/w/0"),
        _event("consumer_join", 0.1, "h/w/0", detail={"prefetch": 3, "ack_mode": "manual"}),
        _event("prefetch_change", 8.5, "h/w/0", value=2.0, detail={"from": 3, "to": 2}),
        _event("phase_start", 8.5, "runner"),
    )
    return slow_consumers_block(deliveries, events, T0)


def _by_consumer(block) -> dict:
    return {c["consumer"]: c for c in block["consumers"]}


def test_a_full_window_counts_only_while_messages_are_ready(block):
    rows = _by_consumer(block)
    assert (rows["a/w/0"]["seconds_sampled"], rows["a/w/0"]["slow_seconds"]) == (10, 5)
    assert rows["a/w/0"]["share"] == pytest.approx(0.5)
    assert (rows["b/w/0"]["seconds_sampled"], rows["b/w/0"]["slow_seconds"]) == (10, 3)


def test_a_window_full_while_the_queue_is_empty_is_not_slow(block):
    c = _by_consumer(block)["c/w/0"]
    assert (c["seconds_sampled"], c["slow_seconds"], c["share"]) == (5, 0, 0.0)


def test_received_at_the_sample_counts_and_settled_at_the_sample_does_not(block):
    f = _by_consumer(block)["f/w/0"]
    assert (f["seconds_sampled"], f["slow_seconds"]) == (3, 2)


def test_a_time_equal_to_a_samples_is_before_it_each_way(block):
    rows = _by_consumer(block)
    assert (rows["i/w/0"]["seconds_sampled"], rows["i/w/0"]["slow_seconds"]) == (1, 1)
    assert (rows["j/w/0"]["seconds_sampled"], rows["j/w/0"]["slow_seconds"]) == (1, 0)


def test_an_unsettled_delivery_counts_until_the_consumer_leaves(block):
    g = _by_consumer(block)["g/w/0"]
    assert (g["seconds_sampled"], g["slow_seconds"]) == (7, 2)


def test_a_prefetch_change_moves_the_threshold(block):
    h = _by_consumer(block)["h/w/0"]
    assert (h["seconds_sampled"], h["slow_seconds"]) == (10, 2)


def test_consumers_without_a_window_are_excluded_and_named(block):
    assert {c["consumer"] for c in block["consumers"]} == {
        "a/w/0",
        "b/w/0",
        "c/w/0",
        "f/w/0",
        "g/w/0",
        "h/w/0",
        "i/w/0",
        "j/w/0",
    }
    assert block["excluded"] == [
        {"consumer": "d/w/0", "group": "d", "reason": "auto_ack"},
        {"consumer": "e/w/0", "group": "e", "reason": "no prefetch limit"},
    ]


def test_the_list_is_sorted_worst_first(block):
    # worst-minute shares (one minute here): i 1/1, f 2/3, a 5/10, b 3/10, g 2/7, h 2/10, c 0, j 0/1
    # (equal shares: by consumer)
    assert [c["consumer"] for c in block["consumers"]] == [
        "i/w/0",
        "f/w/0",
        "a/w/0",
        "b/w/0",
        "g/w/0",
        "h/w/0",
        "c/w/0",
        "j/w/0",
    ]
    assert block["samples"] == 10 and block["source"] == "declare"
    assert block["sample_took_ms"]["max"] == pytest.approx(1.5)


def test_shares_are_kept_per_minute_of_run_time(frame):
    # 120 samples (0..119 s), always 1 ready. Present from 0 s (join) to 119.5 s (leave);
    # its one slot held from 30.5 s to 90.5 s: minute 0 has 31..59 -> 29/60, minute 1 60..90 -> 31/60.
    deliveries = frame("delivery", _d("x/w/0", 30.5, 90.5, prefetch=1))
    events = frame(
        "event",
        *(_sample(t, 1) for t in range(120)),
        _event("consumer_join", 0, "x/w/0", detail={"prefetch": 1}),
        _event("consumer_leave", 119.5, "x/w/0"),
    )
    x = slow_consumers_block(deliveries, events, T0)["consumers"][0]
    assert [(m["minute"], m["sampled"], m["slow"]) for m in x["minutes"]] == [(0, 60, 29), (1, 60, 31)]
    assert x["worst_minute"] == {"minute": 1, "share": pytest.approx(31 / 60)}
    assert x["share"] == pytest.approx(60 / 120)


def test_no_samples_no_block(frame):
    deliveries = frame("delivery", _d("a/w/0", 0.5, 20))
    events = frame("event", _event("consumer_join", 0, "a/w/0", detail={"prefetch": 2}))
    assert slow_consumers_block(deliveries, events, T0) == {}


def test_several_samples_in_one_second_each_see_only_what_came_before_them(frame):
    """Five samples in one second (a sampler catching up) and two in another: each reads the window
    as of its own time (the second's sample times are compared one by one)."""
    deliveries = frame(
        "delivery",
        _d("x/w/0", 3.25, 3.45, prefetch=1),  # held 3.25-3.45 s
        _d("x/w/0", 5.3, 7.0, prefetch=1),
    )  # held 5.3-7.0 s
    samples = [_sample(t, 5) for t in (3.1, 3.2, 3.3, 3.4, 3.5, 5.1, 5.6)]
    block = slow_consumers_block(deliveries, frame("event", *samples), T0)
    [row] = block["consumers"]
    # In its span (3.25-7.0 s): 3.3 and 3.4 full, 3.5 and 5.1 empty, 5.6 full.
    assert (row["seconds_sampled"], row["slow_seconds"]) == (5, 3)


def test_a_span_runs_from_the_first_join_or_receive_to_the_last_leave_receive_or_settle(frame):
    deliveries = frame(
        "delivery",
        _d("a/w/0", 0.5, 9),  # base; busy holds the last receive (3 s) but an earlier settle (4 s)
        _d("a/w/0", 3, 4),
        _d("b/w/0", 0.5, None, prefetch=3),  # never settled: its span ends at its last receive
        _d("b/w/0", 2, None, prefetch=1),
        _d("d/w/0", 1, 1, outcome="auto_ack"),
    )
    events = [_event("consumer_join", 0.2, "a/w/0"), _event("consumer_leave", 8, "b/w/0")]
    spans = {r["consumer"]: r for r in consumer_spans(_activity(deliveries), events)}
    assert spans["a/w/0"] == dict(consumer="a/w/0", group="a", excluded=None, from_ns=T0 + S // 5, to_ns=T0 + 9 * S)
    assert spans["b/w/0"] == dict(consumer="b/w/0", group="b", excluded=None, from_ns=T0 + S // 2, to_ns=T0 + 8 * S)
    assert spans["d/w/0"]["excluded"] == "auto_ack"
