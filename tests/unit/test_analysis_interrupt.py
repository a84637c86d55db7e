"""Ctrl-C during an analysis in the command's own Spark reaches the JVM too: pyspark then tries to
cancel the JVM's jobs on the way out and fails with a py4j error. That is an interrupt (exit 130),
not a failed analysis (exit 5); a py4j error with no interrupt behind it still is one."""

from __future__ import annotations

import pytest

from loadgen.commands.common import EXIT_ANALYSIS, CliError, analysis_failures


class Py4JError(Exception):
    pass


Py4JError.__module__ = "py4j.protocol"


def _cancel_failing_after_ctrl_c() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise Py4JError("Gateway must be connected to send cancel cmd.")  # noqa: B904 - as pyspark does


def test_a_py4j_error_raised_while_ctrl_c_was_handled_is_an_interrupt(tmp_path):
    with pytest.raises(KeyboardInterrupt), analysis_failures(str(tmp_path / "spark.log")):
        _cancel_failing_after_ctrl_c()


def test_a_py4j_error_without_an_interrupt_is_a_failed_analysis(tmp_path):
    with pytest.raises(CliError) as info, analysis_failures(str(tmp_path / "spark.log")):
        raise Py4JError("An error occurred while calling o42.collectToPython")
    assert info.value.code == EXIT_ANALYSIS and "the Spark analysis failed" in str(info.value)
