"""The analysis job: read one run directory, compose the transforms, write summary.json.

It has `analysis.run_file` read and check `RUN_DIR/run.json` and `analysis.traces` check and
read the Parquet traces (each kind once, with the explicit schema), builds the enriched
per-message frames once (docs/analysis.md, "The plan"), has `analysis.summary` collect and
shape the blocks, and writes `RUN_DIR/summary.json` and `report.html`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from analysis import outputs, traces as trace_files
from analysis.buckets import describe as describe_log_histogram
from analysis.concurrent import in_background, side_by_side
from analysis.cube import collected, cube
from analysis.events.accounting import accounting_inputs
from analysis.events.network import network_block
from analysis.events.queue import queue_depth, queue_samples
from analysis.events.single_active import single_active_block
from analysis.events.timeline import timeline
from analysis.progress import Progress, stage
from analysis.run_file import load_run_json, slo_expressions, stream_readers
from analysis.slo import evaluate_slos
from analysis.summary import (
    carries_priorities,
    churn_block,
    codel_block,
    consumer_row,
    egress_block,
    fidelity_block,
    flow_control_block,
    messages_block,
    model_block,
    outcomes_block,
    phase_row,
    priority_rows,
    run_block,
    slow_consumers_block,
    stats_block,
    window_row,
)
from analysis.summary.blocks import ledger_totals
from analysis.summary.by_id import deliveries_by_id, requeue_handoffs
from analysis.summary.codel import untouched
from analysis.summary.deliveries import delivery_rollup
from analysis.summary.flow_control import flow_control_projections
from analysis.summary.histogram import sojourn_histogram
from analysis.summary.model import ack_to_delivery_rows
from analysis.summary.streams import stream_block, stream_starts
from analysis.transforms import (
    DISCARD_CLASSES,
    attach_measured,
    classify,
    drops_past_delivery_limit,
    id_projections,
    ledger,
    mark_measured,
    measurement_window_ns,
    message_facts,
    rejects_at_publish,
    timeline_segments,
    with_confirm_latency,
    with_delivery_latencies,
)
from analysis.transforms._common import Transform, few, seconds_to_ns
from analysis.transforms.codel import NACK_OUTCOMES
from analysis.transforms.codes import decoded, encoded
from analysis.transforms.delivery_cube import publish_cells, publish_projections
from analysis.transforms.fidelity import lateness_projections
from analysis.transforms.model import ack_to_delivery, ack_to_delivery_projections

__all__ = [
    "analyze",
    "results",
    "spark_for",
    "read_traces",
    "summarize",
    "SUMMARY_SCHEMA_VERSION",
    "Progress",
    "Traces",
]

SUMMARY_SCHEMA_VERSION = 1
MAX_UNACCOUNTED_IDS = 100
MAX_EVENTS = 10_000
"""Events are the run's timeline (phase changes, depth samples): small by nature;
the cap only keeps a runaway event stream from flooding the driver and the report."""

CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER
"""The cached frames stay deserialized (Spark's in-memory column batches, spilled to disk when
memory runs short): serializing them cost more than the aggregations that read them (a
million-message facts frame: 3.5 s more than computing it, against 0.9 s deserialized)."""

LOG_HISTOGRAM = {
    **{k: v for k, v in describe_log_histogram().items() if k != "method"},
    "applies_to": [
        "sojourn_ms",
        "latency_ms.*",
        "consumers[*].sojourn_ms",
        "consumers[*].latency_ms.end_to_end",
        "consumers[*].sojourn_quantiles_ms.ms",
        "phases[*].sojourn_ms",
        "phases[*].latency_ms.end_to_end",
        "windows[*].sojourn_ms",
        "windows[*].latency_ms",
        "model.*[*].processing_p99_ms",
        "model.*[*].advice.codel_interval_ms",
        "model.*[*].advice.codel_interval_why",
        "codel.consumers[*].sojourn_before_ms",
        "codel.consumers[*].sojourn_after_ms",
        "fidelity.*.lateness_ms",
        "flow_control.*.blocked_ms",
        "model.*[*].check.ack_to_delivery.p50_ms",
        "model.*[*].check.ack_to_delivery.p95_ms",
        "model.*[*].check.round_trip_ms",
        "model.*[*].check.predicted.round_trip_ms",
        "model.*[*].check.predicted.buffer_wait_ms",
        "model.*[*].prefetch_advice.round_trip_ms",
        "model.*[*].prefetch_advice.ratio",
        "model.*[*].prefetch_advice.why",
        "egress.*.classes[*].sojourn_ms",
        "priorities[*].sojourn_ms",
        "priorities[*].end_to_end_ms",
        "fidelity.*.replay.inter_arrival_ms.intended",
        "fidelity.*.replay.inter_arrival_ms.published",
    ],
}
"""summary.json's `percentiles.log_histogram`: the values estimated from log-bucket histograms
(analysis.buckets, within `relative_error` of the exact ones) rather than by the method above:
the percentiles of the blocks named (`*` a group's name or a list's items), and the values named
themselves (a p99 and the advice that quotes it)."""

Traces = Mapping[str, DataFrame]

_UNREAD_DELIVERY_COLUMNS = (
    "schema_version",
    "run_id",
    "worker",
    "size_bytes",
    "codel_count",
    "codel_first_above_ns",
    "codel_drop_next_ns",
    "handler_error",
)
"""Delivery columns no block reads (the trace keeps them for the user): not cached, since the
cache costs by the column."""

CODED_DELIVERY_COLUMNS = ("consumer", "consumer_group", "phase", "outcome", "egress_class", "settled_by")
"""The delivery trace's few-valued strings, cached as codes (transforms.codes)."""


def analyze(
    run_dir: str | Path,
    master: str | None = None,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    remote: str | None = None,
    server: bool | None = None,
) -> dict:
    """Analyse one run directory; write and return its summary.

    `spark` wins; without it the session is spark_for's (`remote`, `master` and `server` choose it)
    and is let go at the end.
    Raises AnalysisError for bad inputs; nothing is written then.
    """
    from analysis.session import LOG_NAME

    run_dir = Path(run_dir)
    if spark is None:
        with spark_for([run_dir], master, run_dir / LOG_NAME, progress, remote=remote, server=server) as session:
            return analyze(run_dir, spark=session, progress=progress)
    summary, files = results(run_dir, spark, progress)
    outputs.write(run_dir, files)
    return summary


def results(run_dir: str | Path, spark: SparkSession, progress: Progress | None = None) -> tuple[dict, dict[str, str]]:
    """The run's summary and the text of each file the analysis writes into the run directory
    (summary.json, report.html, by name), computed on `spark`; nothing is written (outputs.write
    does).
    Raises AnalysisError for bad inputs."""
    from analysis.session import configure

    run_dir = Path(run_dir)
    say: Progress = progress or (lambda _message: None)
    run = load_run_json(run_dir)
    slo_exprs = slo_expressions(run, run_dir)
    kinds = trace_files.scan(run_dir)
    rows, size = trace_files.total_rows(kinds), trace_files.total_bytes(kinds)
    say(f"traces: {rows:,} rows, {size / 1e6:,.1f} MB of Parquet")
    configure(spark, size, rows, [kinds[kind].file_bytes for kind in ("delivery", "publish")])
    with stage(say, "reading traces"):
        small = {kind: trace_files.read_table(kinds[kind]) for kind in trace_files.SMALL_KINDS}
        frames = trace_files.read(spark, kinds, small)
    summary = summarize(
        frames,
        run,
        say,
        delivery_nulls=kinds["delivery"].null_columns,
        publish_nulls=kinds["publish"].null_columns,
        publish_valued=kinds["publish"].valued_columns,
        delivery_values=trace_files.distinct_values(kinds["delivery"], CODED_DELIVERY_COLUMNS),
        event_rows=small["event"].to_pylist(),
    )
    summary["slo"] = evaluate_slos(summary, slo_exprs)

    with stage(say, "rendering summary.json and report.html"):
        summary = _json_safe(summary)  # what is returned is exactly what the file holds
        text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
        summary = json.loads(text)
        return summary, {"summary.json": text, "report.html": _report(run_dir, summary)}


@contextlib.contextmanager
def spark_for(
    run_dirs: Sequence[str | Path],
    master: str | None = None,
    log_path: str | Path | None = None,
    progress: Progress | None = None,
    remote: str | None = None,
    server: bool | None = None,
) -> Iterator[SparkSession]:
    """One Spark session for analysing all of `run_dirs`; let go at the end.

    Which Spark, first match wins (docs/analysis.md, "Running it"):
    - `remote` (else SOJOURN_SPARK_REMOTE): a Spark Connect server at that URL (sc://HOST:PORT);
    - unless `server` is False (else SOJOURN_SPARK_SERVER=0): a local server of analysis.server
      whose Spark's master is `master` (else SPARK_MASTER, else local[*]), started if none runs,
      left running for the next analysis;
    - else a Spark of this process with that master, sized for the largest of the runs' traces, its
      JVM's output in `log_path` (a session already running in this process is used as it is, and
      left running).
    """
    from analysis import server as local_server
    from analysis.session import connected, get_spark, stop_spark

    say = progress or (lambda _message: None)
    for run_dir in run_dirs:  # a bad or unfinished run.json is the first thing to say, before the traces
        load_run_json(Path(run_dir))
    remote, master, server = local_server.spark_from_env(remote, master, server)
    if remote is not None:
        say(f"analysing on the Spark Connect server {remote.partition(';')[0]}")
        with connected(remote) as spark:
            yield spark
        return
    if server and SparkSession.getActiveSession() is None:
        directory = local_server.state_dir(master)
        with local_server.in_use(directory):
            info = local_server.ensure(directory, progress=say, master=master)
            try:
                with connected(local_server.url_of(info, directory), alive=lambda: local_server.running(info)) as spark:
                    yield spark
            except Exception as exc:
                if not local_server.running(info):
                    raise local_server.ServerError(
                        f"the local Spark server stopped during the analysis ({type(exc).__name__}); "
                        f"its log: {info.log}"
                    ) from exc
                raise
        return
    if SparkSession.getActiveSession() is not None:
        yield cast(SparkSession, SparkSession.getActiveSession())  # not None: checked just above
        return
    sizes = [trace_files.scan(run_dir) for run_dir in run_dirs]
    size = max((trace_files.total_bytes(k) for k in sizes), default=0)
    rows = max((trace_files.total_rows(k) for k in sizes), default=0)
    with stage(say, "starting Spark"):
        spark = get_spark(master, trace_bytes=size, trace_rows=rows, log_path=log_path)
    try:
        yield spark
    finally:
        stop_spark(spark)


@contextlib.contextmanager
def _setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Queries planned or run inside have the SQL setting `key` at `value` (a frame is planned as it
    is cached, and run at its first action); the session's own value is put back after."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _bypassing_partial_aggregation(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Groupings planned inside skip their partial aggregation before the shuffle: grouping by
    message id, each id has a publish row and a delivery row in different files, so a partial
    aggregate reduces nothing and costs a hash table of every row (10M messages: 38 -> 32 s)."""
    return _setting(spark, "spark.sql.execution.bypassPartialAggregation", "true")


def _without_constraint_propagation(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Plans made inside infer no constraints from their filters and aliases: over the ledger's
    account rules, which alias each flag of the grouping, the optimizer's sets of inferred constraints
    grew until a 1 GiB heap ran out (a quickstart-size run, once no join with the events came
    between the grouping and the ledger's filter)."""
    return _setting(spark, "spark.sql.constraintPropagation.enabled", "false")


PARALLEL_BLOCKS = 2
"""How many of the blocks after the overall statistics run their queries at once (concurrent.side_by_side)."""

# --- reading ------------------------------------------------------------------


def read_traces(spark: SparkSession, run_dir: str | Path) -> dict[str, DataFrame]:
    """The trace frames of a run directory (analysis.traces: footers checked, each kind read once)."""
    return trace_files.read(spark, trace_files.scan(run_dir))


# --- computing ----------------------------------------------------------------


def summarize(
    traces: Traces,
    run: Mapping[str, Any],
    progress: Progress | None = None,
    delivery_nulls: Collection[str] = (),
    publish_nulls: Collection[str] = (),
    publish_valued: Collection[str] = (),
    delivery_values: Mapping[str, Sequence[str]] | None = None,
    event_rows: Sequence[Mapping[str, Any]] | None = None,
) -> dict:
    """Compose the transforms over the trace frames into the summary dict (no `slo` yet).

    `delivery_nulls`: delivery columns null in every row (traces.KindFiles.null_columns, from the
    footers): left out of the cache and put back as null literals, which cost nothing to cache or
    scan and let Spark fold away what tests them (10M deliveries, ten such columns: the cache built
    in 6.4-8.3 s instead of 7.8-10.7 s).

    `publish_nulls`: the same of the publish trace. The optional blocks whose columns the footers
    say are null in every row (CoDel and its nacks, egress classes, publish priorities) are given
    as empty without a Spark query. `publish_valued`: the publish columns the footers show a value
    in (traces.KindFiles.valued_columns): a priority there needs no query to say the run has some.

    `delivery_values`: the distinct values of the delivery trace's few-valued string columns
    (traces.distinct_values of CODED_DELIVERY_COLUMNS): the cache holds them as codes
    (transforms.codes); without them it holds the strings, and queries read it row by row.

    `event_rows`: the events trace's rows (traces.read_table's: the job reads them with pyarrow); without
    them they are collected from the frame. The blocks of the events alone are computed from them on
    this process (analysis.events), without Spark.

    The plan (docs/analysis.md): the small kinds (events, leftovers, dead-letters) are read by
    pyarrow and reach Spark as rows of the plan; one grouping by message id over every kind gives
    the per-message facts, of which the ledger (the ids some block looks up, with their account
    class) is collected, and joined back as a local relation; the deliveries, which look the few
    ids that need it up in the ledger for their publish times, are cached; every block below
    aggregates those cached frames or re-reads the publish columns it needs.
    Every percentile comes from a cube's log buckets (analysis.cube).
    """
    say: Progress = progress or (lambda _message: None)
    spark = traces["publish"].sparkSession
    step = lambda name: stage(say, name, spark)  # noqa: E731
    t0 = int(run["t0_ns"])
    duration_s = float(run["duration_s"])
    warmup_s = float(run.get("warmup_s") or 0)
    warmup_end = t0 + seconds_to_ns(warmup_s)
    ended_ns = run.get("ended_ns")
    window = measurement_window_ns(t0, warmup_s, duration_s, ended_ns)
    segments = timeline_segments(run.get("phases") or [], duration_s)

    cached: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        cached.append(frame.persist(CACHE_LEVEL))
        return frame

    with contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: [frame.unpersist() for frame in cached])
        # the small kinds are rows of the plan (traces.SMALL_KINDS), not files: nothing to cache
        events, leftovers, dead_letters = traces["event"], traces["leftover"], traces["deadletter"]
        if event_rows is None:
            event_rows = [r.asDict() for r in events.collect()]
        publishes = traces["publish"].transform(with_confirm_latency).transform(mark_measured(warmup_end))

        shown, more = timeline(event_rows, t0, MAX_EVENTS)
        if more:
            say(f"events: keeping the first {MAX_EVENTS} of more")
        samples = queue_samples(event_rows)

        # The blocks that read only the publish trace and the events: they start once the accounting's
        # grouping is planned and run (it plans with session-wide settings of its own, _setting, which
        # their queries must not take), and run beside the deliveries' blocks. Each is described in
        # docs/summary.md.
        def from_publishes() -> dict[str, Any]:
            # one action: the publishes' cube (analysis.cube) for both blocks and the accounting's counts of
            # the publish rows; the replay's own queries after
            publish_cube = cube(
                publishes,
                [
                    *lateness_projections(),
                    *flow_control_projections(),
                    *id_projections(),
                    *publish_projections(t0, segments, window),
                ],
                publish_cells(t0),
            )
            return {
                "publish_cube": publish_cube,
                "fidelity": fidelity_block(publishes, publish_cube, t0, run.get("replay")),
                "flow_control": flow_control_block(publish_cube, event_rows, int(ended_ns or window[1])),
            }

        with step("computing accounting"):
            inputs = accounting_inputs(event_rows)
            # One grouping by message id, of which only the ids some block looks up are kept; the rest
            # were published once and acked, and are counted (docs/analysis.md, "The plan").
            with_priorities = "priority" not in publish_nulls and (
                "priority" in publish_valued or carries_priorities(traces["publish"])
            )
            readers = stream_readers(run.get("scenario"))  # a stream's groups each read every message
            stream = stream_starts(traces["delivery"], readers) if readers is not None else None
            facts = traces["publish"].transform(
                message_facts(traces["delivery"], leftovers, dead_letters, inputs.losses, stream)
            )
            rules = (
                events if inputs.returned_events else None,
                rejects_at_publish(run.get("scenario")),
                inputs.restart_ns,
                drops_past_delivery_limit(run.get("scenario")),
                stream is not None,
            )
            # One Spark action: the ledger's rows, collected; the blocks after it join them as rows of their
            # plan (a local relation), not as a query.
            with _bypassing_partial_aggregation(spark), _without_constraint_propagation(spark):
                ledger_table = collected(facts.transform(ledger(warmup_end, *rules)))
            # with its schema: Spark Connect infers none from an empty table
            ledger_rows = spark.createDataFrame(ledger_table, schema=from_arrow_schema(ledger_table.schema))
            # The latencies are derived from the cached times as each block reads them: a cached column
            # costs its build by the byte (10M messages: 11 s for the 2 GB of these columns).
            enriched = (
                traces["delivery"].drop(*_UNREAD_DELIVERY_COLUMNS).transform(attach_measured(ledger_rows, warmup_end))
            )
            # publish_ns is filled from the publish trace where the header is missing: not a trace column
            nulls = {
                c: F.lit(None).cast(enriched.schema[c].dataType)
                for c in delivery_nulls
                if c in enriched.columns and c != "publish_ns"
            }
            # The cache holds primitive columns only, so that queries read its column batches as they are
            # (transforms.codes): the few-valued strings as codes, and the ids (a string per row) only
            # where the priorities need them.
            columns = [c for c in enriched.columns if with_priorities or c != "message_id"]
            values = delivery_values or {}
            # no consumer had CoDel on and none nacked: nothing for the codel block to read
            codel_nacks = set(NACK_OUTCOMES) & set(values.get("outcome", NACK_OUTCOMES)) and (
                "settled_by" in delivery_nulls or "codel" in values.get("settled_by", ("codel",))
            )
            codel_untouched = "codel_dropping" in delivery_nulls and not codel_nacks
            codes = {c: values[c] for c in columns if c in values and c not in nulls}
            coded = keep(enriched.select(*[c for c in columns if c not in nulls]).transform(encoded(codes)))

            def on_codes(keys: Mapping[str, str], transform: Transform) -> DataFrame:
                """`transform` of the cached deliveries with the columns of `keys` left as their codes, so
                that a grouping or join by them hashes ints rather than strings; the result's column
                keys[c] is decoded (a grouping may rename its key)."""
                return (
                    coded.transform(decoded({c: v for c, v in codes.items() if c not in keys}))
                    .select(*[nulls[c].alias(c) if c in nulls else c for c in columns])
                    .transform(with_delivery_latencies)
                    .transform(transform)
                    .transform(decoded({keys[c]: v for c, v in codes.items() if c in keys}))
                )

            deliveries = on_codes({}, lambda frame: frame)
            # The blocks that need neither the deliveries' cube nor each other's results run one after
            # the other on a thread of their own, beside the cube (docs/analysis.md, "Side by side").
            early = cleanup.enter_context(
                in_background(
                    say,
                    spark,
                    {
                        "publishes": ("computing publish lateness, flow control and replay fidelity", from_publishes),
                        "ack_to_delivery": (
                            "computing the ack-to-delivery times",
                            lambda: ack_to_delivery_rows(
                                cube(
                                    on_codes({"consumer": "consumer", "phase": "phase"}, ack_to_delivery),
                                    ack_to_delivery_projections(),
                                )
                            ),
                        ),
                    },
                )
            )

        with step("computing latency statistics and throughput"):
            # One Spark action: the deliveries' cube, from which the overall, per-consumer, per-phase and
            # queueing-model blocks roll up on the driver (summary.deliveries).
            rollup = delivery_rollup(deliveries, t0, segments, window, [s["ts_ns"] for s in samples])
            overall = rollup.overall(window)
            consumers = [consumer_row(r) for r in rollup.consumers()]
            # docs/slow-consumers.md: from the cube's rows and the events', on this process
            # a stream holds what was read: its message count is no backlog of ready messages to be slow on
            slow_consumers = (
                slow_consumers_block(event_rows, t0, rollup.activity(), rollup.cells("outstanding"))
                if samples and stream is None
                else {}
            )

        with step("following requeued, held and repeated messages by id"):
            # One Spark action: the deliveries of the ledger's ids (every id CoDel's hand-offs and churn
            # follow), collected; their blocks read them on this process (summary.by_id).
            by_id = deliveries_by_id(
                traces["delivery"].join(few(ledger_rows.select("message_id")), "message_id", "left_semi")
            )

        # The blocks below read the cached frames and nothing of each other: their queries run side by
        # side, the longest (at 10M messages) first. Each is described in docs/summary.md.
        blocks = side_by_side(
            say,
            spark,
            {
                "codel": (  # {} when it was off
                    "computing CoDel",
                    lambda: (
                        untouched()
                        if codel_untouched
                        else codel_block(deliveries, rollup.cells("codel_state"), requeue_handoffs(by_id))
                    ),
                ),
                "priorities": (  # the check was made above
                    "computing priority classes",
                    lambda: (
                        # every published id's class: the ledger holds the notable ones only
                        priority_rows(deliveries, facts.transform(classify(*rules)), DISCARD_CLASSES)
                        if with_priorities
                        else []
                    ),
                ),
                "egress": (  # {} when off
                    "computing egress",
                    lambda: egress_block(None if "egress_class" in delivery_nulls else deliveries, run.get("scenario")),
                ),
            },
            at_once=PARALLEL_BLOCKS,
        )
        begun = early()  # the blocks begun after the accounting
        blocks.update(begun["publishes"])
        blocks["ack_to_delivery"] = begun["ack_to_delivery"]
        accounts = {
            r["message_id"]: r["account"]
            for r in ledger_table.select(["message_id", "account"]).to_pylist()
            if r["account"] is not None
        }
        blocks["consumers_churn"] = churn_block(event_rows, rollup.cells(), by_id, accounts)  # crashes, requeues
        blocks["outcomes"] = outcomes_block(rollup.cells(), by_id, accounts, run.get("scenario"))  # nacks, rejects
        publish_cube = blocks.pop("publish_cube")
        overall.update(rollup.overall_publishes(publish_cube, window))
        phases = [phase_row(r) for r in rollup.phases(publish_cube, segments)]
        windows = [window_row(r) for r in rollup.windows(publish_cube)]
        redelivered = overall["redelivered"]
        ids = publish_cube.counts("ids")
        ledger_list = ledger_table.to_pylist()
        totals, unaccounted = ledger_totals(ledger_list, ids, redelivered, MAX_UNACCOUNTED_IDS)
        messages = messages_block(
            totals,
            unaccounted,
            finished=run.get("status") != "running",
            workers_missing=bool(run.get("workers_missing")),
        )
        depth = queue_depth(samples, t0)
        by_consumer_rows, by_phase_rows = rollup.model_inputs()
        model = model_block(by_consumer_rows, by_phase_rows, consumers, blocks.pop("ack_to_delivery"), depth, segments)

    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run": run_block(run),
        "messages": messages,
        "throughput": {k: overall[k] for k in ("publish_per_s", "deliver_per_s", "ack_per_s")},
        "sojourn_ms": stats_block(overall["sojourn_ms"]),
        "latency_ms": {
            **{
                name: stats_block(overall[name])
                for name in ("end_to_end", "broker_network", "socket_wait", "processing", "ack_delay")
            },
            "confirm": stats_block(overall["confirm"]),
        },
        "percentiles": {**describe_log_histogram(), "log_histogram": LOG_HISTOGRAM},
        "consumers": consumers,
        "codel": blocks["codel"],
        "egress": blocks["egress"],
        "model": model,
        "phases": phases,
        "windows": windows,
        "sojourn_histogram": sojourn_histogram(rollup.histogram("sojourn_ms")),
        "events": shown,
        "network": network_block(event_rows, t0, duration_s, ended_ns),  # docs/network.md
        "single_active_consumer": single_active_block(event_rows, t0, run.get("scenario")),
        "stream": stream_block(stream, ledger_list, consumers),
        "fidelity": blocks["fidelity"],
        "flow_control": blocks["flow_control"],
        "priorities": blocks["priorities"],
        "consumers_churn": blocks["consumers_churn"],
        "outcomes": blocks["outcomes"],
        "slow_consumers": slow_consumers,
        "queue_depth": depth,
    }


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


def _report(run_dir: Path, summary: dict) -> str:
    """report.html of the summary; the Locust report next to it, when the run left one, is linked
    from the header."""
    from analysis.report import render_report

    links = {"Locust report": "locust.html"} if (run_dir / "locust.html").is_file() else None
    return render_report(summary, links=links)
