"""Start and stop the proxy process from the load generator, and route URLs through it.

The proxy runs as `python -m loadgen.netem` in a clean interpreter: Locust's
process is gevent-monkey-patched, where asyncio and forking are unreliable, and a
separate process keeps the delay line off the workers' loop (and its CPU).
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

from loadgen.childenv import child_env
from loadgen.errors import LoadgenError
from loadgen.netem.timeline import Timeline, timeline_to_json

__all__ = ["NetemProcess", "NetemError", "proxied_url", "upstream_address", "PROXY_HOST"]

PROXY_HOST = "127.0.0.1"
_DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}


class NetemError(LoadgenError, RuntimeError):
    """The proxy process could not be started."""


def upstream_address(url: str) -> tuple[str, int]:
    """(host, port) the broker URL points at; the scheme's default port when none is given."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    return host, parts.port or _DEFAULT_PORTS.get(parts.scheme, 5672)


def proxied_url(url: str, port: int, host: str = PROXY_HOST) -> str:
    """The same URL (scheme, user, password, vhost, query) with host:port replaced by the proxy's."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme, f"{userinfo}{at}{host}:{port}", parts.path, parts.query, parts.fragment))


class NetemProcess:
    """A running proxy: `url` is what participants connect to; `stop()` ends it (and flushes)."""

    def __init__(self, proc: subprocess.Popen, port: int, broker_url: str):
        self.proc = proc
        self.port = port
        self.broker_url = broker_url
        self.url = proxied_url(broker_url, port)
        # TLS passes through unchanged: the certificate must still match the broker's name.
        self.tls_server_hostname = upstream_address(broker_url)[0]

    @classmethod
    def start(
        cls,
        broker_url: str,
        timeline: Timeline,
        *,
        t0_ns: int | None,
        run_dir: str = "",
        run_id: str = "",
        worker: str = "",
        listen_port: int = 0,
        seed: str = "",
    ) -> NetemProcess:
        host, port = upstream_address(broker_url)
        cmd = [
            sys.executable,
            "-m",
            "loadgen.netem",
            "--upstream",
            f"{host}:{port}",
            "--listen-port",
            str(listen_port),
            "--timeline",
            timeline_to_json(timeline),
            *(["--t0-ns", str(t0_ns)] if t0_ns is not None else ["--wait-for-t0"]),  # then told by set_t0
            "--watch-stdin",
        ]
        if run_dir:
            cmd += ["--run-dir", run_dir, "--run-id", run_id]
        if worker:
            cmd += ["--worker", worker]
        if seed:
            cmd += ["--seed", str(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:4], "big"))]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=child_env())
        assert proc.stdout is not None  # stdout=subprocess.PIPE
        line = proc.stdout.readline().decode(errors="replace").strip()
        if not line.isdigit():
            proc.kill()
            proc.wait()
            raise NetemError(f"the network proxy did not start (exit status {proc.returncode}); see its message above")
        return cls(proc, int(line), broker_url)

    def set_t0(self, t0_ns: int) -> None:
        """The run's t0, fixed by the start barrier after the proxy was started without one: until
        it arrives the proxy holds the timeline's first state."""
        try:
            assert self.proc.stdin is not None  # stdin=subprocess.PIPE
            self.proc.stdin.write(f"t0 {t0_ns}\n".encode())
            self.proc.stdin.flush()
        except OSError as exc:  # the proxy is gone: its participants fail and say so
            raise NetemError(f"the network proxy exited before the run started: {exc}") from exc

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then wait for the proxy to record its statistics and exit; kill it if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.proc.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]  # a pipe not opened is None: AttributeError, caught below
            except (OSError, AttributeError):
                pass
        return self.proc.wait()
