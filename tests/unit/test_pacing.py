"""The producer's send loop (loadgen.rules.pacing.on_time): a producer behind its schedule stops when
the run's time is up by its own clock, even when the drain's greenlet (which sets `draining`) has
not had the CPU to say so yet; a stop ends it; a late streak yields the loop."""

from loadgen.rules.pacing import LATE_YIELD_EVERY, on_time


class _Clock:
    """elapsed_s() advances by `step_s` on every call: a loop falling behind as it publishes."""

    def __init__(self, start_s: float, step_s: float):
        self.now, self.step = start_s, step_s

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _sent(due, clock, run_end_s=10.0, *, draining=False, stop_at=None, turns=None):
    sends = [(t, "base", None) for t in due]
    paced = on_time(
        sends,
        sleep_until=lambda t: stop_at is None or t < stop_at,  # behind schedule: never sleeps
        draining=lambda: draining,
        elapsed_s=clock,
        run_end_s=run_end_s,
        yield_turn=lambda: turns.append(clock.now) if turns is not None else None,
    )
    return [t for t, _, _ in paced]


def test_a_late_producer_publishes_nothing_once_the_clock_passes_the_runs_end():
    due = [i * 0.01 for i in range(1000)]  # all due in the first 10 s, the loop far behind
    # Each look at the clock is 0.1 s later, two per publish (the end check, then the late streak):
    # 9.1, 9.2 | 9.3, ... The 5th end check reads 9.9 and publishes; the 6th reads 10.1 and stops.
    assert _sent(due, _Clock(start_s=9.0, step_s=0.1)) == due[:5]


def test_on_time_it_publishes_the_whole_schedule():
    due = [i * 0.5 for i in range(20)]
    assert _sent(due, _Clock(start_s=0.0, step_s=0.0001)) == due


def test_nothing_is_published_once_the_drain_has_begun():
    assert _sent([1.0, 2.0], _Clock(0.0, 0.0), draining=True) == []


def test_a_stop_while_waiting_ends_the_loop_before_that_send():
    assert _sent([1.0, 2.0, 3.0], _Clock(0.0, 0.0), stop_at=2.0) == [1.0]


def test_every_run_of_late_publishes_yields_the_loop_once_and_on_time_ones_never():
    turns: list[float] = []
    late = [0.0] * (2 * LATE_YIELD_EVERY + 1)  # all due at once, the clock already at 5 s
    assert len(_sent(late, _Clock(5.0, 0.0), turns=turns)) == len(late)
    assert len(turns) == 2
    turns.clear()
    assert len(_sent([float(i) for i in range(1, 9)], _Clock(0.0, 0.0), turns=turns)) == 8
    assert turns == []
