"""benchmarks.synth: the synthetic run directory is one `sojourn analyze` reads, and the accounting
it promises is what the rows say, recounted here per message id with no Spark."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.schema import KINDS, SCHEMA_VERSION, arrow_schema
from benchmarks import synth

MESSAGES = 20_000
ACCOUNTING = Path(__file__).resolve().parents[2] / "analysis" / "transforms" / "accounting.py"
PART = re.compile(r"part-(?P<worker>.+)-(?P<seq>\d{6})\.parquet")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # chunks of 6,000: what carries from one chunk to the next is exercised too
    return synth.generate(tmp_path_factory.mktemp("synth") / "run", MESSAGES, seed=11, chunk_messages=6_000)


def _parts(run_dir: Path, kind: str) -> list[Path]:
    return sorted((run_dir / "traces" / kind).glob("*.parquet"))


def _rows(run_dir: Path, kind: str) -> list[dict]:
    return [row for part in _parts(run_dir, kind) for row in pq.read_table(part).to_pylist()]


def _recount(run_dir: Path, publish_rejects: bool = False) -> tuple[dict[str, int], dict]:
    """Each message's account class by the rules of analysis/transforms/accounting.py, written
    out per message id, and summary.json's `messages` block from it."""
    publishes, deliveries = _rows(run_dir, "publish"), _rows(run_dir, "delivery")
    events = _rows(run_dir, "event")
    left = {r["message_id"] for r in _rows(run_dir, "leftover")}
    first_dead: dict[str, tuple[int, str]] = {}
    for r in _rows(run_dir, "deadletter"):
        if r["message_id"] not in first_dead or r["received_ns"] < first_dead[r["message_id"]][0]:
            first_dead[r["message_id"]] = (r["received_ns"], r["reason"])
    returned = {e["name"] for e in events if e["kind"] == "publish_returned"}
    lost: dict[str, int] = {}
    for e in events:
        if e["kind"] == "connection_lost":
            lost[e["source"]] = max(lost.get(e["source"], e["ts_ns"]), e["ts_ns"])
    outcomes, unconfirmed_ns, producer = defaultdict(set), {}, {}
    for r in publishes:
        outcomes[r["message_id"]].add(r["outcome"])
        producer.setdefault(r["message_id"], r["producer"])
        if r["outcome"] in ("unconfirmed", "sent"):
            unconfirmed_ns[r["message_id"]] = max(unconfirmed_ns.get(r["message_id"], 0), r["publish_ns"])
    delivered = defaultdict(set)
    acks = Counter()
    for r in deliveries:
        delivered[r["message_id"]].add(r["outcome"])
        if r["outcome"] in ("ack", "auto_ack"):
            acks[r["message_id"]] += 1
    accounts = Counter()
    for mid, seen in outcomes.items():
        reached = bool(seen & {"confirmed", "sent", "unconfirmed"})
        got = delivered.get(mid, set())
        dead = first_dead.get(mid, (0, None))[1]
        if got & {"ack", "auto_ack"}:
            account = "acked"
        elif "nack_discard" in got:
            account = "consumer_nack_discard"
        elif "egress_discard" in got:
            account = "egress_discard"
        elif "nacked" in seen and not reached:
            account = "publish_rejected_maxlen" if publish_rejects else "publish_nacked"
        elif "returned" in seen or mid in returned:
            account = "unroutable"
        elif "failed" in seen and not reached:
            account = "publish_failed"
        elif "blocked_timeout" in seen and not reached:
            account = "publish_failed_blocked"
        elif dead is not None:
            account = f"dead_lettered_{dead}"
        elif mid in left:
            account = "left_in_broker"
        elif mid in unconfirmed_ns and lost.get(producer[mid], -1) >= unconfirmed_ns[mid]:
            account = "connection_lost"
        else:
            account = "unaccounted"
        accounts[account] += 1
    discarded = {c: accounts[c] for c in synth.DISCARD_CLASSES}
    messages = {
        "published": len(outcomes),
        "confirmed": sum("confirmed" in s for s in outcomes.values()),
        "acked": accounts["acked"],
        "discarded": discarded,
        "discarded_total": sum(discarded.values()),
        "left_in_broker": accounts["left_in_broker"],
        "not_yet_read": 0,  # no stream here
        "unaccounted": accounts["unaccounted"],
        "unaccounted_ids": [],
        "unknown_after_crash": 0,  # the run ended (its run.json says so)
        "unknown_after_crash_ids": [],
        "unknown_workers_missing": 0,  # every worker's traces are here
        "unknown_workers_missing_ids": [],
        "redelivered": sum(r["redelivered"] for r in deliveries),
        "duplicates": sum(n > 1 for n in acks.values()),
    }
    return dict(accounts), messages


def test_every_part_has_its_kinds_trace_schema_and_the_writers_name(run):
    for kind in KINDS:
        parts = _parts(run.out_dir, kind)
        assert parts, kind
        for part in parts:
            assert pq.read_schema(part).equals(arrow_schema(kind), check_metadata=True), part
            table = pq.read_table(part)
            assert set(table.column("schema_version").to_pylist()) == {SCHEMA_VERSION}
            assert set(table.column("run_id").to_pylist()) == {run.params.run_id}
            assert set(table.column("worker").to_pylist()) == {PART.fullmatch(part.name)["worker"]}


def test_the_footers_vouch_for_the_schema_version_so_the_analysis_scans_no_rows_for_it(run):
    for kind in KINDS:
        for part in _parts(run.out_dir, kind):
            meta = pq.read_metadata(part)
            column = meta.schema.to_arrow_schema().names.index("schema_version")
            for i in range(meta.num_row_groups):
                stats = meta.row_group(i).column(column).statistics
                assert stats is not None and stats.has_min_max and stats.null_count == 0, part
                assert stats.min == stats.max == SCHEMA_VERSION, part


def test_each_worker_numbers_its_parts_once_across_kinds(run):
    names = [p.name for kind in KINDS for p in _parts(run.out_dir, kind)]
    assert len(names) == len(set(names)) == sum(run.parts.values())
    assert not list((run.out_dir / "traces").glob("*/.*")), "no temporary files are left"


def test_it_publishes_exactly_the_messages_asked_for_with_the_producers_ids(run):
    rows = _rows(run.out_dir, "publish")
    assert len(rows) == MESSAGES == run.rows["publish"]
    assert len({r["message_id"] for r in rows}) == MESSAGES
    assert all(r["message_id"] == f"{run.params.run_id}:{r['producer']}:{r['seq']}" for r in rows)
    assert all(r["producer"] == f"main/{r['worker']}/{r['producer'].rsplit('/', 1)[1]}" for r in rows)
    seqs = defaultdict(list)
    for r in rows:
        seqs[r["producer"]].append(r["seq"])
    assert len(seqs) == 4
    assert all(sorted(s) == list(range(len(s))) for s in seqs.values())


def test_an_independent_recount_gives_the_accounting_it_promises(run):
    accounts, messages = _recount(run.out_dir)
    promised = json.loads((run.out_dir / "synth.json").read_text())["expected"]
    assert messages == run.messages == promised["messages"]
    assert (
        accounts == {c: n for c, n in run.accounts.items() if n} == {c: n for c, n in promised["accounts"].items() if n}
    )
    assert messages["unaccounted"] == 0


def test_it_has_a_few_messages_of_every_fate(run):
    _, m = _recount(run.out_dir)
    for account in ("publish_nacked", "publish_failed", "consumer_nack_discard", "unroutable", "dead_lettered_maxlen"):
        assert m["discarded"][account] > 0, account
    assert m["left_in_broker"] > 0 and m["duplicates"] > 0 and m["redelivered"] > m["duplicates"]
    assert m["confirmed"] < m["published"]


def test_a_redelivery_follows_its_requeue_on_another_consumer(run):
    by_id = defaultdict(list)
    for r in _rows(run.out_dir, "delivery"):
        by_id[r["message_id"]].append(r)
    again = [sorted(rows, key=lambda r: r["receive_ns"]) for rows in by_id.values() if len(rows) > 1]
    assert again
    for first, second in again:
        assert not first["redelivered"] and second["redelivered"] and second["outcome"] == "ack"
        assert first["outcome"] in ("nack_requeue", "ack")
        assert second["receive_ns"] > first["settle_ns"] and second["consumer"] != first["consumer"]


def test_times_are_in_order_on_every_row(run):
    for r in _rows(run.out_dir, "publish"):
        assert r["intended_ns"] <= r["publish_ns"]
        assert (r["confirm_ns"] is None) == (r["outcome"] == "failed")
        assert r["confirm_ns"] is None or r["confirm_ns"] >= r["publish_ns"]
    ended_ns = json.loads((run.out_dir / "run.json").read_text())["ended_ns"]
    for r in _rows(run.out_dir, "delivery"):
        assert r["publish_ns"] <= r["receive_ns"] <= r["start_ns"] <= r["settle_ns"] < ended_ns
        if r["outcome"] in ("nack_requeue", "nack_discard"):
            assert r["end_ns"] is None and r["processing_ms"] is None
        else:
            assert r["start_ns"] <= r["end_ns"] <= r["settle_ns"]
            assert r["end_ns"] - r["start_ns"] >= r["processing_ms"] * 1e6 - 1
        assert 0 <= r["buffer_len"] < r["prefetch"] == 20


def test_phases_in_the_rows_follow_run_json_and_the_slow_one_is_slower(run):
    meta = json.loads((run.out_dir / "run.json").read_text())
    t0 = meta["t0_ns"]

    def phase_at(ns: int) -> str:
        s = (ns - t0) / 1e9
        return next((p["name"] for p in meta["phases"] if p["start_s"] <= s < p["end_s"]), "base")

    assert all(r["phase"] == phase_at(r["intended_ns"]) for r in _rows(run.out_dir, "publish"))
    deliveries = _rows(run.out_dir, "delivery")
    assert all(r["phase"] == phase_at(r["receive_ns"]) for r in deliveries)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    by_phase = lambda phase, f: mean([f(r) for r in deliveries if r["phase"] == phase and r["end_ns"]])  # noqa: E731
    processing = lambda r: r["processing_ms"]  # noqa: E731
    sojourn = lambda r: r["start_ns"] - r["receive_ns"]  # noqa: E731
    assert by_phase("slow", processing) > 1.8 * by_phase("base", processing)
    assert by_phase("slow", sojourn) > 3 * by_phase("base", sojourn)


def test_the_master_samples_the_queue_once_a_second_and_it_grows_when_slow(run):
    meta = json.loads((run.out_dir / "run.json").read_text())
    samples = sorted((e for e in _rows(run.out_dir, "event") if e["kind"] == "queue_sample"), key=lambda e: e["ts_ns"])
    assert len(samples) == meta["duration_s"] + meta["drain_timeout_s"]
    assert {e["worker"] for e in samples} == {run.params.workers[0]}
    assert all(round((e["ts_ns"] - meta["t0_ns"]) / 1e9) == i + 1 for i, e in enumerate(samples))
    details = [json.loads(e["detail"]) for e in samples]
    assert all(set(d) == {"unacked", "consumers", "source", "took_ms"} for d in details)
    assert all(e["value"] >= 0 and d["unacked"] >= 0 for e, d in zip(samples, details))
    slow = next(p for p in meta["phases"] if p["name"] == "slow")
    peak = max(samples, key=lambda e: e["value"])
    assert slow["start_s"] < (peak["ts_ns"] - meta["t0_ns"]) / 1e9 <= slow["end_s"] + 5
    assert samples[-1]["value"] == run.messages["left_in_broker"]


def test_the_timeline_events_are_there(run):
    kinds = Counter(e["kind"] for e in _rows(run.out_dir, "event"))
    assert kinds["run_start"] == kinds["run_end"] == 3
    assert kinds["consumer_join"] == 8 and kinds["producer_join"] == 4
    assert kinds["warmup_end"] == 1 and kinds["phase_start"] == kinds["phase_end"] == 2
    assert kinds["publish_returned"] == run.messages["discarded"]["unroutable"]


def test_run_json_has_what_the_analysis_reads(run):
    meta = json.loads((run.out_dir / "run.json").read_text())
    assert type(meta["t0_ns"]) is int and type(meta["ended_ns"]) is int and meta["ended_ns"] > meta["t0_ns"]
    assert all(type(meta[k]) in (int, float) for k in ("duration_s", "warmup_s"))
    assert meta["duration_s"] >= 60 and meta["status"] == "completed"
    assert meta["schema_version"] == SCHEMA_VERSION and meta["run_id"] == run.params.run_id
    assert [p["name"] for p in meta["phases"]] == ["busy", "slow"]
    assert all(
        set(p) == {"name", "start_s", "end_s"} and 0 <= p["start_s"] < p["end_s"] <= meta["duration_s"]
        for p in meta["phases"]
    )
    scenario = meta["scenario"]
    assert scenario["name"] and scenario["slo"] == [] and scenario["queue"]["name"] == run.params.queue
    assert [(c["name"], c["count"], c["prefetch"]) for c in scenario["consumers"]] == [("main", 8, 20)]
    assert meta["broker_depth_at_end"] == run.messages["left_in_broker"]


def test_the_discard_classes_are_the_analysis_ones():
    """The copy in benchmarks.synth against analysis/transforms/accounting.py, read without importing
    it (it needs pyspark)."""
    if not ACCOUNTING.is_file():
        pytest.skip(f"{ACCOUNTING} moved")
    names = {"DEAD_LETTER_CLASSES", "ACCOUNT_CLASSES", "DISCARD_CLASSES"}
    assigns = [
        node
        for node in ast.parse(ACCOUNTING.read_text()).body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
    ]
    if len(assigns) != len(names):
        pytest.skip(f"{ACCOUNTING} no longer declares {sorted(names)}")
    found: dict = {}
    exec(compile(ast.Module(body=assigns, type_ignores=[]), str(ACCOUNTING), "exec"), found)
    assert found["DISCARD_CLASSES"] == synth.DISCARD_CLASSES


def test_the_same_seed_writes_the_same_traces(tmp_path):
    a = synth.generate(tmp_path / "a", 3_000, seed=3, run_id="r")
    b = synth.generate(tmp_path / "b", 3_000, seed=3, run_id="r")
    assert a.messages == b.messages
    for kind in ("publish", "delivery"):
        assert _rows(a.out_dir, kind) == _rows(b.out_dir, kind)


def test_it_will_not_write_over_a_run(run):
    with pytest.raises(FileExistsError, match="holds a run already"):
        synth.generate(run.out_dir, 1_000)


def test_over_10m_messages_needs_large_and_30m_is_the_most(tmp_path):
    with pytest.raises(synth.SynthSizeError, match="--large"):
        synth.generate(tmp_path / "x", 10_000_001)
    assert not (tmp_path / "x").exists()
    assert synth.plan(30_000_000, large=True).duration_s == 17_648
    with pytest.raises(synth.SynthSizeError, match="30,000,000"):
        synth.plan(30_000_001, large=True)


def test_the_command_refuses_30m_without_large_with_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        synth.main(["--messages", "30M", "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--messages: 30,000,000 is over the limit of 10,000,000 without --large" in err
    assert not (tmp_path / "x").exists()


def test_the_command_prints_the_expected_accounting(tmp_path, capsys):
    assert synth.main(["--messages", "2k", "--out", str(tmp_path / "r"), "--seed", "5"]) == 0
    out = capsys.readouterr().out
    promised = json.loads((tmp_path / "r" / "synth.json").read_text())["expected"]["messages"]
    assert str(tmp_path / "r") in out
    assert re.search(rf"published\s+{promised['published']:,}\b", out)
    assert re.search(rf"acked\s+{promised['acked']:,}\b", out)
