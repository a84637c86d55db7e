"""The warm local Spark: a Spark Connect server that stays up between analyses.

A cold JVM and its first queries are most of a small analysis (docs/analysis.md, "The server").
`sojourn spark up` (loadgen.commands.spark) starts, from the installed pyspark, a Spark Connect
server that analyses then reach as clients; `sojourn analyze`, `run`, `sweep` and `nightly` start
one when none runs (`ensure`), and it stops itself once no analysis has used it for its idle time,
the way Gradle's daemon does.

The server is three processes in a process group of their own: a supervisor (analysis.supervisor,
run as `python -m analysis.supervisor`) and its children, the JVM (`spark-submit` of Spark's
SparkConnectServer, `local[*]`) and the analyst (analysis.analyst: the analysis kept imported and
connected, which warms the JVM and serves the commands' analyses). The supervisor starts them,
watches for idleness, and stops them when told to (SIGTERM) or when idle; `stop` signals the group
and waits.

Everything lives in one directory (SOJOURN_SPARK_DIR, default ~/.cache/sojourn/spark):

    server.json   the supervisor's pid, the JVM's, the port, memory, idle time, state (no secret)
    token         the authentication token clients present (mode 0600)
    server.log    the JVM's and the supervisor's output
    in-use.lock   held shared by every analysis while it runs; the supervisor stops an idle server
                  only while it holds it exclusively, so it never stops one in use
    start.lock    held by whoever starts a server, so two analyses do not start two
    last-used     its time is when an analysis last ended
    analyst.sock  the analyst's Unix socket (mode 0600)
    tmp/          Spark's local directory: spilled cache blocks and shuffle files

The server listens on 127.0.0.1 only and refuses clients without the token.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_IDLE_S",
    "ServerError",
    "PortInUse",
    "ServerInfo",
    "state_dir",
    "spark_from_env",
    "port_from_env",
    "idle_from_env",
    "heap_mib",
    "status",
    "running",
    "start",
    "stop",
    "ensure",
    "in_use",
    "idle_seconds",
    "url_of",
    "WARMUP_RUN",
    "warmed",
    "listening",
    "alive",
]

DEFAULT_PORT = 15052
"""Not Spark Connect's own default (15002), so that a user's own server there is left alone."""

DEFAULT_IDLE_S = 30 * 60
"""How long a server stays up with no analysis using it (SOJOURN_SPARK_IDLE_MINUTES, --idle-minutes)."""

HEAP_SHARE = 0.5
"""The JVM's heap, as a share of the machine's memory: the broker, the load generator and the OS keep
the rest. The heap grows only as the analyses use it; what the cache can not hold spills to tmp/."""

START_TIMEOUT_S = 180.0
WARMUP_RUN = Path(__file__).with_name("warmup_run")
"""A tiny built-in run (744 messages sampled from a quickstart run) that a new server analyses
before it says it is ready, so that the first real analysis does not pay for compiling Spark's code."""
WARM_ANALYSES = 8
WARM_SETTLED = 0.9
"""The warm-up analyses the built-in run until one takes no less than 0.9 of the one before, 8 times
at most: one analysis left the first real one paying the JIT (2026-12-05, after one: the quickstart
run's next analyses took 5.8, 4.7, 4.0, 4.2 s, then 3.2-3.8 s)."""

LOCAL_MASTER = "local[*]"
STOP_WAIT_S = 30.0
"""How long a process is given to end after SIGTERM, before SIGKILL."""


class ServerError(Exception):
    """The server could not be started, reached or stopped; the message says why and names the log."""


class PortInUse(ServerError):
    def __init__(self, port: int):
        super().__init__(
            f"port {port} on 127.0.0.1 is in use by another program: choose another with --port (or SOJOURN_SPARK_PORT)"
        )
        self.port = port


@dataclass(frozen=True)
class ServerInfo:
    """What server.json says of a running server."""

    pid: int  # the supervisor's; its process group holds the JVM too
    jvm_pid: int | None
    port: int
    state: str  # starting, warming, ready
    started: float  # time.time() at start
    ready_after_s: float | None
    idle_s: float
    heap_mib: int
    log: str
    spark_version: str
    master: str = LOCAL_MASTER

    @property
    def url(self) -> str:
        """The client URL without the token (safe to print)."""
        return f"sc://localhost:{self.port}"


# --- where, and from what ------------------------------------------------------


def state_dir(master: str | None = None) -> Path:
    """The directory of the server whose Spark master is `master` (None: the local one, local[*]);
    a server with another master (a cluster's) lives in a directory of its own inside."""
    configured = os.environ.get("SOJOURN_SPARK_DIR")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = Path(configured) if configured else cache / "sojourn" / "spark"
    if master is None:
        return base
    return base / f"master-{hashlib.sha1(master.encode()).hexdigest()[:12]}"


def spark_from_env(
    remote: str | None = None, master: str | None = None, server: bool | None = None
) -> tuple[str | None, str | None, bool]:
    """Where an analysis runs, each of the three from its argument or else the environment: a
    Spark Connect URL (SOJOURN_SPARK_REMOTE), the master of the local server or of a Spark of
    the command's own (SPARK_MASTER), and whether the local server is used (SOJOURN_SPARK_SERVER,
    unless 0). docs/analysis.md, "Running it"."""
    remote = remote or os.environ.get("SOJOURN_SPARK_REMOTE") or None
    master = master or os.environ.get("SPARK_MASTER") or None
    if server is None:
        server = os.environ.get("SOJOURN_SPARK_SERVER", "1") != "0"
    return remote, master, server


def port_from_env() -> int:
    return _int_env("SOJOURN_SPARK_PORT", DEFAULT_PORT)


def idle_from_env() -> float:
    return 60.0 * _int_env("SOJOURN_SPARK_IDLE_MINUTES", DEFAULT_IDLE_S // 60)


def _int_env(name: str, default: int) -> int:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ServerError(f"{name}={text!r}: not a whole number") from None
    if value <= 0:
        raise ServerError(f"{name}={text!r}: must be above 0")
    return value


def heap_mib(machine_bytes: int) -> int:
    """HEAP_SHARE of the machine's memory, at least 1 GiB."""
    return max(1024, int(HEAP_SHARE * machine_bytes) >> 20)


def spark_home() -> Path:
    """The installed pyspark's directory, which holds Spark's jars and spark-submit."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServerError("pyspark is not installed: pip install 'sojourn[analysis]'")
    return Path(spec.origin).parent


def spark_version() -> str:
    """The installed pyspark's version: a server's and its clients' must agree."""
    from importlib.metadata import version

    return version("pyspark")


def url_of(info: ServerInfo, directory: Path | None = None) -> str:
    """The client URL with the token: never print it."""
    token = (directory or state_dir()).joinpath("token").read_text().strip()
    return f"{info.url}/;token={token}"


# --- status ------------------------------------------------------------------


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:
        if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def status(directory: Path | None = None) -> ServerInfo | None:
    """The server running from `directory` (state_dir()), or None; a state file whose supervisor is
    gone is removed."""
    directory = directory or state_dir()
    path = directory / "server.json"
    try:
        info = ServerInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if not alive(info.pid):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    if info.jvm_pid is not None and not alive(info.jvm_pid):
        return None  # its supervisor is about to notice, and go
    return info


def running(info: ServerInfo) -> bool:
    """Whether the server's JVM still runs."""
    return alive(info.jvm_pid)


def write_state(directory: Path, info: ServerInfo) -> None:
    """server.json, replaced whole (a reader never sees half of it)."""
    tmp = directory / f".server.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(info), indent=2) + "\n")
    os.replace(tmp, directory / "server.json")


# --- starting ----------------------------------------------------------------


def _any_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(port) from None
            raise ServerError(f"port {port} on 127.0.0.1 can not be used: {exc.strerror}") from None


@contextlib.contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, how)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(
    port: int | None = None,
    idle_s: float | None = None,
    warm: bool = True,
    directory: Path | None = None,
    progress: Callable[[str], None] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    master: str | None = None,
) -> ServerInfo:
    """Start a server and wait until it is ready (warmed, unless `warm` is False). A server already
    running is returned as it is. `master`: its Spark's master (None: local[*]), whose server lives
    in state_dir(master) on a free port unless `port` says which. Raises PortInUse, or ServerError
    naming the log."""
    directory = directory or state_dir(master)
    with _locked(directory / "start.lock", fcntl.LOCK_EX):
        running = status(directory)
        if running is not None:
            return running if running.state == "ready" else _wait_ready(directory, running.pid, timeout_s)
        port = port or (port_from_env() if master is None else _any_free_port())
        _check_port_free(port)
        (directory / "tmp").mkdir(parents=True, exist_ok=True)
        token_path = directory / "token"
        with contextlib.suppress(OSError):
            token_path.unlink()
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
        log = directory / "server.log"
        command = [
            sys.executable,
            "-m",
            "analysis.supervisor",
            "--dir",
            str(directory),
            "--port",
            str(port),
            "--idle-s",
            str(idle_s if idle_s is not None else idle_from_env()),
        ]
        if not warm:
            command.append("--no-warm")
        if master is not None:
            command += ["--master", master]
        say = progress or (lambda _message: None)
        on = f" for {master}" if master is not None else ""
        say(f"starting a Spark Connect server{on} on 127.0.0.1:{port} (its log: {log})")
        with open(log, "ab") as out:
            supervisor = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                cwd=_package_root(),
                env={**os.environ, "PYTHONPATH": _python_path()},
            )
        try:
            return _wait_ready(directory, supervisor.pid, timeout_s, supervisor)
        except BaseException:
            _stop_group(supervisor.pid)
            raise


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[1])


def _python_path() -> str:
    """The supervisor imports this very package, also when it runs from a clone not installed."""
    existing = os.environ.get("PYTHONPATH")
    return _package_root() + (os.pathsep + existing if existing else "")


def _wait_ready(directory: Path, pid: int, timeout_s: float, process: subprocess.Popen | None = None) -> ServerInfo:
    deadline = time.monotonic() + timeout_s
    log = directory / "server.log"
    while time.monotonic() < deadline:
        info = status(directory)
        if info is not None and info.pid == pid and info.state == "ready":
            return info
        ended = process.poll() is not None if process is not None else not alive(pid)
        if ended:
            raise ServerError(f"the Spark Connect server did not start; the last lines of {log}:\n{_tail(log)}")
        time.sleep(0.1)
    raise ServerError(f"the Spark Connect server was not ready within {timeout_s:.0f} s; see {log}")


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "  (no log)"
    return "\n".join(f"  {line}" for line in text[-lines:])


# --- stopping ----------------------------------------------------------------


def stop(directory: Path | None = None) -> ServerInfo | None:
    """Stop the server running from `directory` and wait for both its processes; the one stopped, or None."""
    directory = directory or state_dir()
    info = status(directory)
    if info is None:
        return None
    _stop_group(info.pid, info.jvm_pid)
    with contextlib.suppress(OSError):
        (directory / "server.json").unlink()
    return info


def _stop_group(pid: int, jvm_pid: int | None = None) -> None:
    """SIGTERM to the supervisor's process group (the supervisor stops the JVM), SIGKILL to what is
    left after STOP_WAIT_S."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and (alive(pid) or alive(jvm_pid)):
        _reap(pid)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _reap(pid)


def _reap(pid: int) -> None:
    """Collect the supervisor's exit status when this process started it (else it stays a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# --- using -------------------------------------------------------------------


@contextlib.contextmanager
def in_use(directory: Path | None = None) -> Iterator[None]:
    """Hold the server while an analysis runs: the supervisor does not stop it for idleness meanwhile,
    and the idle time counts from the end."""
    directory = directory or state_dir()
    try:
        with _locked(directory / "in-use.lock", fcntl.LOCK_SH):
            yield
    finally:
        (directory / "last-used").touch()


def ensure(
    directory: Path | None = None, progress: Callable[[str], None] | None = None, master: str | None = None
) -> ServerInfo:
    """The running server, or one started now without the warm-up (the analysis that asked is the
    first to pay for compiling). A server of another Spark version than this client's (another
    install's) is replaced: a Connect client and server of different versions need not agree.
    `master`: as for start."""
    directory = directory or state_dir(master)
    running = status(directory)
    if running is not None and running.state == "ready":
        if running.spark_version == spark_version():
            return running
        if progress is not None:
            progress(
                f"the running Spark server is Spark {running.spark_version}, this client "
                f"{spark_version()}: replacing it"
            )
        stop(directory)
    return start(warm=False, directory=directory, progress=progress, master=master)


# --- idleness -----------------------------------------------------------------


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def idle_seconds(directory: Path | None = None) -> float | None:
    """How long no analysis has used the server; None while one does."""
    directory = directory or state_dir()
    with open(directory / "in-use.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        fcntl.flock(handle, fcntl.LOCK_UN)
    return idle_for(directory)


def idle_for(directory: Path) -> float:
    """Seconds since an analysis last ended (last-used), whether or not one runs now."""
    try:
        return time.time() - (directory / "last-used").stat().st_mtime
    except OSError:
        return 0.0


def warmed(took: Sequence[float]) -> bool:
    """Whether the warm-up, whose analyses took `took` seconds so far, is over: WARM_ANALYSES of them,
    or the last took no less than WARM_SETTLED of the one before."""
    return len(took) >= WARM_ANALYSES or (len(took) >= 2 and took[-1] >= WARM_SETTLED * took[-2])
