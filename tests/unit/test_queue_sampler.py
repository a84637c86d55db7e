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
