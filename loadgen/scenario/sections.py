"""Parsing of the network impairment (delay-line proxy), including the network paths a timeline
phase may set. A consumer group's CoDel and egress classes are in buffers.py.
"""

from __future__ import annotations

from loadgen.scenario.checks import Check, Reader
from loadgen.scenario.errors import Invalid, did_you_mean
from loadgen.scenario.fields import declared
from loadgen.scenario.model import NETWORK_PATHS, PHASE_SETTABLE, YAML_LAYOUT, LinkSpec, NetworkSpec

__all__ = ["read_network", "network_phase_check"]


def read_network(top: Reader) -> NetworkSpec | None:
    """The top-level `network` section; absent or null means no proxy."""
    if top.raw.get("network") is None:
        return None
    reader = top.section("network", "network")
    links = {
        attr: LinkSpec(**reader.section(spec.key, spec.layout).fields(LinkSpec))
        for attr, spec in declared(NetworkSpec)
        if spec.layout == "link"
    }
    return NetworkSpec(**reader.fields(NetworkSpec, **links))


def network_phase_check(path: str) -> Check:
    """The check for a phase's `network.<path>` value; raises Invalid when a phase may not set it."""
    settable = PHASE_SETTABLE["network"]
    if path not in settable:
        known = path in NETWORK_PATHS or path in YAML_LAYOUT["network"]
        reason = "can not be changed by a phase" if known else "unknown key" + did_you_mean(path, NETWORK_PATHS)
        raise Invalid(f"{reason} (a phase may set network.{{{', '.join(settable)}}})")
    link, dot, key = path.partition(".")
    check = dict(declared(LinkSpec))[key].check if dot else dict(declared(NetworkSpec))[link].check
    assert check is not None  # every settable path is a leaf with a check of its own
    return check
