"""Where the live metrics are served: the port each process of a run listens on, the listening
socket (bound by the run's process, so a port in use is an error at the start, not a silent gap),
and the HTTP server on it (in the trace writer's process, loadgen.trace.sink, which receives the
rows the metrics come from; the run's I/O loop does none of this work).
"""

from __future__ import annotations

import os
import socket
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, MetricsHandler

from loadgen.errors import LoadgenError

__all__ = ["MetricsPortError", "port_for", "listen", "serve", "DEFAULT_HOST"]

DEFAULT_HOST = "0.0.0.0"  # every interface: a metrics endpoint is scraped from other hosts
HOST_ENV = "SOJOURN_METRICS_HOST"


class MetricsPortError(LoadgenError):
    """The metrics port can not be listened on (in use, not allowed)."""


def port_for(base: int, role: str, worker_index: int | None) -> int:
    """The port of one process of a run: `base` for a run in one process and for Locust's master,
    base + 1 + index for worker `index` (Locust numbers a run's workers from 0)."""
    if role == "worker":
        return base + 1 + (worker_index or 0)
    return base


def listen(port: int, host: str | None = None) -> socket.socket:
    """A socket listening on `host`:`port` (default: $SOJOURN_METRICS_HOST, else every interface),
    inheritable, for the trace writer's process to serve."""
    host = host or os.environ.get(HOST_ENV) or DEFAULT_HOST
    if not 0 < port < 65536:
        raise MetricsPortError(f"--metrics-port: {port} is not a port (1-65535)")
    try:
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        reason = exc.strerror or exc
        raise MetricsPortError(f"--metrics-port {port}: can not listen on {host}:{port}: {reason}") from exc
    sock.set_inheritable(True)
    return sock


def serve(fd: int, registry: CollectorRegistry) -> ThreadingHTTPServer:
    """Serve `registry` at /metrics (any path, as prometheus_client does) on the listening socket
    `fd`, from a daemon thread; returns the server (shutdown() stops it)."""
    sock = socket.socket(fileno=fd)
    server = ThreadingHTTPServer(sock.getsockname()[:2], _handler(registry), bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def _handler(registry: CollectorRegistry):
    class Handler(MetricsHandler.factory(registry)):  # type: ignore[misc]
        def log_message(self, format, *args):  # noqa: A002 - a scrape a second is not news
            pass

    return Handler
