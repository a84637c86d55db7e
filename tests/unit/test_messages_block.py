"""summary.json's `messages`: a run that ended reports what it could not place as unaccounted (a
bug); a run whose processes were killed (run.json still says running) reports them apart, as
unknown_after_crash, since no census counted the broker and the rows the processes held are lost."""

from __future__ import annotations

from analysis.summary import messages_block
from analysis.summary.blocks import ledger_totals
from analysis.transforms import DISCARD_CLASSES

TOTALS = {
    "published": 100,
    "confirmed": 100,
    "acked": 80,
    "left_in_broker": 0,
    "not_yet_read": 0,
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


def _row(message_id, account, publishes=1, confirms=1, acks=1):
    return {
        "message_id": message_id,
        "account": account,
        "confirmed": confirms > 0,
        "_publishes": publishes,
        "_confirms": confirms,
        "_acks": acks,
    }


def test_the_totals_count_the_plain_ids_from_the_publish_rows_and_list_the_unaccounted_sorted_and_capped():
    ledger = [
        _row("m9", "unaccounted", acks=0),
        _row("m2", "unaccounted", confirms=0, acks=0),
        _row("m5", "acked", publishes=2, confirms=2, acks=2),  # published twice, acked twice
        _row("m7", "consumer_nack_discard", acks=0),
        _row("zz", None, publishes=0, confirms=0),  # delivered, never published
    ]
    # 10 publish rows with an id, 8 of them confirmed: the ledger's published ids hold 5 rows (4 confirmed),
    # so 5 more ids were published once and acked, 4 of them confirmed
    totals, ids = ledger_totals(ledger, {"true": 8, "false": 2}, redelivered=3, max_ids=1)
    assert (totals["published"], totals["confirmed"], totals["acked"]) == (4 + 5, 3 + 4, 1 + 5)
    assert (totals["unaccounted"], totals["consumer_nack_discard"], totals["duplicates"]) == (2, 1, 1)
    assert totals["redelivered"] == 3 and ids == ["m2"]  # m2 before m9, the first one only
    assert ledger_totals(ledger, {"true": 8, "false": 2}, 0, max_ids=100)[1] == ["m2", "m9"]


def test_a_run_missing_a_workers_traces_reports_them_as_unknown_workers_missing():
    m = messages_block(TOTALS, IDS, workers_missing=True)
    assert (m["unaccounted"], m["unaccounted_ids"]) == (0, [])
    assert (m["unknown_workers_missing"], m["unknown_workers_missing_ids"]) == (20, IDS)
    assert (m["unknown_after_crash"], m["unknown_after_crash_ids"]) == (0, [])
