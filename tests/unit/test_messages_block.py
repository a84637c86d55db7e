"""summary.json's `messages`: a run that ended reports what it could not place as unaccounted (a
bug); a run whose processes were killed (run.json still says running) reports them apart, as
unknown_after_crash, since no census counted the broker and the rows the processes held are lost."""

from __future__ import annotations

from analysis.summary import messages_block
from analysis.transforms import DISCARD_CLASSES

TOTALS = {
    "published": 100,
    "confirmed": 100,
    "acked": 80,
    "left_in_broker": 0,
    "unaccounted": 20,
    "redelivered": 3,
    "duplicates": 0,
    **dict.fromkeys(DISCARD_CLASSES, 0),
}
IDS = ["m-1", "m-2"]


def test_a_run_that_ended_reports_what_it_can_not_place_as_unaccounted():
    m = messages_block(TOTALS, IDS)
    assert (m["unaccounted"], m["unaccounted_ids"]) == (20, IDS)
    assert (m["unknown_after_crash"], m["unknown_after_crash_ids"]) == (0, [])


def test_a_killed_run_reports_them_as_unknown_after_crash_and_none_as_unaccounted():
    m = messages_block(TOTALS, IDS, finished=False)
    assert (m["unaccounted"], m["unaccounted_ids"]) == (0, [])
    assert (m["unknown_after_crash"], m["unknown_after_crash_ids"]) == (20, IDS)
    assert (m["published"], m["acked"]) == (100, 80)
