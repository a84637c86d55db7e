"""The private broker's rabbitmq.conf: settings validated once, then rendered (pure, no I/O).

Settings are rabbitmq.conf (cuttlefish) `key = value` pairs. sojourn owns the listener (the
port, bound to loopback) and fills in a memory watermark and a disk free limit unless given.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from loadgen.errors import LoadgenError

__all__ = [
    "BrokerSettingsError",
    "DEFAULT_SETTINGS",
    "MIB",
    "MIN_ABSOLUTE_WATERMARK",
    "NODE_BASE_MEMORY",
    "check_against_host",
    "information_bytes",
    "settings_warnings",
    "Settings",
    "effective_settings",
    "node_url",
    "parse_setting",
    "render_config",
    "tls_ports",
    "validate_port",
    "watermark_settings",
]

Settings = dict[str, str]
"""rabbitmq.conf keys to values, in the order they are written."""

MIB = 1024 * 1024

DEFAULT_SETTINGS: Mapping[str, str] = {
    # RabbitMQ's own defaults, written out so the config file says what the node runs with.
    "vm_memory_high_watermark.relative": "0.4",
    "disk_free_limit.absolute": "50MB",
    # The node runs in the foreground under our session; its log already goes to log/<node>.log.
    "log.console": "false",
}

_WATERMARK = ("vm_memory_high_watermark.relative", "vm_memory_high_watermark.absolute")
_DISK = ("disk_free_limit.relative", "disk_free_limit.absolute")
_OWNED_PREFIXES = ("listeners.tcp.",)  # the port is --port: a second listener would defeat "loopback only"
# An amqps listener is the user's to add (`listeners.ssl.default = 127.0.0.1:5671`), on loopback
# only like the plain one; its ssl_options files are read by the node, from its own directory.
_TLS_LISTENER_PREFIX = "listeners.ssl."
_TLS_LISTENER = re.compile(r"^127\.0\.0\.1:(\d{1,5})$")
_TLS_FILES = ("ssl_options.cacertfile", "ssl_options.certfile", "ssl_options.keyfile")
_KEY = re.compile(r"^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$")
# A nonzero absolute memory watermark below this is refused. A RabbitMQ node uses 125-140 MiB at
# rest (docs/broker.md, "What was measured"; RabbitMQ's memory guide puts a node's baseline in
# the same range), and the memory alarm blocks every publish while the node uses more than the
# watermark, so under 1 MiB the node can never accept a message: such a value is a missing unit
# (a bare number is bytes: 123 for 123MiB), not a limit. 0 stays allowed: RabbitMQ documents a
# zero watermark as the way to block every publisher at once (a warning says so).
MIN_ABSOLUTE_WATERMARK = MIB
NODE_BASE_MEMORY = 128 * MIB  # below this the alarm is set during boot: publishing blocks at once (a warning)
# rabbit.schema's information units: bytes, or k/kiB/M/MiB/G/GiB (powers of 2), kB/MB/GB (powers of 10).
_INFORMATION_UNIT = re.compile(r"^(\d+)(?:([kmg])(?:(i)?(b))?)?$", re.IGNORECASE)  # number, unit, i, b


class BrokerSettingsError(LoadgenError, ValueError):
    """A broker setting is malformed or conflicts with another; names the key and the value."""

    def __init__(self, key: str, value: object, reason: str):
        self.key = key
        self.value = value
        self.reason = reason
        super().__init__(f"broker setting {key}={value!r}: {reason}")


def parse_setting(text: str) -> tuple[str, str]:
    """`key=value` (as given to `--setting`) -> (key, value); the value may itself contain '='."""
    key, sep, value = text.partition("=")
    if not sep:
        raise BrokerSettingsError(text, "", "expected key=value, e.g. vm_memory_high_watermark.relative=0.2")
    return key.strip(), value.strip()


def node_url(port: int) -> str:
    """The AMQP URL of the private node on `port`: loopback, the node's default guest user."""
    return f"amqp://guest:guest@127.0.0.1:{port}/"


def validate_port(port: object, what: str = "port") -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise BrokerSettingsError(what, port, "must be an integer from 1 to 65535")
    return port


def watermark_settings(relative: float | None = None, absolute_mb: float | None = None) -> Settings:
    """The setting for `--memory-watermark` (a fraction of RAM) or `--memory-watermark-mb` (MiB)."""
    if relative is not None and absolute_mb is not None:
        raise BrokerSettingsError(
            "vm_memory_high_watermark",
            f"{relative} and {absolute_mb} MiB",
            "give a relative or an absolute watermark, not both",
        )
    if relative is not None:
        return {"vm_memory_high_watermark.relative": _fraction("vm_memory_high_watermark.relative", relative)}
    if absolute_mb is not None:
        if not _finite(absolute_mb) or absolute_mb < 0:
            raise BrokerSettingsError("vm_memory_high_watermark.absolute", absolute_mb, "must be a number of MiB >= 0")
        return {"vm_memory_high_watermark.absolute": str(int(round(absolute_mb * MIB)))}
    return {}


def effective_settings(settings: Mapping[str, object] | None = None) -> Settings:
    """Validate `settings` and fill in the defaults they do not override.

    Values may be str, int, float or bool (as from YAML); they come back as rabbitmq.conf strings.
    Raises BrokerSettingsError naming the first bad key.
    """
    given: Settings = {}
    for key, value in (settings or {}).items():
        key = str(key).strip()
        given[key] = _validate(key, _as_text(key, value))
    group: tuple[str, ...]
    for group in (_WATERMARK, _DISK):
        present = [k for k in given if k in group]  # in the order given: blame the later one
        if len(present) > 1:
            raise BrokerSettingsError(
                present[1], given[present[1]], f"conflicts with {present[0]}={given[present[0]]!r}: give one of them"
            )
    result: Settings = {}
    for key, value in DEFAULT_SETTINGS.items():
        group = _WATERMARK if key in _WATERMARK else _DISK if key in _DISK else (key,)
        if not any(k in given for k in group):
            result[key] = value
    result.update(given)
    return result


def render_config(
    settings: Mapping[str, object] | None = None, *, port: int, management_port: int | None = None
) -> str:
    """The rabbitmq.conf text: the loopback listener on `port` (and the management plugin's HTTP
    listener on `management_port`, when given), then the effective settings."""
    validate_port(port)
    lines = [
        "# Written by `sojourn broker up`; rewritten on every start (edit with --setting key=value).",
        f"listeners.tcp.default = 127.0.0.1:{port}",
    ]
    if management_port is not None:
        validate_port(management_port, "--management-port")
        if management_port == port:
            raise BrokerSettingsError(
                "--management-port", management_port, f"the management API needs a port other than the AMQP port {port}"
            )
        lines += ["management.tcp.ip = 127.0.0.1", f"management.tcp.port = {management_port}"]
    effective = effective_settings(settings)
    for key, tls_port in tls_ports(effective).items():
        if tls_port == port:
            raise BrokerSettingsError(
                key, effective[key], f"the TLS listener needs a port other than the AMQP port {port}"
            )
    lines += [f"{key} = {value}" for key, value in effective.items()]
    return "\n".join(lines) + "\n"


def tls_ports(settings: Mapping[str, str]) -> dict[str, int]:
    """The amqps listeners among validated settings: key -> port on 127.0.0.1."""
    return {
        key: int(_TLS_LISTENER.match(value).group(1))  # type: ignore[union-attr]
        for key, value in settings.items()
        if key.startswith(_TLS_LISTENER_PREFIX)
    }


def _as_text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if not _finite(value):
            raise BrokerSettingsError(key, value, "must be a finite number")
        return repr(value)
    if isinstance(value, str):
        return value.strip()
    raise BrokerSettingsError(key, value, f"must be a string, number or boolean, got {type(value).__name__}")


def _validate(key: str, value: str) -> str:
    if not _KEY.match(key):
        raise BrokerSettingsError(
            key, value, "not a rabbitmq.conf key (dotted words, e.g. vm_memory_high_watermark.relative)"
        )
    if key.startswith(_OWNED_PREFIXES):
        raise BrokerSettingsError(key, value, "sojourn sets the listener itself: use --port")
    if not value:
        raise BrokerSettingsError(key, value, "empty value")
    if "\n" in value or "\r" in value or "#" in value:
        raise BrokerSettingsError(
            key, value, "a value can not contain a newline or '#' (rabbitmq.conf reads '#' as the start of a comment)"
        )
    if key.startswith(_TLS_LISTENER_PREFIX):
        found = _TLS_LISTENER.match(value)
        if not found or not 1 <= int(found.group(1)) <= 65535:
            raise BrokerSettingsError(
                key, value, "the private node listens on loopback only: give 127.0.0.1:PORT (PORT other than --port)"
            )
    if key in _TLS_FILES and not value.startswith("/"):
        raise BrokerSettingsError(
            key, value, "must be an absolute path (the node does not run in your current directory)"
        )
    if key in ("vm_memory_high_watermark.relative", "disk_free_limit.relative"):
        return _fraction(key, value, upper=1.0 if key.startswith("vm_") else None)
    if key == "vm_memory_high_watermark_paging_ratio":
        return _fraction(key, value)
    if key in _WHOLE_NUMBERS:
        return _whole(key, value, *_WHOLE_NUMBERS[key])
    if key in _BOOLEANS and value not in ("true", "false"):
        raise BrokerSettingsError(key, value, "must be true or false")
    if key in ("vm_memory_high_watermark.absolute", "disk_free_limit.absolute") and not _INFORMATION_UNIT.match(value):
        raise BrokerSettingsError(key, value, "must be bytes or a size such as 100MiB, 100MB or 1GiB")
    if key == "vm_memory_high_watermark.absolute" and 0 < information_bytes(value) < MIN_ABSOLUTE_WATERMARK:
        hint = f"a bare number is bytes: did you mean {value}MiB? " if value.isdigit() else ""
        raise BrokerSettingsError(
            key,
            value,
            f"{information_bytes(value):,} bytes can not work: a RabbitMQ node needs 125-140 MiB to run, so "
            f"below 1 MiB it never accepts a message ({hint}0 blocks every publisher on purpose)",
        )
    return value


def information_bytes(value: str) -> int:
    """A validated size (`123`, `100MiB`, `1GB`, `512k`) in bytes, as RabbitMQ reads it: a bare
    number is bytes; k, M, G alone or with iB are powers of 2; kB, MB, GB powers of 10."""
    found = _INFORMATION_UNIT.match(value.strip())
    if not found:
        raise ValueError(f"not a size: {value!r}")
    number, unit, binary, b = found.groups()
    if unit is None:
        return int(number)
    power = "kmg".index(unit.lower()) + 1
    decimal = b is not None and binary is None
    return int(number) * (1000**power if decimal else 1024**power)


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that says
        return None


def _disk(data_dir: str | Path) -> tuple[int, int] | None:
    """(total, free) bytes of the file system `data_dir` is (or will be) on: its nearest existing directory."""
    path = Path(data_dir).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return usage.total, usage.free


def check_against_host(settings: Mapping[str, str], data_dir: str | Path) -> None:
    """Refuse a disk limit the node's disk can never meet: `disk_free_limit` above the total size of
    the file system holding `data_dir` (where checkable): the disk alarm would block every publisher
    for good. `settings` as effective_settings returns them."""
    disk = _disk(data_dir)
    if disk is None:
        return
    total = disk[0]
    limit, key = _disk_limit(settings)
    if limit is not None and limit > total:
        raise BrokerSettingsError(
            key,
            settings[key],
            f"asks for {limit / MIB:,.0f} MiB free on a disk of {total / MIB:,.0f} MiB ({Path(data_dir)}): "
            f"the disk alarm would block every publisher for good",
        )


def _disk_limit(settings: Mapping[str, str]) -> tuple[int | None, str]:
    if "disk_free_limit.absolute" in settings:
        return information_bytes(settings["disk_free_limit.absolute"]), "disk_free_limit.absolute"
    if "disk_free_limit.relative" in settings:
        ram = _ram_bytes()
        relative = float(settings["disk_free_limit.relative"])
        return (None if ram is None else int(relative * ram)), "disk_free_limit.relative"
    return None, ""


def settings_warnings(settings: Mapping[str, str], data_dir: str | Path | None = None) -> list[str]:
    """Settings RabbitMQ accepts that block publishing from the start: a memory watermark below the
    node's own use at rest, a disk limit above the disk's free space. `settings` as effective_settings
    returns them."""
    out: list[str] = []
    blocks = "the memory alarm is set while the node boots and blocks every publisher at once"
    if "vm_memory_high_watermark.absolute" in settings:
        watermark = information_bytes(settings["vm_memory_high_watermark.absolute"])
        if watermark < NODE_BASE_MEMORY:
            out.append(
                f"vm_memory_high_watermark.absolute={settings['vm_memory_high_watermark.absolute']}: "
                f"{watermark / MIB:,.1f} MiB is below a node's own use at rest (125-140 MiB): {blocks}"
            )
    elif "vm_memory_high_watermark.relative" in settings:
        relative = float(settings["vm_memory_high_watermark.relative"])
        ram = _ram_bytes()
        if relative == 0 or (ram is not None and relative * ram < NODE_BASE_MEMORY):
            out.append(
                f"vm_memory_high_watermark.relative={settings['vm_memory_high_watermark.relative']}: "
                f"{relative * (ram or 0) / MIB:,.1f} MiB of this machine's RAM, below a node's own use at "
                f"rest (125-140 MiB): {blocks}"
            )
    disk = _disk(data_dir) if data_dir is not None else None
    limit, key = _disk_limit(settings)
    if disk is not None and limit is not None and disk[1] < limit <= disk[0]:
        out.append(
            f"{key}={settings[key]}: more than the {disk[1] / MIB:,.0f} MiB free now on the node's disk: "
            f"the disk alarm blocks every publisher at once"
        )
    return out


_WHOLE_NUMBERS: Mapping[str, tuple[int, int | None]] = {
    # rabbit.schema's integer settings a load test is likely to touch, with the bounds the node enforces
    "memory_monitor_interval": (0, None),  # ms; 0 turns the monitor off
    "channel_max": (0, 65_535),  # an AMQP short
    "frame_max": (0, 2**32 - 1),
    "heartbeat": (0, 65_535),  # s, an AMQP short
    "consumer_timeout": (1, None),  # ms
    "max_message_size": (1, 536_870_912),  # 512 MiB, RabbitMQ's ceiling
    "collect_statistics_interval": (1, None),  # ms
    "disk_monitor_failure_retries": (0, None),
    "disk_monitor_failure_retry_interval": (0, None),
}
_BOOLEANS = ("log.console", "log.file.rotation.compress", "management.disable_stats")


def _whole(key: str, value: str, low: int, high: int | None) -> str:
    bound = f"from {low:,} to {high:,}" if high is not None else f">= {low:,}"
    try:
        number = int(value)
    except ValueError:
        raise BrokerSettingsError(key, value, f"must be a whole number {bound}") from None
    if number < low or (high is not None and number > high):
        raise BrokerSettingsError(key, value, f"must be a whole number {bound}")
    return str(number)


def _fraction(key: str, value: object, upper: float | None = 1.0) -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BrokerSettingsError(key, value, "must be a number") from None
    if not _finite(number) or number < 0 or (upper is not None and number > upper):
        bound = f"from 0 to {upper:g}" if upper is not None else ">= 0"
        raise BrokerSettingsError(key, value, f"must be a fraction {bound}")
    return repr(number)  # rabbit.schema types these as float: "0" would not parse, "0.0" does


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
