"""`python -m benchmarks.sleep`: the consumer's calibrated processing sleep against a plain one.

A simulated processing time is a cooperative sleep, and gevent's timers wake late (epoll waits
in whole milliseconds; a busy CPU adds its own delay). The consumer asks for less by the running
mean of how late it woke (`loadgen.users.consumer.Consumer._simulate`). Each round runs both variants
back to back in fresh processes, `--sleeps` sleeps of each asked time: *calibrated* is the
consumer's own method, *plain* a `gevent.sleep` of the time drawn. The figure is the overshoot,
achieved / asked - 1, of the mean and the p99. `--contended` runs two CPU-bound processes beside
each trial (the two cores busy, as when the broker and Spark share them). A benchmark, not a
test: it prints the numbers and exits 0 whatever they are.

    python -m benchmarks.sleep                         # 1, 4, 6 and 30 ms, 5 rounds, quiet
    python -m benchmarks.sleep --contended --ms 6      # with the two cores busy
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VARIANTS = ("calibrated", "plain")


def _trial(variant: str, ms: float, sleeps: int) -> dict:
    """One variant in this process: `sleeps` sleeps of `ms`; the achieved times' mean and p99."""
    import time

    import gevent

    from loadgen.users.consumer import Consumer

    class _Shim:  # what Consumer._simulate uses of a consumer
        _overshoot_s = 0.0

    shim = _Shim()
    achieved = []
    for _ in range(sleeps):
        began = time.perf_counter()
        if variant == "calibrated":
            Consumer._simulate(shim, ms / 1000)  # type: ignore[arg-type]
        else:
            gevent.sleep(ms / 1000)
        achieved.append((time.perf_counter() - began) * 1000)
    achieved.sort()
    return {
        "mean_ms": statistics.fmean(achieved),
        "p99_ms": achieved[min(len(achieved) - 1, int(0.99 * len(achieved)))],
    }


def _run(variant: str, ms: float, sleeps: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.sleep", "--trial", json.dumps([variant, ms, sleeps])],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(ms: float, rounds: int, sleeps: int, contended: bool) -> dict:
    hogs = []
    if contended:
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        got: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for _ in range(rounds):
            for variant in VARIANTS:
                got[variant].append(_run(variant, ms, sleeps))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    row: dict = {"ms": ms, "rounds": rounds, "sleeps": sleeps, "contended": contended}
    for variant, trials in got.items():
        row[variant] = {
            "mean_overshoot": round(statistics.median(t["mean_ms"] for t in trials) / ms - 1, 4),
            "p99_overshoot": round(statistics.median(t["p99_ms"] for t in trials) / ms - 1, 4),
        }
    return row


def render(load: tuple[float, float], rows: list[dict]) -> str:
    lines = [
        f"Load average {load[0]:.1f} before, {load[1]:.1f} after (the contended rows add one CPU-bound process "
        "per core). Overshoot = achieved / asked - 1; medians over the rounds.",
        "",
        "| asked | two cores busy | rounds x sleeps | calibrated: mean / p99 overshoot | plain: mean / p99 overshoot |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        c, p = r["calibrated"], r["plain"]
        lines.append(
            f"| {r['ms']:g} ms | {'yes' if r['contended'] else 'no'} | {r['rounds']} x {r['sleeps']} "
            f"| {c['mean_overshoot']:+.1%} / {c['p99_overshoot']:+.1%} | {p['mean_overshoot']:+.1%} / "
            f"{p['p99_overshoot']:+.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sleep", description=__doc__.split("\n\n")[0])
    p.add_argument("--ms", default="1,4,6,30", help="comma-separated processing times to ask for (ms)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sleeps", type=int, default=300, help="sleeps per trial (default 300)")
    p.add_argument("--contended", action="store_true", help="also with one CPU-bound process per core")
    p.add_argument("--trial", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.trial:
        variant, ms, sleeps = json.loads(args.trial)
        print(json.dumps(_trial(variant, float(ms), int(sleeps))))
        return 0
    before = os.getloadavg()[0]
    rows = []
    for ms in (float(x) for x in args.ms.split(",") if x.strip()):
        for contended in (False, True) if args.contended else (False,):
            print(f"{ms:g} ms{' (two cores busy)' if contended else ''} ...", file=sys.stderr, flush=True)
            rows.append(measure(ms, args.rounds, args.sleeps, contended))
    print(render((before, os.getloadavg()[0]), rows))
    print(json.dumps(rows), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
