"""Locust's own HTML report and CSV statistics of a run, written when the test stops.

Locust writes `--html` only when it exits (after the web UI is closed) and `--csv` only when
the option was on the command line; a plain `locust -f loadgen/locustfile.py` run without them
gets both in its run directory as the test ends, through Locust's own report and CSV code
(`locust.html.get_html_report`, `locust.stats.StatsCSV`), as `sojourn run` gets them.
"""

from __future__ import annotations

import csv
import os

from locust import stats as locust_stats
from locust.html import get_html_report

__all__ = ["write_html_report", "write_csv_stats"]


def _replace(path: str, write) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)
    os.replace(tmp, path)


def write_html_report(environment, path: str) -> None:
    """Locust's HTML report of the statistics so far (as its --html writes it)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    report = get_html_report(environment, show_download_link=False)
    _replace(path, lambda f: f.write(report))


def write_csv_stats(environment, prefix: str) -> list[str]:
    """PREFIX_stats.csv, PREFIX_failures.csv and PREFIX_exceptions.csv (as its --csv writes them
    at the end; the per-interval history file is Locust's own, with --csv); the paths."""
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    table = locust_stats.StatsCSV(environment, locust_stats.PERCENTILES_TO_REPORT)
    written = []
    for suffix, fill in (
        ("stats", table.requests_csv),
        ("failures", table.failures_csv),
        ("exceptions", table.exceptions_csv),
    ):
        path = f"{prefix}_{suffix}.csv"
        _replace(path, lambda f, fill=fill: fill(csv.writer(f)))
        written.append(path)
    return written
