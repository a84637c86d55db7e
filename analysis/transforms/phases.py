"""Timeline phases: which phase a row belongs to, by time, and per-phase summary rows.

run.json lists the named phases with offsets from t0; time in [0, duration_s)
not covered by any of them is the implicit phase `base`. The timeline is cut
into contiguous *segments*, one summary row each: `base 0-30, slow 30-60`, or
`base 0-10, slow 10-20, base 20-60` when base comes back after a phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform, seconds_to_ns

__all__ = ["BASE", "Segment", "timeline_segments", "assign_phase", "segment_index"]

BASE = "base"


class Segment(NamedTuple):
    phase: str
    start_s: float
    end_s: float


def timeline_segments(phases: Sequence[Mapping[str, Any]], duration_s: float) -> list[Segment]:
    """Cut [0, duration_s) and the named phases into contiguous, non-overlapping segments.

    Where phases overlap the one listed first wins. A named phase may reach past
    duration_s (it keeps its own end); base only fills gaps inside [0, duration_s).
    """
    named = [(str(p["name"]), float(p["start_s"]), float(p.get("end_s", duration_s))) for p in phases]
    named = [(n, s, e) for n, s, e in named if e > s]
    bounds = sorted({0.0, float(duration_s), *(s for _, s, _ in named), *(e for _, _, e in named)})
    segments: list[Segment] = []
    for lo, hi in zip(bounds, bounds[1:]):
        name = next((n for n, s, e in named if s <= lo and hi <= e), None)
        if name is None:
            if lo < 0 or hi > duration_s:
                continue
            name = BASE
        if segments and segments[-1].phase == name and segments[-1].end_s == lo:
            segments[-1] = Segment(name, segments[-1].start_s, hi)
        else:
            segments.append(Segment(name, lo, hi))
    return segments


def _in_segment(time_col: str, t0_ns: int, seg: Segment) -> Column:
    t = F.col(time_col)
    return (t >= F.lit(t0_ns + seconds_to_ns(seg.start_s))) & (t < F.lit(t0_ns + seconds_to_ns(seg.end_s)))


def assign_phase(
    segments: Sequence[Segment], t0_ns: int, time_col: str, out_col: str = "phase", index_col: str = "segment"
) -> Transform:
    """Add the phase name at `time_col` (`base` outside every segment, e.g. in the drain)
    and the segment's index into `segments` (null outside every segment)."""

    def _assign(df: DataFrame) -> DataFrame:
        name: Column = F.lit(BASE)
        for seg in reversed(segments):
            name = F.when(_in_segment(time_col, t0_ns, seg), F.lit(seg.phase)).otherwise(name)
        return df.withColumns({out_col: name, index_col: segment_index(segments, t0_ns, time_col)})

    return _assign


def segment_index(segments: Sequence[Segment], t0_ns: int, time_col: str) -> Column:
    """The index into `segments` of the segment `time_col` falls in; null outside every segment."""
    index: Column = F.lit(None).cast("int")
    for i, seg in reversed(list(enumerate(segments))):
        index = F.when(_in_segment(time_col, t0_ns, seg), F.lit(i)).otherwise(index)
    return index
