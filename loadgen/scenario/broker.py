"""The `broker` section: the URL the workers connect to, or a private node `sojourn run` starts for
the run (`managed`, docs/broker.md); each a frozen spec and the checks of its YAML values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from loadgen.broker.config import node_url
from loadgen.scenario.checks import Reader, boolean, fail, integer, mapping_fields, number
from loadgen.scenario.errors import Invalid, mask_passwords, show
from loadgen.scenario.fields import yaml
from loadgen.scenario.topology import FrozenMapping

__all__ = ["DEFAULT_URL", "MANAGED_PORT", "ManagedSpec", "Broker", "amqp_url", "managed", "managed_url", "read_broker"]

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
MANAGED_PORT = 5673  # loadgen.broker.DEFAULT_PORT, without importing the broker package here


def amqp_url(value: Any) -> str:
    """`broker.url`: an amqp:// or amqps:// URL with a host; a password in it never shows in an error."""
    wanted = "expected an amqp:// or amqps:// URL with a host, e.g. amqp://127.0.0.1:5672/"
    if not isinstance(value, str):
        raise Invalid(f"{wanted}, got {show(value)}")
    masked = mask_passwords(value)  # not redact.mask_url: it raises on a malformed port
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError as err:
        raise Invalid(f"{wanted}, got {show(masked)} ({err})", masked) from None
    if parts.scheme not in ("amqp", "amqps") or not parts.hostname:
        raise Invalid(f"{wanted}, got {show(masked)}", masked)
    return value


def _settings(value: Any) -> FrozenMapping:
    """`broker.managed.settings`: rabbitmq.conf keys to values, as loadgen.broker.config takes them;
    null or empty: none."""
    from loadgen.broker.config import BrokerSettingsError, effective_settings

    settings = value or {}
    if not isinstance(settings, dict):
        raise Invalid(f"expected a mapping of rabbitmq.conf keys to values, got {show(settings)}")
    try:
        effective_settings(settings)
    except BrokerSettingsError as err:
        raise Invalid(f"{err.reason}, got {show(err.value)}", err.value, err.key) from None
    return FrozenMapping({str(k): v for k, v in settings.items()})


@dataclass(frozen=True)
class ManagedSpec:
    """A private RabbitMQ node `sojourn run` starts for the run (docs/broker.md): its AMQP port,
    its rabbitmq.conf settings (e.g. vm_memory_high_watermark.absolute), and whether to leave it
    running afterwards."""

    port: int = field(metadata=yaml(integer(1, 65535), MANAGED_PORT))
    settings: FrozenMapping = field(metadata=yaml(_settings, FrozenMapping(), layout="{}"))
    keep: bool = field(default=False, metadata=yaml(boolean))


def managed(value: Any) -> ManagedSpec | None:
    """`broker.managed`: true (defaults), false/null (none), or {port, settings, keep}."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise Invalid(
            f"expected true or a mapping such as {{port: 5674, settings: "
            f"{{vm_memory_high_watermark.absolute: 200MiB}}}}, got {show(value)}"
        )
    spec = ManagedSpec(**mapping_fields(value, ManagedSpec))
    from loadgen.broker.config import BrokerSettingsError, check_against_host, effective_settings
    from loadgen.broker.managed import default_dir

    try:  # where checkable: the disk the node's directory is on (as `sojourn run` starts it, from here)
        check_against_host(effective_settings(dict(spec.settings)), default_dir(spec.port))
    except BrokerSettingsError as err:
        raise Invalid(f"{err.reason}, got {show(err.value)}", err.value, f"settings.{err.key}") from None
    return spec


@dataclass(frozen=True)
class Broker:
    url: str = field(metadata=yaml(amqp_url, DEFAULT_URL))  # a managed node's own when managed, see read_broker
    heartbeat_s: int = field(metadata=yaml(integer(0, 65_535), 30))  # AMQP: a short
    connect_timeout_s: float = field(metadata=yaml(number(0, strict=True), 5.0))
    managed: ManagedSpec | None = field(default=None, metadata=yaml(managed, layout="managed"))
    """Set: `url` is the private node's; `sojourn run` starts it (docs/broker.md)."""
    url_is_default: bool = field(default=False, compare=False)
    """No file, variable or --set gave the URL: `sojourn run` may start a private node instead."""


def managed_url(spec: ManagedSpec) -> str:
    """The URL of the private node `spec` describes."""
    return node_url(spec.port)


def read_broker(top: Reader, url_is_default: bool, resolved: bool = False) -> Broker:
    """The `broker` section; `url_is_default`: no file, variable or --set gave the URL. `resolved`: a
    resolved scenario (Scenario.to_dict), which gives a managed node's URL too: then it must be that."""
    b = top.section("broker", "broker")
    managed = b.field(Broker, "managed")  # first: it decides the URL
    node_url = managed_url(managed) if managed else None
    if managed is not None and "url" in b.raw and not (resolved and b.raw["url"] == node_url):
        fail(
            b.source,
            "broker.url",
            b.raw["url"],
            "give broker.url or broker.managed, not both "
            "(a managed node's URL is amqp://guest:guest@127.0.0.1:<port>/)",
        )
    url = node_url or b.field(Broker, "url")
    return Broker(**b.fields(Broker, url=url, managed=managed), url_is_default=url_is_default and managed is None)
