"""analysis.concurrent.side_by_side: independent blocks of the job run a few at a time."""

import contextvars
import re
import threading
import time

import pytest

from analysis.concurrent import side_by_side

SETTING = contextvars.ContextVar("setting", default="unset")


def test_blocks_run_at_once_and_give_their_results_by_name():
    both_running = threading.Barrier(2, timeout=5)  # broken (an error) unless both blocks wait at once

    def meet(value):
        both_running.wait()
        return value

    said = []
    got = side_by_side(
        said.append, None, {"a": ("first", lambda: meet(1)), "b": ("second", lambda: meet(2))}, at_once=2
    )
    assert got == {"a": 1, "b": 2}
    assert sorted(m.split(":")[0] for m in said) == ["first", "second"]  # each block is a stage with its time
    assert all(re.fullmatch(r"\w+: \d+\.\d s", m) for m in said)


def test_one_at_a_time_runs_them_in_the_order_given():
    order = []
    blocks = {name: (f"computing {name}", lambda name=name: order.append(name) or name) for name in ("c", "a", "b")}
    assert side_by_side(lambda _m: None, None, blocks, at_once=1) == {"c": "c", "a": "a", "b": "b"}
    assert order == ["c", "a", "b"]


def test_each_block_sees_the_callers_context():
    token = SETTING.set("approximate")  # as stats.percentile_policy sets its policy
    try:
        got = side_by_side(lambda _m: None, None, dict.fromkeys("abc", ("reading the setting", SETTING.get)), at_once=2)
    finally:
        SETTING.reset(token)
    assert got == {"a": "approximate", "b": "approximate", "c": "approximate"}


def test_a_failing_block_raises_once_the_others_have_ended():
    ended = []

    def slow():
        time.sleep(0.2)
        ended.append("slow")

    def fails():
        raise ValueError("no such column")

    with pytest.raises(ValueError, match="no such column"):
        side_by_side(lambda _m: None, None, {"fails": ("failing", fails), "slow": ("slow", slow)}, at_once=2)
    assert ended == ["slow"]
