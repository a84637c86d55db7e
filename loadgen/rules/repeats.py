"""A warning that keeps applying, printed at once and then at most once a minute, with the count
held back: the live "fell behind" warning, a participant retrying against a broker that is down."""

from __future__ import annotations

__all__ = ["HeldBack", "REPEAT_EVERY_S"]

REPEAT_EVERY_S = 60.0


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
