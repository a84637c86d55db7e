"""A consumer group's `handler` as the loader reads it (loadgen/scenario/handler.py): the function is
imported when the scenario is loaded, from the scenario's directory first, so a scenario naming one
that is not there fails at `sojourn validate` with the file, the field and the import error (exit
status 2); and a handler excludes what would decide in its place."""

from __future__ import annotations

import pytest

from loadgen.cli import main
from loadgen.scenario import ScenarioError, load_scenario

BASE = "name: s\nqueue: {name: sojourn.unit.handler}\nrun: {duration_s: 5}\nproducers: [{name: p, rate: 10}]\n"


def _write(tmp_path, consumer: str, module: str | None = "def handle(message):\n    return 'ack'\n"):
    if module is not None:
        (tmp_path / "myhandlers_unit.py").write_text(module)
    path = tmp_path / "s.yaml"
    path.write_text(BASE + f"consumers:\n  - {{name: c, {consumer}}}\n")
    return path


def test_the_function_is_imported_from_the_scenarios_directory(tmp_path):
    s = load_scenario(_write(tmp_path, 'handler: {path: "myhandlers_unit:handle", threads: 3}'), env={})
    h = s.consumer("c").handler
    assert (h.path, h.mode, h.threads, h.on_error, h.directory) == (
        "myhandlers_unit:handle",
        "thread",
        3,
        "discard",
        str(tmp_path),
    )
    assert h.concurrency == 3


@pytest.mark.parametrize(
    "consumer, module, expected",
    [
        (
            'handler: {path: "nowhere_module_x:handle"}',
            None,
            "consumers[0].handler.path: can not import 'nowhere_module_x': ModuleNotFoundError",
        ),
        (
            'handler: {path: "myhandlers_unit:missing"}',
            "def handle(m):\n    pass\n",
            "consumers[0].handler.path: module 'myhandlers_unit'",
        ),
        (
            'handler: {path: "myhandlers_unit:handle"}',
            "import json\nraise RuntimeError('no database configured')\n",
            "can not import 'myhandlers_unit': RuntimeError: no database configured",
        ),
        ('handler: {path: "not a path"}', None, 'consumers[0].handler.path: expected "package.module:function"'),
        ('handler: {path: "m:f", mode: forked}', None, "consumers[0].handler.mode: expected one of thread, inline"),
        (
            'processing_ms: 5, handler: {path: "myhandlers_unit:handle"}',
            "def handle(m):\n    pass\n",
            "consumers[0].processing_ms: consumer group 'c' has a handler",
        ),
        (
            'ack_mode: auto, handler: {path: "myhandlers_unit:handle"}',
            "def handle(m):\n    pass\n",
            "consumers[0].ack_mode: a handler needs ack_mode: manual",
        ),
        (
            'outcomes: {requeue: 0.1}, handler: {path: "myhandlers_unit:handle"}',
            "def handle(m):\n    pass\n",
            "consumers[0].outcomes: consumer group 'c' has a handler",
        ),
    ],
)
def test_a_handler_that_can_not_run_is_an_error_naming_the_file_the_field_and_why(tmp_path, consumer, module, expected):
    import sys

    sys.modules.pop("myhandlers_unit", None)  # each case writes its own module under the same name
    path = _write(tmp_path, consumer, module)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, env={})
    assert str(path) in str(err.value) and expected in str(err.value)


def test_validate_exits_2_on_an_import_error(tmp_path, capsys):
    path = _write(tmp_path, 'handler: {path: "nowhere_module_y:handle"}', None)
    assert main(["validate", str(path)]) == 2
    assert "No module named 'nowhere_module_y'" in capsys.readouterr().err
