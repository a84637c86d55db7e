"""`python -m benchmarks.replay`: how late a replay publishes, at several rates per worker process.

For each rate a constant-gap replay file is written and replayed by one producer in one
Locust process (`sojourn run --no-analyze`, confirms off, no consumer: the queue keeps at most
1,000 messages, dropping the oldest), and the publish trace gives the lateness of every publish
(actual - intended send time). A benchmark, not a test: it prints and records the numbers and
exits 0 whatever they are. The target (issue 5): p99 lateness under 1 ms at 2,000 msg/s.

    python -m benchmarks.replay                       # 1,000 / 2,000 / 5,000 / 10,000 msg/s, 10 s each
    python -m benchmarks.replay --rates 2000 --seconds 3
    python -m benchmarks.replay --docs                # also rewrite the table in docs/replay.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "replay.md"
RESULTS = REPO / "benchmarks" / "replay-results.json"
START, END = "<!-- replay-bench:start -->", "<!-- replay-bench:end -->"
TARGET = (2000, 1.0)  # at 2,000 msg/s per worker, p99 lateness under 1 ms

SCENARIO = """
name: bench-replay
queue: {{name: sojourn.bench.replay, arguments: {{x-max-length: 1000}}, delete_on_end: true}}
run: {{duration_s: {duration}, drain_timeout_s: 5}}
producers:
  - name: replay
    confirms: {confirms}
    replay: {{path: {path}}}
"""


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def measure(rate: int, seconds: float, confirms: bool = False) -> dict:
    """Replay `rate` msg/s for `seconds` and return lateness percentiles in ms."""
    import pyarrow.parquet as pq

    work = Path(tempfile.mkdtemp(prefix="sojourn-bench-replay-"))
    n = int(rate * seconds)
    with open(work / "trace.csv", "w") as f:
        f.write("offset_s,size_bytes\n")
        f.writelines(f"{i / rate:.6f},100\n" for i in range(n))
    (work / "s.yaml").write_text(
        SCENARIO.format(duration=seconds + 0.5, confirms=str(confirms).lower(), path=work / "trace.csv")
    )
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "sojourn"),
            "run",
            str(work / "s.yaml"),
            "--out",
            str(work / "run"),
            "--no-analyze",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=seconds * 10 + 120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"sojourn run failed ({result.returncode}): {result.stderr[-2000:]}")
    table = pq.read_table(work / "run" / "traces" / "publish", columns=["intended_ns", "publish_ns"])
    rows = table.to_pydict()
    late = sorted((p - i) / 1e6 for i, p in zip(rows["intended_ns"], rows["publish_ns"]))
    span_s = (max(rows["publish_ns"]) - min(rows["publish_ns"])) / 1e9 if late else 0.0
    return {
        "rate": rate,
        "seconds": seconds,
        "planned": n,
        "published": len(late),
        "achieved_rate": round(len(late) / span_s, 1) if span_s else None,
        "p50_ms": round(_quantile(late, 0.50), 3),
        "p99_ms": round(_quantile(late, 0.99), 3),
        "p999_ms": round(_quantile(late, 0.999), 3),
        "max_ms": round(late[-1], 3),
        "late_over_1ms": round(sum(1 for x in late if x > 1.0) / len(late), 4),
    }


def machine_facts() -> dict:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_1m": load,
    }


def render(facts: dict, rows: list[dict]) -> str:
    rate, limit = TARGET
    lines = [
        f"Measured {facts['date']} on {facts['host']} ({facts['cores']} cores, Python {facts['python']}, "
        f"load average {facts['load_1m']:.1f} at the start) by `python -m benchmarks.replay`: one replaying "
        "producer in one worker process, confirms off, constant gaps. Lateness = actual - intended send "
        "time of every publish.",
        "",
        "| msg/s per worker | published / planned | achieved msg/s | p50 ms | p99 ms | p99.9 ms | max ms "
        "| share > 1 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rate']:,} | {r['published']:,} / {r['planned']:,} | {r['achieved_rate'] or 0:,.0f} "
            f"| {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['p999_ms']:.3f} | {r['max_ms']:.1f} "
            f"| {r['late_over_1ms']:.1%} |"
        )
    hit = [r for r in rows if r["rate"] == rate]
    if hit:
        verdict = "met" if hit[0]["p99_ms"] < limit else "missed"
        lines += [
            "",
            f"Target: p99 lateness under {limit:g} ms at {rate:,} msg/s per worker — **{verdict}** "
            f"({hit[0]['p99_ms']:.3f} ms).",
        ]
    return "\n".join(lines)


def write_docs(text: str) -> None:
    doc = DOC.read_text()
    if START not in doc:
        raise SystemExit(f"{DOC}: no {START} marker to write the table under")
    head, rest = doc.split(START, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="1000,2000,5000,10000", help="comma-separated msg/s per worker")
    p.add_argument("--seconds", type=float, default=10.0, help="replay length per rate (default 10)")
    p.add_argument("--confirms", action="store_true", help="publish with confirms (window 100)")
    p.add_argument("--json", metavar="PATH", help=f"write the results as JSON (default with --docs: {RESULTS})")
    p.add_argument("--docs", action="store_true", help="rewrite the table in docs/replay.md")
    args = p.parse_args(argv)
    try:
        rates = [int(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        p.error(f"--rates: expected comma-separated whole numbers, got {args.rates!r}")
    facts = machine_facts()
    rows = []
    for rate in rates:
        print(f"replaying {rate:,} msg/s for {args.seconds:g} s ...", file=sys.stderr, flush=True)
        rows.append(measure(rate, args.seconds, args.confirms))
    text = render(facts, rows)
    print(text)
    out = args.json or (str(RESULTS) if args.docs else None)
    if out:
        Path(out).write_text(json.dumps({"machine": facts, "results": rows}, indent=2) + "\n")
    if args.docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
