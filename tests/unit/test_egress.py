"""EgressBuffer: work units, oldest-first discard, minimum burst, strict priority, discard indication."""

from __future__ import annotations

import pytest

from loadgen.rules.egress import ClassSpec, EgressBuffer, work_units

ONE = [ClassSpec("all", ((0, 255),))]
TWO = [ClassSpec("high", ((5, 255),)), ClassSpec("low", ((0, 4),))]


def _drain(buffer: EgressBuffer) -> list[tuple[str, str, bool]]:
    out = []
    while buffer:
        popped = buffer.pop()
        out.append((popped.admitted.item, popped.admitted.egress_class, popped.discard_indication))
    return out


@pytest.mark.parametrize(
    "size, units", [(0, 1), (1, 1), (2047, 1), (2048, 1), (2049, 2), (4096, 2), (4097, 3), (20 * 2048, 20)]
)
def test_work_units_are_ceil_of_size_over_2048_and_at_least_one(size, units):
    assert work_units(size) == units


def test_a_class_under_its_max_depth_discards_nothing_and_serves_oldest_first():
    b = EgressBuffer(ONE, max_depth_units=6, min_burst=1)
    for name in "abc":
        assert b.append(name, None, 4096) == ()  # 2 units each: 2, 4, 6 <= 6
    assert len(b) == 3
    assert _drain(b) == [("a", "all", False), ("b", "all", False), ("c", "all", False)]


def test_over_max_depth_the_oldest_are_discarded_until_the_class_fits():
    # max 5 units; a,b,c are 2 units each (2, 4, 6 -> over). c's admission makes 6 > 5 with
    # 3 messages > min_burst 1: a goes (4 units left). d (3 units): 7 > 5, b goes -> 5.
    b = EgressBuffer(ONE, max_depth_units=5, min_burst=1)
    assert b.append("a", 0, 4000) == ()
    assert b.append("b", 0, 4000) == ()
    assert [d.item for d in b.append("c", 0, 4000)] == ["a"]
    assert [d.item for d in b.append("d", 0, 5000)] == ["b"]
    (stats,) = b.stats()
    assert (stats.length, stats.units, stats.discards) == (2, 5, 2)
    assert (stats.high_water_messages, stats.high_water_units) == (2, 5)


def test_one_big_message_can_push_out_several_old_ones():
    # five 1-unit messages fill max 5; a 4-unit message makes 9: four go (9-4 = 5).
    b = EgressBuffer(ONE, max_depth_units=5, min_burst=1)
    for i in range(5):
        b.append(i, 0, 10)
    assert [d.item for d in b.append("big", 0, 3 * 2048 + 1)] == [0, 1, 2, 3]
    assert [item for item, _, _ in _drain(b)] == [4, "big"]


def test_min_burst_messages_are_admitted_past_the_max_depth():
    # max 2 units, min_burst 3, 3-unit messages: the first three stay (3, 6, 9 units); the fourth
    # makes 12 units with 4 messages > 3, the oldest goes -> 9 units, still over, but 3 messages
    # is not more than min_burst: it stops there.
    b = EgressBuffer(ONE, max_depth_units=2, min_burst=3)
    for name in "abc":
        assert b.append(name, 0, 3 * 2048) == ()
    assert [d.item for d in b.append("d", 0, 3 * 2048)] == ["a"]
    (stats,) = b.stats()
    assert (stats.length, stats.units, stats.high_water_units, stats.high_water_messages) == (3, 9, 9, 3)


def test_a_single_message_bigger_than_the_max_depth_is_kept():
    b = EgressBuffer(ONE, max_depth_units=1, min_burst=1)
    assert b.append("huge", 0, 100 * 2048) == ()
    assert b.stats()[0].units == 100


def test_pop_serves_the_highest_class_first_and_each_class_oldest_first():
    b = EgressBuffer(TWO, max_depth_units=100, min_burst=1)
    for item, priority in (("l1", 1), ("h1", 5), ("l2", None), ("h2", 9)):
        b.append(item, priority, 10)
    assert _drain(b) == [("h1", "high", False), ("h2", "high", False), ("l1", "low", False), ("l2", "low", False)]


def test_a_class_may_take_several_priority_ranges():
    b = EgressBuffer([ClassSpec("mid", ((3, 4),)), ClassSpec("rest", ((5, 255), (0, 2)))], 100, 1)
    b.append("r9", 9, 10)
    b.append("m3", 3, 10)
    b.append("r0", 0, 10)
    assert _drain(b) == [("m3", "mid", False), ("r9", "rest", False), ("r0", "rest", False)]


def test_a_discard_in_one_class_leaves_the_other_class_alone():
    b = EgressBuffer(TWO, max_depth_units=2, min_burst=1)
    b.append("h1", 5, 10)
    b.append("h2", 5, 10)
    b.append("l1", 1, 10)
    b.append("l2", 1, 10)
    assert [d.item for d in b.append("l3", 1, 10)] == ["l1"]
    high, low = b.stats()
    assert (high.name, high.length, high.discards) == ("high", 2, 0)
    assert (low.name, low.length, low.discards) == ("low", 2, 1)


def test_the_next_message_popped_after_a_discard_carries_the_indication_once():
    # low overflows while high messages wait: the indication is for the session, so the next
    # message popped (a high one) carries it, and only that one.
    b = EgressBuffer(TWO, max_depth_units=1, min_burst=1)
    b.append("l1", 0, 10)
    b.append("h1", 7, 10)
    assert [d.item for d in b.append("l2", 0, 10)] == ["l1"]
    assert _drain(b) == [("h1", "high", True), ("l2", "low", False)]
    high, low = b.stats()
    assert (high.discard_indications, low.discard_indications) == (1, 0)
    assert (high.delivered, low.delivered, low.discards) == (1, 1, 1)


def test_several_discards_before_a_pop_give_one_indication():
    b = EgressBuffer(ONE, max_depth_units=1, min_burst=1)
    for item in "abcd":
        b.append(item, 0, 1)  # each admission after the first discards the one before
    assert b.stats()[0].discards == 3
    assert _drain(b) == [("d", "all", True)]
    b.append("e", 0, 1)
    assert _drain(b) == [("e", "all", False)]


def test_admitted_records_the_class_depth_after_its_own_discards():
    b = EgressBuffer(ONE, max_depth_units=3, min_burst=1)
    b.append("a", 0, 2048)  # 1 unit, 1 message
    b.append("b", 0, 4096)  # 3 units, 2 messages
    b.append("c", 0, 2048)  # 4 > 3: a goes -> 3 units, 2 messages
    depths = []
    while b:
        a = b.pop().admitted
        depths.append((a.item, a.units, a.length, a.depth_units))
    assert depths == [("b", 2, 2, 3), ("c", 1, 2, 3)]


def test_high_water_marks_keep_the_peak_after_the_buffer_empties():
    b = EgressBuffer(ONE, max_depth_units=10, min_burst=1)
    for i in range(4):
        b.append(i, 0, 3000)  # 2 units each -> 8 units, 4 messages
    _drain(b)
    (stats,) = b.stats()
    assert (stats.length, stats.units, stats.delivered) == (0, 0, 4)
    assert (stats.high_water_messages, stats.high_water_units) == (4, 8)


def test_classes_must_cover_every_priority_once():
    with pytest.raises(ValueError, match="in no class"):
        EgressBuffer([ClassSpec("high", ((5, 255),))], 10, 1)
    with pytest.raises(ValueError, match="two classes"):
        EgressBuffer([ClassSpec("a", ((0, 5),)), ClassSpec("b", ((5, 255),))], 10, 1)


def test_pop_of_an_empty_buffer_raises():
    with pytest.raises(IndexError):
        EgressBuffer(ONE, 10, 1).pop()
