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
