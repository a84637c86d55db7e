"""Names and numbers the broker would refuse are refused by the loader (so by `validate`), each
error naming the file, the field and the value: AMQP short strings (255 bytes of UTF-8, no
control characters), the names sojourn derives from them, and the heartbeat's 16 bits."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_scenario_errors import CONSUMER, PRODUCER, message

LONG = "q" * 256
ACCENTED = "é" * 128  # 128 characters, 256 bytes of UTF-8


def scenario(queue: str = "q", producer: str = "main", consumer: str = "main", extra: str = "") -> str:
    return (
        f"name: t\nqueue: {{name: {json.dumps(queue)}}}\nrun: {{duration_s: 60}}\n"
        f"producers:\n  - name: {producer}\n    rate: 10\nconsumers:\n  - name: {consumer}\n{extra}"
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        (scenario(queue=LONG), "queue.name: expected at most 255 bytes, got 256 bytes of UTF-8"),
        (scenario(queue=ACCENTED), "queue.name: expected at most 255 bytes, got 256 bytes of UTF-8"),
        (
            scenario(queue="a\tb"),
            "queue.name: expected no control characters, got 'a\\tb' (character 0x09 at position 1)",
        ),
        (
            scenario(producer="p" * 256),
            "producers[0].name: expected a name of at most 255 characters, got 256 bytes of UTF-8",
        ),
        (
            scenario().replace("    rate: 10\n", "    rate: 10\n    routing_key: " + "k" * 300 + "\n"),
            "producers[0].routing_key: expected at most 255 bytes, got 300 bytes of UTF-8",
        ),
        (
            scenario().replace("    rate: 10\n", '    rate: 10\n    exchange: "ex\\u0000"\n'),
            "producers[0].exchange: expected no control characters",
        ),
        (
            "name: t\nqueue: {name: q, arguments: {x-dead-letter-exchange: " + "d" * 256 + "}}\n"
            "run: {duration_s: 60}\n" + PRODUCER + CONSUMER,
            "queue.arguments.x-dead-letter-exchange: expected at most 255 bytes",
        ),
        (
            scenario().replace("name: t\n", "name: t\nbroker: {url: 'amqp://h/', heartbeat_s: 65536}\n"),
            "broker.heartbeat_s: expected an integer between 0 and 65535, got 65536",
        ),
    ],
)
def test_what_the_broker_would_refuse_is_refused_with_file_field_and_value(tmp_path, text, expected):
    assert expected in message(tmp_path, text)


def test_a_group_name_that_fits_alone_but_not_in_the_slot_queue_name_is_refused(tmp_path):
    queue = "q" * 200  # fits; with ".sojourn-slot.consumers.<group>.0" it would not
    got = message(tmp_path, scenario(queue=queue, consumer="c" * 40))
    assert got.startswith("consumers[0].name: ")
    slot = len(queue + ".sojourn-slot.consumers." + "c" * 40 + ".0")  # the one slot of one consumer
    assert f"too long for the slot queues sojourn declares per user ({slot} bytes, AMQP allows 255)" in got


def test_a_queue_name_too_long_for_the_dead_letter_capture_queue_is_refused(tmp_path):
    got = message(tmp_path, scenario(queue="q" * 250))
    assert got.startswith("queue.name: ")
    assert "dead-letter capture queue" in got
    assert f"{len('sojourn.' + 'q' * 250 + '.dead-letters')} bytes, AMQP allows 255" in got


def test_names_at_the_limits_are_accepted(tmp_path):
    from loadgen.scenario import load_scenario

    path = tmp_path / "ok.yaml"
    path.write_text(
        scenario(queue="q" * 200, consumer="c" * 20).replace(
            "    rate: 10\n", "    rate: 10\n    routing_key: " + "k" * 255 + "\n"
        )
    )
    s = load_scenario(path, (), env={})
    assert s.queue.name == "q" * 200 and s.producers[0].routing_key == "k" * 255


def test_a_value_nested_thousands_deep_is_refused_not_a_recursion_error(tmp_path):
    text = scenario() + "description: " + "[" * 5000 + "]" * 5000 + "\n"
    assert "invalid YAML: nested more than 64 levels deep" in message(tmp_path, text)


def test_a_set_value_nested_too_deep_is_refused(tmp_path):
    from loadgen.scenario import ScenarioError, load_scenario

    path = tmp_path / "ok.yaml"
    path.write_text(scenario())
    with pytest.raises(ScenarioError, match="nested more than 64 levels deep"):
        load_scenario(path, ["consumers.main.prefetch=" + "[" * 100 + "]" * 100], env={})


def test_nesting_within_the_bound_is_read(tmp_path):
    from loadgen.scenario.overrides import BoundedLoader

    assert yaml_depth(__import__("yaml").load("[" * 60 + "]" * 60, Loader=BoundedLoader)) == 60


def yaml_depth(value) -> int:
    return 1 + max(map(yaml_depth, value), default=0) if isinstance(value, list) else 0


def test_a_managed_broker_setting_of_the_wrong_type_names_file_field_and_value(tmp_path):
    text = scenario().replace(
        "name: t\n", "name: t\nbroker: {managed: {port: 5699, settings: {memory_monitor_interval: -1}}}\n"
    )
    assert message(tmp_path, text) == (
        "broker.managed.settings.memory_monitor_interval: must be a whole number >= 0, got '-1'"
    )


@pytest.mark.parametrize(
    "edit, expected",
    [
        (("    rate: 10\n", "    rate: 1.0e+300\n"), "producers[0].rate: more than 1,000,000 msg/s per producer"),
        (
            ("    rate: 10\n", "    rate: [{at_s: 0, rate: 10}, {at_s: 5, rate: 2000000}]\n"),
            "producers[0].rate: more than 1,000,000 msg/s per producer",
        ),
        (("run: {duration_s: 60}", "run: {duration_s: 1.0e+300}"), "run.duration_s: more than 604,800 s (7 days)"),
        (("run: {duration_s: 60}", "run: {duration_s: 60, drain_timeout_s: 1.0e+9}"), "run.drain_timeout_s: more than"),
        (
            ("name: t\n", "name: t\nbroker: {url: 'amqp://h/', connect_timeout_s: 1.0e+300}\n"),
            "broker.connect_timeout_s",
        ),
        (
            ("  - name: main\n", "  - name: main\n    processing_ms: 1.0e+12\n", 2),
            "consumers[0].processing_ms: more than",
        ),
        (
            (
                "run: {duration_s: 60}",
                "run: {duration_s: 60}\ntimeline: [{name: hot, start_s: 10, end_s: 20, "
                "set: {producers.main.rate: 5.0e+6}}]",
            ),
            "timeline[0].set.producers.main.rate: more than 1,000,000 msg/s",
        ),
    ],
)
def test_values_that_would_hang_a_run_are_refused_naming_the_field(tmp_path, edit, expected):
    old, new, *nth = edit
    text = scenario()
    if nth:  # the n-th occurrence (the consumer's `- name: main`, not the producer's)
        head, _, tail = text.rpartition(old)
        text = head + new + tail
    else:
        text = text.replace(old, new, 1)
    got = message(tmp_path, text)
    assert got.startswith(expected) or expected in got, got
    assert "set run.beyond_limits: true to run it anyway" in got


def test_beyond_limits_lets_such_values_through_deliberately(tmp_path):
    from loadgen.scenario import load_scenario

    path = tmp_path / "big.yaml"
    path.write_text(scenario().replace("run: {duration_s: 60}", "run: {duration_s: 1.0e+7, beyond_limits: true}"))
    s = load_scenario(path, (), env={})
    assert s.run.duration_s == 1e7 and s.run.beyond_limits is True
    assert s.to_dict()["run"]["beyond_limits"] is True
