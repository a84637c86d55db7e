"""Parsing of the optional per-feature sections: CoDel on a consumer group and the network
impairment (delay-line proxy), including the network paths a timeline phase may set.
"""
from __future__ import annotations

from typing import Any

from loadgen.scenario.checks import Check, Reader, boolean, integer, number, optional_number, sub
from loadgen.scenario.errors import Invalid, did_you_mean, show
from loadgen.scenario.model import NETWORK_PATHS, PHASE_SETTABLE, YAML_LAYOUT, CoDelSpec, LinkSpec, NetworkSpec

__all__ = ["codel", "CODEL_EXAMPLE", "read_network", "network_phase_check"]

CODEL_EXAMPLE = "{target_ms: 5, interval_ms: 100}"

# (check, default) per key, in dataclass order.
_LINK_FIELDS: dict[str, tuple[Check, Any]] = {
    "latency_ms": (number(0), 0.0),
    "jitter_ms": (number(0), 0.0),
    "bandwidth_bytes_per_s": (optional_number(0, strict=True, null_means="unlimited"), None),
}
_SWITCH_FIELDS: dict[str, tuple[Check, Any]] = {"down": (boolean, False), "reset_peer": (boolean, False)}


def codel(value: Any) -> CoDelSpec | None:
    """A consumer group's `codel` value: a mapping, or null for CoDel off."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping such as {CODEL_EXAMPLE}, or null for CoDel off, got {show(value)}")
    allowed = YAML_LAYOUT["codel"]
    for key in value:
        if key not in allowed:
            hint = did_you_mean(key, allowed) or f" (expected one of: {', '.join(allowed)})"
            raise Invalid(f"unknown key{hint}", value[key], str(key))
    for key in ("target_ms", "interval_ms"):
        if key not in value:
            raise Invalid("missing required key", None, key)
    requeue = sub(value, "requeue", boolean) if "requeue" in value else True
    return CoDelSpec(sub(value, "target_ms", number(0, strict=True)),
                     sub(value, "interval_ms", number(0, strict=True)), requeue)


def read_network(top: Reader) -> NetworkSpec | None:
    """The top-level `network` section; absent or null means no proxy."""
    if top.raw.get("network") is None:
        return None
    reader = top.section("network", "network")
    upstream, downstream = (_link(reader.section(key, "link")) for key in ("upstream", "downstream"))
    down, reset_peer = (reader.get(key, check, default) for key, (check, default) in _SWITCH_FIELDS.items())
    return NetworkSpec(reader.get("listen_port", integer(0, 65535), 0), upstream, downstream, down, reset_peer)


def _link(reader: Reader) -> LinkSpec:
    return LinkSpec(*(reader.get(key, check, default) for key, (check, default) in _LINK_FIELDS.items()))


def network_phase_check(path: str) -> Check:
    """The check for a phase's `network.<path>` value; raises Invalid when a phase may not set it."""
    settable = PHASE_SETTABLE["network"]
    if path not in settable:
        known = path in NETWORK_PATHS or path in YAML_LAYOUT["network"]
        reason = "can not be changed by a phase" if known else "unknown key" + did_you_mean(path, NETWORK_PATHS)
        raise Invalid(f"{reason} (a phase may set network.{{{', '.join(settable)}}})")
    link, dot, key = path.partition(".")
    return _LINK_FIELDS[key][0] if dot else _SWITCH_FIELDS[link][0]
