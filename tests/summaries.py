"""Comparing two summary.json dicts: every key and count exactly, floating-point values to a
relative tolerance (a mean summed in another order, or over other partitions, rounds differently
in its last bits)."""

from __future__ import annotations

import math


def differences(before, after, rel: float = 1e-9, path: str = "") -> list[str]:
    """Where `after` differs from `before`: missing keys, other lengths, other values."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = [f"{path}.{k}: missing" for k in before if k not in after]
        for k in before:
            if k in after:
                out += differences(before[k], after[k], rel, f"{path}.{k}")
        return out
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [f"{path}: {len(before)} items before, {len(after)} now"]
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, rel, f"{path}[{i}]")]
    if isinstance(before, float) and isinstance(after, (int, float)) and not isinstance(after, bool):
        return [] if math.isclose(before, after, rel_tol=rel, abs_tol=rel) else [f"{path}: {before} -> {after}"]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]
