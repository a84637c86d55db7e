"""The analysis job: read one run directory, compose the transforms, write summary.json.

This is the only module of the analysis that touches files. It reads
`RUN_DIR/run.json` and the Parquet traces once, with the explicit schema, and
writes `RUN_DIR/summary.json` (and `report.html` when the report renderer exists).
"""
from __future__ import annotations

import inspect
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import schema
from analysis.errors import AnalysisError, RunFileError, SchemaVersionError, TraceColumnsError
from analysis.slo import SloError, evaluate_slos, parse_slo
from analysis.transforms import (
    DISCARD_CLASSES, accounting_totals, attach_intended_ns, classify_messages, consumer_summary, delivery_counts,
    histogram_counts, histogram_edges, mark_measured, measurement_window_ns, per_second_windows,
    phase_summary, rejects_at_publish, stats_block, stats_by, throughput, timeline_events, timeline_segments,
    unaccounted_ids, with_confirm_latency, with_delivery_latencies,
)
from analysis.transforms._common import seconds_to_ns
from analysis.transforms.churn import churn_block
from analysis.transforms.codel import codel_block
from analysis.transforms.egress import egress_block
from analysis.transforms.fidelity import fidelity_block
from analysis.transforms.flow_control import flow_control_block
from analysis.transforms.priority import priority_rows
from analysis.transforms.slow_consumers import queue_depth_series, queue_samples, slow_consumers_block
from analysis.transforms.model import (COMPONENTS, QUANTILES, consumer_sojourn_quantiles, model_inputs,
                                       model_row, window_components)
from analysis.transforms.network import network_summary
from analysis.transforms.stats import STAT_FIELDS
from analysis.transforms.windows import WINDOW_LATENCY_FIELDS, WINDOW_SOJOURN_FIELDS

__all__ = ["analyze", "load_run_json", "read_traces", "summarize", "SUMMARY_SCHEMA_VERSION",
           "Progress", "Traces"]

SUMMARY_SCHEMA_VERSION = 1
MAX_UNACCOUNTED_IDS = 100
MAX_EVENTS = 10_000
"""Events are the run's timeline (phase changes, depth samples): small by nature;
the cap only keeps a runaway event stream from flooding the driver and the report."""

Progress = Callable[[str], None]
Traces = Mapping[str, DataFrame]

_DELIVERY_METRICS = {
    "sojourn_ms": "sojourn_ms",
    "end_to_end": "end_to_end_ms",
    "broker_network": "broker_network_ms",
    "processing": "processing_ms_actual",
    "ack_delay": "ack_delay_ms",
}


def analyze(run_dir: str | Path, master: str | None = None, spark: SparkSession | None = None,
            progress: Progress | None = None) -> dict:
    """Analyse one run directory; write and return its summary.

    `spark` wins over `master`; without either the session comes from
    `analysis.session.get_spark` (argument > SPARK_MASTER > local[*]), and is
    stopped at the end if this call started it.
    Raises AnalysisError for bad inputs; nothing is written then.
    """
    say: Progress = progress or (lambda _message: None)
    run_dir = Path(run_dir)
    run = load_run_json(run_dir)
    slo_exprs = _slo_expressions(run, run_dir)
    own_session = spark is None and SparkSession.getActiveSession() is None
    if spark is None:
        from analysis.session import get_spark
        say("starting Spark")
        spark = get_spark(master)
    try:
        say("reading traces")
        traces = read_traces(spark, run_dir)
        summary = summarize(traces, run, say)
    finally:
        if own_session:
            spark.stop()
    summary["slo"] = evaluate_slos(summary, slo_exprs)

    say("writing summary.json")
    summary = _json_safe(summary)  # what is returned is exactly what the file holds
    text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
    _write_atomically(run_dir / "summary.json", text)
    _write_report(run_dir, json.loads(text), say)
    return summary


# --- reading ------------------------------------------------------------------

def load_run_json(run_dir: Path) -> dict:
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise RunFileError(f"{path}: run.json not found; is {run_dir} a sojourn run directory?",
                           path=path)
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not readable as JSON: {exc}", path=path) from exc
    if not isinstance(run, dict):
        raise RunFileError(f"{path}: expected a JSON object, got {type(run).__name__}", path=path)
    for key, types in (("t0_ns", (int,)), ("duration_s", (int, float))):
        value = run.get(key)
        if isinstance(value, bool) or not isinstance(value, types):
            raise RunFileError(f"{path}: {key} must be a number, got {value!r}", path=path, key=key)
    _check_phases(run.get("phases"), path)
    version = run.get("schema_version", schema.SCHEMA_VERSION)
    if version != schema.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: schema_version {version!r}, but this analysis reads version "
            f"{schema.SCHEMA_VERSION}; analyse it with the sojourn version that recorded it",
            path=path, found=version, expected=schema.SCHEMA_VERSION)
    return run


def _check_phases(phases: Any, path: Path) -> None:
    if phases is None:
        return
    if not isinstance(phases, list):
        raise RunFileError(f"{path}: phases must be a list, got {phases!r}", path=path, key="phases")
    for i, phase in enumerate(phases):
        ok = (isinstance(phase, dict) and isinstance(phase.get("name"), str)
              and all(isinstance(phase.get(k), (int, float)) and not isinstance(phase.get(k), bool)
                      for k in ("start_s", "end_s")))
        if not ok:
            raise RunFileError(f"{path}: phases[{i}] must be {{name, start_s, end_s}}, got {phase!r}",
                               path=path, key=f"phases[{i}]")


def _slo_expressions(run: dict, run_dir: Path) -> list:
    scenario = run.get("scenario") or {}
    exprs = scenario.get("slo", []) if isinstance(scenario, dict) else []
    path = run_dir / "run.json"
    if not isinstance(exprs, list):
        raise RunFileError(f"{path}: scenario.slo must be a list, got {exprs!r}",
                           path=path, key="scenario.slo")
    for i, expr in enumerate(exprs):
        try:
            parse_slo(expr)
        except SloError as exc:
            raise RunFileError(f"{path}: scenario.slo[{i}]: {exc}", path=path,
                               key=f"scenario.slo[{i}]") from exc
    return exprs


def _part_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    # A batch its trace writer process kept to convert after the load, and did not (it was
    # killed): its rows are not in any part yet. `sojourn analyze` converts such batches first.
    unconverted = sorted(directory.glob(".*.parquet.raw"))
    if unconverted:
        raise AnalysisError(f"{unconverted[0]}: a trace batch not converted to Parquet yet (its writer was "
                            f"stopped; {len(unconverted)} in {directory.name}/): `sojourn analyze "
                            f"{directory.parent.parent}` converts them first", path=unconverted[0])
    return sorted(p for p in directory.glob("*.parquet")
                  if p.is_file() and not p.name.startswith((".", "_")))


def _check_part_file(path: Path, kind: str) -> None:
    """Compare a part file's footer with the schema: columns, types, schema version."""
    import pyarrow.parquet as pq

    try:
        found = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for a bad footer
        raise AnalysisError(f"{path}: not a readable Parquet file: {exc}", path=path) from exc
    expected = schema.arrow_schema(kind)
    present = list(found.names)
    missing = [name for name in expected.names if name not in present]
    wrong = [f"{f.name} is {found.field(f.name).type}, expected {f.type}"
             for f in expected if f.name in present and not _same_type(found.field(f.name).type, f.type)]
    if missing or wrong:
        raise TraceColumnsError(path=path, kind=kind, missing=missing, present=present,
                                wrong_types=wrong)
    recorded = (found.metadata or {}).get(b"sojourn.schema_version")
    if recorded is not None and recorded.decode() != str(schema.SCHEMA_VERSION):
        raise SchemaVersionError(
            f"{path}: {kind} trace has schema_version {recorded.decode()}, but this analysis "
            f"reads version {schema.SCHEMA_VERSION}", path=path, found=recorded.decode(),
            expected=schema.SCHEMA_VERSION)


def _same_type(found, expected) -> bool:
    import pyarrow as pa

    # large_string is the same Parquet column as string; some writers choose it.
    if pa.types.is_large_string(found) and pa.types.is_string(expected):
        return True
    return found.equals(expected)


def read_traces(spark: SparkSession, run_dir: str | Path) -> dict[str, DataFrame]:
    """The four trace frames, read once with the explicit schema.

    A missing or empty trace directory is an empty frame. Every part file's footer
    is checked first (cheap: no data is read), so a file with missing columns is
    named before Spark would silently fill them with nulls.
    """
    frames, from_files = {}, {}
    for kind in schema.KINDS:
        files = _part_files(Path(run_dir) / "traces" / kind)
        for path in files:
            _check_part_file(path, kind)
        spark_schema = schema.spark_schema(kind)
        if files:
            uris = [path.resolve().as_uri() for path in files]
            scan = spark.read.schema(spark_schema).parquet(*uris)
            from_files[kind] = scan
            frames[kind] = scan.select(*spark_schema.names)
        else:
            frames[kind] = spark.createDataFrame([], spark_schema)
    _check_schema_version_column(from_files)
    return frames


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _check_schema_version_column(traces: Traces) -> None:
    """Every row must carry this analysis' schema_version: one action, scanning one column."""
    bad = None
    for kind, frame in traces.items():
        rows = (frame.where(F.col("schema_version").isNull()
                            | (F.col("schema_version") != schema.SCHEMA_VERSION))
                .select(F.lit(kind).alias("kind"), "schema_version",
                        F.col("_metadata.file_path").alias("file")))
        bad = rows if bad is None else bad.unionByName(rows)
    found = bad.limit(1).collect() if bad is not None else []
    if found:
        row = found[0]
        path = _local_path(row.file)
        raise SchemaVersionError(
            f"{path}: {row.kind} trace has rows with schema_version {row.schema_version}, "
            f"but this analysis reads version {schema.SCHEMA_VERSION}",
            path=path, found=row.schema_version, expected=schema.SCHEMA_VERSION)


# --- computing ----------------------------------------------------------------

def summarize(traces: Traces, run: Mapping[str, Any], progress: Progress | None = None) -> dict:
    """Compose the transforms over the trace frames into the summary dict (no `slo` yet)."""
    say: Progress = progress or (lambda _message: None)
    t0 = int(run["t0_ns"])
    duration_s = float(run["duration_s"])
    warmup_s = float(run.get("warmup_s") or 0)
    warmup_end = t0 + seconds_to_ns(warmup_s)
    window_start, window_end = measurement_window_ns(t0, warmup_s, duration_s, run.get("ended_ns"))
    segments = timeline_segments(run.get("phases") or [], duration_s)

    publishes = (traces["publish"].transform(with_confirm_latency)
                 .transform(mark_measured(warmup_end)).cache())
    deliveries = (traces["delivery"].transform(attach_intended_ns(traces["publish"]))
                  .transform(with_delivery_latencies).transform(mark_measured(warmup_end)).cache())
    cached = [publishes, deliveries]
    try:
        say("computing accounting")
        classified = publishes.transform(classify_messages(
            deliveries, traces["leftover"], traces["event"], traces.get("deadletter"),
            publish_rejects=rejects_at_publish(run.get("scenario")))).cache()
        cached.append(classified)
        messages = _messages_block(
            accounting_totals(classified).crossJoin(delivery_counts(deliveries)).first(),
            [r.message_id for r in classified.transform(unaccounted_ids(MAX_UNACCOUNTED_IDS)).collect()],
        )

        say("computing latency statistics and throughput")
        measured = F.col("measured")
        overall = (
            deliveries.transform(stats_by([], {
                name: F.when(measured, F.col(col)) for name, col in _DELIVERY_METRICS.items()
            }, fields=(*STAT_FIELDS, "min")))
            .crossJoin(publishes.transform(stats_by([], {"confirm": F.when(measured, F.col("confirm_ms"))})))
            .crossJoin(deliveries.transform(throughput(window_start, window_end, publishes)))
            .first()
        )

        say("computing per-consumer statistics")
        consumers = [_consumer_row(r) for r in deliveries.transform(consumer_summary).collect()]
        say("computing the queueing-model check")
        quantiles = {r["consumer"]: r["sojourn_quantiles_ms"]
                     for r in deliveries.transform(consumer_sojourn_quantiles).collect()}
        for c in consumers:  # additive: docs/summary.md, the `model` block
            c["sojourn_quantiles_ms"] = {"q": list(QUANTILES), "ms": quantiles.get(c["consumer"])}
        model = _model_block(deliveries.transform(model_inputs(t0)).collect(),
                             deliveries.transform(model_inputs(t0, ("consumer", "phase"))).collect(),
                             consumers)
        codel = codel_block(deliveries)  # CoDel per consumer (empty when it was off): docs/summary.md
        egress = egress_block(deliveries, run.get("scenario"))  # egress classes per group ({} when off): docs/summary.md
        say("computing publish lateness and replay fidelity")
        fidelity = fidelity_block(publishes, t0, run.get("replay"))  # per producer group: docs/summary.md
        say("computing producer flow control and priority classes")
        flow_control = flow_control_block(publishes, traces["event"], int(run.get("ended_ns") or window_end))  # docs/summary.md
        priorities = priority_rows(publishes, deliveries, classified, DISCARD_CLASSES)  # docs/summary.md
        say("computing consumer churn")
        churn = churn_block(deliveries, traces["event"], classified)  # crashes, requeues: docs/summary.md
        say("computing slow consumers")  # docs/slow-consumers.md
        slow_consumers = slow_consumers_block(deliveries, traces["event"], t0)
        queue_depth = [r.asDict() for r in queue_depth_series(queue_samples(traces["event"]), t0).collect()]
        say("computing phases")
        phases = [_phase_row(r) for r in
                  deliveries.transform(phase_summary(segments, t0, publishes)).collect()]
        say("computing per-second windows")
        windows = [_window_row(r) for r in
                   deliveries.transform(per_second_windows(t0, publishes)).collect()]
        components = {r["t_s"]: r for r in deliveries.transform(window_components(t0)).collect()}
        for w in windows:  # additive: per-second means of the end-to-end components
            r = components.get(w["t_s"])
            w["components_ms"] = {name: (r[name] if r is not None else None) for name in COMPONENTS}
        say("computing the sojourn histogram")
        sojourn = overall["sojourn_ms"]
        edges = histogram_edges(sojourn["min"], sojourn["max"])
        counts = [0] * (len(edges) - 1)
        for r in deliveries.transform(histogram_counts(edges, F.when(measured, F.col("sojourn_ms")))).collect():
            counts[r["bin"]] = r["count"]
        say("collecting events")
        events = [r.asDict() for r in
                  traces["event"].where(F.col("kind") != "queue_sample")  # in queue_depth instead
                  .transform(timeline_events(t0)).limit(MAX_EVENTS + 1).collect()]
        if len(events) > MAX_EVENTS:
            say(f"events: keeping the first {MAX_EVENTS} of more")
            events = events[:MAX_EVENTS]
    finally:
        for frame in cached:
            frame.unpersist()

    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run": _run_block(run),
        "messages": messages,
        "throughput": {k: overall[k] for k in ("publish_per_s", "deliver_per_s", "ack_per_s")},
        "sojourn_ms": stats_block(overall["sojourn_ms"]),
        "latency_ms": {
            **{name: stats_block(overall[name])
               for name in ("end_to_end", "broker_network", "processing", "ack_delay")},
            "confirm": stats_block(overall["confirm"]),
        },
        "consumers": consumers,
        "codel": codel,
        "egress": egress,
        "model": model,
        "phases": phases,
        "windows": windows,
        "sojourn_histogram": {"edges_ms": edges, "counts": counts},
        "events": events,
        "network": network_summary(traces["event"], t0, duration_s, run.get("ended_ns")),  # docs/network.md
        "fidelity": fidelity,
        "flow_control": flow_control,
        "priorities": priorities,
        "consumers_churn": churn,
        "slow_consumers": slow_consumers,
        "queue_depth": queue_depth,
    }


def _run_block(run: Mapping[str, Any]) -> dict:
    scenario = run.get("scenario") if isinstance(run.get("scenario"), dict) else {}
    name = scenario.get("name") or (Path(run["scenario_path"]).stem if run.get("scenario_path") else None)
    return {
        "run_id": run.get("run_id"), "scenario": name, "t0_ns": int(run["t0_ns"]),
        "duration_s": run["duration_s"], "warmup_s": run.get("warmup_s", 0),
        "broker_url": run.get("broker_url"), "status": run.get("status"),
        "code_version": run.get("code_version"),
    }


def _messages_block(totals, ids: list[str]) -> dict:
    discarded = {c: int(totals[c]) for c in DISCARD_CLASSES}
    return {
        "published": int(totals["published"]), "confirmed": int(totals["confirmed"]),
        "acked": int(totals["acked"]), "discarded": discarded,
        "discarded_total": sum(discarded.values()),
        "left_in_broker": int(totals["left_in_broker"]),
        "unaccounted": int(totals["unaccounted"]), "unaccounted_ids": ids,
        "redelivered": int(totals["redelivered"]), "duplicates": int(totals["duplicates"]),
    }


def _consumer_row(r) -> dict:
    return {"consumer": r["consumer"], "group": r["group"], "delivered": r["delivered"],
            "acked": r["acked"], "utilisation": r["utilisation"],
            "sojourn_ms": stats_block(r["sojourn_ms"]),
            "latency_ms": {"end_to_end": stats_block(r["end_to_end_ms"])}}


def _model_block(rows, phase_rows, consumers: list[dict]) -> dict:
    """The queueing-model check per consumer, and per consumer and phase (the trace's
    phase column) when a consumer saw more than one (analysis/transforms/model.py)."""
    by_id = {c["consumer"]: c for c in consumers}
    out = []
    for r in rows:
        c = by_id.get(r["consumer"], {})
        out.append(model_row({**r.asDict(), "group": c.get("group"), "utilisation": c.get("utilisation")}))
    seen: dict = {}
    for r in phase_rows:
        seen[r["consumer"]] = seen.get(r["consumer"], 0) + 1
    phases = [model_row({**r.asDict(), "group": by_id.get(r["consumer"], {}).get("group")})
              for r in phase_rows if seen[r["consumer"]] > 1]
    return {"consumers": out, "phases": phases}


def _phase_row(r) -> dict:
    return {"phase": r["phase"], "start_s": r["start_s"], "end_s": r["end_s"],
            "published": r["published"], "acked": r["acked"],
            "throughput": {"publish_per_s": r["publish_per_s"], "ack_per_s": r["ack_per_s"]},
            "sojourn_ms": stats_block(r["sojourn_ms"]),
            "latency_ms": {"end_to_end": stats_block(r["end_to_end_ms"])}}


def _window_row(r) -> dict:
    return {"t_s": r["t_s"], "published": r["published"], "delivered": r["delivered"],
            "acked": r["acked"],
            "sojourn_ms": stats_block(r["sojourn_ms"], WINDOW_SOJOURN_FIELDS),
            "latency_ms": stats_block(r["latency_ms"], WINDOW_LATENCY_FIELDS)}


# --- writing ------------------------------------------------------------------

def _json_safe(value: Any) -> Any:
    """NaN and infinities become null; JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_report(run_dir: Path, summary: dict, say: Progress) -> None:
    """Render report.html when analysis.report provides render_report; skip it otherwise.

    The Locust report next to it, when the run left one, is linked from the header.
    """
    try:
        from analysis import report
    except ImportError as exc:
        say(f"report skipped: analysis.report is not importable ({exc})")
        return
    render = getattr(report, "render_report", None)
    if render is None:
        say("report skipped: analysis.report has no render_report yet")
        return
    kwargs = {}
    if (run_dir / "locust.html").is_file() and "links" in inspect.signature(render).parameters:
        kwargs["links"] = {"Locust report": "locust.html"}
    say("writing report.html")
    _write_atomically(run_dir / "report.html", render(summary, **kwargs))
