"""Replay settings that are valid but probably not meant: a key split that loads one producer, and
row priorities sent to a queue that ignores them. Expected shares counted here from the routing
keys with sha256, as the split does (independently of loadgen.replay.plan)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from loadgen.replay.sources import load_sources, replay_warnings
from tests.unit.scenario_files import load

SCENARIO = """
name: w
queue: {{name: q{arguments}}}
run: {{duration_s: 10}}
producers:
  - name: rec
    count: {count}
    replay: {{path: trace.csv, split: {split}}}
consumers: [{{name: c}}]
"""


def _trace(tmp_path: Path, keys: list[str], priority: bool = False) -> None:
    lines = ["offset_s,routing_key,size_bytes,priority"]
    lines += [f"{i * 0.01:.2f},{key},10,{5 if priority and i % 2 else ''}" for i, key in enumerate(keys)]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")


def _warnings(tmp_path: Path, count: int = 2, split: str = "key", arguments: str = "") -> list[str]:
    scenario = load(tmp_path, SCENARIO.format(count=count, split=split, arguments=arguments))
    return replay_warnings(scenario, load_sources(scenario))


def _slot(key: str, count: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count


def test_a_key_split_that_loads_one_producer_beyond_one_and_a_half_shares_is_named(tmp_path: Path):
    # 90 rows of one key, 10 of another: the busier producer carries at least 90 % against 50 %
    keys = ["orders.created"] * 90 + ["orders.paid"] * 10
    _trace(tmp_path, keys)
    busiest = max(sum(_slot(k, 2) == s for k in keys) for s in (0, 1)) / len(keys)
    (line,) = _warnings(tmp_path)
    assert line.startswith(f"{tmp_path / 'x.yaml'}: producers[0].replay.split: key puts ")
    assert f"{busiest:.1%} of " in line and "one of 2 producers (2 routing keys; an even share is 50.0%)" in line
    assert "split: round_robin" in line


def test_an_even_enough_key_split_and_round_robin_say_nothing(tmp_path: Path):
    keys = [f"k{i % 40}" for i in range(400)]  # forty keys: no slot near 75 % of the rows
    _trace(tmp_path, keys)
    shares = [sum(_slot(k, 2) == s for k in keys) / len(keys) for s in (0, 1)]
    assert max(shares) <= 0.75
    assert _warnings(tmp_path) == []
    _trace(tmp_path, ["one"] * 100)
    assert _warnings(tmp_path, split="round_robin") == []
    assert _warnings(tmp_path, count=1) == []  # one producer carries everything by design


def test_row_priorities_without_x_max_priority_are_ignored_by_the_broker_and_said_so(tmp_path: Path):
    _trace(tmp_path, [f"k{i % 40}" for i in range(400)], priority=True)
    (line,) = _warnings(tmp_path)
    assert "producers[0].replay.path: 200 rows of" in line and "has no x-max-priority argument" in line
    assert _warnings(tmp_path, arguments=", arguments: {x-max-priority: 10}") == []
