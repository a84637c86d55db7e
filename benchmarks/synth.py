"""`python -m benchmarks.synth`: a synthetic sojourn run directory, written with no broker, and the
exact message accounting `sojourn analyze` must find in it; for timing the analysis at sizes a
real run on this machine can not reach, and for checking its numbers against known ones.

    python -m benchmarks.synth --messages 1M --out /tmp/synth-1m            # 100k, 1M, 10M or a count
    python -m benchmarks.synth --messages 30M --out /data/synth-30m --large  # over 10M needs --large

What is in it (one seeded draw, written chunk by chunk so memory stays flat at any size):
- A master process (timeline, queue samples, dead-letter capture, census) and two worker
  processes, each with 2 of the 4 producers and 4 of the 8 consumers of one queue; parts are
  `traces/<kind>/part-<worker>-<seq>.parquet`, as each process's trace writer names them.
- Poisson arrivals, exactly `messages` of them over `duration_s = max(60, messages / 1700)`
  seconds, 1.5 times as dense in the `busy` phase. Each consumer is a FIFO server (the Lindley
  recursion, vectorised) of exponential processing, 2.2 times longer in the `slow` phase, where
  the load exceeds the consumers and both broker wait and buffer sojourn grow; a prefetch of 20
  decides when a message leaves the broker for the consumer's buffer.
- A few messages of each fate, drawn per message with FATE_SHARES: requeued (nack_requeue, then
  acked on redelivery by another consumer), acked twice (a duplicate), consumer_nack_discard
  (also dead-lettered `rejected`: the consumer's nack wins), publish_nacked, publish_failed,
  unroutable (outcome returned, and the `publish_returned` event), dead_lettered_maxlen (a
  deadletter row) and left_in_broker (a leftover row from the census). The nacks carry no
  CoDel state (CoDel is off in the scenario): the analysis counts them all the same.

`generate()` returns the accounting computed from these draws, never from the files, and
`synth.json` in the directory holds it in the shape of summary.json's `messages` block.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.schema import SCHEMA_VERSION, arrow_schema
from loadgen.trace.writer import part_name, write_part

__all__ = [
    "SIZES",
    "FATE_SHARES",
    "DISCARD_CLASSES",
    "SynthParams",
    "SynthRun",
    "SynthSizeError",
    "plan",
    "generate",
    "main",
]

SIZES = {"100k": 100_000, "1M": 1_000_000, "10M": 10_000_000, "30M": 30_000_000}
MAX_MESSAGES = 10_000_000  # without --large
MAX_LARGE_MESSAGES = 30_000_000  # with it
MESSAGES_PER_S = 1700  # sets the duration: max(60, messages / this) seconds
PRODUCERS, CONSUMERS = 4, 8
CHUNK_MESSAGES = 200_000  # messages per chunk: a part of ~100k rows per worker and kind
DEFAULT_T0_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: the same files for the same seed

# Share of messages per fate; the rest are published, confirmed and acked once.
FATE_SHARES: Mapping[str, float] = {
    "requeued": 2e-3,
    "duplicate": 5e-4,
    "nack_discard": 5e-4,
    "publish_nacked": 5e-4,
    "publish_failed": 5e-4,
    "unroutable": 5e-4,
    "dead_lettered_maxlen": 5e-4,
    "left_in_broker": 5e-4,
}
_FATES = ("acked", *FATE_SHARES)
_F = {name: i for i, name in enumerate(_FATES)}
_DELIVERED = [_F[f] for f in ("acked", "requeued", "duplicate", "nack_discard")]
_REDELIVERED = [_F["requeued"], _F["duplicate"]]
_NACKED_FIRST = [_F["requeued"], _F["nack_discard"]]
_IN_QUEUE = _DELIVERED + [_F["dead_lettered_maxlen"], _F["left_in_broker"]]

# summary.json's messages.discarded keys, in its order (analysis/transforms/accounting.py,
# DISCARD_CLASSES; copied because that module needs pyspark).
DISCARD_CLASSES = (
    "publish_nacked",
    "publish_failed",
    "consumer_nack_discard",
    "connection_lost",
    "publish_rejected_maxlen",
    "unroutable",
    "publish_failed_blocked",
    "dead_lettered_maxlen",
    "dead_lettered_expired",
    "dead_lettered_rejected",
    "dead_lettered_delivery_limit",
    "egress_discard",
    "lost_with_queue",
    "channel_closed",
    "consumer_reject",
    "dropped_delivery_limit",
)

_PHASES = ("base", "busy", "slow")
_PUBLISH_OUTCOMES = ("confirmed", "nacked", "failed", "returned")
_DELIVERY_OUTCOMES = ("ack", "nack_requeue", "nack_discard")
_GROUP = "main"
_ROUTING_KEY = "work"
_US = 1_000  # ns

Progress = Callable[[int, int], None]
"""progress(messages done, messages in all), after each chunk."""


class SynthSizeError(ValueError):
    """A message count out of range: `messages`, the `limit` it broke."""

    def __init__(self, message: str, *, messages: int, limit: int):
        super().__init__(message)
        self.messages = messages
        self.limit = limit


@dataclass(frozen=True)
class SynthParams:
    """Everything the draw depends on besides the seed; times in s from t0, rates in msg/s."""

    messages: int
    seed: int
    run_id: str
    t0_ns: int
    duration_s: float
    warmup_s: float
    drain_timeout_s: float
    busy: tuple[float, float]
    slow: tuple[float, float]
    base_rate_per_s: float  # all producers together, outside `busy`
    busy_rate_factor: float
    base_processing_ms: float  # mean of the exponential, outside `slow`
    slow_processing_factor: float
    producers: int = PRODUCERS
    consumers: int = CONSUMERS
    prefetch: int = 20
    size_bytes: int = 256
    queue: str = "sojourn.synth"
    exchange: str = "sojourn.synth"
    dead_letter_exchange: str = "sojourn.synth.dlx"
    workers: tuple[str, ...] = ("synth-4100", "synth-4101", "synth-4102")  # master, then the workers
    chunk_messages: int = CHUNK_MESSAGES
    fate_shares: Mapping[str, float] = field(default_factory=lambda: dict(FATE_SHARES))

    def producer_names(self) -> list[str]:
        return [f"{_GROUP}/{self._worker_of(i, self.producers)}/{i}" for i in range(self.producers)]

    def consumer_names(self) -> list[str]:
        return [f"{_GROUP}/{self._worker_of(i, self.consumers)}/{i}" for i in range(self.consumers)]

    def _worker_of(self, slot: int, count: int) -> str:
        participants = self.workers[1:]
        return participants[slot * len(participants) // count]


@dataclass(frozen=True)
class SynthRun:
    """What `generate` wrote: its parameters, the accounting the analysis must find, and the files."""

    out_dir: Path
    params: SynthParams
    accounts: dict[str, int]  # one count per account class (accounting.py's ACCOUNT_CLASSES)
    messages: dict[str, Any]  # summary.json's `messages` block, exactly
    rows: dict[str, int]  # rows written per trace kind
    parts: dict[str, int]  # part files written per trace kind
    bytes: int  # size of the part files
    seconds: float  # time generate() took


def plan(
    messages: int,
    seed: int = 7,
    *,
    run_id: str = "synth",
    t0_ns: int = DEFAULT_T0_NS,
    chunk_messages: int = CHUNK_MESSAGES,
    large: bool = False,
) -> SynthParams:
    """The parameters for `messages` messages; raises SynthSizeError out of range (over
    MAX_MESSAGES without `large`, over MAX_LARGE_MESSAGES with it)."""
    if isinstance(messages, bool) or not isinstance(messages, int) or messages < 1:
        raise SynthSizeError(f"messages: expected a whole number >= 1, got {messages!r}", messages=messages, limit=1)
    limit = MAX_LARGE_MESSAGES if large else MAX_MESSAGES
    if messages > limit:
        hint = f" without --large (up to {MAX_LARGE_MESSAGES:,} with it)" if not large else ""
        raise SynthSizeError(
            f"messages: {messages:,} is over the limit of {limit:,}{hint}", messages=messages, limit=limit
        )
    if chunk_messages < 1:
        raise ValueError(f"chunk_messages: expected >= 1, got {chunk_messages!r}")
    duration = float(max(60, math.ceil(messages / MESSAGES_PER_S)))
    length = float(max(1, round(min(0.2 * duration, 60.0))))
    busy = (float(round(0.2 * duration)), float(round(0.2 * duration)) + length)
    slow = (float(round(0.5 * duration)), float(round(0.5 * duration)) + length)
    busy_factor = 1.5
    rate = messages / (duration + (busy_factor - 1) * length)
    processing_ms = round(0.55 * CONSUMERS / rate * 1000, 3)  # 55 % busy outside the phases
    return SynthParams(
        messages=messages,
        seed=seed,
        run_id=run_id,
        t0_ns=t0_ns,
        duration_s=duration,
        warmup_s=5.0,
        drain_timeout_s=20.0,
        busy=busy,
        slow=slow,
        base_rate_per_s=rate,
        busy_rate_factor=busy_factor,
        base_processing_ms=processing_ms,
        slow_processing_factor=2.2,
        chunk_messages=chunk_messages,
    )


def generate(
    out_dir: str | os.PathLike,
    messages: int,
    seed: int = 7,
    *,
    run_id: str | None = None,
    t0_ns: int = DEFAULT_T0_NS,
    chunk_messages: int = CHUNK_MESSAGES,
    large: bool = False,
    progress: Progress | None = None,
) -> SynthRun:
    """Write a run directory of `messages` synthetic messages to `out_dir` (which must not hold a
    run already) and return what the analysis must find in it. `run_id` defaults to the
    directory's name, as `sojourn run` names runs."""
    started = time.perf_counter()
    out = Path(out_dir)
    p = plan(
        messages, seed, run_id=run_id or out.resolve().name, t0_ns=t0_ns, chunk_messages=chunk_messages, large=large
    )
    if (out / "run.json").exists() or (out / "traces").exists():
        raise FileExistsError(f"{out}: holds a run already (run.json or traces/); choose an empty directory")
    writer = _PartWriter(out / "traces", p.run_id)
    state = _State(p)
    rng = np.random.default_rng(p.seed)
    done = 0
    for times_s in _arrival_chunks(p, rng):
        _write_chunk(p, rng, times_s, state, writer)
        done += len(times_s)
        if progress is not None:
            progress(done, p.messages)
    _write_ending(p, rng, state, writer)
    accounts = _accounts(p, state.fates)
    result = SynthRun(
        out_dir=out,
        params=p,
        accounts=accounts,
        messages=_messages_block(accounts, state.fates),
        rows=dict(writer.rows),
        parts=dict(writer.parts),
        bytes=writer.bytes,
        seconds=round(time.perf_counter() - started, 3),
    )
    _write_json(out / "run.json", _run_json(p, state))
    _write_json(out / "synth.json", _synth_json(result))
    return result


# --- the draw ---------------------------------------------------------------------------------


class _State:
    """What carries from one chunk to the next: per producer and consumer, the fate counts, the
    queue-depth histograms and the messages the census will find."""

    def __init__(self, p: SynthParams):
        self.next_seq = np.zeros(p.producers, np.int64)
        self.last_publish_ns = np.zeros(p.producers, np.int64)
        self.free_at_ns = np.full(p.consumers, p.t0_ns, np.int64)
        # the last `prefetch` starts and settles of each consumer, oldest first
        self.starts = np.full((p.consumers, p.prefetch), p.t0_ns - 10**10, np.int64)
        self.settles = np.full((p.consumers, p.prefetch), p.t0_ns - 10**10, np.int64)
        self.next_tag = np.zeros(p.consumers, np.int64)
        self.fates = np.zeros(len(_FATES), np.int64)
        bins = int(p.duration_s + p.drain_timeout_s) + 2
        self.ready = np.zeros(bins, np.int64)  # per second: into the queue's ready minus out of it
        self.unacked = np.zeros(bins, np.int64)  # delivered minus settled
        self.left: list[tuple[np.ndarray, np.ndarray]] = []  # (producer, seq) of the leftovers
        self.deadletters = 0


def _arrival_chunks(p: SynthParams, rng: np.random.Generator):
    """Arrival times (s from t0, sorted) of exactly `messages` messages, chunk by chunk.

    Given their number, Poisson arrivals are uniform order statistics; those are the normalised
    partial sums of messages + 1 exponential gaps, and a chunk's share of the whole is a Beta
    draw on what is left (the Dirichlet's aggregation), so no chunk needs the others. Mapped
    through the inverse cumulative rate, they are denser in `busy`."""
    n, size = p.messages, p.chunk_messages
    chunks = -(-n // size)
    edges = [0.0, p.busy[0], p.busy[1], p.duration_s]
    rates = [1.0, p.busy_rate_factor, 1.0]
    cumulative = np.concatenate(([0.0], np.cumsum(np.diff(edges) * rates)))
    offset, left_share, gaps_left = 0.0, 1.0, n + 1
    for i in range(chunks):
        k = n // chunks + (i < n % chunks)
        last = i == chunks - 1
        share = left_share if last else left_share * rng.beta(k, gaps_left - k)
        gaps = rng.exponential(1.0, k + 1 if last else k)
        u = offset + np.cumsum(gaps)[:k] / gaps.sum() * share
        offset, left_share, gaps_left = offset + share, left_share - share, gaps_left - k
        yield np.interp(u * cumulative[-1], cumulative, edges)


def _phase_of(p: SynthParams, ns: np.ndarray) -> np.ndarray:
    """Index into _PHASES of the timeline phase at each time (ns)."""
    s = (ns - p.t0_ns) / 1e9
    out = np.zeros(len(ns), np.int8)
    out[(s >= p.busy[0]) & (s < p.busy[1])] = 1
    out[(s >= p.slow[0]) & (s < p.slow[1])] = 2
    return out


def _exp_ns(rng: np.random.Generator, mean_us: float, k: int, floor_us: float = 0.0) -> np.ndarray:
    return (rng.exponential(mean_us * _US, k) + floor_us * _US).astype(np.int64)


def _processing_ms(p: SynthParams, rng: np.random.Generator, at_ns: np.ndarray) -> np.ndarray:
    factor = np.where(_phase_of(p, at_ns) == 2, p.slow_processing_factor, 1.0)
    return rng.exponential(p.base_processing_ms, len(at_ns)) * factor


class _Chunk(NamedTuple):
    """One chunk of messages, in arrival order: who published each, its fate and its times (ns)."""

    producer: np.ndarray
    seq: np.ndarray
    ids: pa.Array
    fate: np.ndarray  # index into _FATES
    intended: np.ndarray
    publish: np.ndarray
    confirm: np.ndarray  # null in the trace for a failed publish
    outcome: np.ndarray  # index into _PUBLISH_OUTCOMES
    arrive: np.ndarray  # in the queue, ready (for the messages that reach it)


def _write_chunk(
    p: SynthParams, rng: np.random.Generator, times_s: np.ndarray, state: _State, writer: _PartWriter
) -> None:
    k = len(times_s)
    producer = rng.integers(0, p.producers, k)
    cum = np.cumsum([p.fate_shares[f] for f in _FATES[1:]])
    fate = np.searchsorted(cum, rng.random(k), side="right") + 1
    fate[fate == len(_FATES)] = 0  # beyond every share: a plain acked message
    state.fates += np.bincount(fate, minlength=len(_FATES))

    intended = p.t0_ns + np.round(times_s * 1e9).astype(np.int64)
    publish = intended + _exp_ns(rng, 40, k, 5)
    seq = np.empty(k, np.int64)
    for i in range(p.producers):  # one producer publishes in order: a late publish delays the next
        mine = producer == i
        publish[mine] = np.maximum.accumulate(np.maximum(publish[mine], state.last_publish_ns[i]))
        seq[mine] = state.next_seq[i] + np.arange(mine.sum())
        if mine.any():
            state.last_publish_ns[i], state.next_seq[i] = publish[mine][-1], seq[mine][-1] + 1
    ids = pc.binary_join_element_wise(
        pc.take(pa.array([f"{p.run_id}:{name}:" for name in p.producer_names()]), pa.array(producer)),
        pc.cast(pa.array(seq), pa.string()),
        "",
    )
    outcome = np.zeros(k, np.int8)  # _PUBLISH_OUTCOMES
    outcome[fate == _F["publish_nacked"]] = 1
    outcome[fate == _F["publish_failed"]] = 2
    outcome[fate == _F["unroutable"]] = 3
    confirm = publish + (rng.lognormal(np.log(600.0), 0.5, k) * _US).astype(np.int64)
    arrive = publish + _exp_ns(rng, 150, k, 80)  # in the queue, ready
    chunk = _Chunk(producer, seq, ids, fate, intended, publish, confirm, outcome, arrive)

    _write_publishes(p, writer, chunk)
    rows, requeues, first_settle = _deliveries(p, rng, state, chunk)
    _write_deliveries(p, writer, ids, rows)
    _count_depth(p, state, chunk, rows, requeues)
    _write_chunk_extras(p, rng, writer, state, chunk, first_settle)


def _deliveries(
    p: SynthParams, rng: np.random.Generator, state: _State, chunk: _Chunk
) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The chunk's delivery rows as columns (each consumer a FIFO server, then the redeliveries),
    when each redelivered message went back to the queue and left it again, and the settle time
    of each message's first delivery (by chunk position; 0 for one never delivered)."""
    fate, arrive, publish = chunk.fate, chunk.arrive, chunk.publish
    k = len(fate)
    consumer = rng.integers(0, p.consumers, k)
    processing_ms = _processing_ms(p, rng, arrive)
    nacked = np.isin(fate, _NACKED_FIRST)
    busy_ns = np.round(processing_ms * 1e6).astype(np.int64) + _exp_ns(rng, 150, k, 50)  # timer overshoot
    ack_ns = _exp_ns(rng, 30, k, 15)
    occupied = np.where(nacked, _exp_ns(rng, 20, k, 20), busy_ns + ack_ns)  # start to settle
    refill = _exp_ns(rng, 150, k, 150)  # settle -> the broker's next delivery read off the socket
    start, receive = np.zeros(k, np.int64), np.zeros(k, np.int64)
    buffer_len, tag = np.zeros(k, np.int32), np.zeros(k, np.int64)
    delivered = np.isin(fate, _DELIVERED)
    for c in range(p.consumers):
        mine = np.flatnonzero(delivered & (consumer == c))
        mine = mine[np.argsort(arrive[mine], kind="stable")]
        m = len(mine)
        if not m:
            continue
        # Lindley: start_n = max(arrive_n, settle_n-1) = max over j <= n of (arrive_j - busy before j) + busy before n
        before = np.concatenate(([0], np.cumsum(occupied[mine])[:-1]))
        s = np.maximum.accumulate(np.maximum(arrive[mine] - before, state.free_at_ns[c])) + before
        settles = np.concatenate((state.settles[c], s + occupied[mine]))
        starts = np.concatenate((state.starts[c], s))
        # prefetch: the n-th waits in the broker until the (n - prefetch)-th is settled
        r = np.minimum(s, np.maximum(arrive[mine], settles[:m] + refill[mine]))
        waiting = p.prefetch + np.arange(m) - np.searchsorted(starts, r, side="right")
        start[mine], receive[mine] = s, r
        buffer_len[mine] = np.clip(waiting, 0, p.prefetch - 1)
        tag[mine] = state.next_tag[c] + 1 + np.arange(m)
        state.next_tag[c] += m
        state.free_at_ns[c] = settles[-1]
        state.settles[c], state.starts[c] = settles[-p.prefetch :], starts[-p.prefetch :]
    first = np.flatnonzero(delivered)
    settle = start + occupied
    end = start + busy_ns
    out_first = np.zeros(k, np.int8)  # _DELIVERY_OUTCOMES
    out_first[fate == _F["requeued"]] = 1
    out_first[fate == _F["nack_discard"]] = 2

    again = np.flatnonzero(np.isin(fate, _REDELIVERED))  # to another consumer, later
    n2 = len(again)
    consumer2 = (consumer[again] + rng.integers(1, p.consumers, n2)) % p.consumers
    back_ns = np.where(
        fate[again] == _F["requeued"], _exp_ns(rng, 1000, n2, 300), _exp_ns(rng, 30_000, n2, 5_000)
    )  # a lost ack: back when its channel closed
    receive2 = settle[again] + back_ns
    start2 = receive2 + _exp_ns(rng, 1000, n2, 20)
    processing2 = _processing_ms(p, rng, receive2)
    end2 = start2 + np.round(processing2 * 1e6).astype(np.int64) + _exp_ns(rng, 150, n2, 50)
    settle2 = end2 + _exp_ns(rng, 30, n2, 15)
    tag2 = np.empty(n2, np.int64)
    for c in range(p.consumers):
        mine = consumer2 == c
        tag2[mine] = state.next_tag[c] + 1 + np.arange(mine.sum())
        state.next_tag[c] += mine.sum()

    cat = np.concatenate
    rows = {
        "index": cat((first, again)),
        "consumer": cat((consumer[first], consumer2)),
        "tag": cat((tag[first], tag2)),
        "redelivered": cat((np.zeros(len(first), bool), np.ones(n2, bool))),
        "publish": cat((publish[first], publish[again])),
        "receive": cat((receive[first], receive2)),
        "start": cat((start[first], start2)),
        "end": cat((end[first], end2)),
        "settle": cat((settle[first], settle2)),
        "outcome": cat((out_first[first], np.zeros(n2, np.int8))),
        "buffer_len": cat((buffer_len[first], np.zeros(n2, np.int32))),
        "processing_ms": cat((processing_ms[first], processing2)),
        "nacked": cat((nacked[first], np.zeros(n2, bool))),
    }
    return rows, (settle[again], receive2), np.where(delivered, settle, 0)


def _count_depth(
    p: SynthParams, state: _State, chunk: _Chunk, d: dict[str, np.ndarray], requeues: tuple[np.ndarray, np.ndarray]
) -> None:
    """Add the chunk to the per-second ins and outs of the queue's ready and unacked counts."""
    bins = len(state.ready)
    fate, arrive = chunk.fate, chunk.arrive

    def add(hist: np.ndarray, ns: np.ndarray, sign: int) -> None:
        hist += sign * np.bincount(np.clip((ns - p.t0_ns) // 10**9, 0, bins - 1), minlength=bins)

    requeued_at, received_again = requeues
    add(state.ready, arrive[np.isin(fate, _IN_QUEUE)], 1)
    add(state.ready, d["receive"][~d["redelivered"]], -1)
    add(state.ready, arrive[fate == _F["dead_lettered_maxlen"]] + 10**6, -1)  # dropped from the head soon after
    add(state.ready, requeued_at, 1)
    add(state.ready, received_again, -1)
    add(state.unacked, d["receive"], 1)
    add(state.unacked, d["settle"], -1)


def _write_chunk_extras(
    p: SynthParams,
    rng: np.random.Generator,
    writer: _PartWriter,
    state: _State,
    chunk: _Chunk,
    first_settle: np.ndarray,
) -> None:
    """The chunk's dead-letters (master), `publish_returned` events (the producers' workers) and
    the ids the census will find."""
    producer, ids, fate, publish, confirm = chunk.producer, chunk.ids, chunk.fate, chunk.publish, chunk.confirm
    master = p.workers[0]
    rows = []
    # maxlen: dropped from the queue's head; rejected: when the consumer nacked it
    for fate_name, reason, at in (
        ("dead_lettered_maxlen", "maxlen", chunk.arrive),
        ("nack_discard", "rejected", first_settle),
    ):
        which = np.flatnonzero(fate == _F[fate_name])
        received = at[which] + _exp_ns(rng, 20_000 if reason == "maxlen" else 1000, len(which), 500)
        rows += [
            (ids[i].as_py(), p.queue, reason, 1, int(r), p.dead_letter_exchange, _ROUTING_KEY)
            for i, r in zip(which.tolist(), received.tolist())
        ]
    if rows:
        writer.rows_part("deadletter", master, sorted(rows, key=lambda row: row[4]))
        state.deadletters += len(rows)
    names = p.producer_names()
    detail = json.dumps(
        {"exchange": p.exchange, "reply_code": 312, "reply_text": "NO_ROUTE", "routing_key": _ROUTING_KEY},
        sort_keys=True,
    )
    returned = np.flatnonzero(fate == _F["unroutable"])
    by_worker: dict[str, list[tuple]] = {}
    for i in returned.tolist():  # the return comes before the confirm
        ts = int(publish[i] + (confirm[i] - publish[i]) // 2)
        name = names[producer[i]]
        by_worker.setdefault(name.split("/")[1], []).append(
            (ts, "publish_returned", name, ids[i].as_py(), None, detail)
        )
    for worker, events in sorted(by_worker.items()):
        writer.rows_part("event", worker, events)
    left = fate == _F["left_in_broker"]
    if left.any():
        state.left.append((producer[left], chunk.seq[left]))


# --- writing ----------------------------------------------------------------------------------


class _PartWriter:
    """Part files as each worker process's trace writer names them: one sequence per worker."""

    def __init__(self, root: Path, run_id: str):
        self.root = root
        self.run_id = run_id
        self.seq: dict[str, int] = {}
        self.rows = dict.fromkeys(("publish", "delivery", "event", "leftover", "deadletter"), 0)
        self.parts = dict.fromkeys(self.rows, 0)
        self.bytes = 0
        for kind in self.rows:
            (root / kind).mkdir(parents=True, exist_ok=True)

    def _next(self, kind: str, worker: str, n: int) -> str:
        self.seq[worker] = self.seq.get(worker, 0) + 1
        self.rows[kind] += n
        self.parts[kind] += 1
        return part_name(worker, self.seq[worker])

    def rows_part(self, kind: str, worker: str, rows: list[tuple]) -> None:
        """A part of row tuples, written by the trace writer's own function (small parts)."""
        name = self._next(kind, worker, len(rows))
        write_part(self.root, kind, name, self.run_id, worker, rows)
        self.bytes += (self.root / kind / name).stat().st_size

    def columns_part(self, kind: str, worker: str, columns: Mapping[str, Any], n: int) -> None:
        """A part from Arrow or numpy columns; a nullable column left out is all null."""
        schema = arrow_schema(kind)
        common = {
            "schema_version": pa.repeat(pa.scalar(SCHEMA_VERSION, pa.int32()), n),
            "run_id": pa.repeat(pa.scalar(self.run_id, pa.string()), n),
            "worker": pa.repeat(pa.scalar(worker, pa.string()), n),
        }
        arrays = []
        for f in schema:
            value = common.get(f.name, columns.get(f.name))
            if value is None:
                if not f.nullable:
                    raise ValueError(f"{kind} part: column {f.name!r} is not nullable and was not given")
                value = pa.nulls(n, f.type)
            arrays.append(value if isinstance(value, (pa.Array, pa.ChunkedArray)) else pa.array(value, f.type))
        table = pa.Table.from_arrays(arrays, schema=schema)
        name = self._next(kind, worker, n)
        tmp = self.root / kind / f".{name}.{os.getpid()}.tmp"
        repeated = [f.name for f in schema if pa.types.is_string(f.type) and f.name != "message_id"]
        pq.write_table(table, tmp, use_dictionary=repeated)
        os.replace(tmp, self.root / kind / name)
        self.bytes += (self.root / kind / name).stat().st_size


def _strings(values: list[str] | tuple[str, ...], index: np.ndarray) -> pa.Array:
    return pc.take(pa.array(list(values), pa.string()), pa.array(index))


def _write_publishes(p: SynthParams, writer: _PartWriter, chunk: _Chunk) -> None:
    producer, seq, intended, outcome = chunk.producer, chunk.seq, chunk.intended, chunk.outcome
    worker_of = np.array([name.split("/")[1] for name in p.producer_names()])
    for worker in p.workers[1:]:
        mine = worker_of[producer] == worker
        n = int(mine.sum())
        if not n:
            continue
        at = pa.array(mine)
        writer.columns_part(
            "publish",
            worker,
            {
                "message_id": chunk.ids.filter(at),
                "producer": _strings(p.producer_names(), producer[mine]),
                "producer_group": pa.repeat(pa.scalar(_GROUP), n),
                "seq": seq[mine],
                "phase": _strings(_PHASES, _phase_of(p, intended[mine])),
                "intended_ns": intended[mine],
                "publish_ns": chunk.publish[mine],
                "size_bytes": np.full(n, p.size_bytes, np.int32),
                "routing_key": pa.repeat(pa.scalar(_ROUTING_KEY), n),
                "persistent": np.zeros(n, bool),
                "confirm_ns": pa.array(chunk.confirm[mine], pa.int64(), mask=outcome[mine] == 2),
                "outcome": _strings(_PUBLISH_OUTCOMES, outcome[mine]),
            },
            n,
        )


def _write_deliveries(p: SynthParams, writer: _PartWriter, ids, d: dict[str, np.ndarray]) -> None:
    names = p.consumer_names()
    worker_of = np.array([name.split("/")[1] for name in names])
    for worker in p.workers[1:]:
        mine = worker_of[d["consumer"]] == worker
        n = int(mine.sum())
        if not n:
            continue
        order = np.flatnonzero(mine)[np.argsort(d["receive"][mine], kind="stable")]  # as a consumer traces them
        col = {key: value[order] for key, value in d.items()}
        writer.columns_part(
            "delivery",
            worker,
            {
                "message_id": pc.take(ids, pa.array(col["index"])),
                "consumer": _strings(names, col["consumer"]),
                "consumer_group": pa.repeat(pa.scalar(_GROUP), n),
                "phase": _strings(_PHASES, _phase_of(p, col["receive"])),
                "delivery_tag": col["tag"],
                "redelivered": col["redelivered"],
                "publish_ns": col["publish"],
                "receive_ns": col["receive"],
                "start_ns": col["start"],
                "end_ns": pa.array(col["end"], pa.int64(), mask=col["nacked"]),
                "settle_ns": col["settle"],
                "outcome": _strings(_DELIVERY_OUTCOMES, col["outcome"]),
                "prefetch": np.full(n, p.prefetch, np.int32),
                "buffer_len": col["buffer_len"].astype(np.int32),
                "size_bytes": np.full(n, p.size_bytes, np.int32),
                "processing_ms": pa.array(col["processing_ms"], pa.float64(), mask=col["nacked"]),
            },
            n,
        )


def _write_ending(p: SynthParams, rng: np.random.Generator, state: _State, writer: _PartWriter) -> None:
    """Events of the whole run (joins, timeline, queue samples, drain, census, ends) and the leftovers."""
    t0, s = p.t0_ns, 10**9
    drain_end = t0 + int((p.duration_s + p.drain_timeout_s) * s)
    census_at = drain_end + s // 4
    master, workers = p.workers[0], p.workers[1:]
    capture = f"sojourn.{p.queue}.dead-letters"
    left = _left_ids(p, state)
    master_events = [
        (t0 - 2 * s, "run_start", "runner", "master", None, json.dumps({"t0_ns": t0})),
        (
            t0 - 19 * s // 10,
            "deadletter_capture",
            "runner",
            capture,
            None,
            json.dumps(
                {"binding_keys": ["#", _ROUTING_KEY, ""], "created_exchange": True, "exchange": p.dead_letter_exchange},
                sort_keys=True,
            ),
        ),
        (t0 + int(p.warmup_s * s), "warmup_end", "runner", "warmup", None, None),
    ]
    for name, (start_s, end_s) in (("busy", p.busy), ("slow", p.slow)):
        master_events += [
            (t0 + int(start_s * s), "phase_start", "runner", name, None, None),
            (t0 + int(end_s * s), "phase_end", "runner", name, None, None),
        ]
    master_events += _queue_samples(p, rng, state)
    master_events += [
        (t0 + int(p.duration_s * s), "drain_start", "runner", master, None, None),
        (drain_end, "drain_end", "runner", master, None, json.dumps({"reason": "timeout"})),
        (
            census_at + len(left) * 60 * _US,
            "broker_depth",
            "census",
            p.queue,
            float(len(left)),
            json.dumps({"recorded": len(left)}),
        ),
        (
            census_at + len(left) * 60 * _US + 20 * _US * 1000,
            "deadletter_capture",
            "runner",
            capture,
            float(state.deadletters),
            json.dumps({"foreign": 0, "swept": 0}, sort_keys=True),
        ),
        (_ended_ns(p, state) + 5 * _US * 1000, "run_end", "runner", "master", None, None),
    ]
    writer.rows_part("event", master, master_events)
    if left:
        writer.rows_part(
            "leftover", master, [(mid, p.queue, census_at + i * 60 * _US, False) for i, mid in enumerate(left)]
        )
    consumers, producers = p.consumer_names(), p.producer_names()
    for w, worker in enumerate(workers):
        mine_c = [c for c in consumers if c.split("/")[1] == worker]
        mine_p = [q for q in producers if q.split("/")[1] == worker]
        events = [(t0 - 18 * s // 10 + w * 10**7, "run_start", "runner", "worker", None, json.dumps({"t0_ns": t0}))]
        events += [
            (
                t0 - s // 2 + i * 10**7,
                "consumer_join",
                c,
                c,
                None,
                json.dumps({"ack_mode": "manual", "prefetch": p.prefetch}, sort_keys=True),
            )
            for i, c in enumerate(mine_c)
        ]
        events += [(t0 - s // 10 + i * 10**7, "producer_join", q, q, None, None) for i, q in enumerate(mine_p)]
        end = t0 + int(p.duration_s * s)
        events += [(end + 10**6, "drain_start", "runner", worker, None, None)]
        events += [(end + 5 * 10**7 + i * 10**6, "producer_leave", q, q, None, None) for i, q in enumerate(mine_p)]
        events += [(drain_end + 10**6, "drain_end", "runner", worker, None, json.dumps({"reason": "timeout"}))]
        events += [
            (drain_end + 10**7 + i * 10**6, "consumer_leave", c, c, None, json.dumps({"clean": True}))
            for i, c in enumerate(mine_c)
        ]
        events += [(_ended_ns(p, state) + 3 * 10**6, "run_end", "runner", "worker", None, None)]
        writer.rows_part("event", worker, events)


def _queue_samples(p: SynthParams, rng: np.random.Generator, state: _State) -> list[tuple]:
    """One `queue_sample` a second, from 1 s to the drain's end, as the master's sampler records
    them: ready and unacked count what happened before the sample's second."""
    seconds = int(p.duration_s + p.drain_timeout_s)
    ready = np.cumsum(state.ready)[:seconds]
    unacked = np.cumsum(state.unacked)[:seconds]
    took_ms = np.round(rng.exponential(0.4, seconds) + 0.8, 3)
    rows = []
    for i in range(seconds):
        ts = p.t0_ns + (i + 1) * 10**9 + int(took_ms[i] * 1e6) // 2
        detail = json.dumps(
            {
                "consumers": p.consumers,
                "source": "declare+management",
                "took_ms": float(took_ms[i]),
                "unacked": int(unacked[i]),
            },
            sort_keys=True,
        )
        rows.append((ts, "queue_sample", "sampler", p.queue, float(ready[i]), detail))
    return rows


def _left_ids(p: SynthParams, state: _State) -> list[str]:
    names = p.producer_names()
    return [
        f"{p.run_id}:{names[producer]}:{seq}"
        for producers, seqs in state.left
        for producer, seq in zip(producers.tolist(), seqs.tolist())
    ]


def _ended_ns(p: SynthParams, state: _State) -> int:
    census = int(state.fates[_F["left_in_broker"]]) * 60 * _US
    return p.t0_ns + int((p.duration_s + p.drain_timeout_s) * 10**9) + 10**9 // 4 + census + 10**8


# --- the accounting and the JSON files --------------------------------------------------------


def _accounts(p: SynthParams, fates: np.ndarray) -> dict[str, int]:
    """Each message's account class, by the analysis's rules, from its fate."""
    n = {name: int(fates[i]) for i, name in enumerate(_FATES)}
    accounts = {"acked": n["acked"] + n["requeued"] + n["duplicate"], "consumer_nack_discard": n["nack_discard"]}
    accounts |= dict.fromkeys(("egress_discard", "publish_rejected_maxlen"), 0)
    accounts |= {
        "publish_nacked": n["publish_nacked"],
        "unroutable": n["unroutable"],
        "publish_failed": n["publish_failed"],
        "publish_failed_blocked": 0,
        "dead_lettered_maxlen": n["dead_lettered_maxlen"],
        "dead_lettered_expired": 0,
        "dead_lettered_rejected": 0,
        "dead_lettered_delivery_limit": 0,
        "left_in_broker": n["left_in_broker"],
        "connection_lost": 0,
        "lost_with_queue": 0,
        "channel_closed": 0,
        "consumer_reject": 0,
        "dropped_delivery_limit": 0,
        "unaccounted": 0,
    }
    assert sum(accounts.values()) == p.messages
    return accounts


def _messages_block(accounts: Mapping[str, int], fates: np.ndarray) -> dict[str, Any]:
    n = {name: int(fates[i]) for i, name in enumerate(_FATES)}
    discarded = {c: accounts[c] for c in DISCARD_CLASSES}
    not_confirmed = n["publish_nacked"] + n["publish_failed"] + n["unroutable"]
    return {
        "published": sum(accounts.values()),
        "confirmed": sum(accounts.values()) - not_confirmed,
        "acked": accounts["acked"],
        "discarded": discarded,
        "discarded_total": sum(discarded.values()),
        "left_in_broker": accounts["left_in_broker"],
        "not_yet_read": 0,  # a stream's class; the generated run's queue is not one
        "unaccounted": 0,
        "unaccounted_ids": [],
        "unknown_after_crash": 0,  # the generated run ended: its run.json says completed
        "unknown_after_crash_ids": [],
        "unknown_workers_missing": 0,  # and every worker's traces are in it
        "unknown_workers_missing_ids": [],
        "redelivered": n["requeued"] + n["duplicate"],
        "duplicates": n["duplicate"],
    }


def _scenario(p: SynthParams) -> dict[str, Any]:
    """The resolved scenario, in the layout of loadgen's Scenario.to_dict."""
    rate = round(p.base_rate_per_s / p.producers, 3)
    processing = {"distribution": "exponential", "mean_ms": p.base_processing_ms}
    return {
        "name": "synth",
        "description": "benchmarks.synth: a synthetic run, no broker",
        "broker": {"url": None, "heartbeat_s": 30, "connect_timeout_s": 5, "managed": None},
        "queue": {
            "name": p.queue,
            "durable": False,
            "auto_delete": False,
            "arguments": {"x-dead-letter-exchange": p.dead_letter_exchange, "x-max-length": 100_000},
            "purge_on_start": True,
            "delete_on_end": False,
            "type": None,
        },
        "exchanges": [
            {
                "name": p.exchange,
                "type": "direct",
                "durable": True,
                "auto_delete": False,
                "arguments": {},
                "delete_on_end": False,
            }
        ],
        "bindings": [{"exchange": p.exchange, "routing_key": _ROUTING_KEY, "arguments": {}}],
        "run": {"duration_s": p.duration_s, "warmup_s": p.warmup_s, "drain_timeout_s": p.drain_timeout_s},
        "producers": [
            {
                "name": _GROUP,
                "count": p.producers,
                "rate": rate,
                "arrival": "poisson",
                "size_bytes": p.size_bytes,
                "persistent": False,
                "confirms": True,
                "confirm_window": 100,
                "exchange": p.exchange,
                "routing_key": _ROUTING_KEY,
                "bursts": None,
                "replay": None,
                "mandatory": True,
                "priority": None,
                "max_blocked_wait_s": None,
            }
        ],
        "consumers": [
            {
                "name": _GROUP,
                "count": p.consumers,
                "prefetch": p.prefetch,
                "prefetch_scope": "consumer",
                "ack_mode": "manual",
                "processing_ms": processing,
                "codel": None,
                "leave": "clean",
                "egress": None,
            }
        ],
        "timeline": [
            {
                "name": "busy",
                "start_s": p.busy[0],
                "end_s": p.busy[1],
                "set": {f"producers.{_GROUP}.rate": round(rate * p.busy_rate_factor, 3)},
            },
            {
                "name": "slow",
                "start_s": p.slow[0],
                "end_s": p.slow[1],
                "set": {
                    f"consumers.{_GROUP}.processing_ms": {
                        **processing,
                        "mean_ms": round(p.base_processing_ms * p.slow_processing_factor, 3),
                    }
                },
            },
        ],
        "slo": [],
        "network": None,
    }


def _run_json(p: SynthParams, state: _State) -> dict[str, Any]:
    from loadgen.run.runinfo import code_version

    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": p.run_id,
        "scenario_path": None,
        "overrides": [],
        "scenario": _scenario(p),
        "broker_url": None,
        "code_version": code_version(),
        "t0_ns": p.t0_ns,
        "duration_s": p.duration_s,
        "warmup_s": p.warmup_s,
        "drain_timeout_s": p.drain_timeout_s,
        "phases": [
            {"name": "busy", "start_s": p.busy[0], "end_s": p.busy[1]},
            {"name": "slow", "start_s": p.slow[0], "end_s": p.slow[1]},
        ],
        "queue": p.queue,
        "broker_depth_at_end": int(state.fates[_F["left_in_broker"]]),
        "ended_ns": _ended_ns(p, state),
        "status": "completed",
        "synthetic": {"generator": "benchmarks.synth", "seed": p.seed, "messages": p.messages},
    }


def _synth_json(run: SynthRun) -> dict[str, Any]:
    return {
        "generator": "benchmarks.synth",
        "params": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(run.params).items()},
        "expected": {"messages": run.messages, "accounts": run.accounts},
        "rows": run.rows,
        "parts": run.parts,
        "bytes": run.bytes,
        "seconds": run.seconds,
    }


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --- the command ------------------------------------------------------------------------------


def _count(text: str) -> int:
    """'1M', '100k', '250000', '1_000_000', '2,500,000' -> the count."""
    cleaned = text.strip().replace("_", "").replace(",", "")
    for name, value in SIZES.items():
        if cleaned.lower() == name.lower():
            return value
    try:
        if cleaned[-1:] in "kKmM" and cleaned[:-1]:
            return round(float(cleaned[:-1]) * (1_000 if cleaned[-1] in "kK" else 1_000_000))
        return int(cleaned)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count (250000, 2.5M) or one of {', '.join(SIZES)}, got {text!r}"
        ) from None


def _progress_printer() -> Progress:
    said = [0]

    def say(done: int, total: int) -> None:
        if done // 1_000_000 > said[0] or done == total:
            said[0] = done // 1_000_000
            print(f"synth: {done:,} / {total:,} messages", file=sys.stderr, flush=True)

    return say


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages", type=_count, required=True, help=f"how many to publish: a count or one of {', '.join(SIZES)}"
    )
    parser.add_argument("--out", type=Path, required=True, help="the run directory to write (new or empty)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: %(default)s)")
    parser.add_argument(
        "--large", action="store_true", help=f"allow over {MAX_MESSAGES:,} messages (up to {MAX_LARGE_MESSAGES:,})"
    )
    args = parser.parse_args(argv)
    try:
        plan(args.messages, args.seed, large=args.large)
    except SynthSizeError as exc:
        parser.error(f"--{exc}")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out: {args.out} is not empty; choose a new directory")
    run = generate(args.out, args.messages, args.seed, large=args.large, progress=_progress_printer())
    print(
        f"synth: wrote {run.out_dir} in {run.seconds:.1f} s: {run.rows['publish']:,} publishes, "
        f"{run.rows['delivery']:,} deliveries, {sum(run.parts.values())} parts, {run.bytes / 1e6:.1f} MB"
    )
    print(f"expected accounting (also in {run.out_dir / 'synth.json'}):")
    m = run.messages
    for key in ("published", "confirmed", "acked"):
        print(f"  {key:<30} {m[key]:>12,}")
    for key, value in m["discarded"].items():
        if value:
            print(f"  discarded.{key:<20} {value:>12,}")
    for key in ("discarded_total", "left_in_broker", "unaccounted", "redelivered", "duplicates"):
        print(f"  {key:<30} {m[key]:>12,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
