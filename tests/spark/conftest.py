"""The tests/spark suite's Spark: a session on the test session's shared server (a Spark of this process
for the few tests that read its JVM), and a builder for tiny trace frames."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from analysis.schema import SCHEMA_VERSION, column_names, spark_schema
from tests.conftest import shared_server_url

_HERE = Path(__file__).parent

# Values for the columns a test does not care about; a test names every column
# its assertion depends on.
_DEFAULTS = {
    "publish": dict(
        producer="p/w:1/0",
        producer_group="p",
        seq=0,
        phase="base",
        size_bytes=100,
        routing_key="rk",
        persistent=False,
        confirm_ns=None,
        outcome="confirmed",
    ),
    "delivery": dict(
        consumer="c/w:1/0",
        consumer_group="c",
        phase="base",
        delivery_tag=1,
        redelivered=False,
        publish_ns=None,
        start_ns=None,
        end_ns=None,
        settle_ns=None,
        outcome="ack",
        prefetch=10,
        buffer_len=0,
        size_bytes=100,
        processing_ms=None,
    ),
    "event": dict(source="runner", name="", value=None, detail=None),
    "leftover": dict(queue="q", observed_ns=0, redelivered=False),
}


def trace_rows(kind: str, *rows: dict) -> list[tuple]:
    """Rows as tuples in schema order: the common columns, the kind's defaults, then `rows`."""
    names = column_names(kind)
    out = []
    for row in rows:
        values = {"schema_version": SCHEMA_VERSION, "run_id": "run-1", "worker": "w:1", **_DEFAULTS[kind], **row}
        unknown = set(values) - set(names)
        if unknown:
            raise KeyError(f"not {kind} columns: {sorted(unknown)}")
        out.append(tuple(values.get(n) for n in names))
    return out


def classify_messages(
    deliveries, leftovers, events=None, dead_letters=None, publish_rejects=False, delivery_limit=False
):
    """Applied to publishes: the job's accounting steps (message_facts, then classify), one call."""
    from analysis.events.accounting import accounting_inputs
    from analysis.transforms import classify, message_facts

    rows = [r.asDict() for r in events.collect()] if events is not None else None
    losses, restart_ns, _ = accounting_inputs(rows) if rows is not None else (None, None, False)

    def _classify(publishes):
        return publishes.transform(message_facts(deliveries, leftovers, dead_letters, losses)).transform(
            classify(events, publish_rejects, restart_ns, delivery_limit)
        )

    return _classify


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="package")
def spark(spark_server_dir):
    """A session on the test session's warm Spark server (tests/conftest.py), the one the integration
    tests' analyses and `sojourn` commands use: one JVM for the whole suite, warm from the first
    test on (these tests took 127-129 s in a Spark of their own, 93-95 s here, the server's start
    included; docs/testing.md). Package-scoped: pyspark is in Connect mode while it lasts, and the
    tests after this package's (tests/unit, their child processes) must not inherit that."""
    from analysis.session import connected

    with connected(shared_server_url()) as session:
        session.conf.set("spark.sql.shuffle.partitions", "1")
        yield session


@contextlib.contextmanager
def _classic_mode():
    """pyspark out of Spark Connect mode while inside (its `functions` build classic columns), however
    long the server's session lasts around it."""
    marker = os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    try:
        yield
    finally:
        if marker is not None:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = marker


@pytest.fixture(scope="package")
def _classic_session():
    from analysis.session import get_spark, stop_spark

    with _classic_mode():
        session = get_spark("local[1]", app_name="sojourn-tests")
        session.conf.set("spark.sql.shuffle.partitions", "1")
    yield session
    with _classic_mode():
        stop_spark(session)


@pytest.fixture
def classic_spark(_classic_session):
    """A Spark of this process, for the few tests that read what only its JVM shows (the status
    tracker's jobs, the context's parallelism and local properties) or wrap the classic DataFrame's
    actions (benchmarks.actions.timing); pyspark in classic mode for the test."""
    with _classic_mode():
        yield _classic_session


@pytest.fixture(scope="package")
def frame(spark):
    """frame("delivery", {"message_id": "m1", "receive_ns": 10}, ...) -> DataFrame."""

    def _frame(kind: str, *rows: dict):
        return spark.createDataFrame(trace_rows(kind, *rows), spark_schema(kind))

    return _frame


@pytest.fixture(scope="session")
def write_trace():
    """write_trace(run_dir, "publish", [{...}, ...]) -> the Parquet part file written with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.schema import arrow_schema

    def _write(run_dir: Path, kind: str, rows: list[dict], name: str = "part-0.parquet", schema=None) -> Path:
        names = column_names(kind)
        dicts = [dict(zip(names, values)) for values in trace_rows(kind, *rows)]
        directory = Path(run_dir) / "traces" / kind
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        pq.write_table(pa.Table.from_pylist(dicts, schema=schema or arrow_schema(kind)), path)
        return path

    return _write
