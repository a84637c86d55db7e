"""RunContext.sleep_until: an interrupt wins even when the deadline has already passed."""

from gevent.event import Event

from loadgen.run.runtime import RunContext


class _Ctx:
    """Just the clock part of RunContext (no broker, no files)."""

    def __init__(self, elapsed: float):
        self._elapsed = elapsed

    def elapsed_s(self) -> float:
        return self._elapsed

    sleep_until = RunContext.sleep_until


def test_a_past_deadline_returns_at_once_while_running():
    assert _Ctx(elapsed=10.0).sleep_until(5.0, Event()) is True


def test_a_past_deadline_reports_the_interrupt_that_already_fired():
    # a producer behind schedule must still notice the run stopping
    stopped = Event()
    stopped.set()
    assert _Ctx(elapsed=10.0).sleep_until(5.0, stopped) is False


def test_no_interrupt_given_means_just_the_clock():
    assert _Ctx(elapsed=10.0).sleep_until(5.0) is True


def test_freeze_heap_leaves_what_exists_out_of_collections_and_still_collects_what_comes_later():
    import gc

    from loadgen.run.runtime import freeze_heap

    class Node:
        pass

    kept = Node()
    kept.self = kept  # a container the collector tracks
    try:
        freeze_heap()
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # no collection walks it any more
        garbage = Node()
        garbage.self = garbage
        del garbage
        assert gc.collect() >= 1  # the run's own garbage cycles are still found
    finally:
        gc.unfreeze()  # the test process goes on collecting as usual
