"""Comparing two summary.json dicts: every key and count exactly, floating-point values to a
relative tolerance (a mean summed in another order, or over other partitions, rounds differently
in its last bits), and the percentiles the later summary estimates from log-bucket histograms
(its `percentiles.log_histogram`) to the relative error it states."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from analysis.buckets import RELATIVE_ERROR

_PERCENTILE = re.compile(r"\.p\d+(_\d+)?$")


def bounded_paths(summary: dict) -> list[str]:
    """The paths whose percentiles `summary` estimates from log buckets (its
    percentiles.log_histogram.applies_to, `*` standing for a group's name)."""
    blocks = (summary.get("percentiles") or {}).get("log_histogram", {}).get("applies_to", [])
    return ["." + block for block in blocks]


def _bounded(path: str, patterns: Sequence[str]) -> bool:
    match = _PERCENTILE.search(path)
    block = path[: match.start()] if match else None
    return block is not None and any(re.fullmatch(re.escape(p).replace(r"\*", r"[^.]+"), block) for p in patterns)


def differences(before, after, rel: float = 1e-9, path: str = "", bounded: Sequence[str] = ()) -> list[str]:
    """Where `after` differs from `before`: missing keys, other lengths, other values. A percentile
    (pNN) of a block in `bounded` (bounded_paths) may differ by the log buckets' relative error."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = [f"{path}.{k}: missing" for k in before if k not in after]
        for k in before:
            if k in after:
                out += differences(before[k], after[k], rel, f"{path}.{k}", bounded)
        return out
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [f"{path}: {len(before)} items before, {len(after)} now"]
        return [
            d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, rel, f"{path}[{i}]", bounded)
        ]
    if isinstance(before, float) and isinstance(after, (int, float)) and not isinstance(after, bool):
        tolerance = RELATIVE_ERROR * (1 + 1e-9) if _bounded(path, bounded) else rel
        return [] if math.isclose(before, after, rel_tol=tolerance, abs_tol=rel) else [f"{path}: {before} -> {after}"]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]
