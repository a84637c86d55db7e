"""The console summary after a run: a load generator that fell behind, or a replay that lost rows, is loud."""

from __future__ import annotations

from loadgen.commands.run import format_summary


def test_a_group_behind_schedule_and_a_replay_with_missing_rows_are_warned_about():
    summary = {
        "messages": {"published": 10},
        "fidelity": {
            "fast": {"behind": True, "lateness_ms": {"p99": 42.25, "max": 1500.0}, "replay": None},
            "rec": {
                "behind": False,
                "lateness_ms": {"p99": 0.4, "max": 2.0},
                "replay": {"missing": 3, "duplicates": 1},
            },
        },
    }
    lines = format_summary(summary, "runs/x").splitlines()
    assert (
        "  WARNING: producer group fast fell behind its schedule: p99 42.2 ms late (max 1,500.0 ms); "
        "the results under-state the offered load"
    ) in lines
    assert "  WARNING: replay rec: 3 rows missing, 1 duplicate publishes" in lines
    assert not any("group rec fell behind" in line for line in lines)


def test_an_on_time_run_has_no_fidelity_warning():
    summary = {
        "fidelity": {"p": {"behind": False, "lateness_ms": {"p99": 0.2}, "replay": {"missing": 0, "duplicates": 0}}}
    }
    assert "WARNING" not in format_summary(summary, "runs/x")
