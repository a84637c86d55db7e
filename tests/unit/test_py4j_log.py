"""analysis.py4j_log: py4j's records (logged on the root logger with logging's own functions) go to
the JVM's log file; any other record is left as Python would leave it."""

import contextlib
import logging
import os

import py4j.java_gateway

from analysis.py4j_log import stop_logging, to_log_file


@contextlib.contextmanager
def root_alone():
    """The root logger without pytest's handlers (added around each test's call), as in the `sojourn`
    command; put back after."""
    root = logging.getLogger()
    kept = root.handlers[:]
    root.handlers.clear()
    try:
        yield root
    finally:
        stop_logging()
        root.handlers[:] = kept


def _as_py4j(source: str) -> None:
    """Run `source` as if it were a line of py4j's java_gateway.py (its records carry that path)."""
    exec(compile(source, os.path.abspath(py4j.java_gateway.__file__), "exec"), {"logging": logging})


def test_py4js_exception_goes_to_the_log_file_and_not_to_the_terminal(tmp_path, capsys):
    with root_alone() as root:
        log = tmp_path / "spark.log"
        to_log_file(log)
        _as_py4j(
            "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n"
            "    logging.exception('KeyboardInterrupt while sending command.')"
        )
        assert capsys.readouterr().err == ""
        text = log.read_text()
        assert "ERROR py4j: KeyboardInterrupt while sending command." in text and "Traceback" in text
        assert len(root.handlers) == 1  # logging.exception found a handler: no basicConfig to stderr


def test_without_it_py4js_exception_reaches_the_terminal(capsys):
    with root_alone() as root:
        _as_py4j("logging.exception('Exception while sending command.')")
        assert "ERROR:root:Exception while sending command." in capsys.readouterr().err
        root.handlers.clear()  # the handler logging.basicConfig added


def test_other_records_reach_the_terminal_as_without_it(tmp_path, capsys):
    with root_alone():
        log = tmp_path / "spark.log"
        to_log_file(log)
        logging.getLogger("sojourn.somewhere").warning("a warning of ours")
        logging.getLogger("sojourn.somewhere").info("a detail of ours")  # below the root's level: nowhere
        assert capsys.readouterr().err == "a warning of ours\n"  # logging.lastResort's output
        assert not log.exists() or "of ours" not in log.read_text()


def test_stop_logging_removes_the_handler_and_a_second_file_replaces_the_first(tmp_path):
    with root_alone() as root:
        to_log_file(tmp_path / "first.log")
        to_log_file(tmp_path / "second.log")
        assert len(root.handlers) == 1
        _as_py4j("logging.warning('to the second')")
        assert "to the second" in (tmp_path / "second.log").read_text()
        assert not (tmp_path / "first.log").exists()
        stop_logging()
        assert root.handlers == []
