"""The replay plan: which rows each producer instance publishes, and when (expected values worked out by hand)."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from loadgen.replay import ReplayItem, ReplayTrace, expected_count, plan, slot_of

KEYS = ("orders.created", "orders.paid", "stock.changed", "audit", None)


def _trace(offsets, keys=None, path="t.csv") -> ReplayTrace:
    n = len(offsets)
    keys = keys if keys is not None else ("k",) * n
    return ReplayTrace(
        path=path,
        format="csv",
        offset_s=tuple(offsets),
        size_bytes=tuple(range(100, 100 + n)),
        routing_key=tuple(keys),
        priority=(None,) * n,
        processing_ms=(None,) * n,
        headers=(None,) * n,
        payload=(None,) * n,
    )


def _times(trace, **kwargs):
    kwargs.setdefault("duration_s", 1e6)
    return [(item.intended_s, item.index, item.loop) for item in plan(trace, slot=0, count=1, **kwargs)]


TRACE = _trace((0.0, 1.0, 3.0))  # span 3 s, three rows: looping without a window end uses period 3 * 3/2 = 4.5


# --- timing -----------------------------------------------------------------------------------


def test_one_pass_replays_the_rows_at_their_offsets():
    assert _times(TRACE) == [(0.0, 0, 0), (1.0, 1, 0), (3.0, 2, 0)]


def test_an_item_carries_its_row():
    trace = ReplayTrace(
        path="t",
        format="jsonl",
        offset_s=(0.0,),
        size_bytes=(7,),
        routing_key=("k",),
        priority=(3,),
        processing_ms=(2.5,),
        headers=({"a": 1},),
        payload=(b"xyz",),
    )
    (item,) = plan(trace, duration_s=10, slot=0, count=1)
    assert item == ReplayItem(0.0, 0, 0, 7, "k", 3, 2.5, {"a": 1}, b"xyz")


def test_speed_two_replays_twice_as_fast():
    assert _times(TRACE, speed=2.0) == [(0.0, 0, 0), (0.5, 1, 0), (1.5, 2, 0)]


def test_the_window_end_is_excluded():
    assert _times(TRACE, window=(0.0, 3.0)) == [(0.0, 0, 0), (1.0, 1, 0)]


def test_the_gap_between_window_start_and_first_row_is_kept():
    trace = _trace((0.0, 2.0, 3.0))
    assert _times(trace, window=(1.0, None)) == [(1.0, 1, 0), (2.0, 2, 0)]


def test_rows_at_or_after_the_run_end_are_not_planned():
    assert _times(TRACE, duration_s=3.0) == [(0.0, 0, 0), (1.0, 1, 0)]


def test_n_passes_without_window_end_keep_the_mean_rate():
    assert _times(TRACE, loop=2) == [(0.0, 0, 0), (1.0, 1, 0), (3.0, 2, 0), (4.5, 0, 1), (5.5, 1, 1), (7.5, 2, 1)]


def test_with_a_window_end_the_period_is_the_window():
    assert _times(TRACE, window=(0.0, 5.0), loop=2) == [
        (0.0, 0, 0),
        (1.0, 1, 0),
        (3.0, 2, 0),
        (5.0, 0, 1),
        (6.0, 1, 1),
        (8.0, 2, 1),
    ]


def test_loop_true_repeats_until_the_run_ends():
    # passes start at 0, 4.5, 9; the row at 9 + 1 = 10 is at the end, not before it
    assert _times(TRACE, loop=True, duration_s=10.0) == [
        (0.0, 0, 0),
        (1.0, 1, 0),
        (3.0, 2, 0),
        (4.5, 0, 1),
        (5.5, 1, 1),
        (7.5, 2, 1),
        (9.0, 0, 2),
    ]
    assert expected_count(TRACE, loop=True, duration_s=10.0) == 7


def test_speed_also_scales_the_loop_period():
    assert _times(TRACE, loop=True, duration_s=5.0, speed=2.0) == [
        (0.0, 0, 0),
        (0.5, 1, 0),
        (1.5, 2, 0),
        (2.25, 0, 1),
        (2.75, 1, 1),
        (3.75, 2, 1),
        (4.5, 0, 2),
    ]


def test_a_single_row_loops_with_a_window_end():
    assert _times(_trace((2.0,)), window=(0.0, 5.0), loop=True, duration_s=15.0) == [
        (2.0, 0, 0),
        (7.0, 0, 1),
        (12.0, 0, 2),
    ]


def test_loop_true_is_generated_lazily():
    items = plan(TRACE, duration_s=1e12, slot=0, count=1, loop=True)
    first = list(itertools.islice(items, 7))
    assert [i.intended_s for i in first] == [0.0, 1.0, 3.0, 4.5, 5.5, 7.5, 9.0]


# --- refusals ---------------------------------------------------------------------------------


def test_a_window_without_rows_names_the_window_and_the_span():
    with pytest.raises(ValueError, match=r"window \[3.5, 9\) selects no rows of t.csv \(its rows span \[0, 3\] s\)"):
        plan(TRACE, duration_s=10, slot=0, count=1, window=(3.5, 9.0))


def test_looping_a_single_row_needs_a_window_end():
    with pytest.raises(ValueError, match="give window end to loop a single row"):
        plan(_trace((2.0,)), duration_s=10, slot=0, count=1, loop=True)
    with pytest.raises(ValueError, match="give window end to loop a single row"):
        expected_count(_trace((1.0, 1.0)), duration_s=10, loop=2)
    assert expected_count(_trace((2.0,)), duration_s=10) == 1  # one pass needs no period


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(speed=0), "speed must be a number > 0, got 0"),
        (dict(speed=float("inf")), "speed must be a number > 0, got inf"),
        (dict(count=0), "count .* must be a whole number >= 1, got 0"),
        (dict(slot=2, count=2), "slot must be a whole number from 0 to 1, got 2"),
        (dict(split="hash"), "split must be one of key, round_robin, got 'hash'"),
        (dict(loop=0), "loop must be false, true or a whole number >= 1, got 0"),
        (dict(window=(2.0, 1.0)), r"window end must be a number > the start \(2.0\), got 1.0"),
        (dict(window=(-1.0, None)), "window start must be a number >= 0, got -1.0"),
        (dict(duration_s=0), "duration_s must be a number > 0, got 0"),
    ],
)
def test_bad_arguments_are_refused_naming_the_value(kwargs, message):
    args = dict(duration_s=10, slot=0, count=1) | kwargs
    with pytest.raises(ValueError, match=message):
        plan(TRACE, **args)


# --- splitting across producer instances ------------------------------------------------------


def test_the_key_split_is_sha256_of_the_routing_key():
    expected = int.from_bytes(hashlib.sha256(b"orders.created").digest()[:8], "big") % 7
    assert slot_of(123, "orders.created", 7, "key") == expected
    assert slot_of(0, None, 5, "key") == slot_of(9, "", 5, "key")


def test_round_robin_deals_rows_by_index():
    assert [slot_of(i, "same", 3, "round_robin") for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def _bursty_trace(seed: int = 3, n: int = 60) -> ReplayTrace:
    rng = random.Random(seed)
    offsets = sorted(round(rng.uniform(0.0, 10.0), 1) for _ in range(n))  # rounded: ties on purpose
    return _trace(offsets, [rng.choice(KEYS) for _ in range(n)])


@pytest.mark.parametrize("count", [1, 2, 3, 7])
@pytest.mark.parametrize("split", ["key", "round_robin"])
@pytest.mark.parametrize(
    ("loop", "window", "duration_s", "speed"),
    [
        (False, (0.0, None), 100.0, 1.0),
        (3, (2.0, 8.0), 100.0, 1.0),
        (True, (2.0, 8.0), 25.0, 1.5),
        (2, (0.0, None), 14.0, 1.0),
    ],
)
def test_all_slots_together_publish_every_planned_row_exactly_once(count, split, loop, window, duration_s, speed):
    trace = _bursty_trace()
    w0, w1 = window
    selected = [i for i, t in enumerate(trace.offset_s) if w0 <= t and (w1 is None or t < w1)]
    if w1 is not None:
        period = w1 - w0
    else:
        first, last = trace.offset_s[selected[0]], trace.offset_s[selected[-1]]
        period = (last - first) * len(selected) / (len(selected) - 1)
    passes = range(1000) if loop is True else range(1 if loop is False else loop)
    expected = {
        (i, k) for k in passes for i in selected if ((trace.offset_s[i] - w0) + k * period) / speed < duration_s
    }

    planned = []
    for slot in range(count):
        planned += [
            (item.index, item.loop)
            for item in plan(
                trace, duration_s=duration_s, slot=slot, count=count, speed=speed, window=window, loop=loop, split=split
            )
        ]
    assert len(planned) == len(set(planned))
    assert set(planned) == expected
    assert expected_count(trace, duration_s=duration_s, speed=speed, window=window, loop=loop) == len(expected)


@pytest.mark.parametrize("count", [2, 3, 7])
@pytest.mark.parametrize("split", ["key", "round_robin"])
def test_each_slot_publishes_in_time_order_ties_by_index(count, split):
    trace = _bursty_trace()
    for slot in range(count):
        items = list(plan(trace, duration_s=30, slot=slot, count=count, loop=True, split=split))
        keys = [(item.intended_s, item.loop, item.index) for item in items]
        assert keys == sorted(keys)


def test_the_key_split_keeps_each_routing_key_in_one_slot_in_order():
    trace = _bursty_trace()
    seen: dict[str | None, int] = {}
    for slot in range(3):
        by_key: dict[str | None, list[tuple[int, int]]] = {}
        for item in plan(trace, duration_s=30, slot=slot, count=3, loop=2):
            assert seen.setdefault(item.routing_key, slot) == slot  # no key is split across slots
            by_key.setdefault(item.routing_key, []).append((item.loop, item.index))
        for rows in by_key.values():
            assert rows == sorted(rows)  # the trace's order within the key, pass after pass
    assert set(seen) == set(trace.routing_key)


def test_round_robin_shares_a_pass_evenly():
    trace = _bursty_trace(n=60)
    sizes = [len(list(plan(trace, duration_s=100, slot=s, count=7, split="round_robin"))) for s in range(7)]
    assert sizes == [9, 9, 9, 9, 8, 8, 8]  # 60 rows dealt to 7 slots
