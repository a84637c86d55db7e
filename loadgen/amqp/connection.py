"""pika connections on gevent, with blocking-style helpers for the calling greenlet.

pika's GeventConnection runs its callbacks in gevent's hub; the helpers here park
only the calling greenlet (never the hub) until a callback answers.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pika
import pika.exceptions

from loadgen.amqp import fastio
from loadgen.errors import BrokerOperationFailed, BrokerRefused, BrokerUnreachable
from loadgen.redact import mask_url

__all__ = ["parameters", "connect", "open_channel", "wait_for", "probe", "flush_writes", "sever"]


def parameters(
    url: str,
    *,
    heartbeat_s: int = 30,
    connect_timeout_s: float = 5.0,
    name: str = "sojourn",
    tls_server_hostname: str | None = None,
) -> pika.URLParameters:
    """Connection parameters for an amqp:// or amqps:// URL.

    For amqps the certificate is verified against the system CAs (or the file in
    SOJOURN_TLS_CAFILE) and the URL's host name, or `tls_server_hostname` when the URL
    points at a TCP proxy in front of the broker; SOJOURN_TLS_INSECURE=1 turns
    verification off for self-signed test brokers.
    """
    scheme = urlsplit(url).scheme
    if scheme not in ("amqp", "amqps"):
        raise ValueError(f"broker url {mask_url(url)!r}: scheme must be amqp or amqps, got {scheme!r}")
    params = pika.URLParameters(url)
    params.heartbeat = heartbeat_s
    params.socket_timeout = connect_timeout_s
    params.blocked_connection_timeout = None
    params.client_properties = {"connection_name": name, "product": "sojourn"}
    if scheme == "amqps":
        context = ssl.create_default_context(cafile=os.environ.get("SOJOURN_TLS_CAFILE") or None)
        if os.environ.get("SOJOURN_TLS_INSECURE") == "1":
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        params.ssl_options = pika.SSLOptions(context, server_hostname=tls_server_hostname or params.host)
    return params


def wait_for(
    start: Callable[[Callable[..., None]], Any], what: str, timeout_s: float = 10.0, channel: Any = None
) -> Any:
    """Run `start(callback)` and park this greenlet until pika calls `callback(result)`.

    With `channel`, a channel closing meanwhile (a broker refusal) raises
    BrokerOperationFailed with the broker's reply code instead of waiting out the timeout.
    """
    from gevent import Timeout
    from gevent.event import AsyncResult

    result: AsyncResult = AsyncResult()
    if channel is not None:

        def _closed(_ch, exc):
            if not result.ready():
                result.set_exception(channel_error(what, exc))

        channel.add_on_close_callback(_closed)
    start(lambda *args: result.ready() or result.set(args[0] if args else None))
    try:
        return result.get(timeout=timeout_s)
    except Timeout:
        raise BrokerOperationFailed(what, None, f"no answer from the broker within {timeout_s:g} s") from None


def connect(
    url: str,
    *,
    heartbeat_s: int = 30,
    connect_timeout_s: float = 5.0,
    name: str = "sojourn",
    on_close: Callable[[Any, BaseException], None] | None = None,
    tls_server_hostname: str | None = None,
):
    """Open a GeventConnection and wait (this greenlet only) until it is open."""
    from gevent.event import AsyncResult
    from pika.adapters.gevent_connection import GeventConnection

    opened: AsyncResult = AsyncResult()
    params = parameters(
        url,
        heartbeat_s=heartbeat_s,
        connect_timeout_s=connect_timeout_s,
        name=name,
        tls_server_hostname=tls_server_hostname,
    )

    def _on_close(conn, exc):
        if not opened.ready():
            opened.set_exception(exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))
        elif on_close is not None:
            on_close(conn, exc)

    conn = GeventConnection(
        params,
        on_open_callback=lambda c: opened.set(c),
        on_open_error_callback=lambda c, exc: opened.set_exception(
            exc if isinstance(exc, BaseException) else RuntimeError(str(exc))
        ),
        on_close_callback=_on_close,
    )
    try:
        conn = opened.get(timeout=connect_timeout_s + 5)
    except Exception as exc:  # noqa: BLE001 - every failure to open means unreachable
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass
        raise _unreachable(url, exc) from None
    fastio.tune(conn)  # fewer system calls per message (loadgen.amqp.fastio)
    return conn


def open_channel(conn, timeout_s: float = 10.0, on_close: Callable[[Any, BaseException], None] | None = None):
    channel = wait_for(lambda cb: conn.channel(on_open_callback=cb), "channel.open", timeout_s)
    if on_close is not None:
        channel.add_on_close_callback(on_close)
    return channel


def flush_writes(conn, timeout_s: float = 1.0) -> bool:
    """Park this greenlet until pika's write buffer is empty (every frame handed to the kernel,
    e.g. the acks sent so far), at most `timeout_s`; True when it emptied."""
    import time

    import gevent

    deadline = time.monotonic() + timeout_s
    while True:
        transport = getattr(conn, "_transport", None)
        if transport is None or transport.get_write_buffer_size() == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        gevent.sleep(0.001)


def sever(conn, abort: bool = False) -> bool:
    """Drop `conn`'s TCP connection the way a crashed client does: no channel.close, no
    connection.close, just the socket shut down for writing (the kernel sends what it already
    holds, then FIN). The broker sees the peer gone without a close, closes its end and requeues
    every unacked delivery. Reading stays open until then, so whatever the broker had already
    sent still reaches the client and can be accounted for (SHUT_RDWR would make the kernel drop
    it unread, leaving requeued deliveries nobody traced).

    pika keeps the socket on the connection's transport: BaseConnection._transport (an
    _AsyncPlaintextTransport or _AsyncSSLTransport from pika.adapters.utils.io_services_utils)
    holds it in `_sock`. Both are private, so a pika without them falls back to the transport's
    public abort(), which closes the socket just as abruptly. pika then reads EOF in the hub and
    closes the connection on its side (on_close_callback with StreamLostError); nothing here waits.
    `abort`: skip the shutdown and abort the transport at once (for a broker that never closes
    its end). Returns False when the connection had no transport left (already gone)."""
    import socket

    transport = getattr(conn, "_transport", None)
    if transport is None:
        return False
    sock = getattr(transport, "_sock", None)
    try:
        if sock is not None and not abort:
            sock.shutdown(socket.SHUT_WR)
            return True
    except OSError:
        pass  # already disconnected: let pika's abort finish the job
    transport.abort()
    return True


def probe(url: str, timeout_s: float = 5.0) -> None:
    """Check that the broker answers, with a plain blocking connection (no gevent needed)."""
    params = parameters(url, heartbeat_s=0, connect_timeout_s=timeout_s, name="sojourn-probe")
    params.connection_attempts = 1
    try:
        pika.BlockingConnection(params).close()
    except Exception as exc:  # noqa: BLE001
        raise _unreachable(url, exc) from None


def _unreachable(url: str, exc: BaseException) -> BrokerUnreachable:
    """BrokerRefused when the broker answered and refused the user or the virtual host, else
    BrokerUnreachable; the URL masked, the reason in words."""
    inner = exc
    while (
        isinstance(inner, pika.exceptions.AMQPConnectionError)
        and inner.args
        and isinstance(inner.args[0], BaseException)
    ):
        inner = inner.args[0]
    refused = (pika.exceptions.ProbableAuthenticationError, pika.exceptions.ProbableAccessDeniedError)
    kind = BrokerRefused if isinstance(inner, refused) else BrokerUnreachable
    return kind(mask_url(url), _describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, pika.exceptions.ProbableAuthenticationError):
        return "authentication refused (check user and password)"
    if isinstance(exc, pika.exceptions.ProbableAccessDeniedError):
        return "access refused (check the virtual host and the user's permissions)"
    if isinstance(exc, pika.exceptions.AMQPConnectionError) and exc.args:
        inner = exc.args[0]
        if isinstance(inner, BaseException):
            return _describe(inner)
    text = str(exc) or type(exc).__name__
    return text


def channel_error(operation: str, exc: BaseException) -> BrokerOperationFailed:
    code = getattr(exc, "reply_code", None)
    text = getattr(exc, "reply_text", None) or str(exc)
    return BrokerOperationFailed(operation, code, text)
