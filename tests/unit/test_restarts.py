"""The restart check's decisions, above the transport seam: the broker's answers are scripted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadgen.run import restarts
from loadgen.run.restarts import LostQueueWatch, alive_queue_name


class _Broker:
    """Answers as a broker would: up or down, and the queues it holds."""

    def __init__(self):
        self.up = True
        self.queues: set[str] = set()
        self.declared_topology = 0

    def channel(self):
        if not self.up:
            raise ConnectionRefusedError("connection refused")
        return SimpleNamespace(is_open=False)


@pytest.fixture
def broker(monkeypatch):
    b = _Broker()
    monkeypatch.setattr(restarts.topology, "queue_exists", lambda _ch, name: name in b.queues)
    monkeypatch.setattr(restarts.topology, "declare_queue", lambda _ch, name, **_kw: b.queues.add(name) or 0)
    monkeypatch.setattr(restarts.topology, "delete_queue", lambda _ch, name: b.queues.discard(name))
    return b


def _ctx(broker, events):
    def declare_topology(purge):
        assert purge is False  # never purge what the broker kept
        broker.declared_topology += 1
        return 7

    return SimpleNamespace(
        run_id="run-1",
        new_channel=broker.channel,
        declare_topology=declare_topology,
        event=lambda *a, **kw: events.append((a, kw)),
        scenario=SimpleNamespace(queue=SimpleNamespace(name="q", durable=False)),
    )


def test_a_connection_cut_without_a_restart_is_not_a_restart(broker):
    events = []
    watch = LostQueueWatch(_ctx(broker, events)).start()
    assert broker.queues == {"sojourn.alive.run-1"}
    assert watch.check() is None  # nothing failed: nothing to check
    watch.failed()
    broker.up = False
    assert watch.check() is None  # still down: can not tell
    broker.up = True
    assert watch.check() is False  # back, marker still there: the connection was cut, the broker kept its state
    assert events == [] and broker.declared_topology == 0


def test_a_broker_back_without_the_marker_restarted_the_topology_is_declared_again_once(broker):
    events = []
    watch = LostQueueWatch(_ctx(broker, events)).start()
    watch.failed()
    broker.up = False
    broker.queues.clear()  # the node died: its non-durable queues went with it
    assert watch.check() is None
    broker.up = True
    assert watch.check() is True
    assert broker.declared_topology == 1 and "sojourn.alive.run-1" in broker.queues  # a new marker
    (args, kwargs) = events[0]
    assert args[:4] == ("broker_restart", "runner", "q", 7.0)
    assert kwargs["detail"]["queue_durable"] is False and kwargs["detail"]["down_since_ns"] > 0
    assert watch.check() is None and watch.restarts == 1  # said once
    watch.stop()
    assert broker.queues == set()


def test_the_marker_name_fits_an_amqp_short_string():
    assert len(alive_queue_name("x" * 1000).encode()) <= 255
    assert alive_queue_name("run-1") == "sojourn.alive.run-1"


def test_a_refused_marker_leaves_the_run_without_restart_detection_not_without_a_run(broker, monkeypatch, caplog):
    from loadgen.errors import BrokerOperationFailed

    def refuse(_ch, name, **_kw):
        raise BrokerOperationFailed(f"queue.declare {name!r}", 403, "ACCESS_REFUSED")

    monkeypatch.setattr(restarts.topology, "declare_queue", refuse)
    events = []
    watch = LostQueueWatch(_ctx(broker, events)).start()
    assert "will not be noticed" in caplog.text
    watch.failed()
    assert watch.check() is None and events == [] and broker.declared_topology == 0
    watch.stop()  # nothing to delete
