"""The CoDel control law on an injected clock; expected times worked out by hand from RFC 8289.

Every controller here has target 5 ms and interval 100 ms (the RFC's defaults), so
the drop spacing is interval / sqrt(count):
    count 1: 100 ms          count 2: 100 / 1.414214 = 70.710678 ms
    count 3: 100 / 1.732051 = 57.735027 ms          count 4: 100 / 2 = 50 ms
    count 5: 100 / 2.236068 = 44.721360 ms
Times are integer nanoseconds; spacings are rounded to the nearest ns.
"""

from __future__ import annotations

import pytest

from loadgen.rules.codel import CoDel, CoDelState

MS = 1_000_000
T0 = 1_000_000 * MS  # an arbitrary wall-clock origin
ABOVE = 10 * MS  # a sojourn above the 5 ms target
BELOW = 4 * MS  # a sojourn below it
BACKLOG = 5  # deliveries still waiting: a standing queue


def controller() -> CoDel:
    return CoDel(target_ms=5, interval_ms=100)


def at(ms_after_t0: float) -> int:
    return T0 + round(ms_after_t0 * MS)


def drive_into_first_drop(c: CoDel) -> None:
    """Above target from T0; the first drop at T0 + 100 ms."""
    assert c.on_dequeue(ABOVE, T0, BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(100), BACKLOG) is True


# --- entering the dropping state ---------------------------------------------------


def test_sojourn_above_target_starts_the_interval_clock_without_dropping():
    c = controller()
    assert c.on_dequeue(ABOVE, T0, BACKLOG) is False
    # first-above deadline = T0 + interval
    assert c.state() == CoDelState(dropping=False, drop_count=0, first_above_ns=T0 + 100 * MS, drop_next_ns=0)


def test_first_drop_comes_one_interval_after_sojourn_went_above_target():
    c = controller()
    assert c.on_dequeue(ABOVE, T0, BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(50), BACKLOG) is False
    assert c.on_dequeue(ABOVE, T0 + 100 * MS - 1, BACKLOG) is False  # 1 ns short of the interval
    assert c.on_dequeue(ABOVE, T0 + 100 * MS, BACKLOG) is True
    # count 1, next drop at T0 + 100 ms + 100 ms / sqrt(1) = T0 + 200 ms
    assert c.state() == CoDelState(True, 1, T0 + 100 * MS, T0 + 200 * MS)


def test_a_sojourn_exactly_at_target_counts_as_above():
    c = controller()
    c.on_dequeue(5 * MS, T0, BACKLOG)
    assert c.first_above_ns == T0 + 100 * MS  # the RFC's test is sojourn < target


# --- the drop schedule -------------------------------------------------------------


def test_drops_then_come_at_interval_over_sqrt_count():
    c = controller()
    drive_into_first_drop(c)
    # drop_next after each drop, from the previous deadline (not from the call time):
    #   count 2: 200 ms + 70.710678 ms = 270.710678 ms
    #   count 3: 270.710678 + 57.735027 = 328.445705 ms
    #   count 4: 328.445705 + 50        = 378.445705 ms
    #   count 5: 378.445705 + 44.721360 = 423.167065 ms
    deadlines_ns = [200_000_000, 270_710_678, 328_445_705, 378_445_705, 423_167_065]
    for count, (due, following) in enumerate(zip(deadlines_ns, deadlines_ns[1:]), start=2):
        assert c.on_dequeue(ABOVE, T0 + due - 1, BACKLOG) is False, f"dropped early before count {count}"
        assert c.on_dequeue(ABOVE, T0 + due, BACKLOG) is True, f"no drop due at count {count}"
        assert (c.count, c.drop_next_ns) == (count, T0 + following)


def test_a_late_dequeue_drops_once_and_keeps_the_schedule():
    c = controller()
    drive_into_first_drop(c)
    # The next delivery is only taken at 250 ms, 50 ms after the 200 ms deadline:
    # one drop, and the next deadline still counts from 200 ms: 270.710678 ms.
    assert c.on_dequeue(ABOVE, at(250), BACKLOG) is True
    assert c.drop_next_ns == T0 + 270_710_678
    # A backlog of late deadlines drops back to back, like the RFC's while loop:
    # at 400 ms the deadlines 270.71 and 328.45 and 378.45 ms have all passed.
    assert [c.on_dequeue(ABOVE, at(400), BACKLOG) for _ in range(4)] == [True, True, True, False]
    assert c.count == 5 and c.drop_next_ns == T0 + 423_167_065


# --- leaving the dropping state ----------------------------------------------------


def test_a_sojourn_below_target_leaves_the_dropping_state_and_resets_the_clock():
    c = controller()
    drive_into_first_drop(c)
    assert c.on_dequeue(BELOW, at(150), BACKLOG) is False
    assert (c.dropping, c.first_above_ns) == (False, 0)
    # Above again at 160 ms: a whole new interval must pass, to 260 ms, before a drop
    # (the old 200 ms deadline no longer applies).
    assert c.on_dequeue(ABOVE, at(160), BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(200), BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(259.999), BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(260), BACKLOG) is True


def test_an_empty_buffer_leaves_the_dropping_state():
    c = controller()
    drive_into_first_drop(c)
    c.on_empty(at(120))
    assert (c.dropping, c.first_above_ns) == (False, 0)
    assert c.on_dequeue(ABOVE, at(200), BACKLOG) is False  # the 200 ms deadline is void


def test_an_empty_buffer_restarts_the_interval_before_the_first_drop():
    c = controller()
    c.on_dequeue(ABOVE, T0, BACKLOG)  # first-above deadline 100 ms
    c.on_empty(at(50))
    assert c.on_dequeue(ABOVE, at(60), BACKLOG) is False  # new deadline 60 + 100 = 160 ms
    assert c.on_dequeue(ABOVE, at(100), BACKLOG) is False
    assert c.on_dequeue(ABOVE, at(160), BACKLOG) is True


@pytest.mark.parametrize("waiting", [0, 1])
def test_a_backlog_of_at_most_one_waiting_delivery_is_never_above_target(waiting):
    # The RFC's "bytes() <= maxpacket": one MTU left in the queue is not a standing queue;
    # here one delivery left waiting is the next job, not a queue.
    c = controller()
    for ms in range(0, 1000, 10):
        assert c.on_dequeue(1000 * MS, at(ms), waiting) is False
    assert c.first_above_ns == 0


def test_a_small_backlog_while_dropping_leaves_the_dropping_state():
    c = controller()
    drive_into_first_drop(c)
    assert c.on_dequeue(ABOVE, at(200), 1) is False
    assert c.dropping is False


# --- count resumption (RFC 8289 section 5, the Linux variant) ----------------------


def _drop_four_times_then_recover(c: CoDel) -> None:
    drive_into_first_drop(c)  # count 1 at 100 ms
    for due_ns in (200_000_000, 270_710_678, 328_445_705):  # counts 2, 3, 4
        assert c.on_dequeue(ABOVE, T0 + due_ns, BACKLOG) is True
    assert (c.count, c.drop_next_ns) == (4, T0 + 378_445_705)
    assert c.on_dequeue(BELOW, at(340), BACKLOG) is False  # leave the dropping state


def test_dropping_that_restarts_soon_resumes_from_the_drops_of_the_last_cycle():
    c = controller()
    _drop_four_times_then_recover(c)
    assert c.on_dequeue(ABOVE, at(350), BACKLOG) is False  # above again: deadline 450 ms
    assert c.on_dequeue(ABOVE, at(450), BACKLOG) is True
    # delta = count - lastcount = 4 - 1 = 3 > 1, and now - drop_next =
    # 450 - 378.445705 = 71.55 ms < 16 x 100 ms: count = 3;
    # next drop at 450 + 100 / sqrt(3) = 450 + 57.735027 = 507.735027 ms.
    assert (c.count, c.drop_next_ns) == (3, T0 + 507_735_027)


def test_the_resumed_count_becomes_the_new_baseline():
    c = controller()
    _drop_four_times_then_recover(c)
    c.on_dequeue(ABOVE, at(350), BACKLOG)
    assert c.on_dequeue(ABOVE, at(450), BACKLOG) is True  # count 3 (resumed), lastcount 3
    assert c.on_dequeue(ABOVE, T0 + 507_735_027, BACKLOG) is True  # count 4
    assert c.on_dequeue(BELOW, at(520), BACKLOG) is False
    c.on_dequeue(ABOVE, at(530), BACKLOG)  # deadline 630 ms
    assert c.on_dequeue(ABOVE, at(630), BACKLOG) is True
    # delta = 4 - 3 = 1, not > 1: count starts again at 1, next drop 630 + 100 = 730 ms
    assert (c.count, c.drop_next_ns) == (1, T0 + 730 * MS)


def test_dropping_that_restarts_sixteen_intervals_later_starts_from_one():
    c = controller()
    _drop_four_times_then_recover(c)
    # Re-enter at 1978.445705 ms: now - drop_next = 1978.445705 - 378.445705 = 1600 ms,
    # not < 16 x 100 ms: count = 1, next drop at + 100 ms.
    start = 378_445_705 + 1600 * MS - 100 * MS
    assert c.on_dequeue(ABOVE, T0 + start, BACKLOG) is False
    assert c.on_dequeue(ABOVE, T0 + start + 100 * MS, BACKLOG) is True
    assert (c.count, c.drop_next_ns) == (1, T0 + start + 200 * MS)


def test_one_nanosecond_inside_the_window_still_resumes():
    c = controller()
    _drop_four_times_then_recover(c)
    start = 378_445_705 + 1600 * MS - 100 * MS - 1  # now - drop_next = 1600 ms - 1 ns
    c.on_dequeue(ABOVE, T0 + start, BACKLOG)
    assert c.on_dequeue(ABOVE, T0 + start + 100 * MS, BACKLOG) is True
    assert c.count == 3


# --- parameters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, interval, bad",
    [
        (0, 20, "target_ms"),
        (100, -1, "interval_ms"),
        (float("nan"), 20, "target_ms"),
        (100, float("inf"), "interval_ms"),
    ],
)
def test_target_and_interval_must_be_positive(target, interval, bad):
    with pytest.raises(ValueError, match=bad):
        CoDel(target, interval)


def test_target_must_be_a_number():
    with pytest.raises(TypeError, match="target_ms must be a number, got '100'"):
        CoDel("100", 20)


def test_parameters_are_kept_in_nanoseconds():
    c = CoDel(target_ms=100, interval_ms=20.5)
    assert (c.target_ns, c.interval_ns) == (100 * MS, 20_500_000)


# --- scenario warnings -------------------------------------------------------------

WARNINGS_SCENARIO = """\
name: w
queue: {name: q.w}
run: {duration_s: 10}
producers:
  - {name: p, rate: 100}
consumers:
  - name: c
    prefetch: 51
    processing_ms: 4
    codel: {target_ms: 100, interval_ms: 20}
"""


def warnings_for(tmp_path, *overrides: str) -> list[str]:
    from loadgen.scenario import load_scenario
    from loadgen.scenario.advice import codel_warnings

    path = tmp_path / "w.yaml"
    path.write_text(WARNINGS_SCENARIO)
    return codel_warnings(load_scenario(path, overrides))


def test_the_blogs_tuning_raises_no_warning(tmp_path):
    # prefetch 51, 4 ms, target 100 <= (51 - 1) x 4 = 200 ms, interval 20 = 5 x 4 ms
    assert warnings_for(tmp_path) == []


def test_codel_off_raises_no_warning(tmp_path):
    assert warnings_for(tmp_path, "consumers.c.codel=null", "consumers.c.prefetch=1") == []


@pytest.mark.parametrize("prefetch", ["1", "2"])
def test_a_prefetch_of_two_or_less_can_never_nack(tmp_path, prefetch):
    [warning] = warnings_for(tmp_path, f"consumers.c.prefetch={prefetch}")
    assert warning.startswith(f"consumers.c.codel: prefetch {prefetch} can never build a standing queue")


def test_a_prefetch_of_three_can(tmp_path):
    # 3 - 1 = 2 may wait behind the one taken: a backlog above one; (3 - 1) x 4 = 8 ms of work
    # can exceed a 5 ms target
    assert warnings_for(tmp_path, "consumers.c.prefetch=3", "consumers.c.codel.target_ms=5") == []


def test_a_target_above_what_a_full_buffer_holds_can_never_nack(tmp_path):
    # (26 - 1) x 4 ms = 100 ms of work at most; a 150 ms target is never exceeded
    [warning] = warnings_for(tmp_path, "consumers.c.prefetch=26", "consumers.c.codel.target_ms=150")
    assert (
        "consumers.c.codel: target_ms 150 is more than the buffer can ever hold: "
        "(prefetch 26 - 1) x mean processing 4 ms = 100 ms"
    ) in warning


def test_a_target_reachable_in_some_phase_is_fine(tmp_path):
    # base: (26 - 1) x 4 = 100 < 150; phase 'slow': (26 - 1) x 40 = 1000 >= 150
    path = tmp_path / "w.yaml"
    path.write_text(
        WARNINGS_SCENARIO + "timeline:\n  - {name: slow, start_s: 5, set: {consumers.c.processing_ms: 40}}\n"
    )
    from loadgen.scenario import load_scenario
    from loadgen.scenario.advice import codel_warnings

    assert codel_warnings(load_scenario(path, ["consumers.c.prefetch=26", "consumers.c.codel.target_ms=150"])) == []


@pytest.mark.parametrize("interval, said", [("41", "10.2x above"), ("0.39", "10.3x below")])
def test_an_interval_more_than_ten_times_off_the_processing_time_is_suspicious(tmp_path, interval, said):
    # 41 / 4 = 10.25 > 10; 4 / 0.39 = 10.26 > 10
    [warning] = warnings_for(tmp_path, f"consumers.c.codel.interval_ms={interval}")
    assert f"interval_ms {interval} is {said} the mean processing time 4 ms" in warning


def test_an_interval_ten_times_the_processing_time_is_fine(tmp_path):
    assert warnings_for(tmp_path, "consumers.c.codel.interval_ms=40") == []


def test_auto_ack_makes_codel_inert(tmp_path):
    [warning] = warnings_for(tmp_path, "consumers.c.ack_mode=auto")
    assert "ack_mode is auto, so deliveries can not be nacked; CoDel is ignored" in warning


def test_validate_prints_warnings_on_stderr_and_still_succeeds(tmp_path, capsys):
    from loadgen.cli import main

    path = tmp_path / "w.yaml"
    path.write_text(WARNINGS_SCENARIO)
    assert main(["validate", str(path), "--set", "consumers.c.prefetch=2"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("warning: consumers.c.codel: prefetch 2 can never build")
    assert ": ok" in captured.out


def test_the_shipped_codel_scenario_is_tuned_as_the_blog_says():
    import pathlib

    from loadgen.scenario import load_scenario
    from loadgen.scenario.advice import codel_warnings

    scenario = load_scenario(pathlib.Path(__file__).resolve().parents[2] / "scenarios/codel-slow-consumer.yaml")
    assert codel_warnings(scenario) == []
    assert {
        (g.name, g.prefetch, g.codel.target_ms, g.codel.interval_ms, g.codel.requeue) for g in scenario.consumers
    } == {("fast", 51, 100, 20, True), ("slow", 51, 100, 20, True)}
    # the slow phase slows one consumer only
    assert [g.processing.mean_ms for g in scenario.at(30).consumers] == [4, 40]
