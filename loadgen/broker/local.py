"""The local machine as a private node sees it: node processes by pid, loopback ports, and the AMQP
handshake that says a node is ready (loadgen.broker.managed runs the node's lifecycle on them)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

__all__ = [
    "amqp_answers",
    "free_loopback_port",
    "is_node_process",
    "port_free",
    "port_owner",
    "send_signal",
    "wait_gone",
]


def is_node_process(pid: int, node: str) -> bool:
    """Whether `pid` is alive (not a zombie) and the BEAM of node `node`, not a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return False
    # RabbitMQ 3.10 names the node at run time (no -sname on beam's command line), so look for the
    # RABBITMQ_NODENAME we started it with: a reused pid will not have it.
    return b"beam" in cmdline and f"RABBITMQ_NODENAME={node}\0".encode() in environ


def wait_gone(pid: int, node: str, seconds: float) -> bool:
    """Wait up to `seconds` for node `node`'s process `pid` to be gone; True if it is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_node_process(pid, node):
            return True
        time.sleep(0.2)
    return not is_node_process(pid, node)


def send_signal(pid: int, sig: int) -> None:
    """Signal `pid`, quietly when it is gone already or not ours."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_loopback_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now."""
    with socket.socket() as s:
        # SO_REUSEADDR as the node sets it: lingering TIME_WAIT sockets do not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_owner(port: int) -> str | None:
    """Best effort `name (pid N)` of the listener, from `ss`."""
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'users:\(\("([^"]+)",pid=(\d+)', out)
    return f"{found.group(1)} (pid {found.group(2)})" if found else None


def amqp_answers(port: int) -> bool:
    """A full AMQP handshake as guest, not just an open port: the listener opens before the
    node is ready to accept logins."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    import pika

    params = pika.ConnectionParameters(
        "127.0.0.1",
        port,
        credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1,
        socket_timeout=2,
        blocked_connection_timeout=None,
    )
    try:
        pika.BlockingConnection(params).close()
    except Exception:  # noqa: BLE001 - any failure here means "not ready yet"
        return False
    return True
