from analysis.transforms import attach_intended_ns, mark_measured

T0 = 1_000_000_000_000
S = 1_000_000_000


def test_deliveries_take_the_intended_time_of_their_publish_and_warmup_is_excluded(frame):
    publishes = frame(
        "publish",
        dict(message_id="early", intended_ns=T0 + 1 * S, publish_ns=T0 + 1 * S + 7),
        dict(message_id="late", intended_ns=T0 + 6 * S, publish_ns=T0 + 6 * S + 7),
    )
    deliveries = frame(
        "delivery",
        # published inside the 5 s warm-up, received after it: still warm-up
        dict(message_id="early", publish_ns=T0 + 1 * S + 7, receive_ns=T0 + 6 * S),
        dict(message_id="late", publish_ns=None, receive_ns=T0 + 7 * S),
        # foreign message: no publish row; its header publish time stands in
        dict(message_id=None, publish_ns=T0 + 4 * S, receive_ns=T0 + 8 * S),
        # unknown id and no header: its receive time stands in
        dict(message_id="stranger", publish_ns=None, receive_ns=T0 + 9 * S),
    )
    got = {
        r.message_id: (r.intended_ns - T0, r.publish_ns, r.measured)
        for r in deliveries.transform(attach_intended_ns(publishes)).transform(mark_measured(T0 + 5 * S)).collect()
    }
    assert got == {
        "early": (1 * S, T0 + 1 * S + 7, False),
        "late": (6 * S, T0 + 6 * S + 7, True),  # missing header filled from the publish trace
        None: (4 * S, T0 + 4 * S, False),
        "stranger": (9 * S, None, True),
    }


def test_the_warmup_boundary_itself_is_measured(frame):
    p = frame(
        "publish",
        dict(message_id="m", intended_ns=T0 + 5 * S, publish_ns=T0 + 5 * S),
        dict(message_id="n", intended_ns=T0 + 5 * S - 1, publish_ns=T0 + 5 * S),
    )
    got = {r.message_id: r.measured for r in p.transform(mark_measured(T0 + 5 * S)).collect()}
    assert got == {"m": True, "n": False}


def test_the_header_decides_the_warmup_and_only_the_exceptions_look_their_publish_up(frame):
    """attach_measured: the job's way, without joining every delivery to its publish. Each case
    below is one where the header alone would decide wrongly, or the plain case on both sides."""
    from analysis.transforms import attach_measured, message_facts

    end = T0 + 5 * S
    publishes = frame(
        "publish",
        dict(message_id="before", intended_ns=T0 + 1 * S, publish_ns=T0 + 1 * S + 7),
        dict(message_id="after", intended_ns=T0 + 6 * S, publish_ns=T0 + 6 * S + 7),
        # intended inside the warm-up, sent after it: the header says measured, the schedule not
        dict(message_id="straddles", intended_ns=end - 3, publish_ns=end + 9),
        # published twice: the earliest intended time counts
        dict(message_id="twice", intended_ns=T0 + 2 * S, publish_ns=T0 + 2 * S + 1),
        dict(message_id="twice", intended_ns=T0 + 8 * S, publish_ns=T0 + 8 * S + 1),
        # no header on its delivery: intended and publish time come from this row
        dict(message_id="headless", intended_ns=T0 + 7 * S, publish_ns=T0 + 7 * S + 5),
    )
    deliveries = frame(
        "delivery",
        dict(message_id="before", publish_ns=T0 + 1 * S + 7, receive_ns=T0 + 6 * S),
        dict(message_id="after", publish_ns=T0 + 6 * S + 7, receive_ns=T0 + 7 * S),
        dict(message_id="straddles", publish_ns=end + 9, receive_ns=end + 20),
        dict(message_id="twice", publish_ns=T0 + 8 * S + 1, receive_ns=T0 + 9 * S),
        dict(message_id="headless", publish_ns=None, receive_ns=T0 + 8 * S),
        dict(message_id=None, publish_ns=T0 + 6 * S, receive_ns=T0 + 8 * S),  # foreign, after
        dict(message_id="stranger", publish_ns=None, receive_ns=T0 + 4 * S),  # unknown, no header
    )
    facts = publishes.transform(message_facts(deliveries, frame("leftover")))
    got = {
        r.message_id: (r.publish_ns, r.measured) for r in deliveries.transform(attach_measured(facts, end)).collect()
    }
    assert got == {
        "before": (T0 + 1 * S + 7, False),
        "after": (T0 + 6 * S + 7, True),
        "straddles": (end + 9, False),
        "twice": (T0 + 8 * S + 1, False),
        "headless": (T0 + 7 * S + 5, True),
        None: (T0 + 6 * S, True),
        "stranger": (None, False),
    }
