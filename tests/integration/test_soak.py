"""The soak, one minute of it (scenarios/soak.yaml runs ten): 2,000 msg/s into a consumer that keeps
up with about half, so the backlog grows all run long. Every process of the run sampled its memory
into run.json, none of them keeps growing, and every message is acked or left for the census.

The bound, 20 MB a minute over the second half of the run, is about 170 bytes per message at
2,000 msg/s: the leaks this project has had were 1.9 KB per message (the old census) and more."""

from __future__ import annotations

import json

from tests.integration.conftest import REPO, sojourn
from tests.integration.traces import ids, read_rows

GROWTH_BOUND_MB_PER_MIN = 20.0
SECONDS = 60


def test_a_minute_of_soak_keeps_every_processs_memory_flat_and_accounts_for_the_backlog(tmp_path):
    run_dir = tmp_path / "soak"
    done = sojourn(
        "run",
        str(REPO / "scenarios" / "soak.yaml"),
        "--set",
        f"run.duration_s={SECONDS}",
        "--set",
        "queue.name=sojourn.it.soak",
        "--out",
        str(run_dir),
        "--no-analyze",
        timeout=SECONDS + 180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((run_dir / "run.json").read_text())
    memory = run["memory"]
    assert memory["sampled"] is True
    by_name = {p["process"]: p for p in memory["processes"]}
    assert set(by_name) == {"local", "local trace writer"}, sorted(by_name)
    for name, process in by_name.items():
        assert len(process["samples"]) >= SECONDS / memory["every_s"], (name, len(process["samples"]))
        times = [t for t, _mb in process["samples"]]
        assert times[0] < 5 and times[-1] >= SECONDS - 1, (name, times[0], times[-1])  # from t0 to the end
        assert process["growth_mb_per_min"] is not None
        assert process["growth_mb_per_min"] <= GROWTH_BOUND_MB_PER_MIN, (name, process["samples"])
        assert process["max_mb"] == max(mb for _t, mb in process["samples"])

    published = ids(read_rows(run_dir, "publish"))
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    left = ids(read_rows(run_dir, "leftover"))
    assert len(published) > 1_500 * SECONDS  # about 2,000 msg/s asked for
    assert len(left) > 300 * SECONDS, "the consumer takes about half: a backlog grows all run"
    assert run["broker_depth_at_end"] == len(left)
    assert published == acked | left and not acked & left
    assert (run_dir / "memory").is_dir()
