"""The live 'fell behind' warning: pure counting over windows of publishes."""

from __future__ import annotations

from loadgen.rules.lateness import Lateness

MS = 1_000_000


def test_on_time_publishes_give_no_warning():
    late = Lateness()
    for _ in range(1000):
        late.note(2 * MS)
    assert Lateness.warning(late.take_window(), "now") is None


def test_more_than_one_percent_late_warns_with_counts_and_the_worst():
    late = Lateness()
    for i in range(1000):
        late.note(25 * MS if i < 11 else 0)  # 11 of 1,000 = 1.1 % over 10 ms
    line = Lateness.warning(late.take_window(), "in the last 5 s")
    assert line.startswith("publishing fell behind schedule in the last 5 s: 11 of 1,000 publishes")
    assert "worst 25.0 ms" in line


def test_exactly_one_percent_is_tolerated_but_one_second_late_is_not():
    late = Lateness()
    for i in range(1000):
        late.note(50 * MS if i < 10 else 0)
    assert Lateness.warning(late.take_window(), "x") is None
    late.note(1_500 * MS)
    for _ in range(10_000):
        late.note(0)
    assert "worst 1,500.0 ms" in Lateness.warning(late.take_window(), "x")


def test_windows_add_up_to_the_run_total():
    late = Lateness()
    late.note(20 * MS)
    late.take_window()
    late.note(0)
    late.note(30 * MS)
    late.take_window()
    assert (late.total.sent, late.total.late, late.total.worst_ns) == (3, 2, 30 * MS)
