"""Network impairment between sojourn's clients and the broker: a delay-line TCP proxy.

Pure parts (no I/O, injected clock): `link` (delay line, token bucket, settings),
`timeline` (the scenario's `network:` section resolved into timed steps),
`measure` (the proxy's self-measurement). I/O: `proxy` (asyncio, runs in its own
process: `python -m loadgen.netem`) and `process` (start/stop it from the load
generator). See docs/network.md.
"""

from loadgen.netem.link import UNIMPAIRED, DelayLine, LinkSettings, NetworkState, TokenBucket
from loadgen.netem.process import NetemError, NetemProcess, proxied_url, upstream_address
from loadgen.netem.timeline import Step, resolve_timeline, step_index_at, transitions

__all__ = [
    "LinkSettings",
    "NetworkState",
    "UNIMPAIRED",
    "DelayLine",
    "TokenBucket",
    "Step",
    "resolve_timeline",
    "step_index_at",
    "transitions",
    "NetemProcess",
    "NetemError",
    "proxied_url",
    "upstream_address",
]
