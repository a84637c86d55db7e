"""A producer behind its schedule stops publishing when the run's time is up by its own clock,
even when the drain's greenlet (which sets `draining`) has not had the CPU to say so yet."""

from types import SimpleNamespace

from gevent.event import Event

from loadgen.producer import Producer


class _Clock:
    """elapsed_s() advances by `step_s` on every call: a loop falling behind as it publishes."""

    def __init__(self, start_s: float, step_s: float):
        self.now, self.step = start_s, step_s

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _producer(clock, duration_s: float, draining: bool = False):
    p = Producer.__new__(Producer)  # the loop only: no connection, no trace writer
    p.ctx = SimpleNamespace(
        elapsed_s=clock,
        stopping=Event(),
        draining=Event(),
        scenario=SimpleNamespace(run=SimpleNamespace(duration_s=duration_s)),
        sleep_until_precise=lambda t, interrupt: True,
    )  # behind schedule: never sleeps
    if draining:
        p.ctx.draining.set()
    p.published = []
    p._publish = lambda settings, intended_s, phase, item: p.published.append(intended_s)
    return p


def test_a_late_producer_publishes_nothing_once_the_clock_passes_the_runs_end():
    clock = _Clock(start_s=9.0, step_s=0.1)  # each look at the clock is 0.1 s later
    p = _producer(clock, duration_s=10.0)
    due = [i * 0.01 for i in range(1000)]  # all due in the first 10 s, the loop far behind
    p._send_all(None, ((t, "base", None) for t in due))
    # Looks at the clock twice per publish (the end check, then the late streak): 9.1, 9.2 | 9.3, ...
    # The 5th end check reads 9.9 and publishes; the 6th reads 10.1 and stops.
    assert p.published == due[:5]


def test_on_time_it_publishes_the_whole_schedule():
    clock = _Clock(start_s=0.0, step_s=0.0001)
    p = _producer(clock, duration_s=10.0)
    due = [i * 0.5 for i in range(20)]
    p._send_all(None, ((t, "base", None) for t in due))
    assert p.published == due


def test_nothing_is_published_once_the_drain_has_begun():
    p = _producer(_Clock(0.0, 0.0), duration_s=10.0, draining=True)
    p._send_all(None, ((t, "base", None) for t in (1.0, 2.0)))
    assert p.published == []
