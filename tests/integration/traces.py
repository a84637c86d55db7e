"""Read a run's trace part files with pyarrow (independent of the Spark analysis)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def read_rows(run_dir: str | Path, kind: str) -> list[dict]:
    parts = sorted((Path(run_dir) / "traces" / kind).glob("*.parquet"))
    rows: list[dict] = []
    for part in parts:
        rows.extend(pq.read_table(part).to_pylist())
    return rows


def ids(rows, **where) -> set:
    """The message ids of the rows whose columns equal `where`."""
    return {r["message_id"] for r in rows if all(r[k] == v for k, v in where.items())}


def independent_outcomes(run_dir: Path) -> dict[str, set]:
    """From the traces alone, with pyarrow: what was published, acked, left, dead-lettered and why."""
    published = ids(read_rows(run_dir, "publish"))
    deliveries = read_rows(run_dir, "delivery")
    acked = {d["message_id"] for d in deliveries if d["outcome"] in ("ack", "auto_ack")}
    left = ids(read_rows(run_dir, "leftover"))
    dead = read_rows(run_dir, "deadletter")
    return {
        "published": published,
        "acked": acked,
        "left": left,
        "maxlen": ids(dead, reason="maxlen"),
        "expired": ids(dead, reason="expired"),
        "nacked": ids(read_rows(run_dir, "publish"), outcome="nacked"),
    }


# A producer's last arrivals are dropped when its wake for them comes after the run's end (a late
# schedule is not published after the run: loadgen/rules/pacing.py); a loaded host of two cores
# stalls a timer by tens of milliseconds, so the arrivals of a run's last TAIL_S may be missing.
TAIL_S = 0.2


def published_on_schedule(publishes: list[dict], rate: float, duration_s: float) -> int:
    """Assert each producer of a constant `rate` over `duration_s` published its schedule: sequence
    numbers 0..n-1 without a gap, all arrivals but those of the last TAIL_S. Returns the count."""
    producers = {p["producer"] for p in publishes}
    assert producers, "nothing was published"
    for producer in producers:
        seqs = sorted(p["seq"] for p in publishes if p["producer"] == producer)
        assert seqs == list(range(len(seqs))), f"{producer}: a gap in its sequence numbers"
        assert rate * (duration_s - TAIL_S) <= len(seqs) <= rate * duration_s, (producer, len(seqs))
    return len(publishes)
