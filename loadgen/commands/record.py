"""`sojourn record`: capture live publishes from RabbitMQ's firehose into a replay file.

The firehose (`rabbitmqctl trace_on -p VHOST`) copies every publish on a vhost to the
topic exchange `amq.rabbitmq.trace` with routing key `publish.<exchange>`, the original
body, and the original routing key and properties in its headers. The recorder binds an
exclusive queue there, stamps each copy with the recorder's monotonic clock when it
arrives, and streams one row per message to a `loadgen.replay.writer.TraceFileWriter`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from loadgen.errors import BrokerUnreachable, LoadgenError
from loadgen.redact import mask_url
from loadgen.replay.writer import REQUIRED_COLUMNS, TraceFileError, TraceFileWriter, headers_json, trace_format

__all__ = [
    "RecordOptions",
    "RecordResult",
    "RecordError",
    "TracingOff",
    "record",
    "firehose_row",
    "binding_keys",
    "tracing_enabled",
]

TRACE_EXCHANGE = "amq.rabbitmq.trace"
PROGRESS_EVERY_S = 2.0
SILENCE_WARNING_S = 5.0
RABBITMQCTL_TIMEOUT_S = 20.0


class RecordError(LoadgenError):
    """Bad input for a recording (URL, output, tracing state): the CLI exits 2."""


class TracingOff(RecordError):
    def __init__(self, vhost: str):
        self.vhost = vhost
        super().__init__(
            f"firehose tracing is off on vhost '{vhost}': run `rabbitmqctl trace_on -p {vhost}` "
            f"(and trace_off afterwards), or pass --trace-on"
        )


@dataclass(frozen=True)
class RecordOptions:
    url: str
    out: str
    duration_s: float | None = 60.0  # None: only --count or Ctrl-C stops the recording
    count: int | None = None
    exchanges: tuple[str, ...] = ()  # empty: every exchange
    payloads: bool = False
    trace_on: bool = False


@dataclass
class RecordResult:
    path: str
    messages: int = 0
    first_offset_s: float | None = None
    last_offset_s: float | None = None
    elapsed_s: float = 0.0
    interrupted: bool = False
    connection_lost: bool = False
    stopped_by: str = ""  # "count", "duration" or "interrupt"
    warnings: list[str] = field(default_factory=list)

    @property
    def span_s(self) -> float:
        if self.first_offset_s is None or self.last_offset_s is None:
            return 0.0
        return self.last_offset_s - self.first_offset_s

    def summary(self) -> str:
        rate = (self.messages - 1) / self.span_s if self.messages > 1 and self.span_s > 0 else 0.0
        how = {
            "count": "count reached",
            "duration": "duration reached",
            "interrupt": "interrupted",
            "connection lost": "connection lost",
        }
        return (
            f"recorded {self.messages:,} messages spanning {self.span_s:.3f} s (first to last), "
            f"mean {rate:,.1f} msg/s, in {self.elapsed_s:.1f} s ({how.get(self.stopped_by, 'stopped')})"
            f" -> {self.path}"
        )


def binding_keys(exchanges: tuple[str, ...]) -> list[str]:
    """`publish.#` for every exchange, else one `publish.<exchange>` per filter ('' = the default exchange)."""
    if not exchanges:
        return ["publish.#"]
    return [f"publish.{x}" for x in dict.fromkeys(exchanges)]


def firehose_row(headers: Mapping[str, Any], body: bytes, offset_s: float, *, payloads: bool) -> dict:
    """One replay-file row from a firehose copy's headers and body.

    `routing_keys` holds the publish's routing key first, then any CC/BCC keys; the
    original message's own headers and priority are in the `properties` table.
    """
    props = headers.get("properties") or {}
    keys = headers.get("routing_keys") or [""]
    row = {
        "offset_s": offset_s,
        "size_bytes": len(body),
        "routing_key": _text(keys[0]),
        "exchange": _text(headers.get("exchange_name") or ""),
        "priority": props.get("priority"),
        "headers": headers_json(props.get("headers")),
    }
    if payloads:
        row["payload_b64"] = base64.b64encode(body).decode("ascii")
    return row


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="backslashreplace") if isinstance(value, bytes) else str(value)


# -- tracing state --------------------------------------------------------------
def _is_local(host: str) -> bool:
    if host in ("localhost", "::1") or host.startswith("127."):
        return True
    try:
        return host in (socket.gethostname(), socket.getfqdn())
    except OSError:
        return False


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess | None:
    exe = shutil.which("rabbitmqctl")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "-q", *args], capture_output=True, text=True, timeout=RABBITMQCTL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def tracing_enabled(vhost: str, host: str) -> bool | None:
    """Whether the firehose is on for `vhost`, asked of the local node with rabbitmqctl.

    None when it can not be known: the broker is not on this machine, rabbitmqctl is
    missing or can not reach the node (e.g. no Erlang cookie), or the node has no such vhost.
    """
    if not _is_local(host):
        return None
    done = _rabbitmqctl("list_vhosts", "name", "tracing", "--formatter", "json")
    if done is None or done.returncode != 0:
        return None
    try:
        listing = {v["name"]: v["tracing"] for v in json.loads(done.stdout)}
    except (ValueError, TypeError, KeyError):
        return None
    state = listing.get(vhost)
    return state if isinstance(state, bool) else None


# -- recording ------------------------------------------------------------------
def record(
    opts: RecordOptions, *, say: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic
) -> RecordResult:
    """Record until --count or --duration is reached, or until Ctrl-C / SIGTERM.

    Raises TraceFileError or RecordError for bad input and BrokerUnreachable when the
    broker does not answer, leaving an existing file at `opts.out` untouched. Once recording
    has started every exit path closes the file with what was captured: an interrupt sets
    `interrupted`, a lost connection `connection_lost`, instead of raising.
    """
    import pika
    import pika.exceptions

    from loadgen.amqp.connection import _describe, parameters

    say = say or (lambda m: print(f"sojourn record: {m}", file=sys.stderr, flush=True))
    masked = mask_url(opts.url)
    if opts.count is not None and opts.count < 1:
        raise RecordError(f"--count {opts.count}: must be at least 1")
    if opts.duration_s is not None and opts.duration_s <= 0:
        raise RecordError(f"--duration {opts.duration_s:g}: must be more than 0 s")
    try:
        params = parameters(opts.url, heartbeat_s=30, name="sojourn-record")
    except (ValueError, TypeError) as exc:
        raise RecordError(f"--url {masked}: {mask_url(str(exc))}") from None
    params.connection_attempts = 1
    vhost = params.virtual_host
    host = urlsplit(opts.url).hostname or "localhost"

    columns = REQUIRED_COLUMNS + (("payload_b64",) if opts.payloads else ())
    _check_writable(opts.out)  # before connecting; the file itself is opened (truncated) only once bound
    result = RecordResult(path=opts.out)
    conn = None
    writer: TraceFileWriter | None = None
    turned_on = False
    started = False
    previous_sigterm = _sigterm_as_interrupt()
    try:
        try:
            conn = pika.BlockingConnection(params)
        except Exception as exc:  # noqa: BLE001 - every failure to open means unreachable
            raise BrokerUnreachable(masked, _unreachable_reason(exc, _describe)) from None
        tracing = tracing_enabled(vhost, host)
        if opts.trace_on and tracing is None:
            raise RecordError(
                f"--trace-on: can not run `rabbitmqctl trace_on -p {vhost}` against the broker "
                f"at {masked} from here (rabbitmqctl reaches only a broker on this machine); "
                f"run it on the broker host"
            )
        if tracing is False:
            if not opts.trace_on:
                raise TracingOff(vhost)
            done = _rabbitmqctl("trace_on", "-p", vhost)
            if done is None or done.returncode != 0:
                detail = (done.stderr or done.stdout).strip() if done is not None else "rabbitmqctl did not answer"
                raise RecordError(f"--trace-on: `rabbitmqctl trace_on -p {vhost}` failed: {detail}")
            turned_on = True
            say(f"firehose tracing turned on for vhost '{vhost}' (turned off again when the recording ends)")
        channel = conn.channel()
        queue = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        keys = binding_keys(opts.exchanges)
        for key in keys:
            channel.queue_bind(queue, TRACE_EXCHANGE, key)
        writer = TraceFileWriter(opts.out, columns)
        started = True
        _consume(
            conn,
            channel,
            queue,
            opts,
            writer,
            result,
            say,
            clock,
            warn_silence=tracing is None,
            masked=masked,
            vhost=vhost,
        )
    except KeyboardInterrupt:
        if not started:
            raise
        result.interrupted = True
        result.stopped_by = "interrupt"
    except pika.exceptions.AMQPError as exc:
        if not started:
            raise RecordError(
                f"setting up the firehose queue on {masked} failed: {_describe(exc)} "
                f"(the user needs configure rights for a server-named queue and read "
                f"rights on {TRACE_EXCHANGE})"
            ) from None
        result.warnings.append(
            f"the connection to {masked} failed: {_describe(exc)}; "
            f"keeping the {result.messages:,} messages recorded so far"
        )
        say(result.warnings[-1])
        result.stopped_by = "connection lost"
        result.connection_lost = True
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        if writer is not None:
            writer.close()
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - already closed or broken: nothing left to release
                pass
        if turned_on:
            done = _rabbitmqctl("trace_off", "-p", vhost)
            if done is None or done.returncode != 0:
                say(f"could not turn tracing off again: run `rabbitmqctl trace_off -p {vhost}`")
            else:
                say(f"firehose tracing turned off again for vhost '{vhost}'")
    return result


def _consume(
    conn,
    channel,
    queue: str,
    opts: RecordOptions,
    writer: TraceFileWriter,
    result: RecordResult,
    say: Callable[[str], None],
    clock: Callable[[], float],
    *,
    warn_silence: bool,
    masked: str,
    vhost: str,
) -> None:
    wanted = set(opts.exchanges)
    state = {"full": False}

    def on_message(_ch, _method, properties, body):
        offset = clock() - start  # first thing: the stamp should not include our own work
        if state["full"]:
            return
        headers = properties.headers or {}
        if wanted and _text(headers.get("exchange_name") or "") not in wanted:
            return  # an exchange name with topic wildcards in it matched more than itself
        writer.append(firehose_row(headers, body, offset, payloads=opts.payloads))
        result.messages += 1
        if result.first_offset_s is None:
            result.first_offset_s = offset
        result.last_offset_s = offset
        if opts.count is not None and result.messages >= opts.count:
            state["full"] = True

    channel.basic_consume(queue, on_message, auto_ack=True)
    start = clock()
    deadline = start + opts.duration_s if opts.duration_s is not None else None
    stops = [f"{opts.count:,} messages"] if opts.count is not None else []
    stops += [f"{opts.duration_s:g} s"] if deadline is not None else []
    which = ", ".join(repr(x) for x in opts.exchanges) if opts.exchanges else "all exchanges"
    say(
        f"recording publishes to {which} on vhost '{vhost}' at {masked} into {opts.out}; "
        f"stops after {' or '.join(stops) if stops else 'Ctrl-C'}"
    )
    next_progress = start + PROGRESS_EVERY_S
    last_count, last_time = 0, start
    warned = not warn_silence
    try:
        while not state["full"]:
            now = clock()
            if deadline is not None and now >= deadline:
                result.stopped_by = "duration"
                break
            wait = min(0.2, next_progress - now, (deadline - now) if deadline is not None else 0.2)
            conn.process_data_events(time_limit=max(0.0, wait))
            now = clock()
            if now >= next_progress:
                rate = (result.messages - last_count) / (now - last_time)
                say(f"{result.messages:,} messages  {rate:,.1f} msg/s  {now - start:,.1f} s")
                last_count, last_time = result.messages, now
                next_progress = now + PROGRESS_EVERY_S
                writer.flush()
            if not warned and result.messages == 0 and now - start >= SILENCE_WARNING_S:
                warned = True
                result.warnings.append(
                    f"no publish seen in {SILENCE_WARNING_S:g} s; firehose tracing may be off on vhost "
                    f"'{vhost}' (could not check from here): run `rabbitmqctl trace_on -p {vhost}` on the broker"
                )
                say(result.warnings[-1])
        else:
            result.stopped_by = "count"
    finally:
        result.elapsed_s = clock() - start


def _unreachable_reason(exc: BaseException, describe: Callable[[BaseException], str]) -> str:
    """pika hides why a connection failed two levels down (a socket error, or a bare getaddrinfo code)."""
    inner = exc.args[0] if exc.args else None
    cause = getattr(inner, "exception", None)
    if isinstance(cause, OSError):
        return cause.strerror or str(cause) or type(cause).__name__
    if isinstance(inner, int):
        return f"can not resolve the host name (getaddrinfo error {inner})"
    return describe(exc)


def _sigterm_as_interrupt():
    """Let SIGTERM end a recording like Ctrl-C does (file closed with what was captured)."""

    def _raise(_signum, _frame):
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread: leave SIGTERM alone
        return None


def _check_writable(path: str) -> None:
    """TraceFileError now for a bad extension or a place no file can be made, without touching `path`."""
    trace_format(path)
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise TraceFileError(path, "can not write: is a directory")
    if not os.path.isdir(parent):
        raise TraceFileError(path, f"can not write: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise TraceFileError(path, "can not write: permission denied")
