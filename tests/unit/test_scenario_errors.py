"""Invalid scenarios: each error names the file, the YAML path, the bad value and the close match."""

from __future__ import annotations

import pathlib
import pickle

import pytest

from loadgen.scenario import ScenarioError, load_scenario

HEAD = "name: t\nqueue: {name: q}\nrun: {duration_s: 60}\n"
PRODUCER = "producers:\n  - name: main\n    rate: 10\n"
CONSUMER = "consumers:\n  - name: main\n"


def error_for(tmp_path: pathlib.Path, text: str, overrides=(), env=None) -> ScenarioError:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides, env={} if env is None else env)
    return info.value


def message(tmp_path: pathlib.Path, text: str, overrides=(), env=None) -> str:
    """The error text after the '<file>: ' prefix, which every message must start with."""
    err = str(error_for(tmp_path, text, overrides, env))
    prefix = f"{tmp_path / 'x.yaml'}: "
    assert err.startswith(prefix)
    return err[len(prefix) :]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            HEAD + PRODUCER + CONSUMER + "    prefech: 3\n",
            "consumers[0].prefech: unknown key (did you mean 'prefetch'?)",
        ),
        (HEAD + "runn: {}\n", "runn: unknown key (did you mean 'run'?)"),
        (
            HEAD + "broker: {url: 'amqp://h/', heartbeat: 3}\n",
            "broker.heartbeat: unknown key (did you mean 'heartbeat_s'?)",
        ),
        (
            HEAD + "zzz: 1\n",
            "zzz: unknown key (expected one of: name, description, broker, queue, run, "
            "producers, consumers, timeline, slo, network, exchanges, bindings)",
        ),
        (
            HEAD + CONSUMER + "    processing_ms: {distribution: exponential, mean: 4}\n",
            "consumers[0].processing_ms.mean: unknown key for distribution exponential (did you mean 'mean_ms'?)",
        ),
    ],
)
def test_unknown_keys_are_rejected_at_every_level_with_a_close_match(tmp_path, text, expected):
    assert message(tmp_path, text) == expected


def test_queue_arguments_accept_any_key(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("name: t\nqueue: {name: q, arguments: {x-anything-goes: 1}}\nrun: {duration_s: 1}\n")
    assert dict(load_scenario(path, env={}).queue.arguments) == {"x-anything-goes": 1}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("queue: {name: q}\nrun: {duration_s: 60}\n", "name: missing required key"),
        ("name: t\nrun: {duration_s: 60}\n", "queue: missing required key"),
        ("name: t\nqueue: {name: q}\nrun: {warmup_s: 1}\n", "run.duration_s: missing required key"),
        (HEAD + "producers:\n  - name: main\n", "producers[0].rate: missing required key"),
        (HEAD + "consumers:\n  - count: 2\n", "consumers[0].name: missing required key"),
        (
            HEAD + CONSUMER + "    processing_ms: {mean_ms: 4}\n",
            "consumers[0].processing_ms.distribution: missing required key",
        ),
        (
            HEAD + CONSUMER + "    processing_ms: {distribution: lognormal, median_ms: 4}\n",
            "consumers[0].processing_ms.sigma: missing required key",
        ),
    ],
)
def test_missing_required_keys_are_named(tmp_path, text, expected):
    assert message(tmp_path, text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            HEAD + CONSUMER + "    prefetch: -3\n",
            "consumers[0].prefetch: expected an integer between 0 and 65535, got -3",
        ),
        (
            HEAD + CONSUMER + "    prefetch: 70000\n",
            "consumers[0].prefetch: expected an integer between 0 and 65535, got 70000",
        ),
        (HEAD + CONSUMER + "    count: -3\n", "consumers[0].count: expected an integer >= 0, got -3"),
        (HEAD + CONSUMER + "    count: 1.5\n", "consumers[0].count: expected an integer >= 0, got 1.5"),
        (
            HEAD + "producers:\n  - {name: main, rate: 10, arrival: poison}\n",
            "producers[0].arrival: expected one of constant, poisson, got 'poison' (did you mean 'poisson'?)",
        ),
        (HEAD + "producers:\n  - {name: main, rate: yes}\n", "producers[0].rate: expected a number >= 0, got true"),
        (HEAD + "producers:\n  - {name: main, rate: -1}\n", "producers[0].rate: expected a number >= 0, got -1"),
        (HEAD + "producers:\n  - {name: main, rate: .nan}\n", "producers[0].rate: expected a number >= 0, got nan"),
        (
            HEAD + "producers:\n  - {name: main, rate: '200'}\n",
            "producers[0].rate: expected a number >= 0, got '200' "
            "(that is text, not a number: drop the quotes; write 1e3 as 1000 or 1.0e+3)",
        ),
        (
            HEAD + "producers:\n  - {name: main, rate: 10, size_bytes: 134217729}\n",
            "producers[0].size_bytes: expected an integer between 0 and 134217728, got 134217729",
        ),
        (
            HEAD + "producers:\n  - {name: main, rate: 10, confirm_window: 0}\n",
            "producers[0].confirm_window: expected an integer >= 1, got 0",
        ),
        (
            HEAD + "producers:\n  - {name: main, rate: 10, confirms: 'yes'}\n",
            "producers[0].confirms: expected true or false, got 'yes'",
        ),
        (
            HEAD + "producers:\n  - {name: 'main group', rate: 10}\n",
            "producers[0].name: expected a name made of letters, digits, '.', '_' or '-', got 'main group'",
        ),
        (
            HEAD + CONSUMER + "    ack_mode: automatic\n",
            "consumers[0].ack_mode: expected one of manual, auto, got 'automatic' (did you mean 'auto'?)",
        ),
        (HEAD + CONSUMER + "    processing_ms: -1\n", "consumers[0].processing_ms: expected a number >= 0, got -1"),
        (
            HEAD + CONSUMER + "    processing_ms: {distribution: lognormal, median_ms: 4, sigma: 0}\n",
            "consumers[0].processing_ms.sigma: expected a number > 0, got 0",
        ),
        (
            HEAD + CONSUMER + "    processing_ms: {distribution: uniform, min_ms: 6, max_ms: 2}\n",
            "consumers[0].processing_ms.max_ms: expected max_ms >= min_ms (6), got 2",
        ),
        (
            HEAD + CONSUMER + "    processing_ms: {distribution: gaussian, mean_ms: 4}\n",
            "consumers[0].processing_ms.distribution: "
            "expected one of fixed, exponential, lognormal, uniform, recorded, got 'gaussian'",
        ),
        ("name: t\nqueue: {name: q}\nrun: {duration_s: 0}\n", "run.duration_s: expected a number > 0, got 0"),
        (
            "name: t\nqueue: {name: q}\nrun: {duration_s: 10, warmup_s: 10}\n",
            "run.warmup_s: expected a number >= 0 and < run.duration_s (10), got 10",
        ),
        ("name: t\nqueue: {name: ''}\nrun: {duration_s: 10}\n", "queue.name: expected a non-empty string, got ''"),
        (
            "name: t\nqueue: {name: q, arguments: {x-dead-letter: [a]}}\nrun: {duration_s: 10}\n",
            "queue.arguments.x-dead-letter: expected a string, number or boolean, got ['a']",
        ),
        (
            "name: t\nqueue: {name: q, durable: 1}\nrun: {duration_s: 10}\n",
            "queue.durable: expected true or false, got 1",
        ),
        (HEAD + "broker: {connect_timeout_s: 0}\n", "broker.connect_timeout_s: expected a number > 0, got 0"),
        (
            HEAD + "slo: ['sojourn_ms.p99 <']\n",
            "slo[0]: 'sojourn_ms.p99 <' is not of the form '<metric> <op> <number>' with op one of "
            "< <= > >= == != (e.g. 'sojourn_ms.p99 < 200')",
        ),
        (HEAD + "producers: {name: main}\n", "producers: expected a list, got {'name': 'main'}"),
        (HEAD + "run: 5\n".replace("run", "broker"), "broker: expected a mapping, got 5"),
    ],
)
def test_bad_values_are_reported_with_the_expected_range(tmp_path, text, expected):
    assert message(tmp_path, text) == expected


def test_error_fields_are_structured(tmp_path):
    err = error_for(tmp_path, HEAD + CONSUMER + "    prefetch: -3\n")
    assert (err.path, err.yaml_path, err.value) == (str(tmp_path / "x.yaml"), "consumers[0].prefetch", -3)
    assert err.message == "expected an integer between 0 and 65535, got -3"
    assert err.override is None


def test_errors_survive_pickling_for_worker_processes(tmp_path):
    err = error_for(tmp_path, HEAD + CONSUMER + "    prefetch: -3\n")
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_duplicate_group_names_are_rejected(tmp_path):
    text = HEAD + "consumers:\n  - name: main\n  - name: main\n"
    assert message(tmp_path, text) == "consumers[1].name: duplicate name: consumers[0] is also called 'main'"


def test_a_producer_and_a_consumer_may_share_a_name(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + PRODUCER + CONSUMER)
    assert load_scenario(path, env={}).consumer("main").name == "main"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://user:hunter2@h/", "'http://user:****@h/'"),
        ("amqp://user:hunter2@h:notaport/", "'amqp://user:****@h:notaport/'"),
        ("amqp:///vhost", "'amqp:///vhost'"),
    ],
)
def test_bad_broker_urls_are_rejected_without_showing_the_password(tmp_path, url, shown):
    text = message(tmp_path, HEAD + f"broker: {{url: '{url}'}}\n")
    assert text.startswith("broker.url: expected an amqp:// or amqps:// URL with a host")
    assert shown in text
    assert "hunter2" not in text


def test_a_bad_url_from_the_environment_says_where_it_came_from(tmp_path):
    text = message(tmp_path, HEAD, env={"SOJOURN_AMQP_URL": "localhost:5672"})
    assert text.startswith("broker.url: expected an amqp://")
    assert text.endswith("(from $SOJOURN_AMQP_URL)")


def test_bad_yaml_syntax_reports_the_line(tmp_path):
    text = message(tmp_path, "name: t\nqueue:\n  name: [q\nrun: {duration_s: 1}\n")
    assert text.startswith("line 4, column 4: invalid YAML:")


def test_duplicate_yaml_keys_are_rejected_with_the_line(tmp_path):
    text = message(tmp_path, HEAD + CONSUMER + "    prefetch: 10\n    prefetch: 20\n")
    assert text.startswith("line 7, column 5: invalid YAML:")
    assert "duplicate key 'prefetch'" in text


def test_a_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "nope.yaml", env={})
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: no such file"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "the file is empty; a scenario needs at least name, queue and run"),
        ("- a\n- b\n", "expected a mapping at the top level, got ['a', 'b']"),
    ],
)
def test_a_file_that_is_not_a_mapping_is_rejected(tmp_path, text, expected):
    assert message(tmp_path, text) == expected


def test_loading_never_prints(tmp_path, capsys):
    error_for(tmp_path, HEAD + CONSUMER + "    prefech: 3\n")
    assert capsys.readouterr() == ("", "")
