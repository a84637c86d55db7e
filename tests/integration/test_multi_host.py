"""Locust's master and two workers as three hosts: network namespaces the test creates (a bridge,
a veth pair each, addresses the test assigns), each process in its own working directory, and the
workers unable to see the master's run directory (a private tmpfs over it in their mount
namespace). The broker is reached through a forwarder the test runs on the bridge's address. At
the end the master's run directory holds every worker's traces, sent over Locust's messaging with
no file copied by hand, and its summary equals what the workers published and consumed by their
own copies of the traces, with nothing unaccounted.

Needs root and `ip` (iproute2); skipped otherwise."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, free_port, write_scenario
from tests.integration.traces import published_on_schedule, read_rows

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None,
        reason="network namespaces need root, iproute2 and unshare",
    ),
]

RATE, DURATION_S = 50, 6
SCENARIO = f"""
name: it-multi-host
queue: {{name: sojourn.it.multi-host, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {DURATION_S}, warmup_s: 1, drain_timeout_s: 15}}
producers: [{{name: p, count: 2, rate: {RATE}, arrival: constant, confirms: true}}]
consumers: [{{name: c, count: 2, prefetch: 10, processing_ms: 2}}]
"""
MASTER_PORT = 5557
HOSTS = ("m", "w1", "w2")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class _Forwarder:
    """TCP from `listen` to the broker on 127.0.0.1:5672 (RabbitMQ's guest user logs in from loopback only)."""

    def __init__(self, host: str, port: int):
        self.server = socket.create_server((host, port))
        self.server.settimeout(0.5)
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                continue
            upstream = socket.create_connection(("127.0.0.1", 5672))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.stopped.set()
        self.server.close()


@pytest.fixture
def hosts():
    """Three namespaces on a bridge: {"m": (namespace, address), "w1": ..., "w2": ...} and the
    bridge's address (where the broker's forwarder listens)."""
    tag = f"{random.randrange(16**4):04x}"
    net = f"10.{200 + random.randrange(50)}.{random.randrange(250)}"
    bridge = f"sjb{tag}"
    made: list[str] = []
    try:
        _ip("link", "add", "name", bridge, "type", "bridge")
        _ip("addr", "add", f"{net}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        out = {}
        for i, name in enumerate(HOSTS):
            ns, veth = f"sj{tag}{name}", f"sj{tag}{i}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
            _ip("link", "set", f"{veth}p", "netns", ns)
            _ip("link", "set", veth, "master", bridge, "up")
            address = f"{net}.{10 + i}"
            for args in (("addr", "add", f"{address}/24", "dev", f"{veth}p"), ("link", "set", f"{veth}p", "up")):
                _ip("netns", "exec", ns, "ip", *args)
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            out[name] = (ns, address)
        yield out, f"{net}.1"
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_master_and_two_workers_on_three_hosts_end_with_the_whole_run_on_the_master(
    hosts, tmp_path, analyze_in_process
):
    namespaces, broker_host = hosts
    broker_port = free_port()
    forwarder = _Forwarder(broker_host, broker_port)
    env = {
        **os.environ,
        "SOJOURN_AMQP_URL": f"amqp://guest:guest@{broker_host}:{broker_port}/",
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
    }
    master_dir = tmp_path / "master"
    run_dir = master_dir / "run"
    procs: dict[str, subprocess.Popen] = {}
    logs = {}
    locust = [sys.executable, "-m", "locust", "-f", str(REPO / "loadgen" / "locustfile.py")]
    try:
        master_ns, master_address = namespaces["m"]
        master_dir.mkdir()
        scenario = write_scenario(master_dir / "s.yaml", SCENARIO)
        logs["m"] = open(master_dir / "locust.out", "w")  # noqa: SIM115 - closed below
        procs["m"] = subprocess.Popen(
            ["ip", "netns", "exec", master_ns, *locust, "--scenario", scenario, "--headless", "--only-summary"]
            + ["--master", "--master-bind-host", master_address, "--master-bind-port", str(MASTER_PORT)]
            + ["--expect-workers", "2", "--run-dir", str(run_dir)],
            cwd=master_dir,
            env=env,
            stdout=logs["m"],
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        for name in ("w1", "w2"):
            ns, _address = namespaces[name]
            home = tmp_path / name
            home.mkdir()
            scenario_copy = write_scenario(home / "s.yaml", SCENARIO)  # every host needs the scenario
            worker = " ".join(
                [*locust, "--scenario", scenario_copy, "--worker", "--master-host", master_address]
                + ["--master-port", str(MASTER_PORT)]
            )
            # Its own mount namespace, with a private empty tmpfs over the master's directory: this
            # host does not see the master's files.
            script = f"mount -t tmpfs tmpfs {master_dir} && cd {home} && exec {worker}"
            logs[name] = open(home / "locust.out", "w")  # noqa: SIM115 - closed below
            procs[name] = subprocess.Popen(
                ["ip", "netns", "exec", ns, "unshare", "-m", "--propagation", "private", "sh", "-c", script],
                cwd=home,
                env=env,
                stdout=logs[name],
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        code = procs["m"].wait(timeout=180)
        for name in ("w1", "w2"):
            procs[name].wait(timeout=60)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in logs.values():
            log.close()
        forwarder.close()
    said = {name: (tmp_path / ("master" if name == "m" else name) / "locust.out").read_text() for name in HOSTS}
    assert code == 0, said["m"][-4000:]

    # Each worker wrote into a directory of its own, never the master's, and kept its copy there.
    copies = {}
    for name in ("w1", "w2"):
        [copy] = (tmp_path / name / "runs").iterdir()
        copies[name] = copy
        assert "sent" in said[name] and "files of the run to the master" in said[name], said[name][-3000:]
    # The master's directory holds every file of both workers, byte for byte.
    for name, copy in copies.items():
        for rel in _files_under(copy / "traces"):
            assert (run_dir / "traces" / rel).read_bytes() == (copy / "traces" / rel).read_bytes(), (name, rel)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "completed" and not run.get("workers_missing")

    # What the workers' own copies say they published and acked, counted here...
    publishes = [r for c in copies.values() for r in read_rows(c, "publish")]
    published = {r["message_id"] for r in publishes}
    acked = [r["message_id"] for c in copies.values() for r in read_rows(c, "delivery") if r["outcome"] == "ack"]
    # Two producers at a constant rate, each its whole schedule (but a send the run's end overtook:
    # the last is due 20 ms before it), every message id once.
    assert published_on_schedule(publishes, RATE, DURATION_S) == len(published)
    assert len({r["producer"] for r in publishes}) == 2  # one on each worker
    assert sorted(acked) == sorted(published)  # each acked once, by one of the two consumers
    # ...is what the master's analysis of its directory reports.
    summary = analyze_in_process(run_dir)
    m = summary["messages"]
    assert (m["published"], m["acked"], m["unaccounted"]) == (len(published), len(acked), 0)
    assert summary["run"]["workers_missing"] == []
