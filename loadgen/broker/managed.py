"""A throwaway private RabbitMQ node run from the installed rabbitmq-server, for settings
(a low memory watermark) that must never be set on a shared broker.

    broker = ManagedBroker(".sojourn/broker/sojourn-5673", port=5673,
                           settings={"vm_memory_high_watermark.absolute": "150MiB"})
    broker.start(timeout=90)      # writes the config, starts the node detached, waits for AMQP
    broker.url                    # amqp://guest:guest@127.0.0.1:5673/
    broker.status()               # BrokerStatus: running, pid, watermark, memory alarm
    broker.stop(purge=True)       # rabbitmqctl stop, then delete the directory

The node is `sojourn-<port>@localhost`. Everything it writes lives under its directory:
rabbitmq.conf, enabled_plugins (empty: no management plugin, unless a management_port asks for
it: the HTTP API on that loopback port, for a broker's own counters), rabbitmq-env.conf (so the
system's /etc/rabbitmq/rabbitmq-env.conf is not read), mnesia/ (data), log/ (the node's log and
console.log), the pid file and sojourn-broker.json (port, node, distribution port, settings).
The node outlives the process that started it; `ManagedBroker.from_dir(dir)` finds it again.
The Erlang cookie is the usual $HOME/.erlang.cookie. Errors derive from BrokerError.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from loadgen.broker.config import MIB, Settings, effective_settings, node_url, render_config, tls_ports, validate_port
from loadgen.broker.local import (
    amqp_answers,
    free_loopback_port,
    is_node_process,
    port_free,
    port_owner,
    send_signal,
    wait_gone,
)
from loadgen.errors import LoadgenError

__all__ = [
    "BrokerError",
    "BrokerNotInstalled",
    "BrokerPortInUse",
    "BrokerStartFailed",
    "BrokerStatus",
    "DEFAULT_PORT",
    "ManagedBroker",
    "StartResult",
    "default_dir",
    "find_rabbitmq",
]

DEFAULT_PORT = 5673
DIST_PORT_OFFSET = 20000  # RabbitMQ's own convention: distribution port = AMQP port + 20000
STATE_FILE = "sojourn-broker.json"
LOG_TAIL_LINES = 25
FALLBACK_SCRIPTS = Path("/usr/lib/rabbitmq/bin")  # Debian/Ubuntu; /usr/sbin is often not on a user's PATH

Progress = Callable[[str], None]


class BrokerError(LoadgenError):
    """Root of the managed broker's errors."""


class BrokerNotInstalled(BrokerError):
    def __init__(self) -> None:
        super().__init__(
            f"rabbitmq-server is not installed (looked on PATH and in {FALLBACK_SCRIPTS}): "
            "apt-get install -y rabbitmq-server"
        )


class BrokerPortInUse(BrokerError):
    def __init__(self, port: int, what: str, owner: str | None, advice: str = "choose another --port"):
        self.port = port
        self.owner = owner
        by = f" by {owner}" if owner else " by another process"
        super().__init__(f"{what} port {port} on 127.0.0.1 is in use{by}; {advice}")


class BrokerStartFailed(BrokerError):
    """The node did not come up; carries the log files' paths and their last lines."""

    def __init__(self, node: str, reason: str, logs: Mapping[str, str]):
        self.node = node
        self.reason = reason
        self.logs = dict(logs)
        text = [f"the private broker {node} did not start: {reason}"]
        for path, tail in self.logs.items():
            text.append(f"--- last lines of {path} ---\n{tail.rstrip() or '(empty)'}")
        super().__init__("\n".join(text))


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    node: str
    port: int
    dir: Path
    pid: int | None = None
    watermark: str | None = None  # as configured, e.g. "relative 0.4" or "absolute 150MiB"
    memory_limit_bytes: int | None = None  # from the live node (rabbitmqctl status)
    memory_used_bytes: int | None = None
    alarms: tuple[str, ...] | None = None  # e.g. ("memory",); None when not asked or not answered
    detail: str = ""  # why a live query failed, if it did

    @property
    def memory_alarm(self) -> bool | None:
        return None if self.alarms is None else "memory" in self.alarms


@dataclass(frozen=True)
class StartResult:
    already_running: bool
    seconds: float
    pid: int | None = None


@dataclass(frozen=True)
class _Rabbit:
    server: Path
    ctl: Path


def default_dir(port: int, base: str | Path = ".") -> Path:
    """`.sojourn/broker/sojourn-<port>` under `base` (the current directory by default)."""
    return Path(base) / ".sojourn" / "broker" / f"sojourn-{port}"


def find_rabbitmq() -> _Rabbit:
    """The real rabbitmq-server and rabbitmqctl scripts, bypassing Debian's wrapper in /usr/sbin
    (which switches to the rabbitmq user, and so to that user's cookie and HOME)."""
    candidates = []
    found = shutil.which("rabbitmq-server")
    if found:
        real = Path(os.path.realpath(found))
        candidates.append(real.parent / "rabbitmq-server" if real.name == "rabbitmq-script-wrapper" else real)
    candidates.append(FALLBACK_SCRIPTS / "rabbitmq-server")
    for server in candidates:
        ctl = server.with_name("rabbitmqctl")
        if server.is_file() and os.access(server, os.X_OK) and ctl.is_file():
            return _Rabbit(server, ctl)
    raise BrokerNotInstalled()


class ManagedBroker:
    """One private node: `dir` holds everything it writes (default `default_dir(port)`); `port` is
    its AMQP port on 127.0.0.1; `settings` are rabbitmq.conf keys, validated here (see
    loadgen.broker.config) and completed with the defaults."""

    def __init__(
        self,
        dir: str | Path | None = None,  # noqa: A002 - public keyword, as the .dir attribute and the repr
        port: int = DEFAULT_PORT,
        settings: Mapping[str, object] | None = None,
        management_port: int | None = None,
    ):
        self.port: int = validate_port(port)
        self.dir: Path = Path(dir) if dir is not None else default_dir(port)
        self.settings: Settings = effective_settings(settings)
        self.management_port = None if management_port is None else validate_port(management_port, "--management-port")
        self._process: subprocess.Popen | None = None

    def __repr__(self) -> str:
        return f"ManagedBroker(dir={str(self.dir)!r}, port={self.port}, node={self.node!r})"

    @classmethod
    def from_dir(cls, dir: str | Path) -> ManagedBroker:  # noqa: A002 - public keyword, as in ManagedBroker(dir=...)
        """The broker last started in `dir` (its port and settings from sojourn-broker.json)."""
        path = Path(dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
            port = int(state["port"])
            settings = state.get("settings") or {}
            management_port = state.get("management_port")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BrokerError(f"{path}: not a readable sojourn broker state file ({exc})") from None
        return cls(dir, port=port, settings=settings, management_port=management_port)

    # -- identity ---------------------------------------------------------------------------
    @property
    def node(self) -> str:
        return f"sojourn-{self.port}@localhost"

    @property
    def url(self) -> str:
        return node_url(self.port)

    @property
    def management_url(self) -> str | None:
        """The management plugin's HTTP API (guest/guest), when the node runs it."""
        return None if self.management_port is None else f"http://127.0.0.1:{self.management_port}/api/"

    @property
    def pid_file(self) -> Path:
        return self.dir / "rabbitmq.pid"

    @property
    def log_file(self) -> Path:
        return self.dir / "log" / f"{self.node}.log"

    @property
    def console_log(self) -> Path:
        return self.dir / "log" / "console.log"

    @property
    def watermark(self) -> str:
        for kind in ("relative", "absolute"):
            value = self.settings.get(f"vm_memory_high_watermark.{kind}")
            if value is not None:
                return f"{kind} {value}" + (f" ({int(value) / MIB:g} MiB)" if value.isdigit() else "")
        return "default"

    # -- lifecycle --------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The node's OS pid if it is alive (and really is this node), else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if is_node_process(pid, self.node) else None

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self, timeout: float = 90.0, progress: Progress | None = None) -> StartResult:
        """Start the node detached and wait until it accepts an AMQP connection.

        Returns at once (already_running=True) when this directory's node is already up.
        Raises BrokerNotInstalled, BrokerPortInUse or BrokerStartFailed (the node is stopped then);
        on KeyboardInterrupt the node is stopped too.
        """
        say = progress or (lambda _msg: None)
        began = time.monotonic()
        rabbit = find_rabbitmq()
        running = self.pid()
        if running is not None:
            return StartResult(True, 0.0, running)
        _check_free(self.port, "AMQP")
        if self.management_port is not None:
            _check_free(self.management_port, "management (HTTP)", "choose another --management-port")
        for key, tls_port in tls_ports(self.settings).items():
            _check_free(tls_port, "TLS (amqps)", f"choose another port in --setting {key}=127.0.0.1:PORT")
        dist_port = self._dist_port()
        self._write_files(dist_port)
        env = self._env(dist_port)
        self.console_log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.console_log, "wb") as console:  # this start only: its errors, not the last one's
            # A new session: the node survives this process and a Ctrl-C aimed at it. Foreground
            # mode (not -detached) keeps the node's early errors in console.log.
            self._process = subprocess.Popen(
                [str(rabbit.server)],
                env=env,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        say(
            f"starting {self.node} on 127.0.0.1:{self.port} (distribution port {dist_port}, "
            f"data in {self.dir}, watermark {self.watermark})"
        )
        try:
            return self._await_amqp(began, timeout, say)
        except KeyboardInterrupt:
            self._kill()  # do not leave a half-started node behind
            raise

    def _await_amqp(self, began: float, timeout: float, say: Progress) -> StartResult:
        assert self._process is not None
        deadline = began + timeout
        next_note = time.monotonic() + 5
        while True:
            code = self._process.poll()
            if code is not None:
                raise BrokerStartFailed(
                    self.node, f"rabbitmq-server exited (status {code}) before answering AMQP", self._log_tails()
                )
            if amqp_answers(self.port):
                return StartResult(False, time.monotonic() - began, self.pid())
            now = time.monotonic()
            if now >= deadline:
                self._kill()
                raise BrokerStartFailed(
                    self.node,
                    f"no AMQP answer on 127.0.0.1:{self.port} within {timeout:g} s (the node was stopped)",
                    self._log_tails(),
                )
            if now >= next_note:
                say(f"waiting for {self.node} to answer AMQP ... {now - began:.0f} s")
                next_note = now + 5
            time.sleep(0.25)

    def stop(self, timeout: float = 60.0, purge: bool = False) -> bool:
        """Stop the node (rabbitmqctl stop, then wait up to `timeout` for the process to exit, then
        SIGTERM, then SIGKILL); True if it was running.
        `purge` then deletes the directory (only one that sojourn-broker.json marks as ours)."""
        pid = self.pid()
        if pid is not None:
            try:
                # Not `stop <pid_file>`: that waits on the pid with its own check, which took a
                # minute here after the node had gone; we watch the pid ourselves (zombie = gone).
                self.ctl("stop", timeout=timeout)
            except (subprocess.TimeoutExpired, BrokerError):
                pass
            if not wait_gone(pid, self.node, timeout):
                send_signal(pid, signal.SIGTERM)
                if not wait_gone(pid, self.node, 20):
                    send_signal(pid, signal.SIGKILL)
                    wait_gone(pid, self.node, 5)
        if self._process is not None:
            try:
                self._process.wait(timeout=10)  # reap the shell that ran the node
            except subprocess.TimeoutExpired:
                pass
            self._process = None
        if purge:
            self.purge()
        return pid is not None

    def purge(self) -> None:
        if self.is_running():
            raise BrokerError(f"{self.node} is running: stop it before deleting {self.dir}")
        if self.dir.exists():
            if not (self.dir / STATE_FILE).is_file():
                raise BrokerError(f"{self.dir} has no {STATE_FILE}: not a sojourn broker directory, not deleting it")
            shutil.rmtree(self.dir)

    def status(self, query_node: bool = True, timeout: float = 30.0) -> BrokerStatus:
        """Running or not; with `query_node`, the live memory limit, use and alarms (rabbitmqctl, ~2-4 s)."""
        pid = self.pid()
        base: dict[str, Any] = dict(node=self.node, port=self.port, dir=self.dir, pid=pid, watermark=self.watermark)
        if pid is None or not query_node:
            return BrokerStatus(running=pid is not None, **base)
        try:
            out = self.ctl("status", "--formatter", "json", timeout=timeout)
            live = json.loads(out)
        except (subprocess.TimeoutExpired, BrokerError, ValueError) as exc:
            return BrokerStatus(running=True, detail=f"rabbitmqctl status failed: {exc}", **base)
        total = live.get("memory", {}).get("total", {})
        strategy = live.get("vm_memory_calculation_strategy", "rss")
        used = total.get(strategy) if isinstance(total, dict) else None
        alarms = tuple(
            sorted(
                {
                    # a str in rabbitmqctl's JSON; dict.get's stub makes a nested get "Any | None"
                    cast(str, a.get("resource", a.get("type", "?"))) if isinstance(a, dict) else str(a)
                    for a in live.get("alarms", [])
                }
            )
        )
        return BrokerStatus(
            running=True,
            memory_limit_bytes=live.get("vm_memory_high_watermark_limit"),
            memory_used_bytes=used,
            alarms=alarms,
            **base,
        )

    # -- helpers ----------------------------------------------------------------------------
    def _dist_port(self) -> int:
        preferred = self.port + DIST_PORT_OFFSET
        if preferred <= 65535 and port_free(preferred):
            return preferred
        return free_loopback_port()

    def _write_files(self, dist_port: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq.conf").write_text(
            render_config(self.settings, port=self.port, management_port=self.management_port)
        )
        plugins = "rabbitmq_management" if self.management_port is not None else ""
        (self.dir / "enabled_plugins").write_text(f"[{plugins}].\n")
        # Our own env file, so /etc/rabbitmq/rabbitmq-env.conf (NODENAME=...) is never read.
        (self.dir / "rabbitmq-env.conf").write_text(
            "# Written by sojourn: keep epmd on loopback.\nERL_EPMD_ADDRESS=127.0.0.1\n"
        )
        state = {
            "port": self.port,
            "node": self.node,
            "dist_port": dist_port,
            "url": self.url,
            "settings": self.settings,
            "management_port": self.management_port,
        }
        (self.dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def _env(self, dist_port: int | None = None) -> dict[str, str]:
        d = self.dir.resolve()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")}
        env.update(
            {
                "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
                "RABBITMQ_NODENAME": self.node,
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port),
                "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "advanced.config"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
                "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
                "RABBITMQ_LOG_BASE": str(d / "log"),
                "RABBITMQ_PID_FILE": str(d / "rabbitmq.pid"),
                "ERL_EPMD_ADDRESS": "127.0.0.1",
                # Erlang distribution (rabbitmqctl's way in) on loopback only.
                "ERL_FLAGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            }
        )
        if dist_port is not None:
            env["RABBITMQ_DIST_PORT"] = str(dist_port)
        return env

    def ctl(self, *args: str, timeout: float = 30.0) -> str:
        """`rabbitmqctl -n <this node> ARGS...` with the node's environment; its stdout.
        Raises BrokerError when it fails (e.g. `ctl("set_vm_memory_high_watermark", "absolute", "1MB")`)."""
        rabbit = find_rabbitmq()
        done = subprocess.run(
            [str(rabbit.ctl), "-n", self.node, *args],
            env=self._env(),
            cwd=self.dir,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise BrokerError(
                f"rabbitmqctl {' '.join(args)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}"
            )
        return done.stdout

    def _kill(self) -> None:
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signal.SIGTERM)
            self._process.wait(timeout=20)
        except (ProcessLookupError, PermissionError):
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=5)
        self._process = None

    def _log_tails(self) -> dict[str, str]:
        return {str(path): _tail(path, LOG_TAIL_LINES) for path in (self.log_file, self.console_log) if path.exists()}


# -- module helpers ---------------------------------------------------------------------------
def _check_free(port: int, what: str, advice: str = "choose another --port") -> None:
    if not port_free(port):
        raise BrokerPortInUse(port, what, port_owner(port), advice)


def _tail(path: Path, lines: int) -> str:
    """The last `lines` lines; when the first error is earlier (cuttlefish names a bad setting
    there, then the VM prints 40 lines of crash report), its first lines come first."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    first_error = next((i for i, line in enumerate(text) if "[error]" in line), None)
    if first_error is None or first_error >= len(text) - lines:
        return "\n".join(text[-lines:])
    head = text[first_error : first_error + lines // 2]
    return "\n".join(head + ["[...]"] + text[-(lines - len(head)) :])
