"""The queue sampler's pure parts: the management API's URL and credentials, and its JSON."""

from __future__ import annotations

import base64
import logging
from types import SimpleNamespace

import pytest

from loadgen.run.queue_sampler import QueueSampler, management_endpoint, parse_queue_json


def _credentials(authorization: str) -> str:
    scheme, token = authorization.split(" ")
    assert scheme == "Basic"
    return base64.b64decode(token).decode()


def test_the_default_vhost_is_encoded_as_percent_2f():
    for url in ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:guest@127.0.0.1:5672", "amqp://u:p@h/%2F"):
        assert management_endpoint(url, "orders").url.endswith("/api/queues/%2F/orders")


def test_vhost_and_queue_names_are_encoded_whole():
    endpoint = management_endpoint("amqp://u:p@broker.example:5672/team%2Fa", "jobs/high prio.q")
    assert endpoint.url == "http://broker.example:15672/api/queues/team%2Fa/jobs%2Fhigh%20prio.q"


def test_amqps_uses_https_on_the_tls_port_and_ipv6_keeps_brackets():
    assert management_endpoint("amqps://u:p@[::1]:5671/", "q").url == "https://[::1]:15671/api/queues/%2F/q"
    assert management_endpoint("amqp://u:p@h/", "q", port=8080).url == "http://h:8080/api/queues/%2F/q"


def test_credentials_travel_in_the_header_never_in_the_url_or_repr():
    endpoint = management_endpoint("amqp://ops:s%40cret%3A1@h:5672/", "q")
    assert _credentials(endpoint.authorization) == "ops:s@cret:1"
    assert "cret" not in endpoint.url and "ops" not in endpoint.url
    assert "cret" not in repr(endpoint) and base64.b64encode(b"ops:s@cret:1").decode() not in repr(endpoint)


def test_a_url_without_credentials_uses_rabbitmqs_default_user():
    assert _credentials(management_endpoint("amqp://h/", "q").authorization) == "guest:guest"


def test_the_api_queue_object_gives_ready_unacked_and_consumers():
    payload = b'{"name": "q", "messages": 12, "messages_ready": 9, "messages_unacknowledged": 3, "consumers": 2}'
    assert parse_queue_json(payload) == {"ready": 9, "unacked": 3, "consumers": 2}


def test_a_queue_without_statistics_yet_has_no_counts():
    assert parse_queue_json('{"name": "q", "consumers": 0}') == {"ready": None, "unacked": None, "consumers": 0}


def test_anything_but_an_object_is_refused():
    with pytest.raises(ValueError, match="JSON object"):
        parse_queue_json("[1, 2]")


def test_a_failed_probe_falls_back_to_the_declare_and_logs_no_password(caplog):
    ctx = SimpleNamespace(
        scenario=SimpleNamespace(
            queue=SimpleNamespace(name="q"), broker=SimpleNamespace(url="amqp://ops:hunter2@h:5672/")
        )
    )

    def refuse(endpoint, timeout_s):
        raise OSError(f"connection refused: {endpoint.url} {endpoint!r}")

    sampler = QueueSampler(ctx, fetch=refuse)
    with caplog.at_level(logging.INFO, logger="sojourn"):
        assert sampler.probe() is None
    assert sampler.source == "declare"
    assert "management API not used" in caplog.text and "hunter2" not in caplog.text


def test_the_probe_reads_the_queue_over_http_with_basic_auth():
    # A loopback HTTP server standing in for the management API: checks the path and the header.
    import http.server
    import threading

    seen = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen["path"], seen["auth"] = self.path, self.headers.get("Authorization")
            body = b'{"messages_ready": 4, "messages_unacknowledged": 7, "consumers": 1}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ctx = SimpleNamespace(
            scenario=SimpleNamespace(
                queue=SimpleNamespace(name="jobs/1"), broker=SimpleNamespace(url="amqp://ops:pw@127.0.0.1/vh")
            )
        )
        sampler = QueueSampler(ctx, management_port=server.server_port)
        assert sampler.source == "declare"  # until a probe succeeds
        sampler.endpoint = sampler.probe()
        assert sampler.endpoint is not None and sampler.source == "declare+management"
        assert seen["path"] == "/api/queues/vh/jobs%2F1"
        assert _credentials(seen["auth"]) == "ops:pw"
    finally:
        server.shutdown()
        server.server_close()


# -- the control connection after a failed sample ----------------------------------------------------


class _Connection:
    def __init__(self, number):
        self.number = number
        self.is_open = True

    def close(self):
        self.is_open = False


class _Channel:
    def __init__(self, conn):
        self.conn = conn
        self._open = True

    @property
    def is_open(self):
        return self._open and self.conn.is_open

    def close(self):
        self._open = False


class _Broker:
    """What the sampler's passive declares get, in turn: (ready, consumers) or an exception."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked_on: list[int] = []  # the connection each declare went out on

    def queue_counts(self, channel, _queue, _timeout_s):
        self.asked_on.append(channel.conn.number)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            if getattr(answer, "reply_code", None) is not None:
                channel.close()  # the broker closes the channel it refused on
            raise answer
        return answer


def _sampler_on_broker_side(monkeypatch, broker: _Broker):
    """A QueueSampler on the real control-connection logic (BrokerSide), pika replaced by fakes."""
    from gevent.lock import RLock

    from loadgen.run import broker_side, queue_sampler
    from loadgen.run.broker_side import BrokerSide

    connections: list[_Connection] = []

    class Side(BrokerSide):
        def _connect_direct(self, name, on_close=None):
            connections.append(_Connection(len(connections)))
            return connections[-1]

    events: list[tuple] = []
    side = Side()
    side.scenario = SimpleNamespace(queue=SimpleNamespace(name="q"), broker=SimpleNamespace(url="amqp://h/"))
    side.worker, side._control, side._control_conn, side._control_lock = "w", None, None, RLock()
    side.writer = SimpleNamespace(append=lambda kind, row: events.append(row))
    monkeypatch.setattr(broker_side.amqp, "open_channel", lambda conn: _Channel(conn))
    monkeypatch.setattr(queue_sampler.topology, "queue_counts", broker.queue_counts)
    side.control()  # the run's start: topology and slot markers on the first connection
    return QueueSampler(side), side, connections, events


def test_a_sample_without_an_answer_closes_the_control_connection_and_the_next_opens_a_new_one(monkeypatch):
    from loadgen.errors import BrokerOperationFailed

    no_answer = BrokerOperationFailed("queue.declare passive 'q'", None, "no answer from the broker within 2 s")
    broker = _Broker((7, 1), no_answer, (5, 1))
    sampler, side, connections, events = _sampler_on_broker_side(monkeypatch, broker)
    assert sampler.sample()["ready"] == 7
    assert sampler.sample() is None and sampler.failures == 1
    # closed, not left open beside the next one with the slot markers exclusive to it
    assert [c.is_open for c in connections] == [False]
    assert sampler.sample()["ready"] == 5
    assert broker.asked_on == [0, 0, 1] and [c.is_open for c in connections] == [False, True]
    assert [row[4] for row in events] == [7.0, 5.0]  # queue_sample values: the failed second has none
    side.close_control()
    assert not any(c.is_open for c in connections)


def test_a_refused_sample_keeps_the_connection_and_its_slot_markers(monkeypatch):
    from loadgen.errors import BrokerOperationFailed

    gone = BrokerOperationFailed("queue.declare passive 'q'", 404, "NOT_FOUND - no queue 'q'")
    broker = _Broker(gone, (3, 0))
    sampler, _side, connections, _events = _sampler_on_broker_side(monkeypatch, broker)
    assert sampler.sample() is None
    assert sampler.sample()["ready"] == 3
    assert broker.asked_on == [0, 0] and len(connections) == 1 and connections[0].is_open


def test_a_control_channel_the_broker_closed_is_reopened_on_the_same_connection(monkeypatch):
    _sampler, side, connections, _events = _sampler_on_broker_side(monkeypatch, _Broker())
    first = side.control()
    first.close()  # e.g. a refused declaration on it
    again = side.control()
    assert again is not first and again.is_open and again.conn is connections[0] and len(connections) == 1
    connections[0].close()  # the connection itself went: a new one, the old one not used again
    assert side.control().conn is connections[1]
