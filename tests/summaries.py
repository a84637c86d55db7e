"""Comparing two summary.json dicts: every key and count exactly, floating-point values to a
relative tolerance (a mean summed in another order, or over other partitions, rounds differently
in its last bits), and the percentiles the later summary estimates from log-bucket histograms
(its `percentiles.log_histogram`) to the relative error it states; `recorded_differences` holds a
summary to one recorded before the sojourn histogram was counted from log buckets."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from analysis.buckets import GAMMA, RELATIVE_ERROR

_PERCENTILE = re.compile(r"\.p\d+(_\d+)?$|\[\d+\]$")
"""A percentile field (pNN) of a stats block, or an item of a list of quantiles."""
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def bounded_paths(summary: dict) -> list[str]:
    """The paths whose percentiles `summary` estimates from log buckets (its
    percentiles.log_histogram.applies_to, `*` standing for a group's name)."""
    blocks = (summary.get("percentiles") or {}).get("log_histogram", {}).get("applies_to", [])
    return ["." + block for block in blocks]


def _bounded(path: str, patterns: Sequence[str]) -> bool:
    """Whether `path` is a value estimated from log buckets: named by a pattern itself, or a
    percentile (or quantile list item) of a block a pattern names."""
    match = _PERCENTILE.search(path)
    candidates = [path] + ([path[: match.start()]] if match else [])
    regexes = [re.escape(p).replace(r"\*", r"[^.]+") for p in patterns]
    return any(re.fullmatch(r, c) for r in regexes for c in candidates)


def _same_text(before: str, after: str, tolerance: float) -> bool:
    """Texts that say the same but for numbers within `tolerance` (relative) of each other, beyond
    the rounding of the digits shown: a sentence that quotes an estimated percentile."""
    if _NUMBER.sub("#", before) != _NUMBER.sub("#", after):
        return False
    for b, a in zip(_NUMBER.findall(before), _NUMBER.findall(after)):
        # each side rounded by up to half a unit of its last digit shown
        shown = 10.0 ** -len(b.partition(".")[2].partition("e")[0])
        x, y = float(b), float(a)
        if abs(x - y) > tolerance * max(abs(x), abs(y)) + shown * (1 + 1e-9):
            return False
    return True


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
    if isinstance(before, str) and isinstance(after, str) and _bounded(path, bounded):
        return [] if _same_text(before, after, RELATIVE_ERROR * (1 + 1e-9)) else [f"{path}: {before!r} -> {after!r}"]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


UNCOMPARED = ("sojourn_histogram", "percentiles")
"""Held to rules of their own: the histogram to _histogram_differences; `percentiles` says how the
later summary estimated its values (its bounds read by bounded_paths), not what they are."""


def recorded_differences(before: dict, after: dict) -> list[str]:
    """differences() of two summaries, the sojourn histogram held to _histogram_differences."""
    rest = {k: v for k, v in after.items() if k not in UNCOMPARED}
    return _histogram_differences(before["sojourn_histogram"], after["sojourn_histogram"]) + differences(
        {k: v for k, v in before.items() if k not in UNCOMPARED}, rest, bounded=bounded_paths(after)
    )


def _histogram_differences(before: dict, after: dict) -> list[str]:
    """Where the sojourn histogram differs from the recorded one by more than its counting from log
    buckets allows (analysis.summary.histogram): as many bins, each edge the recorded one or less than
    one bucket (GAMMA - 1, relative) below it, the same total, and the same count in every bin
    neither of whose edges moved."""
    edges_b, edges_a, counts_b, counts_a = before["edges_ms"], after["edges_ms"], before["counts"], after["counts"]
    if len(edges_a) != len(edges_b) or len(counts_a) != len(counts_b):
        return [f"{len(counts_b)} bins before, {len(counts_a)} now"]
    out = [
        f"edge {i}: {b} -> {a}"
        for i, (b, a) in enumerate(zip(edges_b, edges_a))
        if a != b and not 0 < b - a < (GAMMA - 1) * abs(b)
    ]
    if sum(counts_a) != sum(counts_b):
        out.append(f"{sum(counts_b)} values before, {sum(counts_a)} now")
    out += [
        f"bin {i}: {b} -> {a}"
        for i, (b, a) in enumerate(zip(counts_b, counts_a))
        if a != b and edges_a[i] == edges_b[i] and edges_a[i + 1] == edges_b[i + 1]
    ]
    return out
