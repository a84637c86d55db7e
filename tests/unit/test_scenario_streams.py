"""A stream (`queue.type: stream`) as the loader checks it (loadgen/scenario/streams.py,
docs/scenarios.md "Streams"): where each consumer group starts reading (`consumers[].offset`), what a
stream refuses of the queue section and of its consumer groups (in the group and in a phase), each
a ScenarioError naming the field (exit status 2), and what `sojourn validate` says about a stream."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
import yaml

from loadgen.cli import main
from loadgen.scenario import ScenarioError, load_scenario
from loadgen.scenario.streams import consume_offset
from tests.unit.scenario_files import load

PRODUCER = "producers: [{name: p, rate: 10}]\n"


def stream(queue_extra: str = "", consumers: str = "  - {name: live}\n", extra: str = "") -> str:
    """A stream scenario: `queue_extra` goes inside the queue mapping, `consumers` is the list's lines."""
    return (
        f"name: t\nqueue: {{name: sojourn.unit.stream, type: stream{queue_extra}}}\nrun: {{duration_s: 20}}\n"
        f"{PRODUCER}consumers:\n{consumers}{extra}"
    )


def refusal(tmp_path: pathlib.Path, text: str, *overrides: str) -> ScenarioError:
    """The ScenarioError the loader raises for `text` (the error `sojourn validate` exits 2 with)."""
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides, env={})
    assert str(info.value).startswith(f"{path}: ")  # the file is named
    return info.value


TWO_READERS = stream(
    consumers="  - {name: live, prefetch: 50, offset: next}\n  - {name: audit, prefetch: 50, offset: first}\n"
)


# ---- what loads


def test_a_stream_read_by_two_groups_loads_durable_and_is_declared_as_a_stream(tmp_path):
    s = load(tmp_path, TWO_READERS)
    q = s.queue
    assert (q.type, q.queue_type, q.stream) == ("stream", "stream", True)
    assert (q.durable, q.auto_delete) == (True, False)  # durable without saying so, like a quorum queue
    assert q.declare_arguments() == {"x-queue-type": "stream"}
    assert [(g.name, g.count, g.prefetch, g.ack_mode, g.offset) for g in s.consumers] == [
        ("live", 1, 50, "manual", "next"),
        ("audit", 1, 50, "manual", "first"),
    ]


def test_x_queue_type_stream_in_the_arguments_makes_a_stream_too(tmp_path):
    text = TWO_READERS.replace("type: stream", "arguments: {x-queue-type: stream}")
    q = load(tmp_path, text).queue
    assert (q.type, q.stream, q.durable, q.declare_arguments()) == (None, True, True, {"x-queue-type": "stream"})


def test_a_group_without_offset_has_none_and_reads_from_the_brokers_default(tmp_path):
    assert load(tmp_path, stream()).consumer("live").offset is None


def test_the_stream_arguments_a_stream_takes_are_kept_as_written(tmp_path):
    text = stream(", arguments: {x-max-age: 7D, x-max-length-bytes: 1000000, x-stream-max-segment-size-bytes: 500000}")
    q = load(tmp_path, text).queue
    assert q.declare_arguments() == {
        "x-max-age": "7D",
        "x-max-length-bytes": 1000000,
        "x-stream-max-segment-size-bytes": 500000,
        "x-queue-type": "stream",
    }


def test_a_stream_scenario_reads_back_equal_from_its_resolved_form(tmp_path):
    original = load(tmp_path, TWO_READERS)
    assert load(tmp_path, yaml.safe_dump(original.to_dict(mask_password=False))) == original


# ---- consumers[].offset


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("first", "first"),
        ("last", "last"),
        ("next", "next"),
        ("0", 0),
        ("42", 42),
        ('"2026-12-05T10:00:00Z"', "2026-12-05T10:00:00Z"),
        ('"2026-12-05T10:00:00+01:00"', "2026-12-05T10:00:00+01:00"),
    ],
)
def test_every_documented_offset_is_accepted_as_written(tmp_path, written, kept):
    s = load(tmp_path, stream(consumers=f"  - {{name: live, offset: {written}}}\n"))
    assert s.consumer("live").offset == kept


def test_an_unquoted_timestamp_is_accepted_and_kept_as_an_iso_string(tmp_path):
    # YAML reads 2026-12-05T10:00:00Z unquoted as a datetime; run.json is JSON, so it is kept as text
    s = load(tmp_path, stream(consumers="  - {name: live, offset: 2026-12-05T10:00:00Z}\n"))
    offset = s.consumer("live").offset
    assert isinstance(offset, str)
    assert dt.datetime.fromisoformat(offset) == dt.datetime(2026, 12, 5, 10, 0, tzinfo=dt.timezone.utc)
    assert load(tmp_path, yaml.safe_dump(s.to_dict(mask_password=False))) == s  # and reads back


def test_an_unquoted_timestamp_keeps_its_time_zone(tmp_path):
    s = load(tmp_path, stream(consumers="  - {name: live, offset: 2026-12-05T10:00:00+01:00}\n"))
    stamp = dt.datetime.fromisoformat(s.consumer("live").offset)
    assert stamp == dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.timezone.utc)
    assert stamp.utcoffset() == dt.timedelta(hours=1)


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("-1", "expected an offset >= 0, got -1"),
        ("true", "expected first, last, next, an offset (an integer >= 0) or a timestamp, got true"),
        (
            "yesterday",
            "expected first, last, next, an offset (an integer >= 0) or an ISO 8601 timestamp "
            "(e.g. 2026-12-05T10:00:00Z), got 'yesterday'",
        ),
        ("1.5", "expected first, last, next, an offset (an integer >= 0) or an ISO 8601 timestamp"),
        ('"7"', "expected first, last, next, an offset (an integer >= 0) or an ISO 8601 timestamp"),
    ],
)
def test_an_offset_that_is_no_place_in_a_stream_is_refused_naming_the_field(tmp_path, written, message):
    err = refusal(tmp_path, stream(consumers=f"  - {{name: live}}\n  - {{name: audit, offset: {written}}}\n"))
    assert err.yaml_path == "consumers[1].offset"
    assert err.message.startswith(message)


def test_a_timestamp_without_a_time_zone_is_refused_saying_it_needs_one(tmp_path):
    err = refusal(tmp_path, stream(consumers='  - {name: live, offset: "2026-12-05T10:00:00"}\n'))
    assert err.yaml_path == "consumers[0].offset"
    assert err.message.startswith("a timestamp needs a time zone")
    assert "2026-12-05T10:00:00Z" in err.message  # shows how to write one


@pytest.mark.parametrize("written", ["2026-12-05T10:00:00", '"2026-12-05T10:00:00"'])
def test_a_timestamp_without_a_time_zone_is_refused_quoted_or_not(tmp_path, written):
    err = refusal(tmp_path, stream(consumers=f"  - {{name: live, offset: {written}}}\n"))
    assert err.yaml_path == "consumers[0].offset"
    assert err.message.startswith("a timestamp needs a time zone")


@pytest.mark.parametrize("written", ["2026-12-05", '"2026-12-05"', '"2026-12-05+00:00"'])
def test_a_date_alone_is_refused_with_a_full_timestamp_to_write_instead(tmp_path, written):
    err = refusal(tmp_path, stream(consumers=f"  - {{name: live, offset: {written}}}\n"))
    assert err.yaml_path == "consumers[0].offset"
    assert "2026-12-05T00:00:00Z" in err.message and "datetime.date" not in err.message
    advice = stream(consumers="  - {name: live, offset: 2026-12-05T00:00:00Z}\n")
    assert load(tmp_path, advice).consumer("live").offset  # the advice loads


def test_consume_offset_sends_a_timestamp_as_a_time_zone_aware_datetime():
    stamp = consume_offset("2026-12-05T10:00:00Z")
    assert isinstance(stamp, dt.datetime) and stamp.tzinfo is not None
    assert stamp == dt.datetime(2026, 12, 5, 10, 0, tzinfo=dt.timezone.utc)
    other = consume_offset("2026-12-05T10:00:00+01:00")
    assert other == dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.timezone.utc)
    assert other.utcoffset() == dt.timedelta(hours=1)


@pytest.mark.parametrize("offset", ["first", "last", "next", 0, 42])
def test_consume_offset_sends_a_word_or_an_offset_as_it_is(offset):
    assert consume_offset(offset) == offset
    assert type(consume_offset(offset)) is type(offset)


def test_the_offset_of_an_unquoted_timestamp_reaches_the_broker_as_that_instant(tmp_path):
    s = load(tmp_path, stream(consumers="  - {name: live, offset: 2026-12-05T10:00:00Z}\n"))
    assert consume_offset(s.consumer("live").offset) == dt.datetime(2026, 12, 5, 10, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("queue", ["{name: q}", "{name: q, type: classic}", "{name: q, type: quorum}"])
def test_an_offset_on_a_queue_that_is_not_a_stream_is_refused(tmp_path, queue):
    text = f"name: t\nqueue: {queue}\nrun: {{duration_s: 20}}\n{PRODUCER}consumers:\n  - {{name: c, offset: first}}\n"
    err = refusal(tmp_path, text)
    assert err.yaml_path == "consumers[0].offset"
    assert "queue.type: stream" in err.message


# ---- what a stream refuses of the queue section


@pytest.mark.parametrize(
    ("queue_extra", "path", "message"),
    [
        (", durable: false", "queue.durable", "a stream is always durable"),
        (", auto_delete: true", "queue.auto_delete", "a stream can not be auto-deleted"),
        (", purge_on_start: true", "queue.purge_on_start", "RabbitMQ can not purge a stream"),
    ],
)
def test_a_transient_auto_deleted_or_purged_stream_is_refused(tmp_path, queue_extra, path, message):
    err = refusal(tmp_path, stream(queue_extra))
    assert err.yaml_path == path
    assert err.message.startswith(message)


def test_purge_on_start_false_is_accepted_on_a_stream(tmp_path):
    assert load(tmp_path, stream(", purge_on_start: false")).queue.purge_on_start is False


def test_a_purge_asked_for_by_set_is_refused_naming_the_override(tmp_path):
    err = refusal(tmp_path, stream(), "queue.purge_on_start=true")
    assert (err.yaml_path, err.override) == ("queue.purge_on_start", "queue.purge_on_start=true")
    assert "can not purge a stream" in err.message


@pytest.mark.parametrize(
    ("argument", "why"),
    [
        ("x-max-length: 1000", "use x-max-length-bytes or x-max-age"),
        ("x-overflow: drop-head", "never refuses or drops a publish"),
        ("x-message-ttl: 60000", "use x-max-age"),
        ("x-max-priority: 5", "no message priorities"),
        ("x-dead-letter-exchange: dlx", "never dead-letters"),
        ("x-dead-letter-routing-key: dead", "never dead-letters"),
        ("x-delivery-limit: 3", "counts no deliveries"),
        ("x-single-active-consumer: true", "no single active consumer on a stream"),
        ("x-queue-mode: lazy", "classic-queue setting"),
    ],
)
def test_the_arguments_of_queues_that_remove_messages_are_refused_on_a_stream(tmp_path, argument, why):
    err = refusal(tmp_path, stream(f", arguments: {{{argument}}}"))
    assert err.yaml_path == f"queue.arguments.{argument.split(':')[0]}"
    assert why in err.message


@pytest.mark.parametrize("age", ["7D", "12h", "1Y", "30m", "90s"])
def test_x_max_age_with_a_number_and_a_unit_is_accepted(tmp_path, age):
    assert load(tmp_path, stream(f", arguments: {{x-max-age: {age}}}")).queue.arguments["x-max-age"] == age


@pytest.mark.parametrize("age", ['"1 hour"', "3600", "0D", "7d"])
def test_x_max_age_in_another_form_is_refused_with_the_forms_it_takes(tmp_path, age):
    err = refusal(tmp_path, stream(f", arguments: {{x-max-age: {age}}}"))
    assert err.yaml_path == "queue.arguments.x-max-age"
    assert err.message.startswith("expected a number and a unit of Y, M, D, h, m or s (e.g. 7D, 12h)")


def test_a_segment_size_of_0_bytes_is_refused(tmp_path):
    err = refusal(tmp_path, stream(", arguments: {x-stream-max-segment-size-bytes: 0}"))
    assert err.yaml_path == "queue.arguments.x-stream-max-segment-size-bytes"
    assert err.message == "expected an integer >= 1, got 0"


# ---- what a stream refuses of its consumer groups


@pytest.mark.parametrize(
    ("group", "path", "message"),
    [
        ("ack_mode: auto", "consumers[1].ack_mode", "a stream consumer needs ack_mode: manual"),
        ("prefetch: 0", "consumers[1].prefetch", "a stream consumer needs a prefetch > 0"),
        ("outcomes: {requeue: 0.1}", "consumers[1].outcomes", "outcomes has no meaning there"),
        ("codel: {target_ms: 5, interval_ms: 100}", "consumers[1].codel", "codel has no meaning there"),
        ("egress: {}", "consumers[1].egress", "egress has no meaning there"),
        ("leave: crash", "consumers[1].leave", "leave: crash has no meaning there"),
        ("prefetch_scope: channel", "consumers[1].prefetch_scope", "needs its own prefetch"),
    ],
)
def test_a_stream_group_that_would_nack_requeue_or_read_unbounded_is_refused(tmp_path, group, path, message):
    err = refusal(tmp_path, stream(consumers=f"  - {{name: live}}\n  - {{name: audit, {group}}}\n"))
    assert err.yaml_path == path
    assert message in err.message


def test_a_group_of_two_on_a_stream_is_refused_since_each_would_read_every_message(tmp_path):
    err = refusal(tmp_path, stream(consumers="  - {name: live, count: 2}\n"))
    assert (err.yaml_path, err.value) == ("consumers[0].count", 2)
    assert "every consumer reads every message" in err.message
    assert "declare one group (count: 1) per reader" in err.message


def test_a_group_a_phase_raises_from_0_to_2_on_a_stream_is_refused_too(tmp_path):
    text = stream(
        consumers="  - {name: live}\n  - {name: audit, count: 0}\n",
        extra="timeline:\n  - {name: join, start_s: 10, set: {consumers.audit.count: 2}}\n",
    )
    err = refusal(tmp_path, text)
    assert (err.yaml_path, err.value) == ("timeline[0].set.consumers.audit.count", 2)  # where the 2 is written
    assert "every consumer reads every message" in err.message


def test_a_group_that_joins_later_with_one_consumer_is_accepted(tmp_path):
    text = stream(
        consumers="  - {name: live}\n  - {name: audit, count: 0, offset: first}\n",
        extra="timeline:\n  - {name: join, start_s: 10, set: {consumers.audit.count: 1}}\n",
    )
    s = load(tmp_path, text)
    assert (s.at(5).consumer("audit").count, s.at(15).consumer("audit").count) == (0, 1)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("consumers.audit.prefetch: 0", "a stream consumer needs a prefetch > 0"),
        ("consumers.audit.outcomes: {requeue: 0.1}", "outcomes has no meaning there"),
        ("consumers.audit.leave: crash", "leave: crash has no meaning there"),
    ],
)
def test_a_phase_may_not_make_a_stream_group_what_the_group_may_not_be(tmp_path, setting, message):
    text = stream(
        consumers="  - {name: live}\n  - {name: audit}\n",
        extra=f"timeline:\n  - {{name: later, start_s: 10, set: {{{setting}}}}}\n",
    )
    err = refusal(tmp_path, text)
    assert err.yaml_path == f"timeline[0].set.{setting.split(':')[0]}"
    assert err.message.startswith("consumer group 'audit' reads a stream: ")
    assert message in err.message


@pytest.mark.parametrize("setting", ["consumers.audit.prefetch: 10", "consumers.audit.outcomes: null"])
def test_a_phase_may_change_what_a_stream_group_may_be(tmp_path, setting):
    text = stream(
        consumers="  - {name: live}\n  - {name: audit}\n",
        extra=f"timeline:\n  - {{name: later, start_s: 10, set: {{{setting}}}}}\n",
    )
    load(tmp_path, text)


# ---- sojourn validate


def test_validate_says_where_each_group_reads_the_stream_from(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(TWO_READERS + "  - {name: tail, prefetch: 50}\n")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(stream)" in out  # the queue's type
    lines = {line.split(":")[0].strip(): line for line in out.splitlines() if line.startswith("  consumer ")}
    assert lines["consumer audit"].endswith("reads the stream from first")
    assert lines["consumer live"].endswith("reads the stream from next")
    assert lines["consumer tail"].endswith("reads the stream from next")  # the broker's default


def test_validate_exits_2_naming_the_file_the_field_and_why(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(stream(consumers="  - {name: live, count: 3}\n"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: consumers[0].count: " in err and "on a stream every consumer reads every message" in err


@pytest.mark.parametrize("argument", ["x-max-age: 7D", "x-stream-max-segment-size-bytes: 1000000"])
@pytest.mark.parametrize("kind", ["classic", "quorum"])
def test_a_streams_argument_on_another_queue_is_refused_rather_than_ignored(tmp_path, argument, kind):
    text = f"name: t\nqueue: {{name: q, type: {kind}, arguments: {{{argument}}}}}\nrun: {{duration_s: 20}}\n{PRODUCER}"
    err = refusal(tmp_path, text)
    assert err.yaml_path == f"queue.arguments.{argument.split(':')[0]}"
    assert "set queue.type: stream" in err.message


def test_more_groups_than_the_accounting_follows_are_refused(tmp_path):
    groups = "".join(f"  - {{name: g{i}}}\n" for i in range(63))
    err = refusal(tmp_path, stream(consumers=groups))
    assert err.yaml_path == "consumers" and "at most 62 consumer groups" in err.message
    assert load(tmp_path, stream(consumers="".join(f"  - {{name: g{i}}}\n" for i in range(62))))
