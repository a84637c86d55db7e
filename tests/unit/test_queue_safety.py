"""A real queue left as it was found (issue 48): a queue the run did not create is purged only when
the scenario says `purge_on_start: true`, kept with `false`, and without the key the run refuses
to start (exit 2) before it declares anything; only what the run created is deleted at the end.
The broker's answers are scripted below the topology seam (tests/integration/test_queue_safety.py
holds the same against RabbitMQ)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from gevent.lock import RLock

from loadgen.errors import BrokerOperationFailed, LoadgenError, QueueHoldsMessages
from loadgen.run import broker_side
from loadgen.run.broker_side import BrokerSide, start_policy
from loadgen.scenario.topology import ExchangeSpec, QueueSpec


@pytest.mark.parametrize(
    ("existed", "ready", "purge_on_start", "expected"),
    [
        (False, 0, None, "none"),  # the run created it: nothing in it to decide about
        (False, 0, True, "none"),
        (True, 0, None, "none"),  # existed, but empty: nothing to purge, nothing refused
        (True, 0, False, "none"),
        (True, 50, None, "refuse"),  # the key absent: never purged
        (True, 50, True, "purge"),
        (True, 50, False, "keep"),
        (True, 1, None, "refuse"),
    ],
)
def test_start_policy(existed, ready, purge_on_start, expected):
    assert start_policy(existed, ready, purge_on_start) == expected


def test_the_refusal_names_the_queue_its_count_and_the_key_and_exits_2():
    exc = QueueHoldsMessages("s.yaml: queue.purge_on_start", "orders", 1234)
    text = str(exc)
    assert text.startswith("s.yaml: queue.purge_on_start: queue 'orders' already holds 1,234 messages")
    assert "queue.purge_on_start: true to purge them" in text
    assert "queue.purge_on_start: false to keep them" in text
    assert isinstance(exc, LoadgenError) and (exc.queue, exc.messages) == ("orders", 1234)
    assert "holds 1 message and" in str(QueueHoldsMessages("s.yaml: x", "q", 1))


class _Broker:
    """What the broker holds: queue -> [ready, consumers], and exchanges; every call in `calls`."""

    def __init__(self, queues=None, exchanges=()):
        self.queues = {name: list(counts) for name, counts in (queues or {}).items()}
        self.exchanges = set(exchanges)
        self.calls: list[tuple[str, str]] = []

    def install(self, monkeypatch) -> None:
        t = broker_side.topology

        def queue_counts(_ch, name):
            self.calls.append(("passive", name))
            if name not in self.queues:
                raise BrokerOperationFailed(f"queue.declare passive {name!r}", 404, "NOT_FOUND")
            return tuple(self.queues[name])

        def declare_queue_counts(_ch, name, **_kw):
            self.calls.append(("declare", name))
            return tuple(self.queues.setdefault(name, [0, 0]))

        def declare_exchange(_ch, name, **_kw):
            self.calls.append(("exchange.declare", name))
            self.exchanges.add(name)

        def purge_queue(_ch, name):
            self.calls.append(("purge", name))
            n, self.queues[name][0] = self.queues[name][0], 0
            return n

        def delete_queue(_ch, name):
            self.calls.append(("queue.delete", name))
            del self.queues[name]

        def delete_exchange(_ch, name):
            self.calls.append(("exchange.delete", name))
            self.exchanges.discard(name)

        monkeypatch.setattr(t, "queue_counts", queue_counts)
        monkeypatch.setattr(t, "declare_queue_counts", declare_queue_counts)
        monkeypatch.setattr(t, "exchange_exists", lambda _ch, name: name in self.exchanges)
        monkeypatch.setattr(t, "declare_exchange", declare_exchange)
        monkeypatch.setattr(t, "bind_queue", lambda _ch, q, x, *_a: self.calls.append(("bind", f"{q}->{x}")))
        monkeypatch.setattr(t, "purge_queue", purge_queue)
        monkeypatch.setattr(t, "delete_queue", delete_queue)
        monkeypatch.setattr(t, "delete_exchange", delete_exchange)


class _Side(BrokerSide):
    def __init__(self, queue: QueueSpec, exchanges=()):
        self.scenario = SimpleNamespace(
            source_path="s.yaml",
            queue=queue,
            exchanges=tuple(exchanges),
            bindings=(),
            producers=(),
        )
        self._control_lock = RLock()
        self._created = set()
        self.dead_letters = None
        self.events: list[tuple] = []

    def control(self):
        return SimpleNamespace(is_open=True)

    def new_channel(self):
        return SimpleNamespace(is_open=False)

    def event(self, kind, source, name, value=None, detail=None):
        self.events.append((kind, name, value, detail))


def _queue(purge_on_start=None, delete_on_end=True) -> QueueSpec:
    return QueueSpec("orders", False, False, {}, purge_on_start, delete_on_end)


def test_a_queue_holding_messages_without_the_key_is_refused_before_anything_is_declared(monkeypatch):
    broker = _Broker({"orders": (50, 0)})
    broker.install(monkeypatch)
    side = _Side(_queue(None), [ExchangeSpec("x", "topic")])
    with pytest.raises(QueueHoldsMessages) as caught:
        side.declare_topology(purge=True)
    assert (caught.value.queue, caught.value.messages) == ("orders", 50)
    assert caught.value.where == "s.yaml: queue.purge_on_start"
    assert broker.calls == [("passive", "orders")]  # no exchange, queue, binding or purge
    assert broker.queues["orders"] == [50, 0] and "x" not in broker.exchanges


def test_purge_on_start_true_purges_what_it_held_and_says_so(monkeypatch, capsys):
    broker = _Broker({"orders": (50, 0)})
    broker.install(monkeypatch)
    side = _Side(_queue(True))
    assert side.declare_topology(purge=True) == 0
    assert ("purge", "orders") in broker.calls and broker.queues["orders"][0] == 0
    assert "queue 'orders': purged 50 messages it held before the run (queue.purge_on_start: true)" in (
        capsys.readouterr().err
    )
    assert ("broker_depth", "orders", 50.0, {"purged": True}) in side.events


def test_purge_on_start_false_keeps_them_and_starts_saying_so(monkeypatch, caplog):
    broker = _Broker({"orders": (50, 0)})
    broker.install(monkeypatch)
    side = _Side(_queue(False))
    with caplog.at_level(logging.WARNING, logger="sojourn"):
        assert side.declare_topology(purge=True) == 50
    assert not any(call[0] == "purge" for call in broker.calls)
    assert "keeping the 50 messages it held before the run (queue.purge_on_start: false)" in caplog.text


def test_a_queue_the_run_creates_needs_no_purge_and_is_the_only_kind_deleted(monkeypatch):
    broker = _Broker()
    broker.install(monkeypatch)
    side = _Side(_queue(None), [ExchangeSpec("x", "topic", delete_on_end=True)])
    assert side.declare_topology(purge=True) == 0
    assert side.created("queue", "orders") and side.created("exchange", "x")
    side.delete_queue()
    side.delete_exchanges()
    assert ("queue.delete", "orders") in broker.calls and ("exchange.delete", "x") in broker.calls


def test_what_existed_before_the_run_is_never_deleted_even_with_delete_on_end(monkeypatch, caplog):
    broker = _Broker({"orders": (0, 0)}, exchanges={"x"})
    broker.install(monkeypatch)
    side = _Side(_queue(None, delete_on_end=True), [ExchangeSpec("x", "topic", delete_on_end=True)])
    side.declare_topology(purge=True)  # empty: nothing refused
    with caplog.at_level(logging.WARNING, logger="sojourn"):
        side.delete_queue()
        side.delete_exchanges()
    assert not [c for c in broker.calls if c[0].endswith(".delete")]
    assert "orders" in broker.queues and "x" in broker.exchanges
    assert "queue.delete_on_end: queue 'orders' existed before this run, so it is not deleted" in caplog.text
    assert "exchanges[0].delete_on_end: exchange 'x' existed before this run" in caplog.text


def test_other_consumers_on_the_queue_draw_a_warning_with_their_count(monkeypatch, caplog):
    broker = _Broker({"orders": (0, 3)})
    broker.install(monkeypatch)
    side = _Side(_queue(None))
    with caplog.at_level(logging.WARNING, logger="sojourn"):
        side.declare_topology(purge=True)
    assert "queue 'orders' already has 3 consumers other than sojourn's" in caplog.text
    assert ("queue_consumers", "orders", 3.0, {"at": "start"}) in side.events


def test_a_worker_or_a_redeclaration_after_a_restart_only_declares(monkeypatch):
    broker = _Broker({"orders": (50, 2)})
    broker.install(monkeypatch)
    side = _Side(_queue(None))
    assert side.declare_topology(purge=False) == 50  # no passive look, no refusal, no purge
    assert broker.calls == [("declare", "orders")]
    assert not side.created("queue", "orders")
