"""The start barrier: the run's t0 is fixed once every participant is ready.

Before t0 each producer connects and each consumer subscribes (Participant.prepare), then waits
(RunContext.ready_to_start). The process that owns the run (the local runner, or the master for
its workers' counts) counts them; once all the scenario's participants are ready it fixes t0
`margin_s` ahead, so that everyone is awake when the first scheduled publish is due. The network
proxy has been listening and the topology declared before the first participant could connect.
Should some participant not get ready within START_TIMEOUT_S (it cannot connect, and retries), the
run starts with those that are, and says so.

Pure: the count and the decision; the waiting and the messages are loadgen.run.locust_session's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["StartBarrier", "START_MARGIN_S", "START_MARGIN_DISTRIBUTED_S", "START_TIMEOUT_S"]

START_MARGIN_S = 0.2
"""t0 is this long after the last participant got ready (a local run)."""
START_MARGIN_DISTRIBUTED_S = 1.0
"""The same for a master: its message with t0 must reach every worker before t0."""
START_TIMEOUT_S = 60.0
"""How long the run waits for every participant before it starts with those that are ready."""


@dataclass
class StartBarrier:
    """Counts ready participants per process (`local`, or each worker's name) against `expected`."""

    expected: int
    opened_s: float  # when the run started setting up (a monotonic clock's seconds)
    counts: dict[str, int] = field(default_factory=dict)

    def report(self, source: str, ready: int) -> None:
        """`source` now has `ready` participants ready (a count that only grows; a message that
        arrives late with a smaller one changes nothing)."""
        self.counts[source] = max(self.counts.get(source, 0), ready)

    @property
    def ready(self) -> int:
        return sum(self.counts.values())

    def complete(self) -> bool:
        return self.ready >= self.expected

    def timed_out(self, now_s: float) -> bool:
        return now_s - self.opened_s >= START_TIMEOUT_S

    def detail(self, t0_s: float) -> dict[str, Any]:
        """What run.json and the `start_barrier` event say about a start whose t0 is at `t0_s` (the
        same monotonic clock): start-up time and how many were ready of how many."""
        return {
            "startup_s": round(t0_s - self.opened_s, 3),
            "participants": self.expected,
            "ready": min(self.ready, self.expected),
            "timed_out": not self.complete(),
        }

    def progress(self, now_s: float) -> str:
        return (
            f"[sojourn] starting: {min(self.ready, self.expected)} of {self.expected} participants ready "
            f"after {now_s - self.opened_s:.0f} s"
        )
