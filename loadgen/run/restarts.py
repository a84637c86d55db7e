"""A broker that restarted mid-run: noticed, recorded, and the run's topology declared again.

A node restart drops every connection (each participant traces its `connection_lost` and
reconnects), and it also drops what the broker held only in memory: a non-durable queue and its
messages, a durable queue's transient messages. From the connections alone a restart can not be
told from a network cut, so the declaring process keeps a marker: a small non-durable queue of
the run's own (`alive_queue_name`), declared with the topology. It outlives any connection and
vanishes only with the broker's memory. After a failed queue sample (the queue sampler's
connection died, or the run's queue is gone), the sampler asks `LostQueueWatch.check`: when the
broker answers again and the marker is gone, the broker lost its state. The watch then declares
the run's topology again (consumers waiting to re-subscribe find their queue), declares a new
marker, and records a `broker_restart` event; the analysis classifies the messages that reached
the broker before it and were never acked, left or dead-lettered as `lost_with_queue`
(docs/summary.md). The marker is deleted at the end of the run, and expires by itself an hour
after a run that was killed.
"""

from __future__ import annotations

import logging
import time

from loadgen.amqp import topology
from loadgen.errors import BrokerOperationFailed
from loadgen.redact import mask_text

__all__ = ["LostQueueWatch", "alive_queue_name", "MARKER_EXPIRES_MS"]

log = logging.getLogger("sojourn")

MARKER_EXPIRES_MS = 3_600_000  # a killed run's marker goes an hour after its last use


def alive_queue_name(run_id: str) -> str:
    """The marker queue of run `run_id` (within AMQP's 255-byte names: the id is cut if long)."""
    return f"sojourn.alive.{run_id.encode()[:200].decode(errors='ignore')}"


class LostQueueWatch:
    """The marker's lifecycle and the restart check, in the process that declares the topology."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.marker = alive_queue_name(ctx.run_id)
        self.restarts = 0
        self.enabled = True  # False when the broker refused the marker (start)
        self._down_since_ns: int | None = None

    def start(self) -> LostQueueWatch:
        """Declare the marker. A broker that refuses it (a user allowed to configure only some
        names) leaves the run without restart detection, said once, not without a run."""
        try:
            self._declare_marker()
        except BrokerOperationFailed as exc:
            self.enabled = False
            log.warning(
                "the broker refused the run's marker queue %s (%s): a broker restart mid-run will not be "
                "noticed, and what it loses counts as unaccounted",
                self.marker,
                mask_text(str(exc)),
            )
        return self

    def stop(self) -> None:
        """Delete the marker (best effort: a broker that is gone took it along)."""
        if not self.enabled:
            return
        try:
            channel = self.ctx.new_channel()
            try:
                topology.delete_queue(channel, self.marker)
            finally:
                if channel.is_open:
                    channel.close()
        except Exception as exc:  # noqa: BLE001 - the marker expires by itself
            log.info("the run's marker queue %s was not deleted: %s", self.marker, mask_text(str(exc)))

    def failed(self) -> None:
        """A sample failed: from now on, `check` until the broker answers."""
        if self._down_since_ns is None:
            self._down_since_ns = time.time_ns()

    def check(self) -> bool | None:
        """After a failure: None while the broker does not answer (or nothing failed); False when
        it answers and still holds the marker; True when the marker is gone: the topology has been
        declared again and a `broker_restart` event recorded."""
        if self._down_since_ns is None or not self.enabled:
            return None
        try:
            channel = self.ctx.new_channel()  # reconnects the control connection if it died
        except Exception:  # noqa: BLE001 - still down
            return None
        try:
            if topology.queue_exists(channel, self.marker):
                self._down_since_ns = None
                return False
        except BrokerOperationFailed:
            return None
        finally:
            if channel.is_open:
                channel.close()
        depth = self.ctx.declare_topology(purge=False)  # raises on a refusal: checked again after the next failure
        self._declare_marker()
        down_since_ns, self._down_since_ns = self._down_since_ns, None
        self.restarts += 1
        q = self.ctx.scenario.queue
        self.ctx.event(
            "broker_restart",
            "runner",
            q.name,
            float(depth),
            detail={"down_since_ns": down_since_ns, "queue_durable": q.durable, "depth_after": depth},
        )
        log.warning(
            "the broker lost its in-memory state (it restarted): queue %r declared again%s; the messages "
            "it held that were never acked count as lost_with_queue",
            q.name,
            f" with {depth:,} messages it kept" if depth else ", empty",
        )
        return True

    def _declare_marker(self) -> None:
        channel = self.ctx.new_channel()
        try:
            topology.declare_queue(
                channel,
                self.marker,
                durable=False,
                auto_delete=False,
                arguments={"x-expires": MARKER_EXPIRES_MS},
            )
        finally:
            if channel.is_open:
                channel.close()
