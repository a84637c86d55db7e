"""Dead-letter capture's pure parts: what it binds, what it warns about, and the row it writes."""

from types import SimpleNamespace

from loadgen.run.deadletter import capture_plan, capture_warnings, dead_letter_row
from tests.unit.scenario_files import load

BASE = """
name: dl
queue:
  name: q
  arguments: {ARGS}
run:
  duration_s: 5
producers:
  - name: a
    rate: 1
    routing_key: ka
  - name: b
    rate: 1
    routing_key: kb
    confirms: {CONFIRMS}
consumers:
  - name: c
"""


def _scenario(tmp_path, args: str, confirms: str = "true"):
    return load(tmp_path, BASE.replace("{ARGS}", args).replace("{CONFIRMS}", confirms))


def test_without_a_dead_letter_exchange_there_is_nothing_to_capture(tmp_path):
    assert capture_plan(_scenario(tmp_path, "{x-max-length: 5}")) is None


def test_the_capture_queue_is_bound_for_any_exchange_type_with_the_producers_keys(tmp_path):
    plan = capture_plan(_scenario(tmp_path, "{x-dead-letter-exchange: dlx}"))
    assert plan.exchange == "dlx" and plan.queue == "sojourn.q.dead-letters" and plan.source_queue == "q"
    assert plan.binding_keys == ("#", "ka", "kb", "")


def test_a_dead_letter_routing_key_replaces_the_producers_keys(tmp_path):
    plan = capture_plan(_scenario(tmp_path, "{x-dead-letter-exchange: dlx, x-dead-letter-routing-key: dead}"))
    assert plan.binding_keys == ("#", "dead", "")


def test_the_default_exchange_can_not_be_captured_and_says_so(tmp_path):
    scenario = _scenario(tmp_path, '{x-dead-letter-exchange: "", x-message-ttl: 100}')
    assert capture_plan(scenario) is None
    (warning,) = capture_warnings(scenario)
    assert "default exchange" in warning


def test_discarding_arguments_without_a_dead_letter_exchange_warn_that_drops_are_unaccounted(tmp_path):
    (warning,) = capture_warnings(_scenario(tmp_path, "{x-max-length: 5, x-message-ttl: 100}"))
    assert "x-max-length, x-message-ttl without x-dead-letter-exchange" in warning
    assert "unaccounted" in warning


def test_reject_publish_needs_no_dead_letter_exchange_but_needs_confirms(tmp_path):
    assert capture_warnings(_scenario(tmp_path, "{x-max-length: 5, x-overflow: reject-publish}")) == []
    (warning,) = capture_warnings(_scenario(tmp_path, "{x-max-length: 5, x-overflow: reject-publish}", "false"))
    assert "producers b publish without confirms" in warning


def test_a_captured_message_becomes_a_row_with_the_death_in_the_runs_queue():
    method = SimpleNamespace(exchange="dlx", routing_key="q")
    props = SimpleNamespace(
        headers={
            "sojourn-id": b"run:p/0:7",
            "x-death": [
                {"queue": "elsewhere", "reason": "maxlen", "count": 1},  # it died again after leaving q
                {"queue": b"q", "reason": b"expired", "count": 2, "exchange": ""},
            ],
        }
    )
    assert dead_letter_row(method, props, 123, "q") == ("run:p/0:7", "q", "expired", 2, 123, "dlx", "q")


def test_a_message_that_was_not_dead_lettered_from_the_runs_queue_is_not_recorded():
    method = SimpleNamespace(exchange="dlx", routing_key="q")
    other_queue = SimpleNamespace(headers={"x-death": [{"queue": "other", "reason": "expired", "count": 1}]})
    assert dead_letter_row(method, other_queue, 1, "q") is None  # a queue sharing the DLX
    assert dead_letter_row(method, SimpleNamespace(headers={"sojourn-id": "x"}), 1, "q") is None
    assert dead_letter_row(method, SimpleNamespace(headers=None), 1, "q") is None
