"""Publish lateness seen live: when the load generator can not keep its schedule, say so.

Pure counting: producers call `note()` for every publish (one comparison on the hot path);
a watcher calls `take_window()` every few seconds and prints `warning()` when it is not None.
The analysis computes the exact figures afterwards (analysis/transforms/fidelity.py);
this is the console's early, loud version of its `behind` flag.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lateness", "LATE_NS", "WARN_SHARE", "FAR_BEHIND_NS"]

LATE_NS = 10_000_000  # a publish more than 10 ms after its intended time is late
WARN_SHARE = 0.01  # warn when more than 1 % of a window's publishes were late ...
FAR_BEHIND_NS = 1_000_000_000  # ... or any was more than 1 s late (the analysis's thresholds)


@dataclass
class _Window:
    sent: int = 0
    late: int = 0
    worst_ns: int = 0


class Lateness:
    def __init__(self) -> None:
        self._window = _Window()
        self.total = _Window()

    def note(self, late_ns: int) -> None:
        w = self._window
        w.sent += 1
        if late_ns > LATE_NS:
            w.late += 1
            if late_ns > w.worst_ns:
                w.worst_ns = late_ns

    def take_window(self) -> _Window:
        """The counts since the last call; they are added to `total`."""
        w, self._window = self._window, _Window()
        self.total.sent += w.sent
        self.total.late += w.late
        self.total.worst_ns = max(self.total.worst_ns, w.worst_ns)
        return w

    @staticmethod
    def warning(w: _Window, what: str) -> str | None:
        """A console line when `w` shows the schedule slipping, else None."""
        if not w.sent or (w.late <= WARN_SHARE * w.sent and w.worst_ns <= FAR_BEHIND_NS):
            return None
        return (
            f"publishing fell behind schedule {what}: {w.late:,} of {w.sent:,} publishes were "
            f"more than {LATE_NS / 1e6:g} ms late (worst {w.worst_ns / 1e6:,.1f} ms); the offered load "
            "is lower than the scenario asks for (see the report's publish lateness section)"
        )
