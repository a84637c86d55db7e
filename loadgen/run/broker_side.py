"""The run's broker side in one process: the control connection (never through the network
proxy), the participants' connections (through it when the scenario has one), the topology,
slot claims, queue depths, the dead-letter capture and the network proxy itself. A part of
RunContext (loadgen.run.runtime)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from gevent.lock import RLock

from loadgen.amqp import connection as amqp, topology
from loadgen.errors import BrokerOperationFailed, QueueHoldsMessages
from loadgen.run.deadletter import DeadLetterCapture
from loadgen.scenario.names import slot_queue_name
from loadgen.scenario.topology import required_exchanges

if TYPE_CHECKING:
    from loadgen.netem import NetemProcess
    from loadgen.run.deadletter import CapturePlan

__all__ = ["BrokerSide", "start_policy"]

log = logging.getLogger("sojourn")


def start_policy(existed: bool, ready: int, purge_on_start: bool | None) -> str:
    """What the start does with the `ready` messages a queue holds: "none" when the run created it
    (`existed` false) or it holds none, else as `queue.purge_on_start` says: "purge" (true), "keep"
    (false), "refuse" (absent: a queue the run did not create is never purged unless told to)."""
    if not existed or ready <= 0:
        return "none"
    if purge_on_start is None:
        return "refuse"
    return "purge" if purge_on_start else "keep"


def _kept_existing(what: str, name: str, key: str) -> None:
    log.warning("%s: %s %r existed before this run, so it is not deleted", key, what, name)


class BrokerSide:
    scenario: Any
    run_dir: str
    run_id: str
    worker: str
    netem: NetemProcess | None
    dead_letter_plan: CapturePlan | None
    dead_letters: DeadLetterCapture | None
    _claimed: set[tuple[str, str, int]]
    _created: set[tuple[str, str]]  # ("queue" | "exchange", name) this run declared into existence
    _control: Any
    _control_conn: Any
    _control_lock: RLock

    if TYPE_CHECKING:  # RunContext's

        def event(
            self, kind: str, source: str, name: str, value: float | None = None, detail: dict[str, Any] | None = None
        ) -> None: ...

    def control(self):
        """The process's control channel (topology, depth checks, slot claims, census). A channel the
        broker closed (a refused operation) is replaced on the same connection: the slot markers
        (claim_slot) are exclusive to it and go with it. A new connection only when that one is gone."""
        with self._control_lock:
            if self._control is None or not self._control.is_open:
                conn = self._control_conn
                if conn is None or not conn.is_open:
                    self.close_control()  # e.g. still closing: nothing of it is used again
                    conn = self._control_conn = self._connect_direct(f"sojourn-control-{self.worker}")
                self._control = amqp.open_channel(conn)
            return self._control

    def close_control(self) -> None:
        """Close the control connection, if open (its slot markers go with it), so that the next use
        opens a new one: after the broker did not answer on it, and at the end. Never raises."""
        with self._control_lock:
            conn, self._control, self._control_conn = self._control_conn, None, None
            try:
                if conn is not None and conn.is_open:
                    conn.close()
            except Exception as exc:  # noqa: BLE001 - a connection already dying
                log.debug("closing the control connection: %s", exc)

    def connect(self, name: str, on_close=None):
        """A producer's or consumer's connection, open when this returns: through the network
        proxy when the scenario has one (same user and vhost; amqps still checks the broker's name)."""
        if self.netem is None:
            return self._connect_direct(name, on_close)
        b = self.scenario.broker
        return amqp.connect(
            self.netem.url,
            heartbeat_s=b.heartbeat_s,
            connect_timeout_s=b.connect_timeout_s,
            name=name,
            on_close=on_close,
            tls_server_hostname=self.netem.tls_server_hostname,
        )

    def connect_direct(self, name: str, on_close=None):
        """A connection straight to the broker, never through the network proxy (dead-letter capture)."""
        return self._connect_direct(name, on_close)

    def _connect_direct(self, name: str, on_close=None):
        """Straight to the broker: the control connection is never delayed or cut by the proxy,
        so topology, slot claims, drain depth checks and the census keep working in an outage."""
        b = self.scenario.broker
        return amqp.connect(
            b.url, heartbeat_s=b.heartbeat_s, connect_timeout_s=b.connect_timeout_s, name=name, on_close=on_close
        )

    def start_netem(self) -> None:
        """Start this process's network proxy when the scenario has a `network:` section."""
        from loadgen.netem import NetemProcess, resolve_timeline

        timeline = resolve_timeline(self.scenario)
        if timeline is None:
            return
        self.netem = NetemProcess.start(
            self.scenario.broker.url,
            timeline,
            t0_ns=None,  # started before the start barrier: fix_t0 tells it t0
            run_dir=self.run_dir,
            run_id=self.run_id,
            worker=f"netem-{self.worker}",
            listen_port=self.scenario.network.listen_port,
            seed=f"{self.run_id}/{self.worker}",
        )
        log.info("network proxy on 127.0.0.1:%d", self.netem.port)

    def new_channel(self):
        """A fresh channel on the control connection (closing it does not disturb others)."""
        with self._control_lock:
            self.control()
            return amqp.open_channel(self._control_conn)

    def declare_topology(self, purge: bool) -> int:
        """The scenario's exchanges, then its queue, then the queue's bindings; every exchange used but
        not declared must exist. Returns the queue's depth. A refusal raises topology.TopologyError
        naming the object and saying what to do.

        `purge`: this is the run's start in the process that owns it (the local runner or the
        master). Then the queue is looked at first (a passive declare, which needs no permission):
        one that existed before the run and holds messages is purged, kept or refused as
        queue.purge_on_start says (start_policy), before anything is declared; other consumers on
        it are warned about; and what this run creates is noted, since only that is ever deleted
        at the end (delete_queue, delete_exchanges). Otherwise (a worker, or the topology declared
        again after a broker restart) only declare."""
        s = self.scenario
        q = s.queue
        where = f"{s.source_path}: queue.purge_on_start"
        with self._control_lock:
            found = self.queue_counts_if_exists(q.name) if purge else None
            if (
                purge
                and found is not None
                and not q.stream
                and start_policy(True, found[0], q.purge_on_start) == "refuse"
            ):
                raise QueueHoldsMessages(where, q.name, found[0])
            for i, x in enumerate(s.exchanges):
                existed = self._exchange_exists(x.name) if purge else True
                self._declare(
                    lambda ch, x=x: topology.declare_exchange(
                        ch,
                        x.name,
                        exchange_type=x.type,
                        durable=x.durable,
                        auto_delete=x.auto_delete,
                        arguments=x.arguments,
                    ),
                    "exchange",
                    x.name,
                    f"exchanges[{i}]",
                )
                if not existed:
                    self.note_created("exchange", x.name)
            for name, path in required_exchanges(s):
                if not self._exchange_exists(name):
                    raise topology.missing_exchange(name, f"{s.source_path}: {path}")
            depth, consumers = self._declare(
                lambda ch: topology.declare_queue_counts(
                    ch, q.name, durable=q.durable, auto_delete=q.auto_delete, arguments=q.declare_arguments()
                ),
                "queue",
                q.name,
                "queue",
            )
            if purge:
                existed = found is not None
                if not existed:
                    self.note_created("queue", q.name)
                if q.stream:  # kept as it is: a stream can not be purged, and reading it takes nothing away
                    if existed:
                        log.warning(
                            "stream %r existed before the run: a consumer group reading from first (or from an "
                            "offset or a time before the run) reads what it held too; those deliveries are "
                            "traced but are not this run's messages, so the accounting leaves them out",
                            q.name,
                        )
                else:
                    depth = self._start_on(q.name, existed, depth, consumers, q.purge_on_start, where)
            for i, b in enumerate(s.bindings):
                self._declare(
                    lambda ch, b=b: topology.bind_queue(ch, q.name, b.exchange, b.routing_key, b.arguments),
                    "binding",
                    b.exchange,
                    f"bindings[{i}]",
                )
        return depth

    def _start_on(
        self, queue: str, existed: bool, depth: int, consumers: int, purge_on_start: bool | None, where: str
    ) -> int:
        """The start on `queue`, just declared (`depth` ready messages and `consumers` consumers, none
        of them the run's yet): warn about other consumers, then purge, keep or refuse what it holds
        (start_policy). Returns the depth the run starts with."""
        if consumers:
            log.warning(
                "queue %r already has %d consumer%s other than sojourn's: they compete with the run's "
                "consumers for its messages (theirs are not traced), and they receive what the run publishes",
                queue,
                consumers,
                "" if consumers == 1 else "s",
            )
            self.event("queue_consumers", "runner", queue, float(consumers), {"at": "start"})
        policy = start_policy(existed, depth, purge_on_start)
        if policy == "refuse":  # messages arrived between the passive declare and this one
            raise QueueHoldsMessages(where, queue, depth)
        if policy == "purge":
            purged = topology.purge_queue(self.control(), queue)
            self.event("broker_depth", "runner", queue, float(depth), {"purged": True})
            sys.stderr.write(
                f"[sojourn] queue {queue!r}: purged {purged:,} message{'' if purged == 1 else 's'} it held "
                f"before the run (queue.purge_on_start: true)\n"
            )
            return 0
        if policy == "keep":
            log.warning(
                "queue %r: keeping the %d message%s it held before the run (queue.purge_on_start: false); "
                "the run's consumers receive and ack them too (traced without a message id), and the census "
                "counts what is left",
                queue,
                depth,
                "" if depth == 1 else "s",
            )
            self.event("broker_depth", "runner", queue, float(depth), {"kept": True})
        return depth

    def queue_counts_if_exists(self, name: str) -> tuple[int, int] | None:
        """(messages ready, consumers) of the queue `name`, or None when it does not exist."""
        channel = self.new_channel()  # a missing queue closes the channel it was asked on
        try:
            return topology.queue_counts(channel, name)
        except BrokerOperationFailed as exc:
            if exc.reply_code == topology.NOT_FOUND:
                return None
            raise topology.refused(exc, "queue", name, f"{self.scenario.source_path}: queue") from None
        finally:
            if channel.is_open:
                channel.close()

    def note_created(self, kind: str, name: str) -> None:
        """The queue or exchange (`kind`) `name` did not exist before this run declared it."""
        self._created.add((kind, name))

    def created(self, kind: str, name: str) -> bool:
        """This run declared the queue or exchange (`kind`) `name` into existence: it did not exist before."""
        return (kind, name) in self._created

    def _declare(self, operation, kind: str, name: str, yaml_path: str):
        """operation(control channel); a refusal becomes a TopologyError located in the scenario."""
        try:
            return operation(self.control())
        except BrokerOperationFailed as exc:
            raise topology.refused(exc, kind, name, f"{self.scenario.source_path}: {yaml_path}") from None

    def _exchange_exists(self, name: str) -> bool:
        channel = self.new_channel()  # a missing exchange closes the channel it was asked on
        try:
            return topology.exchange_exists(channel, name)
        finally:
            if channel.is_open:
                channel.close()

    def start_dead_letter_capture(self, purge: bool) -> None:
        """When the queue has a dead-letter exchange: declare the capture and consume it (docs/discards.md)."""
        if self.dead_letter_plan is None:
            return
        capture = DeadLetterCapture(self, self.dead_letter_plan)
        capture.declare(purge)
        capture.start()
        self.dead_letters = capture

    def stop_dead_letter_capture(self) -> None:
        """After the census: stop capturing and read what is still in the capture queue."""
        if self.dead_letters is not None:
            self.dead_letters.stop()

    def delete_queue(self) -> None:
        """queue.delete_on_end: remove the queue (and what the census counted in it), and the capture
        queue; each only if this run created it. A queue that existed before the run is never deleted."""
        name = self.scenario.queue.name
        with self._control_lock:
            if self.created("queue", name):
                topology.delete_queue(self.control(), name)
                self.event("queue_deleted", "runner", name)
            else:
                _kept_existing("queue", name, "queue.delete_on_end")
            capture = self.dead_letters
            if capture is not None:
                if self.created("queue", capture.plan.queue):
                    topology.delete_queue(self.control(), capture.plan.queue)
                else:
                    _kept_existing("dead-letter capture queue", capture.plan.queue, "queue.delete_on_end")

    def delete_exchanges(self) -> None:
        """exchanges[].delete_on_end: remove those exchanges (and their bindings) after the run, each
        only if this run created it."""
        for i, x in enumerate(self.scenario.exchanges):
            if not x.delete_on_end:
                continue
            if not self.created("exchange", x.name):
                _kept_existing("exchange", x.name, f"exchanges[{i}].delete_on_end")
                continue
            with self._control_lock:
                topology.delete_exchange(self.control(), x.name)
            self.event("exchange_deleted", "runner", x.name)

    def queue_depth(self) -> int | None:
        try:
            with self._control_lock:
                return topology.queue_depth(self.control(), self.scenario.queue.name)
        except Exception as exc:  # noqa: BLE001 - a failed probe must not kill the drain
            log.warning("queue depth check failed: %s", exc)
            if getattr(exc, "reply_code", None) is None:  # no answer: not this connection again
                self.close_control()
            return None

    def _dead_letter_depth(self) -> int | None:
        """Dead-letters not yet read by the capture: 0 without one, or before the declaring process made it."""
        if self.dead_letter_plan is None:
            return 0
        try:
            channel = self.new_channel()  # a missing queue closes the channel it was asked on
            try:
                return topology.queue_depth(channel, self.dead_letter_plan.queue)
            finally:
                if channel.is_open:
                    channel.close()
        except BrokerOperationFailed as exc:
            if exc.reply_code == topology.NOT_FOUND:
                return 0
            log.warning("dead-letter queue depth check failed: %s", exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a failed probe must not kill the drain
            log.warning("dead-letter queue depth check failed: %s", exc)
            return None

    def claim_slot(self, kind: str, group: str, max_count: int) -> int:
        """A slot number unique across every process of the run.

        Slots are claimed with exclusive, auto-deleting marker queues on the
        control connection, so workers on other processes or hosts never get the
        same slot; a slot decides when its user is active on the timeline.
        """
        with self._control_lock:  # held across the broker round trip: users of this process claim in turn
            for i in range(max_count):
                key = (kind, group, i)
                if key in self._claimed:
                    continue
                name = slot_queue_name(self.scenario.queue.name, kind, group, i)
                channel = self.new_channel()
                try:
                    amqp.wait_for(
                        # wait_for calls it now, in this iteration
                        lambda cb: channel.queue_declare(name, exclusive=True, auto_delete=True, callback=cb),  # noqa: B023
                        f"queue.declare {name!r}",
                        10.0,
                        channel=channel,
                    )
                except BrokerOperationFailed as exc:
                    if exc.reply_code == 405:  # RESOURCE_LOCKED: another process holds it
                        continue
                    raise
                finally:
                    if channel.is_open:
                        channel.close()
                self._claimed.add(key)
                return i
        raise RuntimeError(f"no free {kind} slot in group {group!r} (max {max_count})")
