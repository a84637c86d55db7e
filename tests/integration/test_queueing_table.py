"""The queueing table of docs/queueing.md, measured: 25 ms each way through sojourn's delay line, 5 ms
processing, one consumer always fed, at prefetch 1, R/p and 2·R/p. Throughput and mean buffer
sojourn follow the arithmetic within 5 % (10 % at the knee, prefetch R/p: KNEE_TOLERANCE), the
arithmetic taking the processing time and the round trip the consumer actually achieved (from its
traces), not the 5 ms and 55 ms it was set up for; the achieved round trip is at least the delay
line's 50 ms plus p, and at most 15 % of 55 ms over it.

The expected values are computed here from the traces alone: p is the mean processing time, and R is
p plus the mean time from an ack to the delivery it drew (the k-th delivery of a channel at prefetch
n goes out once the ack of its (k-n)-th arrives). Nothing of sojourn's analysis or model check is
used. On a slow machine the client and the broker add a few ms to the 50 ms of the delay line (about
52 in one CI run, which left the knee, prefetch R/p, 6.6 % under the configured arithmetic and 3.8 %
under the achieved one). The model check (analysed afterwards) is then held to them: its regime
per consumer (prefetch 1 starved, 2·R/p saturated), its round trip and its predicted throughput."""

from __future__ import annotations

import statistics
from pathlib import Path

from tests.integration.conftest import sojourn, write_scenario
from tests.integration.queueing import achieved_round_trip, quiet_run, round_trip_arithmetic

S = 1_000_000_000
ONE_WAY_MS = 25.0
P_MS = 5.0
R_MS = ONE_WAY_MS + P_MS + ONE_WAY_MS  # 55 ms as configured: R/p = 11, 2R/p = 22
TOLERANCE = 0.05
# At the knee (prefetch R/p) any jitter of R or p turns into idle slots and buffer waits that the
# arithmetic's min(n/R, 1/p) does not have: on a slow machine deliveries came in clumps that waited
# 3.7 ms in the buffer, which left the rate 6.1-6.2 % under the arithmetic (R and p achieved) and
# 9 % under the 2R/p phase's; in a CI run 3.8 % and 4 %. The knee's row is held to 10 %, the other two to 5 %.
KNEE_TOLERANCE = 0.10
# The hosts' share of the round trip on top of the delay line's: 2-6 ms measured (52-61 ms of 55).
ROUND_TRIP_SLACK = 0.15
SETTLE_S = 1.0  # each phase's first second is left out: the buffer fills or empties to its new level

# (phase, start_s, end_s, prefetch): one consumer group per prefetch, each on in its phase only.
PHASES = [("prefetch-1", 1, 9, 1), ("prefetch-r-over-p", 9, 16, 11), ("prefetch-2r-over-p", 16, 23, 22)]

SCENARIO = (
    f"""
name: it-queueing-table
queue:
  name: sojourn.it.queueing-table
  purge_on_start: true
  arguments: {{x-max-length: 300, x-overflow: reject-publish}}   # always fed, and a short drain
  delete_on_end: true
# No warm-up: the queue fills in the first second and prefetch 1 never drains it, so every message
# c1 gets was published in that second; a warm-up would leave none of c1's deliveries measured.
run: {{duration_s: 23, warmup_s: 0, drain_timeout_s: 20}}
network:
  upstream: {{latency_ms: {ONE_WAY_MS:g}}}
  downstream: {{latency_ms: {ONE_WAY_MS:g}}}
producers:
  # 300 msg/s: more than the consumer takes in any phase (at most 1 / 5 ms = 200 msg/s)
  - {{name: p, rate: 300, arrival: constant, size_bytes: 100, confirms: true, confirm_window: 500}}
consumers:
"""
    + "".join(
        f"  - {{name: c{n}, count: {int(n == 1)}, prefetch: {n}, processing_ms: {P_MS:g}}}\n" for _, _, _, n in PHASES
    )
    + "timeline:\n"
    + "".join(
        f"  - {{name: {name}, start_s: {start}, end_s: {end}, set: {{"
        + ", ".join(f"consumers.c{m}.count: {int(m == n)}" for _, _, _, m in PHASES)
        + "}}\n"
        for name, start, end, n in PHASES
    )
)


def test_prefetch_1_r_over_p_and_2r_over_p_follow_the_queueing_arithmetic_within_5_percent(
    tmp_path: Path, analyze_in_process
):
    scenario = write_scenario(tmp_path / "table.yaml", SCENARIO)

    def run(run_dir: Path) -> Path:
        done = sojourn("run", scenario, "--out", str(run_dir), "--no-analyze")
        assert done.returncode == 0, done.stderr[-3000:]
        return run_dir

    windows = [(start + SETTLE_S, end) for _, start, end, _ in PHASES]
    run_dir, t0, deliveries = quiet_run(run, tmp_path, windows, P_MS)
    acked = [d for d in deliveries if d["outcome"] == "ack"]

    table = []
    achieved: dict[int, float] = {}  # prefetch -> the round trip achieved in its phase, ms
    for name, start, end, prefetch in PHASES:
        lo, hi = t0 + int((start + SETTLE_S) * S), t0 + end * S
        in_phase = [d for d in acked if lo <= d["start_ns"] < hi]
        p_ms, r_ms = achieved_round_trip(in_phase, deliveries, prefetch)
        # The delay line was in force: the round trip is at least its 2 x 25 ms plus p, and the hosts
        # add a few ms (on a busy CI host 61 ms against 55, in the knee's phase with 11 in flight). The
        # arithmetic below takes the achieved round trip, so a slow host does not bend it.
        configured = 2 * ONE_WAY_MS + p_ms
        assert configured - 0.02 * R_MS <= r_ms <= configured + ROUND_TRIP_SLACK * R_MS, (name, r_ms, p_ms)
        achieved[prefetch] = r_ms
        rate, wait = round_trip_arithmetic(r_ms, p_ms, prefetch)  # with the achieved p and R
        measured_rate = len(in_phase) / (end - start - SETTLE_S)
        measured_wait = statistics.fmean((d["start_ns"] - d["receive_ns"]) / 1e6 for d in in_phase)
        table.append((name, prefetch, p_ms, rate, measured_rate, wait, measured_wait))
        tolerance = KNEE_TOLERANCE if prefetch == round(R_MS / P_MS) else TOLERANCE
        assert abs(measured_rate - rate) <= tolerance * rate, table[-1]
        # 5 % of the predicted wait, or of R where the prediction is below R (a buffer about empty
        # at prefetch 1 and R/p: 5 % of 0 would ask for an exact zero).
        assert abs(measured_wait - wait) <= tolerance * max(wait, R_MS), table[-1]
    # The three rows are the table's: prefetch 1 starves the consumer, R/p about saturates it with
    # the buffer about empty, 2R/p keeps it saturated and adds about R of waiting (measured values).
    (_, _, _, _, measured1, _, _), (_, _, _, _, measured11, _, _), (_, _, _, _, measured22, _, wait22) = table
    # (At the knee at least 85 % of the saturated rate: 91-96 % measured in the runs KNEE_TOLERANCE cites.)
    assert measured1 < 0.2 * measured11 and 0.85 * measured22 < measured11 < (1 + TOLERANCE) * measured22, table
    assert wait22 > 0.8 * R_MS, table
    for row in table:  # with -s: name, prefetch, measured p, predicted and measured rate, wait
        print(" ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row))

    # sojourn's own model check says which regime each consumer was in and, where the saturated
    # arithmetic applies, predicts what was measured above: prefetch 1 starved (the queue always
    # held messages, the consumer idle most of the time), 2R/p saturated. Its round trip (p plus
    # the time from an ack to the delivery it drew) is the one this test read from the traces.
    model = {row["group"]: row for row in analyze_in_process(run_dir)["model"]["consumers"]}
    for (name, _, _, prefetch), (_, _, _, rate, measured_rate, _, _), regime in zip(
        (PHASES[0], PHASES[2]), (table[0], table[2]), ("starved", "saturated")
    ):
        row = model[f"c{prefetch}"]
        check = row["check"]
        assert row["regime"] == regime, (name, row["regime"], check["regime_why"])
        assert check["applies"] is True, (name, check["not_applicable"])
        assert check["round_trip_source"] == "ack_to_delivery", (name, check)
        # The same round trip as this test's own reading of the traces (ack to the delivery it drew).
        assert abs(check["round_trip_ms"] - achieved[prefetch]) <= 0.1 * R_MS, (
            name,
            check["round_trip_ms"],
            achieved[prefetch],
        )
        assert abs(check["predicted"]["throughput_per_s"] - measured_rate) <= TOLERANCE * rate, (name, check, table)
