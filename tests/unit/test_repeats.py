"""The rate limit for a warning that keeps applying."""

from __future__ import annotations

from loadgen.rules.repeats import HeldBack


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
