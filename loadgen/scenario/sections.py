"""Parsing of the network impairment (delay-line proxy), including the network paths a timeline
phase may set. A consumer group's CoDel and egress classes are in buffers.py.
"""

from __future__ import annotations

from typing import Any

from loadgen.scenario.checks import Check, Reader, boolean, integer, number, optional_number
from loadgen.scenario.errors import Invalid, did_you_mean
from loadgen.scenario.model import NETWORK_PATHS, PHASE_SETTABLE, YAML_LAYOUT, LinkSpec, NetworkSpec

__all__ = ["read_network", "network_phase_check"]


# (check, default) per key, in dataclass order.
_LINK_FIELDS: dict[str, tuple[Check, Any]] = {
    "latency_ms": (number(0), 0.0),
    "jitter_ms": (number(0), 0.0),
    "bandwidth_bytes_per_s": (optional_number(0, strict=True, null_means="unlimited"), None),
}
_SWITCH_FIELDS: dict[str, tuple[Check, Any]] = {"down": (boolean, False), "reset_peer": (boolean, False)}


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
