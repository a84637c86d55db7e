"""analysis.concurrent: independent blocks of the job run a few at a time (side_by_side), or on a thread
of their own while the caller goes on (in_background)."""

import contextvars
import re
import threading
import time

import pytest

from analysis.concurrent import in_background, side_by_side

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
    token = SETTING.set("approximate")  # a setting held in a context variable
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


def test_background_blocks_run_while_the_caller_goes_on():
    caller_went_on = threading.Event()
    said = []
    with in_background(said.append, None, {"a": ("waiting", lambda: caller_went_on.wait(5) and 1)}) as results:
        caller_went_on.set()  # the block returns 1 only if this line ran while it waited
        assert results() == {"a": 1}
    assert [m.split(":")[0] for m in said] == ["waiting"]  # a stage with its time


def test_background_blocks_run_one_at_a_time_in_the_order_given():
    order = []

    def block(name):
        order.append(f"{name} begins")
        time.sleep(0.05)
        order.append(f"{name} ends")
        return name

    blocks = {name: (name, lambda name=name: block(name)) for name in ("c", "a", "b")}
    with in_background(lambda _m: None, None, blocks) as results:
        assert results() == {"c": "c", "a": "a", "b": "b"}
    assert order == ["c begins", "c ends", "a begins", "a ends", "b begins", "b ends"]


def test_background_blocks_see_the_callers_context_as_it_was_on_entry():
    token = SETTING.set("approximate")
    try:
        with in_background(lambda _m: None, None, {"a": ("reading the setting", SETTING.get)}) as results:
            SETTING.set("changed later")
            assert results() == {"a": "approximate"}
    finally:
        SETTING.reset(token)


def test_a_failing_background_block_raises_where_its_result_is_asked_for():
    blocks = {"fails": ("failing", lambda: 1 / 0)}
    with in_background(lambda _m: None, None, blocks) as results, pytest.raises(ZeroDivisionError):
        results()


def test_leaving_early_waits_for_the_running_block_and_drops_the_rest():
    started, release = threading.Event(), threading.Event()
    ran = []

    def first():
        started.set()
        release.wait(5)
        ran.append("first")

    blocks = {"first": ("first", first), "second": ("second", lambda: ran.append("second"))}
    with pytest.raises(RuntimeError, match="the accounting failed"), in_background(lambda _m: None, None, blocks):
        assert started.wait(5)
        threading.Timer(0.1, release.set).start()
        raise RuntimeError("the accounting failed")
    assert ran == ["first"]  # waited for, not cut off; the second never started
