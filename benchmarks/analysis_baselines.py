"""Baselines for the analysis benchmark: the core of what `sojourn analyze` computes, done by DuckDB and by pandas.

    python -m benchmarks.analysis_baselines duckdb RUN_DIR
    python -m benchmarks.analysis_baselines pandas RUN_DIR

Each reads only the columns it needs from RUN_DIR/traces/{publish,delivery}/*.parquet (the part
files the Spark job reads) and RUN_DIR/run.json, and prints one JSON object (`Summary`): measured
sojourn and end-to-end stats overall and per consumer, measured sojourn stats, publishes and acks
per second since t0, the publish and ack counts, and how many published ids no delivery acked.
The definitions are the Spark job's (analysis/transforms: latency, warmup, stats, windows,
accounting), restated here so that neither baseline imports pyspark; the two engines do the
same work, so the benchmark can time each as a fresh process and a test can compare them.
Only what the benchmark times is imported: the duckdb baseline never loads pandas or pyarrow.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "BaselineError",
    "RunInputs",
    "Summary",
    "StatsBlock",
    "BASELINES",
    "PUBLISH_COLUMNS",
    "DELIVERY_COLUMNS",
    "load_inputs",
    "duckdb_baseline",
    "pandas_baseline",
    "main",
]

PUBLISH_COLUMNS = ("message_id", "intended_ns", "publish_ns")
DELIVERY_COLUMNS = ("message_id", "consumer", "outcome", "publish_ns", "receive_ns", "start_ns", "end_ns", "settle_ns")
ACKED_OUTCOMES = ("ack", "auto_ack")  # analysis.transforms._common.ACKED_OUTCOMES (that module imports pyspark)
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
STAT_FIELDS = ("count", "mean", *QUANTILES, "max")
NS_PER_S = 1_000_000_000

StatsBlock = dict[str, Any]
"""count (int), then mean, p50, p95, p99, max in ms: floats, all None when count is 0."""

Summary = dict[str, Any]
"""What a baseline prints:

    engine: "duckdb" | "pandas"
    rows: {publish, delivery}                      trace rows read
    published: {rows, ids}                         publish rows; distinct published message ids
    acked_deliveries: int                          deliveries with outcome ack or auto_ack
    accounting: {acked_ids, not_acked_ids}         published ids with / without an acked delivery
    sojourn_ms, end_to_end_ms: {overall: StatsBlock, by_consumer: {consumer: StatsBlock}}  measured only
    per_second: {first_s, published: [int], acked: [int], sojourn_ms: {field: [...]}}

`per_second` arrays hold one entry per second since t0, from `first_s` to the last second with a
publish (by publish_ns), an ack (by settle_ns) or a measured sojourn (by start_ns); seconds
without any are zeros and None. Every stats block is over measured deliveries only.
"""


class BaselineError(Exception):
    """A run directory the baselines can not read; `path` names the file or directory."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path


class RunInputs(NamedTuple):
    publish_files: list[Path]
    delivery_files: list[Path]
    t0_ns: int
    warmup_end_ns: int


# --- inputs ---------------------------------------------------------------------------------------


def load_inputs(run_dir: str | Path) -> RunInputs:
    """The part files and the run's t0 and warm-up end; raises BaselineError naming what is missing."""
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: not a readable run.json: {exc}", path) from exc
    if not isinstance(run, dict):
        raise BaselineError(f"{path}: expected a JSON object, got {type(run).__name__}", path)
    t0, warmup_s = run.get("t0_ns"), run.get("warmup_s") or 0
    if isinstance(t0, bool) or not isinstance(t0, int):
        raise BaselineError(f"{path}: t0_ns must be an integer, got {t0!r}", path)
    if isinstance(warmup_s, bool) or not isinstance(warmup_s, (int, float)):
        raise BaselineError(f"{path}: warmup_s must be a number, got {warmup_s!r}", path)
    # As analysis.transforms._common.seconds_to_ns: rounded to the nearest ns.
    warmup_end = t0 + int(round(float(warmup_s) * NS_PER_S))
    return RunInputs(
        _part_files(run_dir / "traces" / "publish"), _part_files(run_dir / "traces" / "delivery"), t0, warmup_end
    )


def _part_files(directory: Path) -> list[Path]:
    """The files `sojourn analyze` reads (analysis.job._part_files); none is an error here, since
    both engines need at least one file to know the columns."""
    if next(directory.glob(".*.parquet.raw"), None) is not None:
        raise BaselineError(
            f"{directory}: holds trace batches not converted to Parquet yet; `sojourn analyze` converts them", directory
        )
    files = sorted(p for p in directory.glob("*.parquet") if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise BaselineError(f"{directory}: no Parquet part files", directory)
    return files


# --- DuckDB ---------------------------------------------------------------------------------------


def duckdb_baseline(run_dir: str | Path) -> Summary:
    """The summary computed with DuckDB SQL on one in-memory connection (default threads)."""
    import duckdb

    inputs = load_inputs(run_dir)
    t0, warmup_end = inputs.t0_ns, inputs.warmup_end_ns
    con = duckdb.connect()
    try:
        # Each trace is read once into memory, as the Spark job caches its frames.
        con.execute(
            f"CREATE TEMP TABLE publishes AS SELECT {', '.join(PUBLISH_COLUMNS)} "
            f"FROM read_parquet({_sql_list(inputs.publish_files)})"
        )
        con.execute(
            f"CREATE TEMP TABLE delivery_rows AS SELECT {', '.join(DELIVERY_COLUMNS)} "
            f"FROM read_parquet({_sql_list(inputs.delivery_files)})"
        )
        con.execute("""
            CREATE TEMP TABLE by_id AS
            SELECT message_id, min(intended_ns) AS pub_intended_ns, min(publish_ns) AS pub_publish_ns
            FROM publishes WHERE message_id IS NOT NULL GROUP BY message_id""")
        con.execute(f"""
            CREATE TEMP TABLE deliveries AS
            SELECT d.message_id, d.consumer, d.start_ns, d.settle_ns,
                   d.outcome IN {_sql_list(ACKED_OUTCOMES, paren=True)} AS acked,
                   (d.start_ns - d.receive_ns) / 1e6 AS sojourn_ms,
                   (d.end_ns - coalesce(d.publish_ns, b.pub_publish_ns)) / 1e6 AS end_to_end_ms,
                   coalesce(coalesce(b.pub_intended_ns, d.publish_ns, d.receive_ns) >= {warmup_end}, false)
                       AS measured
            FROM delivery_rows AS d LEFT JOIN by_id AS b USING (message_id)""")

        def blocks(where: str = "measured") -> str:
            return ", ".join(_sql_stats(col, where) for col in ("sojourn_ms", "end_to_end_ms"))

        overall = con.execute(f"SELECT {blocks()} FROM deliveries").fetchone()
        by_consumer = con.execute(
            f"SELECT consumer, {blocks()} FROM deliveries GROUP BY consumer ORDER BY consumer"
        ).fetchall()
        sojourn_s = con.execute(f"""
            SELECT {_sql_second("start_ns", t0)} AS t_s, {_sql_stats("sojourn_ms", "true")}
            FROM deliveries WHERE measured AND sojourn_ms IS NOT NULL GROUP BY t_s""").fetchall()
        published_s = con.execute(
            f"SELECT {_sql_second('publish_ns', t0)} AS t_s, count(*) FROM publishes GROUP BY t_s"
        ).fetchall()
        acked_s = con.execute(
            f"SELECT {_sql_second('settle_ns', t0)} AS t_s, count(*) FROM deliveries "
            f"WHERE acked AND settle_ns IS NOT NULL GROUP BY t_s"
        ).fetchall()
        pub_rows, del_rows, ids, acked_deliveries = con.execute("""
            SELECT (SELECT count(*) FROM publishes), (SELECT count(*) FROM delivery_rows),
                   (SELECT count(*) FROM by_id), (SELECT count(*) FROM deliveries WHERE acked)""").fetchone()
        acked_ids, not_acked_ids = con.execute("""
            SELECT count(*) FILTER (WHERE a.acked), count(*) FILTER (WHERE NOT coalesce(a.acked, false))
            FROM by_id LEFT JOIN (SELECT message_id, bool_or(acked) AS acked FROM deliveries
                                  WHERE message_id IS NOT NULL GROUP BY message_id) AS a USING (message_id)
            """).fetchone()
    finally:
        con.close()

    return _summary(
        "duckdb",
        rows=(pub_rows, del_rows),
        published_ids=ids,
        acked_deliveries=acked_deliveries,
        accounting=(acked_ids, not_acked_ids),
        overall=(_sql_block(overall[0:4]), _sql_block(overall[4:8])),
        by_consumer={r[0]: (_sql_block(r[1:5]), _sql_block(r[5:9])) for r in by_consumer},
        sojourn_per_second={r[0]: _sql_block(r[1:5]) for r in sojourn_s},
        published_per_second=dict(published_s),
        acked_per_second=dict(acked_s),
    )


def _sql_list(values, paren: bool = False) -> str:
    quoted = ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)
    return f"({quoted})" if paren else f"[{quoted}]"


def _sql_stats(col: str, where: str) -> str:
    """Four columns: count, mean, the list of quantiles (exact, linear interpolation), max."""
    f = f"FILTER (WHERE {where})"
    return f"count({col}) {f}, avg({col}) {f}, quantile_cont({col}, {list(QUANTILES.values())}) {f}, max({col}) {f}"


def _sql_second(col: str, t0_ns: int) -> str:
    # As analysis.transforms.windows.second_since: the ns difference is exact, then divided as a double.
    return f"CAST(floor(({col} - {int(t0_ns)}) / 1e9) AS BIGINT)"


def _sql_block(values) -> StatsBlock:
    count, mean, quantiles, max_ = values
    return _block(count, mean, quantiles or [None] * len(QUANTILES), max_)


# --- pandas ---------------------------------------------------------------------------------------


def pandas_baseline(run_dir: str | Path) -> Summary:
    """The summary computed with pyarrow (reading) and pandas (merge, groupby, quantile)."""
    import numpy as np
    import pandas as pd

    inputs = load_inputs(run_dir)
    t0, warmup_end = inputs.t0_ns, inputs.warmup_end_ns
    pub = _read_pandas(inputs.publish_files, PUBLISH_COLUMNS)
    dl = _read_pandas(inputs.delivery_files, DELIVERY_COLUMNS)

    by_id = pub.groupby("message_id", sort=False).agg(
        pub_intended_ns=("intended_ns", "min"), pub_publish_ns=("publish_ns", "min")
    )
    d = dl.merge(by_id, how="left", left_on="message_id", right_index=True, sort=False)
    intended = d["pub_intended_ns"].fillna(d["publish_ns"]).fillna(d["receive_ns"])
    measured = (intended >= warmup_end).fillna(False).to_numpy(dtype=bool)
    acked = d["outcome"].isin(ACKED_OUTCOMES).to_numpy(dtype=bool)
    sojourn = _ms(d["start_ns"] - d["receive_ns"])
    end_to_end = _ms(d["end_ns"] - d["publish_ns"].fillna(d["pub_publish_ns"]))
    values = pd.DataFrame(
        {
            "consumer": d["consumer"].to_numpy(),
            "sojourn_ms": np.where(measured, sojourn, np.nan),
            "end_to_end_ms": np.where(measured, end_to_end, np.nan),
        }
    )

    overall = tuple(_pandas_block(values[col]) for col in ("sojourn_ms", "end_to_end_ms"))
    per_consumer = _pandas_grouped(values, "consumer", ("sojourn_ms", "end_to_end_ms"))
    by_consumer = {
        c: (per_consumer["sojourn_ms"][c], per_consumer["end_to_end_ms"][c]) for c in per_consumer["sojourn_ms"]
    }

    timed = ~np.isnan(values["sojourn_ms"].to_numpy())
    sojourn_s = pd.DataFrame(
        {
            "t_s": _seconds(d["start_ns"][timed], t0),
            "sojourn_ms": values["sojourn_ms"].to_numpy()[timed],
        }
    )
    settled = acked & d["settle_ns"].notna().to_numpy(dtype=bool)
    published_s = pd.Series(_seconds(pub["publish_ns"], t0)).value_counts()
    acked_s = pd.Series(_seconds(d["settle_ns"][settled], t0)).value_counts()

    acked_by_id = (
        pd.DataFrame({"message_id": d["message_id"].to_numpy(), "acked": acked})
        .groupby("message_id", sort=False)["acked"]
        .any()
    )  # groupby drops the null ids of foreign messages
    id_acked = acked_by_id.reindex(by_id.index, fill_value=False).to_numpy(dtype=bool)

    return _summary(
        "pandas",
        rows=(len(pub), len(dl)),
        published_ids=len(by_id),
        acked_deliveries=int(acked.sum()),
        accounting=(int(id_acked.sum()), int((~id_acked).sum())),
        overall=overall,
        by_consumer=by_consumer,
        sojourn_per_second=_pandas_grouped(sojourn_s, "t_s", ("sojourn_ms",))["sojourn_ms"],
        published_per_second={int(k): int(v) for k, v in published_s.items()},
        acked_per_second={int(k): int(v) for k, v in acked_s.items()},
    )


def _read_pandas(files: list[Path], columns: tuple[str, ...]):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table([str(p) for p in files], columns=list(columns), partitioning=None)
    # Nullable Int64, not the default float64 for an int column with nulls: ns since 1970 need 61
    # bits, and a double would round every time to 256 ns.
    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _ms(ns_difference):
    """Int64 ns differences (exact) to float ms, missing as NaN."""
    import numpy as np

    return (ns_difference / 1e6).to_numpy(dtype="float64", na_value=np.nan)


def _seconds(times_ns, t0_ns: int):
    import numpy as np

    return np.floor((times_ns - t0_ns).to_numpy(dtype="int64") / 1e9).astype("int64")


def _pandas_block(values) -> StatsBlock:
    quantiles = values.quantile(list(QUANTILES.values()), interpolation="linear")
    return _block(values.count(), values.mean(), quantiles.tolist(), values.max())


def _pandas_grouped(frame, key: str, cols: tuple[str, ...]) -> dict[str, dict[Any, StatsBlock]]:
    """col -> group key -> stats block, for every group (a group whose values are all NaN: count 0)."""
    grouped = frame.groupby(key, sort=True)[list(cols)]
    aggregates = grouped.agg(["count", "mean", "max"])
    quantiles = grouped.quantile(list(QUANTILES.values()), interpolation="linear")
    out: dict[str, dict[Any, StatsBlock]] = {}
    for col in cols:
        q = quantiles[col].unstack()
        out[col] = {
            _plain(g): _block(row[(col, "count")], row[(col, "mean")], q.loc[g].tolist(), row[(col, "max")])
            for g, row in aggregates.iterrows()
        }
    return out


# --- shared ---------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """numpy and pandas scalars as JSON values; NaN and NA as None."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    pd = sys.modules.get("pandas")  # not imported here: the duckdb baseline's process never loads it
    if pd is not None and value is pd.NA:
        return None
    return value


def _block(count, mean, quantiles, max_) -> StatsBlock:
    count = int(_plain(count) or 0)
    if count == 0:
        return {f: (0 if f == "count" else None) for f in STAT_FIELDS}
    block: StatsBlock = {"count": count, "mean": float(_plain(mean))}
    block.update({name: float(_plain(q)) for name, q in zip(QUANTILES, quantiles)})
    block["max"] = float(_plain(max_))
    return block


def _summary(
    engine: str,
    *,
    rows: tuple[int, int],
    published_ids: int,
    acked_deliveries: int,
    accounting: tuple[int, int],
    overall: tuple[StatsBlock, StatsBlock],
    by_consumer: dict[str, tuple[StatsBlock, StatsBlock]],
    sojourn_per_second: dict[int, StatsBlock],
    published_per_second: dict[int, int],
    acked_per_second: dict[int, int],
) -> Summary:
    seconds = [*sojourn_per_second, *published_per_second, *acked_per_second]
    first, last = (min(seconds), max(seconds)) if seconds else (None, None)
    span = range(first, last + 1) if seconds else range(0)
    empty = _block(0, None, [], None)
    return {
        "engine": engine,
        "rows": {"publish": int(rows[0]), "delivery": int(rows[1])},
        "published": {"rows": int(rows[0]), "ids": int(published_ids)},
        "acked_deliveries": int(acked_deliveries),
        "accounting": {"acked_ids": int(accounting[0]), "not_acked_ids": int(accounting[1])},
        "sojourn_ms": {"overall": overall[0], "by_consumer": {c: b[0] for c, b in sorted(by_consumer.items())}},
        "end_to_end_ms": {"overall": overall[1], "by_consumer": {c: b[1] for c, b in sorted(by_consumer.items())}},
        "per_second": {
            "first_s": first,
            "published": [int(published_per_second.get(s, 0)) for s in span],
            "acked": [int(acked_per_second.get(s, 0)) for s in span],
            "sojourn_ms": {f: [sojourn_per_second.get(s, empty)[f] for s in span] for f in STAT_FIELDS},
        },
    }


BASELINES: dict[str, Callable[[str | Path], Summary]] = {"duckdb": duckdb_baseline, "pandas": pandas_baseline}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.analysis_baselines", description=__doc__.split("\n\n")[0])
    p.add_argument("engine", help=" or ".join(BASELINES))
    p.add_argument("run_dir", type=Path, help="a run directory: run.json and traces/")
    args = p.parse_args(argv)
    baseline = BASELINES.get(args.engine)
    if baseline is None:
        close = difflib.get_close_matches(args.engine, BASELINES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(BASELINES)}"
        p.error(f"unknown engine {args.engine!r}{hint}")
    try:
        summary = baseline(args.run_dir)
    except BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
