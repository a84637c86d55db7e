"""summary.json's `network` block: the impairment periods and the proxy's self-measurement
(transforms.network), collected as plain dicts (docs/network.md).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from analysis.transforms.network import DIRECTIONS, impairment_periods, proxy_measurements

__all__ = ["network_summary"]


def network_summary(
    events: DataFrame, t0_ns: int, duration_s: float, ended_ns: int | None = None
) -> dict[str, Any] | None:
    """The summary's `network` block (the job's one call; it collects two small frames).

    None when the run had no proxy (no `network_change` event). The last period ends
    at the end of the run: `ended_ns` when known, never before `duration_s`.
    """
    end_s = float(duration_s)
    if ended_ns:
        end_s = max(end_s, (int(ended_ns) - int(t0_ns)) / 1e9)
    periods = [_plain(r) for r in events.transform(impairment_periods(end_s)).collect()]
    if not periods:
        return None
    proxy = {r["direction"]: _plain(r) for r in events.transform(proxy_measurements("run")).collect()}
    return {
        "periods": periods,
        "proxy": {
            d: {k: v for k, v in proxy[d].items() if k != "direction"} if d in proxy else None for d in DIRECTIONS
        },
    }


def _plain(row: Any) -> dict[str, Any]:
    return row.asDict(recursive=True)
