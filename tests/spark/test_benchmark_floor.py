"""benchmarks.floor: the bare operations find what the traces hold (counted here with pyarrow)."""

from __future__ import annotations

import collections
from pathlib import Path

import pyarrow.parquet as pq

from analysis import traces
from benchmarks.floor import SKETCHED, operations

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "quickstart"


def _column(kind: str, column: str = "message_id") -> list[str | None]:
    files = sorted((RECORDED / "traces" / kind).glob("*.parquet"))
    return [v for f in files for v in pq.read_table(f, columns=[column]).column(column).to_pylist()]


def test_the_bare_operations_count_the_ids_and_the_ids_out_of_the_ordinary(spark):
    frames = traces.read(spark, traces.scan(RECORDED))
    found = {name: operation() for name, operation in operations(frames["publish"], frames["delivery"], 256).items()}

    published, delivered = _column("publish"), _column("delivery")
    with_id = [i for i in published + delivered if i is not None]
    assert found["rows with an id (publish and delivery)"] == len(with_id)
    pubs = collections.Counter(i for i in published if i is not None)
    dels = collections.Counter(i for i in delivered if i is not None)
    odd = [i for i in set(pubs) | set(dels) if (pubs[i], dels[i]) != (1, 1)]
    assert found["ids not published once and delivered once"] == len(odd)
    # every non-null value of the six sketched columns: each sketch holds its own column's
    sketched = sum(v is not None for c in SKETCHED for v in _column("delivery", c))
    assert found["values sketched (six KLL sketches per consumer)"] == sketched > 0


def test_an_id_out_of_the_ordinary_is_one_published_or_delivered_other_than_once(frame):
    publishes = frame("publish", *[{"message_id": i} for i in ("a", "b", "c", None)])
    deliveries = frame(
        "delivery",
        {"message_id": "a", "consumer": "c1", "processing_ms": 1.0, "receive_ns": 10},
        {"message_id": "b", "consumer": "c1", "receive_ns": 20},
        {"message_id": "b", "consumer": "c2", "redelivered": True},  # delivered twice
        {"message_id": "d", "consumer": "c2"},  # never published
    )  # and c was never delivered
    found = {name: operation() for name, operation in operations(publishes, deliveries, 256).items()}
    assert found == {
        "rows with an id (publish and delivery)": 3 + 4,
        "ids not published once and delivered once": 3,
        # the non-null values of the sketched columns: processing_ms once, receive_ns twice
        "values sketched (six KLL sketches per consumer)": 3,
    }
