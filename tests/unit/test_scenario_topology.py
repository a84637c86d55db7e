"""The topology sections of a scenario: queue.type, the checked queue arguments, exchanges and
bindings; what the run must find on the broker; how a refused declaration is worded."""

from __future__ import annotations

import pytest
import yaml

from loadgen.amqp.topology import missing_exchange, refused
from loadgen.errors import BrokerOperationFailed
from loadgen.scenario.model import BindingSpec, ExchangeSpec
from loadgen.scenario.topology import required_exchanges
from tests.unit.scenario_files import error, load

RUN = "run: {duration_s: 10}\n"


def scenario(queue: str = "{name: q}", extra: str = "") -> str:
    return f"name: t\nqueue: {queue}\n{RUN}{extra}"


TOPOLOGY = scenario(
    "{name: q, type: quorum, arguments: {x-delivery-limit: 3, x-dead-letter-exchange: dlx}}",
    """
exchanges:
  - {name: orders, type: topic, delete_on_end: true}
  - {name: hashed, type: x-consistent-hash, durable: false, auto_delete: true, arguments: {hash-header: k}}
bindings:
  - {exchange: orders, routing_key: "orders.*"}
  - {exchange: hashed, routing_key: "10"}
  - {exchange: amq.headers, arguments: {x-match: any, region: eu}}
producers:
  - {name: eu, rate: 5, exchange: orders, routing_key: orders.eu}
  - {name: legacy, rate: 5, exchange: legacy.in}
  - {name: direct, rate: 5}
""",
)


# ---- what loads, and how it reads back


def test_exchanges_and_bindings_load_with_their_defaults(tmp_path):
    s = load(tmp_path, TOPOLOGY)
    assert s.exchanges == (
        ExchangeSpec("orders", "topic", True, False, {}, True),
        ExchangeSpec("hashed", "x-consistent-hash", False, True, {"hash-header": "k"}, False),
    )
    assert s.bindings == (
        BindingSpec("orders", "orders.*", {}),
        BindingSpec("hashed", "10", {}),
        BindingSpec("amq.headers", "", {"x-match": "any", "region": "eu"}),
    )


def test_quorum_type_is_durable_by_default_and_declared_as_x_queue_type(tmp_path):
    q = load(tmp_path, TOPOLOGY).queue
    assert (q.type, q.queue_type, q.durable, q.auto_delete) == ("quorum", "quorum", True, False)
    assert q.declare_arguments() == {"x-delivery-limit": 3, "x-dead-letter-exchange": "dlx", "x-queue-type": "quorum"}
    assert "x-queue-type" not in q.arguments  # the arguments stay as written


def test_x_queue_type_in_the_arguments_alone_gives_the_queue_type(tmp_path):
    q = load(tmp_path, scenario("{name: q, durable: true, arguments: {x-queue-type: quorum}}")).queue
    assert (q.type, q.queue_type, q.declare_arguments()) == (None, "quorum", {"x-queue-type": "quorum"})


def test_the_same_type_given_twice_is_accepted(tmp_path):
    q = load(tmp_path, scenario("{name: q, type: quorum, arguments: {x-queue-type: quorum}}")).queue
    assert q.declare_arguments() == {"x-queue-type": "quorum"}


def test_a_queue_without_type_is_classic_and_declared_without_x_queue_type(tmp_path):
    q = load(tmp_path, scenario()).queue
    assert (q.type, q.queue_type, q.durable, q.declare_arguments()) == (None, "classic", False, {})


@pytest.mark.parametrize("text", [TOPOLOGY, scenario(), scenario("{name: q, type: classic}")])
def test_the_resolved_scenario_loads_back_equal(tmp_path, text):
    original = load(tmp_path, text)
    assert load(tmp_path, yaml.safe_dump(original.to_dict(mask_password=False))) == original


def test_run_json_records_exchanges_and_bindings(tmp_path):
    d = load(tmp_path, TOPOLOGY).to_dict()
    assert d["exchanges"][0] == {
        "name": "orders",
        "type": "topic",
        "durable": True,
        "auto_delete": False,
        "arguments": {},
        "delete_on_end": True,
    }
    assert d["bindings"][2] == {
        "exchange": "amq.headers",
        "routing_key": "",
        "arguments": {"x-match": "any", "region": "eu"},
    }
    assert d["queue"]["type"] == "quorum"


def test_exchanges_used_but_not_declared_must_be_found_on_the_broker(tmp_path):
    s = load(tmp_path, TOPOLOGY)
    # `orders` and `hashed` are declared, "" is the default exchange: only these two are looked up.
    assert required_exchanges(s) == [("legacy.in", "producers[1].exchange"), ("amq.headers", "bindings[2].exchange")]


# ---- queue.type and what the broker would refuse


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        ("{name: q, type: lazy}", "queue.type: expected one of classic, quorum, stream, got 'lazy'"),
        (
            "{name: q, type: quorum, arguments: {x-queue-type: classic}}",
            "queue.type: conflicts with queue.arguments.x-queue-type ('classic'); give the type once",
        ),
        ("{name: q, type: quorum, durable: false}", "queue.durable: a quorum queue is always durable"),
        (
            "{name: q, arguments: {x-queue-type: quorum}, durable: false}",
            "queue.durable: a quorum queue is always durable",
        ),
        ("{name: q, type: quorum, auto_delete: true}", "queue.auto_delete: quorum queues can not be auto-deleted"),
        (
            "{name: q, type: quorum, arguments: {x-max-priority: 5}}",
            "queue.arguments.x-max-priority: quorum queues have no message priorities in RabbitMQ 3.10",
        ),
        ("{name: q, type: quorum, arguments: {x-queue-mode: lazy}}", "queue.arguments.x-queue-mode: x-queue-mode is a"),
        (
            "{name: q, type: quorum, arguments: {x-max-length: 5, x-overflow: reject-publish-dlx}}",
            "queue.arguments.x-overflow: quorum queues do not support reject-publish-dlx in RabbitMQ 3.10",
        ),
        ("{name: q, arguments: {x-delivery-limit: 3}}", "queue.arguments.x-delivery-limit: only quorum queues count"),
    ],
)
def test_queue_settings_the_broker_refuses_are_scenario_errors(tmp_path, queue, expected):
    assert error(tmp_path, scenario(queue)).startswith(expected)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{x-max-length: -1}", "queue.arguments.x-max-length: expected an integer >= 0, got -1"),
        ("{x-max-length-bytes: 1.5}", "queue.arguments.x-max-length-bytes: expected an integer >= 0, got 1.5"),
        ("{x-max-length: '100'}", "queue.arguments.x-max-length: expected an integer >= 0, got '100' (that is text"),
        (
            "{x-overflow: reject}",
            "queue.arguments.x-overflow: expected one of drop-head, reject-publish, "
            "reject-publish-dlx, got 'reject' (did you mean 'reject-publish'?)",
        ),
        ("{x-message-ttl: -5}", "queue.arguments.x-message-ttl: expected an integer >= 0, got -5"),
        ("{x-max-priority: 0}", "queue.arguments.x-max-priority: expected an integer between 1 and 255, got 0"),
        ("{x-max-priority: 256}", "queue.arguments.x-max-priority: expected an integer between 1 and 255, got 256"),
        ("{x-dead-letter-exchange: 5}", "queue.arguments.x-dead-letter-exchange: expected a string, got 5"),
        ("{x-queue-type: lazy}", "queue.arguments.x-queue-type: expected one of classic, quorum, stream, got 'lazy'"),
    ],
)
def test_discard_arguments_are_checked(tmp_path, arguments, expected):
    assert error(tmp_path, scenario(f"{{name: q, arguments: {arguments}}}")).startswith(expected)


def test_delivery_limit_must_be_positive_on_a_quorum_queue(tmp_path):
    text = scenario("{name: q, type: quorum, arguments: {x-delivery-limit: 0}}")
    assert error(tmp_path, text) == "queue.arguments.x-delivery-limit: expected an integer >= 1, got 0"


def test_unchecked_arguments_pass_through(tmp_path):
    q = load(tmp_path, scenario("{name: q, arguments: {x-single-active-consumer: true, x-custom: abc}}")).queue
    assert dict(q.arguments) == {"x-single-active-consumer": True, "x-custom": "abc"}


# ---- exchanges and bindings


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "exchanges: [{name: x, type: topics}]",
            "exchanges[0].type: expected one of direct, fanout, topic, headers or a plugin's x- type",
        ),
        ("exchanges: [{name: x}]", "exchanges[0].type: missing required key"),
        ("exchanges: [{name: '', type: topic}]", "exchanges[0].name: expected a non-empty string, got ''"),
        (
            "exchanges: [{name: amq.topic, type: topic}]",
            "exchanges[0].name: names starting with 'amq.' are the broker's",
        ),
        (
            "exchanges: [{name: x, type: topic}, {name: x, type: fanout}]",
            "exchanges[1].name: duplicate name: exchanges[0] is also called 'x'",
        ),
        (
            "exchanges: [{name: x, type: topic, durabel: true}]",
            "exchanges[0].durabel: unknown key (did you mean 'durable'?)",
        ),
        (
            "exchanges: [{name: x, type: topic, delete_on_end: 1}]",
            "exchanges[0].delete_on_end: expected true or false, got 1",
        ),
        ("exchanges: {name: x, type: topic}", "exchanges: expected a list"),
        ("bindings: [{exchange: ''}]", 'bindings[0].exchange: the default exchange ("") reaches every queue'),
        ("bindings: [{routing_key: a}]", "bindings[0].exchange: missing required key"),
        ("bindings: [{exchange: x, routing_key: 5}]", "bindings[0].routing_key: expected a string, got 5"),
        ("bindings: [{exchange: x, key: a}]", "bindings[0].key: unknown key"),
        (
            "bindings: [{exchange: x, routing_key: a}, {exchange: x, routing_key: a}]",
            "bindings[1]: the same binding as bindings[0]",
        ),
        (
            "exchanges: [{name: h, type: headers}]\nbindings: [{exchange: h, arguments: {x-match: some}}]",
            "bindings[0].arguments.x-match: expected one of all, any, all-with-x, any-with-x, got 'some'",
        ),
    ],
)
def test_bad_exchanges_and_bindings_name_the_field_and_value(tmp_path, extra, expected):
    assert error(tmp_path, scenario(extra=extra + "\n")).startswith(expected)


# ---- a refused declaration, worded for the user


def test_an_existing_queue_with_other_arguments_says_how_to_delete_it():
    exc = BrokerOperationFailed(
        "queue.declare 'orders'",
        406,
        "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'orders' in vhost '/'",
    )
    text = str(refused(exc, "queue", "orders", "x.yaml: queue"))
    assert text.startswith(
        "x.yaml: queue: the broker refused queue.declare 'orders': 406 PRECONDITION_FAILED - "
        "inequivalent arg 'x-max-length'"
    )
    assert "rabbitmqctl delete_queue orders" in text


def test_an_exchange_of_another_type_says_how_to_delete_it():
    exc = BrokerOperationFailed("exchange.declare 'x'", 406, "PRECONDITION_FAILED - inequivalent arg 'type'")
    err = refused(exc, "exchange", "x", "x.yaml: exchanges[0]")
    assert isinstance(err, BrokerOperationFailed) and err.reply_code == 406  # the run exits 2 on it
    assert "rabbitmqadmin delete exchange name=x" in str(err)


def test_an_unknown_plugin_exchange_type_points_at_the_plugins():
    exc = BrokerOperationFailed("exchange.declare 'x'", 503, "COMMAND_INVALID - unknown exchange type 'x-nope'")
    assert "rabbitmq-plugins" in str(refused(exc, "exchange", "x", "x.yaml: exchanges[0]"))


def test_a_missing_exchange_names_the_field_that_uses_it():
    text = str(missing_exchange("legacy.in", "x.yaml: producers[1].exchange"))
    assert text.startswith("x.yaml: producers[1].exchange: exchange 'legacy.in' does not exist on the broker\n")
    assert "exchanges" in text
