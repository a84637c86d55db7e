"""The live 'fell behind' warning: pure counting over windows of publishes."""

from __future__ import annotations

from loadgen.lateness import HeldBack, Lateness

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


def test_a_warning_that_keeps_applying_is_printed_once_a_minute_with_the_count_held_back():
    repeats = HeldBack(every_s=60)
    # a slipping window every 5 s from t=5 to t=130: printed at 5, 65 and 125
    printed = {t: repeats.line("behind", float(t)) for t in range(5, 131, 5)}
    said = {t: line for t, line in printed.items() if line}
    assert sorted(said) == [5, 65, 125]
    assert said[5] == "behind"
    assert said[65] == "behind (11 more such warnings held back since the last)"  # 10, 15, ..., 60
    assert said[125] == "behind (11 more such warnings held back since the last)"
    assert repeats.held == 26 - 3  # 26 windows, 3 printed


def test_windows_with_nothing_to_say_do_not_count_as_held_back():
    repeats = HeldBack(every_s=60)
    assert repeats.line("behind", 0.0) == "behind"
    assert repeats.line(None, 5.0) is None
    assert repeats.line(None, 10.0) is None
    assert repeats.line("behind", 61.0) == "behind"
    assert repeats.held == 0
