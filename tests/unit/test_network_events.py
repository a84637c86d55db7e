"""The summary's network block from the events' rows without Spark (analysis.events.network): the cases of
tests/spark/test_network.py, and how Spark's from_json, min_by, countDistinct and round read the details."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from analysis.events.network import DIRECTIONS, MEASUREMENT_FIELDS, NETWORK_EVENT_KINDS, network_block

T0 = 1_000_000_000_000
S = 1_000_000_000

Event = dict[str, Any]


def link(latency_ms: float, jitter_ms: float = 0.0, bandwidth: float | None = None) -> dict[str, Any]:
    return {"latency_ms": latency_ms, "jitter_ms": jitter_ms, "bandwidth_bytes_per_s": bandwidth}


def step(
    at_s: float, phase: str, up: dict, down_link: dict, down: bool = False, reset_peer: bool = False
) -> dict[str, Any]:
    return {
        "at_s": at_s,
        "phase": phase,
        "upstream": up,
        "downstream": down_link,
        "down": down,
        "reset_peer": reset_peer,
    }


def event(kind: str, at_ns: int, detail: Any, worker: str | None = "netem-a", name: str = "") -> Event:
    """A row of the events trace; `detail` is dumped to JSON unless it is already a string (or None)."""
    return {
        "schema_version": 5,
        "run_id": "run-1",
        "worker": worker,
        "ts_ns": at_ns,
        "kind": kind,
        "source": "netem",
        "name": name,
        "value": None,
        "detail": detail if detail is None or isinstance(detail, str) else json.dumps(detail),
    }


def change_events(worker: str, offset_ns: int) -> list[Event]:
    """What one proxy records for: 50 ms each way; 100 ms from 20 s; down 40-45 s; reset at 50 s."""
    base = step(0.0, "base", link(50), link(50))
    slow = step(20.0, "slow", link(100), link(100, 5))
    cut = step(40.0, "cut", link(50), link(50), down=True)
    back = step(45.0, "base", link(50), link(50))
    rst = step(50.0, "rst", link(50), link(50), reset_peer=True)

    def at(s: float) -> int:
        return T0 + int(s * S) + offset_ns

    return [
        event("network_change", at(0.2), base, worker),
        event("network_change", at(20), slow, worker),
        event("network_change", at(40), cut, worker),
        event("network_down", at(40), cut, worker),
        event("network_change", at(45), back, worker),
        event("network_up", at(45), back, worker),
        event("network_change", at(50), rst, worker),
        event("network_reset", at(50), rst, worker),
    ]


def stats(
    scope: str,
    direction: str,
    count: Any,
    p50: Any,
    p99: Any,
    worst: Any,
    worker: str | None = "netem-a",
    at_s: Any = None,
    delay_p50: Any = None,
    **fields: Any,
) -> Event:
    detail = {
        "scope": scope,
        "direction": direction,
        "count": count,
        "bytes": count * 100 if isinstance(count, int) else 0,
        "dropped": 0,
        "error_p50_ms": p50,
        "error_p99_ms": p99,
        "error_max_ms": worst,
        "delay_p50_ms": delay_p50,
        "delay_p99_ms": delay_p50,
        "delay_mean_ms": delay_p50,
        **fields,
    }
    if at_s is not None:
        detail["at_s"] = at_s
    return event("proxy_stats", T0 + 60 * S, detail, worker, name=direction)


def periods(events: list[Event], end_s: float = 60) -> list[dict[str, Any]]:
    block = network_block(events, T0, end_s)
    assert block is not None
    return block["periods"]


def run_proxy(*measurements: Event) -> dict[str, Any]:
    """The block's `proxy` of one proxy's timeline and these proxy_stats events."""
    block = network_block([*change_events("netem-a", 0), *measurements], T0, 60)
    assert block is not None
    return block["proxy"]


# The cases of tests/spark/test_network.py


def test_each_timeline_step_is_one_period_even_when_two_proxies_recorded_it() -> None:
    events = [*change_events("netem-a", 0), *change_events("netem-b", 3_000_000)]
    rows = periods(events, 63.5)
    assert [(r["start_s"], r["end_s"], r["phase"], r["down"], r["reset"]) for r in rows] == [
        (0.0, 20.0, "base", False, False),
        (20.0, 40.0, "slow", False, False),
        (40.0, 45.0, "cut", True, False),
        (45.0, 50.0, "base", False, False),
        (50.0, 63.5, "rst", False, True),
    ]  # the last period ends with the run


def test_a_period_carries_the_settings_of_each_direction() -> None:
    slow = periods(change_events("netem-a", 0))[1]
    assert (slow["upstream"]["latency_ms"], slow["upstream"]["jitter_ms"]) == (100.0, 0.0)
    assert (slow["downstream"]["latency_ms"], slow["downstream"]["jitter_ms"]) == (100.0, 5.0)
    assert slow["upstream"]["bandwidth_bytes_per_s"] is None and slow["upstream"]["measured"] is None


def test_a_period_shows_what_the_proxy_measured_in_it() -> None:
    events = [
        *change_events("netem-a", 0),
        stats("period", "downstream", 400, 0.1, 0.8, 2.0, at_s=20.0, delay_p50=100.1),
    ]
    slow = periods(events)[1]
    assert slow["downstream"]["measured"]["count"] == 400
    assert slow["downstream"]["measured"]["delay_p50_ms"] == pytest.approx(100.1)
    assert slow["upstream"]["measured"] is None
    assert slow["downstream"]["measured"] == {
        "proxies": 1,
        "count": 400,
        "bytes": 40_000,
        "dropped": 0,
        "error_p50_ms": 0.1,
        "error_p99_ms": 0.8,
        "error_max_ms": 2.0,
        "delay_p50_ms": 100.1,
        "delay_p99_ms": 100.1,
        "delay_mean_ms": 100.1,
    }


def test_two_proxies_measurements_add_counts_weight_p50s_and_keep_the_worst_p99() -> None:
    proxy = run_proxy(
        stats("run", "upstream", 300, 0.1, 0.5, 3.0, worker="netem-a"),
        stats("run", "upstream", 100, 0.5, 0.9, 1.0, worker="netem-b"),
        stats("run", "downstream", 50, 0.2, 0.4, 0.6, worker="netem-a"),
        stats("period", "upstream", 999, 9.0, 9.0, 9.0, worker="netem-a", at_s=0.0),
    )
    up = proxy["upstream"]
    assert (up["proxies"], up["count"], up["bytes"]) == (2, 400, 40_000)
    assert up["error_p50_ms"] == pytest.approx((300 * 0.1 + 100 * 0.5) / 400)  # 0.2
    assert up["error_p50_ms"] == 0.2  # rounded to 4 decimals
    assert (up["error_p99_ms"], up["error_max_ms"]) == (0.9, 3.0)
    assert proxy["downstream"]["count"] == 50


def test_the_network_block_is_null_for_a_run_without_the_proxy() -> None:
    events = [{**event("phase_start", T0, None, worker="w:1", name="slow"), "source": "runner"}]
    assert network_block(events, T0, 60) is None
    assert network_block([], T0, 60) is None


def test_the_network_block_lists_periods_and_the_proxys_run_totals() -> None:
    events = [
        *change_events("netem-a", 0),
        stats("run", "upstream", 10, 0.1, 0.2, 0.3),
        stats("run", "downstream", 20, 0.1, 0.2, 0.3),
    ]
    block = network_block(events, T0, 60, ended_ns=T0 + 64 * S)
    assert block is not None
    assert [p["phase"] for p in block["periods"]] == ["base", "slow", "cut", "base", "rst"]
    assert block["periods"][-1]["end_s"] == 64.0
    assert block["periods"][2]["downstream"]["latency_ms"] == 50.0
    assert block["proxy"]["upstream"]["count"] == 10 and block["proxy"]["downstream"]["count"] == 20
    assert "direction" not in block["proxy"]["upstream"]


# The block's shape: what network_summary's rows gave with asDict(recursive=True)


def test_the_block_has_the_summarys_keys_in_order_and_its_types() -> None:
    events = [
        event("network_change", T0 + S // 5, step(0, "base", link(50), link(50, 2))),
        event("network_change", T0 + 30 * S, step(30, "thin", link(100), link(50, 0, 20_000))),
        event("network_reset", T0 + 30 * S, step(30, "thin", link(100), link(50, 0, 20_000))),
        stats("period", "upstream", 10, 0.05, 0.2, 1, at_s=0, delay_p50=50.06),
        stats("run", "upstream", 30, 0.05, 0.2, 1, delay_p50=61.0),
    ]
    block = network_block(events, T0, 60, ended_ns=T0 + 61_500_000_000)
    measured_0 = {
        "proxies": 1,
        "count": 10,
        "bytes": 1000,
        "dropped": 0,
        "error_p50_ms": 0.05,
        "error_p99_ms": 0.2,
        "error_max_ms": 1.0,
        "delay_p50_ms": 50.06,
        "delay_p99_ms": 50.06,
        "delay_mean_ms": 50.06,
    }
    run_delays = {"delay_p50_ms": 61.0, "delay_p99_ms": 61.0, "delay_mean_ms": 61.0}
    assert block == {
        "periods": [
            {
                "start_s": 0.0,
                "end_s": 30.0,
                "phase": "base",
                "down": False,
                "reset": False,
                "upstream": {
                    "latency_ms": 50.0,
                    "jitter_ms": 0.0,
                    "bandwidth_bytes_per_s": None,
                    "measured": measured_0,
                },
                "downstream": {"latency_ms": 50.0, "jitter_ms": 2.0, "bandwidth_bytes_per_s": None, "measured": None},
            },
            {
                "start_s": 30.0,
                "end_s": 61.5,
                "phase": "thin",
                "down": False,
                "reset": True,
                "upstream": {"latency_ms": 100.0, "jitter_ms": 0.0, "bandwidth_bytes_per_s": None, "measured": None},
                "downstream": {
                    "latency_ms": 50.0,
                    "jitter_ms": 0.0,
                    "bandwidth_bytes_per_s": 20_000.0,
                    "measured": None,
                },
            },
        ],
        "proxy": {"upstream": {**measured_0, "count": 30, "bytes": 3000, **run_delays}, "downstream": None},
    }
    assert block is not None
    assert list(block) == ["periods", "proxy"]
    first = block["periods"][0]
    assert list(first) == ["start_s", "end_s", "phase", "down", "reset", *DIRECTIONS]
    assert list(first["upstream"]) == ["latency_ms", "jitter_ms", "bandwidth_bytes_per_s", "measured"]
    assert list(first["upstream"]["measured"]) == list(MEASUREMENT_FIELDS)
    assert list(block["proxy"]) == list(DIRECTIONS)
    assert list(block["proxy"]["upstream"]) == list(MEASUREMENT_FIELDS)
    # doubles are floats even where the JSON had integers (at_s 0, error_max_ms 1), longs are ints
    assert all(type(first[k]) is float for k in ("start_s", "end_s"))
    assert all(type(v) is float for k, v in first["upstream"]["measured"].items() if k.endswith("_ms"))
    assert all(type(first["upstream"]["measured"][k]) is int for k in ("proxies", "count", "bytes", "dropped"))
    assert type(first["down"]) is bool and type(first["reset"]) is bool


def test_the_constants() -> None:
    assert NETWORK_EVENT_KINDS == ("network_change", "network_down", "network_up", "network_reset")
    assert DIRECTIONS == ("upstream", "downstream")
    assert MEASUREMENT_FIELDS[0] == "proxies" and len(MEASUREMENT_FIELDS) == 10


# The end of the last period


@pytest.mark.parametrize(
    ("duration_s", "ended_ns", "end_s"),
    [
        (60, None, 60.0),
        (60, 0, 60.0),  # not known
        (60, T0 + 64 * S, 64.0),
        (60, T0 + 58 * S, 60.0),  # never before the duration
        (60.5, T0 + 60 * S, 60.5),
    ],
)
def test_the_last_period_ends_with_the_run(duration_s: float, ended_ns: int | None, end_s: float) -> None:
    block = network_block(change_events("netem-a", 0), T0, duration_s, ended_ns)
    assert block is not None
    assert block["periods"][-1]["end_s"] == end_s and type(block["periods"][-1]["end_s"]) is float


def test_a_step_scheduled_after_the_run_ends_where_it_starts() -> None:
    events = [
        event("network_change", T0, step(0, "base", link(5), link(5))),
        event("network_change", T0 + 70 * S, step(70, "late", link(5), link(5))),
    ]
    assert [(p["start_s"], p["end_s"]) for p in periods(events, 60)] == [(0.0, 70.0), (70.0, 70.0)]


# Several proxies, and min_by


def test_a_step_takes_the_state_of_the_earliest_record_whatever_the_rows_order() -> None:
    late = event("network_change", T0 + 2 * S, step(10, "second", link(7), link(8)), worker="netem-b")
    early = event("network_change", T0 + S, step(10, "first", link(1), link(2), down=True), worker="netem-a")
    for events in ([late, early], [early, late]):
        (only,) = periods(events)
        assert (only["phase"], only["down"], only["upstream"]["latency_ms"]) == ("first", True, 1.0)


def test_proxies_counts_distinct_workers_and_not_a_null_one() -> None:
    proxy = run_proxy(
        stats("run", "upstream", 10, 0.1, 0.2, 0.3, worker="netem-a"),
        stats("run", "upstream", 20, 0.1, 0.2, 0.3, worker="netem-a"),
        stats("run", "upstream", 5, 0.1, 0.2, 0.3, worker=None),
    )
    assert (proxy["upstream"]["proxies"], proxy["upstream"]["count"]) == (1, 35)
    assert proxy["downstream"] is None


def test_the_period_measurements_of_several_proxies_are_combined_per_step_and_direction() -> None:
    events = [
        *change_events("netem-a", 0),
        *change_events("netem-b", 1000),
        stats("period", "upstream", 100, 0.1, 0.3, 0.5, worker="netem-a", at_s=20.0, delay_p50=100.0),
        stats("period", "upstream", 300, 0.3, 0.7, 0.6, worker="netem-b", at_s=20, delay_p50=100.2),
        stats("period", "upstream", 7, 9.0, 9.0, 9.0, worker="netem-b"),  # no at_s: no period
        stats("period", "sideways", 7, 9.0, 9.0, 9.0, worker="netem-b", at_s=20.0),
    ]
    rows = periods(events)
    assert rows[1]["upstream"]["measured"] == {
        "proxies": 2,
        "count": 400,
        "bytes": 40_000,
        "dropped": 0,
        "error_p50_ms": 0.25,  # (100 x 0.1 + 300 x 0.3) / 400
        "error_p99_ms": 0.7,
        "error_max_ms": 0.6,
        "delay_p50_ms": 100.15,  # (100 x 100.0 + 300 x 100.2) / 400
        "delay_p99_ms": 100.2,
        "delay_mean_ms": 100.15,
    }
    assert [r["upstream"]["measured"] is None for r in rows] == [True, False, True, True, True]
    assert all(r["downstream"]["measured"] is None for r in rows)


# Rounding and the weighted means


def test_a_weighted_mean_on_a_five_in_the_fifth_decimal_rounds_half_up() -> None:
    proxy = run_proxy(
        stats("run", "upstream", 1, 1.0, 1.0, 1.0, worker="netem-a", delay_mean_ms=0.00015),
        stats("run", "upstream", 1, 0.0001, 1.0, 1.0, worker="netem-b", delay_mean_ms=0.00015),
    )
    assert (1.0 * 1 + 0.0001 * 1) / 2 == 0.50005  # what Spark rounds, printed as it prints it
    assert round(0.50005, 4) == 0.5  # Python's round works on the binary value, below the half
    assert proxy["upstream"]["error_p50_ms"] == 0.5001
    assert proxy["upstream"]["delay_mean_ms"] == 0.0002  # 0.00015 HALF_UP, where round() gives 0.0001
    assert proxy["upstream"]["delay_p50_ms"] is None  # no value at all: a sum over nothing is null


def test_a_mean_without_weight_is_null_and_a_null_value_weighs_nothing() -> None:
    proxy = run_proxy(
        stats("run", "upstream", 0, 0.3, 0.5, 0.5, worker="netem-a"),
        stats("run", "downstream", 10, None, 0.5, None, worker="netem-a", delay_p50=2.0),
        stats("run", "downstream", 30, 0.4, None, None, worker="netem-b", delay_p50=None),
    )
    up, down = proxy["upstream"], proxy["downstream"]
    assert (up["count"], up["error_p50_ms"], up["error_p99_ms"]) == (0, None, 0.5)
    assert down["count"] == 40
    assert down["error_p50_ms"] == 0.4  # netem-a's null p50 weighs nothing: 30 x 0.4 / 30
    assert down["delay_p50_ms"] == 2.0  # and netem-b's: 10 x 2.0 / 10
    assert (down["error_p99_ms"], down["error_max_ms"]) == (0.5, None)


# from_json: how the details are read


@pytest.mark.parametrize(
    "detail",
    [
        "not json",
        '{"at_s": 5',  # cut short
        '{"at_s": 5,}',
        "[1, 2]",
        '[{"at_s": 5}]',  # an array is no object, even of one
        '"text"',
        "5",
        "null",
        "",
        "   ",
        None,
    ],
)
def test_a_detail_that_is_not_a_json_object_reads_as_null(detail: str | None) -> None:
    events = [event("network_change", T0, detail)]
    assert network_block(events, T0, 60) is None
    events += [event("network_change", T0 + S, step(1, "ok", link(1), link(1))), event("network_reset", T0, detail)]
    (only,) = periods(events)
    assert (only["start_s"], only["phase"], only["reset"]) == (1.0, "ok", False)
    proxy = run_proxy(event("proxy_stats", T0, detail), stats("run", "upstream", 10, 0.1, 0.2, 0.3))
    assert (proxy["upstream"]["proxies"], proxy["upstream"]["count"]) == (1, 10)


def test_a_change_without_at_s_is_no_step() -> None:
    events = [
        event("network_change", T0, {"phase": "nowhen"}),
        event("network_change", T0, {"at_s": None, "phase": "null"}),
        event("network_change", T0, {"at_s": "20", "phase": "a string"}),
        event("network_change", T0, {"at_s": True, "phase": "a boolean"}),
    ]
    assert network_block(events, T0, 60) is None


def test_missing_fields_are_null_and_down_and_reset_default_to_false() -> None:
    (only,) = periods([event("network_change", T0, {"at_s": 5})])
    assert only == {
        "start_s": 5.0,
        "end_s": 60.0,
        "phase": None,
        "down": False,
        "reset": False,
        "upstream": {"latency_ms": None, "jitter_ms": None, "bandwidth_bytes_per_s": None, "measured": None},
        "downstream": {"latency_ms": None, "jitter_ms": None, "bandwidth_bytes_per_s": None, "measured": None},
    }


def test_a_field_of_the_wrong_type_is_null_and_the_others_are_kept() -> None:
    detail = {
        "at_s": 10,  # an integer: a double column's float
        "phase": "p",
        "down": "yes",
        "upstream": {"latency_ms": "fast", "jitter_ms": 2, "bandwidth_bytes_per_s": [1]},
        "downstream": 3,
        "unknown": {"anything": [1, 2]},
    }
    (only,) = periods([event("network_change", T0, detail)])
    assert (only["start_s"], type(only["start_s"]), only["phase"], only["down"]) == (10.0, float, "p", False)
    assert (only["upstream"]["latency_ms"], only["upstream"]["jitter_ms"]) == (None, 2.0)
    assert type(only["upstream"]["jitter_ms"]) is float and only["upstream"]["bandwidth_bytes_per_s"] is None
    assert only["downstream"] == {
        "latency_ms": None,
        "jitter_ms": None,
        "bandwidth_bytes_per_s": None,
        "measured": None,
    }


@pytest.mark.parametrize(
    ("value", "down"), [("true", True), ("false", False), ("1", False), ('"true"', False), ("null", False)]
)
def test_booleans_are_read_only_from_true_and_false(value: str, down: bool) -> None:
    (only,) = periods([event("network_change", T0, f'{{"at_s": 1, "down": {value}}}')])
    assert only["down"] is down


def test_a_count_written_other_than_as_an_integer_is_null() -> None:
    proxy = run_proxy(
        stats("run", "upstream", 2.5, 9.0, 9.0, 9.0, worker="netem-a"),  # non-integral
        stats("run", "upstream", 3.0, 9.0, 9.0, 9.0, worker="netem-b"),  # a float token: no long either
        stats("run", "upstream", "4", 9.0, 9.0, 9.0, worker="netem-c"),  # a string
        stats("run", "upstream", 10, 0.2, 0.3, 0.4, worker="netem-e", bytes=1e3, dropped=2),
    )
    up = proxy["upstream"]
    assert up["proxies"] == 4  # every record counts its proxy
    assert (up["count"], up["bytes"], up["dropped"]) == (10, 0, 2)  # bytes 1e3 is null; the others wrote 0
    assert up["error_p50_ms"] == 0.2  # a null count weighs nothing
    assert (up["error_p99_ms"], up["error_max_ms"]) == (9.0, 9.0)  # maxima do not need a count


def test_a_null_count_everywhere_sums_to_null() -> None:
    proxy = run_proxy(stats("run", "upstream", None, 0.2, 0.3, 0.4, bytes=None, dropped=None))
    up = proxy["upstream"]
    assert (up["proxies"], up["count"], up["bytes"], up["dropped"], up["error_p50_ms"]) == (1, None, None, None, None)


# Keys: resets, -0.0, NaN


def test_a_reset_marks_only_the_period_starting_at_its_at_s() -> None:
    events = [
        event("network_change", T0, step(0, "base", link(1), link(1))),
        event("network_change", T0 + 20 * S, step(20, "rst", link(1), link(1), reset_peer=True)),
        event("network_reset", T0 + 20 * S, {"at_s": 20}, worker="netem-a"),
        event("network_reset", T0 + 20 * S, {"at_s": 20.0}, worker="netem-b"),
        event("network_reset", T0 + 33 * S, {"at_s": 33.0}),  # no step there: no period
        event("network_reset", T0 + 34 * S, {"phase": "no at_s"}),
    ]
    assert [(p["start_s"], p["reset"]) for p in periods(events)] == [(0.0, False), (20.0, True)]


def test_minus_zero_is_zero() -> None:
    events = [
        event("network_change", T0, '{"at_s": -0.0, "phase": "b"}', worker="netem-b"),
        event("network_change", T0 + 1, '{"at_s": 0, "phase": "a"}', worker="netem-a"),
        event("network_reset", T0, '{"at_s": -0.0}'),
        stats("period", "upstream", 10, 0.1, 0.2, 0.3, at_s=-0.0),
    ]
    (only,) = periods(events)
    assert (only["start_s"], math.copysign(1.0, only["start_s"]), only["phase"]) == (0.0, 1.0, "b")
    assert only["reset"] and only["upstream"]["measured"]["count"] == 10


def test_a_nan_step_sorts_last_and_ends_as_nan() -> None:
    events = [
        event("network_change", T0, '{"at_s": NaN, "phase": "n"}'),
        event("network_change", T0 + 1, '{"at_s": "NaN", "phase": "n2"}', worker="netem-b"),  # later: not its state
        event("network_change", T0, '{"at_s": 10, "phase": "t"}'),
    ]
    first, last = periods(events)
    assert (first["phase"], first["start_s"], last["phase"]) == ("t", 10.0, "n")
    assert math.isnan(first["end_s"]) and math.isnan(last["start_s"]) and math.isnan(last["end_s"])
