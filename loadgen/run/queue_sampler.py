"""Broker queue depth once a second, as `queue_sample` events, for slow-consumer detection.

Runs in the process that declares the topology (local runner or Locust master). Each sample
is a passive queue.declare on the control connection (never through the network proxy):
messages ready and consumers, exact at the moment the broker answers. When the RabbitMQ
management API answers on the broker's host (probed once at start), each sample also asks it
for the queue's unacked count. The API's counters are the broker's periodic statistics
(`collect_statistics_interval`, 5 s by default), so they may lag by that much: that is why
ready and consumers always come from the declare. docs/slow-consumers.md.

A failed sample (a lost connection, a queue gone) also has the broker checked for a restart
(loadgen.run.restarts.LostQueueWatch): the run's topology is declared again and the restart recorded.
One the broker did not answer also closes the control connection (the next sample opens a new one).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple, cast
from urllib.parse import quote, unquote, urlsplit

import gevent
from gevent.event import Event

from loadgen.amqp import topology
from loadgen.redact import mask_text
from loadgen.run import guarded
from loadgen.run.restarts import LostQueueWatch

__all__ = [
    "QueueSampler",
    "ManagementEndpoint",
    "management_endpoint",
    "parse_queue_json",
    "MANAGEMENT_PORT",
    "SAMPLE_EVERY_S",
]

log = logging.getLogger("sojourn")

SAMPLE_EVERY_S = 1.0
MANAGEMENT_PORT = 15672
MANAGEMENT_TLS_PORT = 15671
HTTP_TIMEOUT_S = 1.0
DECLARE_TIMEOUT_S = 2.0


class ManagementEndpoint(NamedTuple):
    """Where the management API has the queue, and how to authenticate. `url` never holds the
    password; `authorization` does (Basic), so neither is ever logged or stored whole."""

    url: str
    authorization: str

    def __repr__(self) -> str:  # keep the credentials out of any log line or traceback
        return f"ManagementEndpoint(url={self.url!r}, authorization='****')"


def _vhost(path: str) -> str:
    """The AMQP URL's vhost as pika reads it: no path or "/" is the default vhost "/"."""
    return unquote(path[1:]) if len(path) > 1 else "/"


def management_endpoint(amqp_url: str, queue: str, port: int | None = None) -> ManagementEndpoint:
    """GET /api/queues/{vhost}/{queue} on the broker's host; http for amqp, https for amqps.
    Vhost and queue name are percent-encoded whole ("/" is %2F), as the API expects."""
    parts = urlsplit(amqp_url)
    scheme = "https" if parts.scheme == "amqps" else "http"
    port = port or (MANAGEMENT_TLS_PORT if scheme == "https" else MANAGEMENT_PORT)
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    user = unquote(parts.username) if parts.username is not None else "guest"
    password = unquote(parts.password) if parts.password is not None else "guest"
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    url = f"{scheme}://{host}:{port}/api/queues/{quote(_vhost(parts.path), safe='')}/{quote(queue, safe='')}"
    return ManagementEndpoint(url, f"Basic {token}")


def parse_queue_json(payload: bytes | str) -> dict[str, int | None]:
    """The management API's queue object -> {ready, unacked, consumers} (None where absent:
    a queue that has not yet emitted statistics has no message counts)."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")

    def _int(key: str) -> int | None:
        value = data.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return {"ready": _int("messages_ready"), "unacked": _int("messages_unacknowledged"), "consumers": _int("consumers")}


def _http_get(endpoint: ManagementEndpoint, timeout_s: float) -> bytes:
    from urllib.request import Request, urlopen

    request = Request(endpoint.url, headers={"Authorization": endpoint.authorization, "Accept": "application/json"})
    with urlopen(request, timeout=timeout_s) as response:
        return response.read()


def _cooperative(fn: Callable[[], Any]) -> Any:
    """Blocking socket I/O without stalling the gevent loop: in place when the process is
    monkey-patched (Locust patches its processes), else in the hub's thread pool."""
    from gevent import monkey

    if monkey.is_module_patched("socket"):
        return fn()
    return gevent.get_hub().threadpool.apply(fn)


class QueueSampler:
    """A greenlet sampling the run's queue at every whole second of run time until stopped."""

    def __init__(
        self,
        ctx,
        every_s: float = SAMPLE_EVERY_S,
        fetch: Callable[[ManagementEndpoint, float], bytes] = _http_get,
        management_port: int | None = None,
    ):
        self.ctx = ctx
        self.management_port = management_port  # None: 15672 (15671 for amqps)
        self.queue = ctx.scenario.queue.name
        self.every_s = every_s
        self._fetch = fetch
        self.endpoint: ManagementEndpoint | None = None
        self._channel = None
        self._greenlet: gevent.Greenlet | None = None
        self._stop = Event()
        self.took_ms: list[float] = []
        self.failures = 0
        self._warned = False
        self.restarts: LostQueueWatch | None = None  # set by start(): it declares its marker queue

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> QueueSampler:
        self.restarts = LostQueueWatch(self.ctx).start()
        self._greenlet = guarded.spawn("queue_sampler", self._run)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop sampling (the sample in flight finishes) and log what the samples cost."""
        self._stop.set()
        if self._greenlet is not None:
            self._greenlet.join(timeout_s)
            self._greenlet.kill(block=False)
            self._greenlet = None
        self._close_channel()
        if self.restarts is not None:
            self.restarts.stop()
        if self.took_ms:
            q = statistics.quantiles(self.took_ms, n=100, method="inclusive") if len(self.took_ms) > 1 else None
            log.info(
                "queue sampler: %d samples (%s), p50 %.2f ms, p99 %.2f ms, max %.2f ms each%s",
                len(self.took_ms),
                self.source,
                statistics.median(self.took_ms),
                q[98] if q else self.took_ms[0],
                max(self.took_ms),
                f"; {self.failures} failed" if self.failures else "",
            )

    @property
    def source(self) -> str:
        return "declare+management" if self.endpoint is not None else "declare"

    # -- sampling -------------------------------------------------------------
    def _run(self) -> None:
        self.endpoint = self.probe()
        while not (self._stop.is_set() or self.ctx.stopping.is_set()):
            # Whole seconds of run time: a minute of the report holds exactly 60 samples.
            next_t = max(0.0, math.floor(self.ctx.elapsed_s() / self.every_s + 1) * self.every_s)
            if not self.ctx.sleep_until(next_t, self._stop):
                return
            self.sample()

    def probe(self) -> ManagementEndpoint | None:
        endpoint = management_endpoint(self.ctx.scenario.broker.url, self.queue, self.management_port)
        try:
            counts = parse_queue_json(_cooperative(lambda: self._fetch(endpoint, HTTP_TIMEOUT_S)))
        except Exception as exc:  # noqa: BLE001 - no API: the declare alone gives ready and consumers
            log.info(
                "queue sampler: management API not used (%s); sampling by passive declare",
                mask_text(str(exc)) or type(exc).__name__,
            )
            return None
        if counts["unacked"] is None:
            log.info("queue sampler: management API at %s has no message counts yet; using it anyway", endpoint.url)
        return endpoint

    def sample(self) -> dict[str, Any] | None:
        """One sample, recorded as a `queue_sample` event; None (and a warning the first time)
        when the broker did not answer."""
        self._check_restart()
        started_ns, started = time.time_ns(), time.perf_counter()
        try:
            ready, consumers = topology.queue_counts(self._sample_channel(), self.queue, DECLARE_TIMEOUT_S)
            answered_ns = time.time_ns()
        except Exception as exc:  # noqa: BLE001 - a failed sample must not end the run
            self._failed(exc)
            self._close_channel()
            if getattr(exc, "reply_code", None) is None:
                # No answer, or the connection went: close the control connection rather than leave it
                # (with the slot markers exclusive to it) for the next sample to open a new one beside.
                self.ctx.close_control()
            if self.restarts is not None:
                self.restarts.failed()
            return None
        unacked = None
        if self.endpoint is not None:
            try:
                # Not None (checked just above; only _run sets it): mypy does not carry that into a lambda.
                unacked = parse_queue_json(
                    _cooperative(lambda: self._fetch(cast(ManagementEndpoint, self.endpoint), HTTP_TIMEOUT_S))
                )["unacked"]
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)
        took_ms = (time.perf_counter() - started) * 1e3
        self.took_ms.append(took_ms)
        detail = {"unacked": unacked, "consumers": consumers, "source": self.source, "took_ms": round(took_ms, 3)}
        # Stamped halfway through the declare's round trip: the broker counted somewhere in it.
        ts = (started_ns + answered_ns) // 2
        self.ctx.writer.append(
            "event", (ts, "queue_sample", "sampler", self.queue, float(ready), json.dumps(detail, sort_keys=True))
        )
        return {"ts_ns": ts, "ready": ready, **detail}

    def _check_restart(self) -> None:
        """After a failed sample: has the broker come back without the run's state?"""
        if self.restarts is None:
            return
        try:
            if self.restarts.check():
                self._close_channel()  # its connection is the dead one
        except Exception as exc:  # noqa: BLE001 - e.g. the broker refused the declaration: try again next second
            log.warning("queue sampler: declaring the topology again failed: %s", mask_text(str(exc)))

    def _sample_channel(self):
        """A channel of its own on the control connection: a refused declare closes only it."""
        if self._channel is None or not self._channel.is_open:
            self._channel = self.ctx.new_channel()
        return self._channel

    def _close_channel(self) -> None:
        channel, self._channel = self._channel, None
        try:
            if channel is not None and channel.is_open:
                channel.close()
        except Exception:  # noqa: BLE001 - closing a channel of a dead connection
            pass

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        if not self._warned:
            self._warned = True
            log.warning(
                "queue sampler: a sample failed (%s); slow-consumer shares skip the seconds "
                "without one. Further failures are counted, not logged.",
                mask_text(str(exc)) or type(exc).__name__,
            )
