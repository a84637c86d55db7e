"""Publish lateness seen live: when the load generator can not keep its schedule, say so.

Pure counting: producers call `note()` for every publish (one comparison on the hot path);
a watcher calls `take_window()` every few seconds and prints `warning()` when it is not None.
The analysis computes the exact figures afterwards (analysis/transforms/fidelity.py);
this is the console's early, loud version of its `behind` flag.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lateness", "HeldBack", "LATE_NS", "WARN_SHARE", "FAR_BEHIND_NS", "REPEAT_EVERY_S"]

LATE_NS = 10_000_000  # a publish more than 10 ms after its intended time is late
WARN_SHARE = 0.01  # warn when more than 1 % of a window's publishes were late ...
FAR_BEHIND_NS = 1_000_000_000  # ... or any was more than 1 s late (the analysis's thresholds)
REPEAT_EVERY_S = 60.0  # a warning that keeps applying is printed again at most once a minute


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


class HeldBack:
    """Rate limit for a warning that keeps applying: the first is printed, then at most one per
    `every_s`; each printed line says how many were held back since the last, and `held` counts
    them over the run, for the summary at the end."""

    def __init__(self, every_s: float = REPEAT_EVERY_S) -> None:
        self.every_s = every_s
        self.held = 0
        self._since_last = 0
        self._last_s: float | None = None

    def line(self, text: str | None, now_s: float) -> str | None:
        """`text` to print now (with the count held back since the last), or None: nothing to say,
        or said less than `every_s` ago."""
        if text is None:
            return None
        if self._last_s is not None and now_s - self._last_s < self.every_s:
            self._since_last += 1
            self.held += 1
            return None
        held, self._since_last, self._last_s = self._since_last, 0, now_s
        return text if not held else f"{text} ({held:,} more such warnings held back since the last)"
