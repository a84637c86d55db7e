"""amqps:// end to end: a private node listening TLS (a throwaway CA and a server certificate for
localhost made with the openssl CLI), a short `sojourn run` over TLS whose every message is
confirmed and acked exactly once, the password in no output or file of the run, and a CA that
does not sign the server's certificate refused like any unreachable broker (exit 3, URL masked).

The node is started as a user would (`sojourn broker up --setting ...`) and stopped with
`sojourn broker down --purge` in the fixture's teardown, whatever happens. guest's password is
changed on the private node to a unique string, so that "not in any file" means something.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from loadgen.broker import ManagedBroker
from tests.integration.conftest import BIN, REPO, free_port, sojourn, write_scenario
from tests.integration.traces import read_rows

_HAVE_RABBIT = shutil.which("rabbitmq-server") is not None or Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists()
pytestmark = [
    pytest.mark.skipif(
        shutil.which("openssl") is None,
        reason="the openssl CLI is not installed (needed to make the test CA and certificate)",
    ),
    pytest.mark.skipif(not _HAVE_RABBIT, reason="rabbitmq-server is not installed"),
]

SCENARIO = """
name: it-tls
broker: {{url: "{url}", connect_timeout_s: 5}}
queue: {{name: sojourn.it.tls, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: 3, drain_timeout_s: 10}}
producers:
  - {{name: p, rate: 100, confirms: true}}
  # 100 kB bodies: one fastio FrameWriter write of ~100 kB each, several TLS records, through pika's
  # TLS transport (fastio tunes only plaintext sockets)
  - {{name: big, rate: 10, size_bytes: 100000, confirms: true}}
consumers:
  - {{name: c, prefetch: 50}}
"""


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"openssl {' '.join(args)}: {done.stderr}"


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA (EC P-256, one day): (certificate, key)."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.pem",
        "-days",
        "1",
        "-subj",
        f"/CN=sojourn test {name}",
        cwd=directory,
    )
    return directory / f"{name}.pem", directory / f"{name}.key"


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate it signs for localhost and 127.0.0.1, and a second, unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca(directory, "ca")
    other_ca, _ = make_ca(directory, "other-ca")
    (directory / "server.ext").write_text(
        "subjectAltName = DNS:localhost, IP:127.0.0.1\n"
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
        "authorityKeyIdentifier = keyid, issuer\n"
        "subjectKeyIdentifier = hash\n"
    )
    openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
        cwd=directory,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        cwd=directory,
    )
    return {"ca": ca, "other_ca": other_ca, "cert": directory / "server.pem", "key": directory / "server.key"}


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory):
    """(tls port, password, certificates) of a private node with an amqps listener on loopback;
    `sojourn broker down --purge` afterwards, whatever happened."""
    base = tmp_path_factory.mktemp("tls")
    certs = make_certificates(base / "certs")
    port = free_port()
    tls_port = free_port({port, port + 20000})
    directory = base / "broker"
    settings = {
        "listeners.ssl.default": f"127.0.0.1:{tls_port}",
        "ssl_options.cacertfile": str(certs["ca"]),
        "ssl_options.certfile": str(certs["cert"]),
        "ssl_options.keyfile": str(certs["key"]),
        "ssl_options.verify": "verify_none",  # no client certificates
        "ssl_options.fail_if_no_peer_cert": "false",
    }
    try:
        began = time.monotonic()
        up = sojourn(
            "broker",
            "up",
            "--port",
            str(port),
            "--dir",
            str(directory),
            "--timeout",  # catches a hang; a start takes 10-25 s on a loaded machine of two cores
            "120",
            *[a for key, value in settings.items() for a in ("--setting", f"{key}={value}")],
            timeout=180,
        )
        if up.returncode != 0:
            # sojourn refusing the settings is a failure; the node failing on its TLS setup
            # (e.g. an Erlang without its ssl application) is this machine's, and a skip
            if "did not start" in up.stderr and ("ssl" in up.stderr.lower() or "tls" in up.stderr.lower()):
                pytest.skip(f"the private node does not start with a TLS listener here: {up.stderr[-1500:]}")
            raise AssertionError(up.stderr)
        print(f"node up in {time.monotonic() - began:.1f} s")
        # guest/guest would make "the password is in no file" meaningless ("guest" is also the
        # user): give guest a password of its own on this throwaway node.
        password = "tls-" + secrets.token_hex(8)
        ManagedBroker.from_dir(directory).ctl("change_password", "guest", password, timeout=60)
        yield tls_port, password, certs
    finally:
        if (directory / "sojourn-broker.json").exists():
            down = sojourn("broker", "down", "--dir", str(directory), "--purge", timeout=120)
            assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def runs(tls_node, tmp_path_factory):
    """Both runs at once (each would otherwise wait on its own): the good CA, and an unrelated one."""
    tls_port, password, certs = tls_node
    base = tmp_path_factory.mktemp("tls-runs")
    url = f"amqps://guest:{password}@localhost:{tls_port}/"
    scenario = write_scenario(base / "tls.yaml", SCENARIO.format(url=url))
    procs = {}
    for case, ca in (("good", certs["ca"]), ("wrong-ca", certs["other_ca"])):
        procs[case] = subprocess.Popen(
            [str(BIN / "sojourn"), "run", scenario, "--out", str(base / case), "--no-analyze"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**_clean_env(), "SOJOURN_TLS_CAFILE": str(ca)},
        )
    out = {}
    try:
        for case, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=120)
            out[case] = (proc.returncode, stdout, stderr, base / case)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    return url, password, out


def _clean_env() -> dict:
    import os

    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("SOJOURN_AMQP_URL", "SOJOURN_TLS_CAFILE", "SOJOURN_TLS_INSECURE")
    }


def test_a_run_over_amqps_confirms_and_acks_every_message_once_and_never_shows_the_password(runs):
    url, password, out = runs
    code, stdout, stderr, run_dir = out["good"]
    assert code == 0, stderr[-3000:]

    publishes = read_rows(run_dir, "publish")
    deliveries = read_rows(run_dir, "delivery")
    assert sum(p["producer_group"] == "p" for p in publishes) > 100, "~100/s for 3 s"
    assert sum(p["producer_group"] == "big" for p in publishes) > 10, "~10/s for 3 s"
    published = [p["message_id"] for p in publishes]
    assert len(set(published)) == len(published)
    assert {p["outcome"] for p in publishes} == {"confirmed"}
    acked = [d["message_id"] for d in deliveries if d["outcome"] == "ack"]
    assert sorted(acked) == sorted(published), "every message acked exactly once"
    assert len(deliveries) == len(published), "no redelivery, nothing else delivered"
    # kernel receive stamps through TLS: each consumer's connection got them, and every delivery's
    # arrival is after its publish and no later than its read
    joins = [json.loads(e["detail"]) for e in read_rows(run_dir, "event") if e["kind"] == "consumer_join"]
    assert joins and all(j["receive_stamp"] == "kernel" for j in joins), joins
    assert all(d["publish_ns"] <= d["receive_ns"] <= d["read_ns"] for d in deliveries)

    assert password not in stdout and password not in stderr
    leaks = [str(path) for path in run_dir.rglob("*") if path.is_file() and password.encode() in path.read_bytes()]
    assert not leaks, f"the password is in {leaks}"
    # it is there, masked: the run says which broker it used
    assert f"amqps://guest:****@localhost:{url.rsplit(':', 1)[1]}" in (run_dir / "run.json").read_text()


def test_a_ca_that_did_not_sign_the_server_certificate_fails_like_an_unreachable_broker(runs):
    url, password, out = runs
    code, stdout, stderr, _run_dir = out["wrong-ca"]
    assert code == 3, stderr[-3000:]
    masked = url.replace(password, "****")
    assert f"cannot reach the broker at {masked}" in stderr
    assert "certificate verify failed" in stderr.lower(), stderr
    # The advice is about the certificate, not about starting a RabbitMQ (which answered).
    assert "SOJOURN_TLS_CAFILE" in stderr and "rabbitmq-server -detached" not in stderr, stderr
    assert password not in stderr and password not in stdout
    assert "Traceback" not in stderr


def test_over_tls_a_record_read_late_carries_the_time_it_arrived(tmp_path):
    """Kernel receive stamps through TLS (loadgen.amqp.kstamp): the reader peeks the next TLS
    record's stamp from the socket underneath before the TLS layer reads it. A record sent, then
    left 0.2 s in the socket, is stamped when it arrived, not when it was read."""
    import socket
    import ssl
    import threading

    from loadgen.amqp import kstamp

    if kstamp.platform_reason() is not None:
        pytest.skip(kstamp.platform_reason())
    certs = make_certificates(tmp_path / "certs")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs["cert"], certs["key"])
    client_ctx = ssl.create_default_context(cafile=str(certs["ca"]))
    listener = socket.create_server(("127.0.0.1", 0))
    sent: dict[str, int] = {}

    def serve():
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)  # the client is ready
            sent["ns"] = time.time_ns()
            tls.sendall(b"delivery")
            tls.recv(1)  # until the client is done

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with client_ctx.wrap_socket(socket.create_connection(listener.getsockname()), server_hostname="localhost") as tls:
        tls.setsockopt(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, 1)
        time.sleep(0.05)  # Linux turns receive stamping on for the first such socket a moment later
        stamps = kstamp.ReceiveStamps()
        recv = kstamp._recv_stamped_tls(stamps, tls)  # as enable() installs it on pika's TLS transport
        tls.sendall(b"r")
        time.sleep(0.3)  # the stalled consumer: the record waits in the socket
        data = recv(tls, 4096)
        read_ns = time.time_ns()
        tls.sendall(b"d")
    thread.join(5)
    listener.close()
    assert data == b"delivery"
    assert sent["ns"] <= stamps.kernel_ns < sent["ns"] + 100_000_000  # when it arrived, on loopback
    assert read_ns - stamps.kernel_ns >= 200_000_000  # a read-time stamp would have hidden the wait
