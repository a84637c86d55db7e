"""The pure parts of the analysis's server and of choosing where an analysis runs."""

from __future__ import annotations

import argparse

import pytest

from analysis import server
from analysis.session import _local_cores
from loadgen.commands.common import CliError, spark_choice

GIB = 1 << 30


def test_the_heap_is_half_the_machine_and_at_least_a_gibibyte():
    assert server.heap_mib(24 * GIB) == 12 * 1024
    assert server.heap_mib(1 * GIB) == 1024  # half would be 512 MiB


def test_each_master_has_a_directory_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("SOJOURN_SPARK_DIR", str(tmp_path))
    local = server.state_dir()
    cluster = server.state_dir("spark://a:7077")
    assert local == tmp_path
    assert cluster.parent == tmp_path and cluster.name.startswith("master-")
    assert server.state_dir("spark://b:7077") != cluster
    assert server.state_dir("spark://a:7077") == cluster  # the same master, the same server


@pytest.mark.parametrize("text", ["fifteen", "0", "-3"])
def test_a_bad_port_or_idle_time_in_the_environment_is_named(monkeypatch, text):
    monkeypatch.setenv("SOJOURN_SPARK_PORT", text)
    with pytest.raises(server.ServerError, match=f"SOJOURN_SPARK_PORT={text!r}"):
        server.port_from_env()
    monkeypatch.setenv("SOJOURN_SPARK_IDLE_MINUTES", text)
    with pytest.raises(server.ServerError, match="SOJOURN_SPARK_IDLE_MINUTES"):
        server.idle_from_env()


def test_no_server_running_has_no_status(tmp_path):
    assert server.status(tmp_path) is None
    (tmp_path / "server.json").write_text('{"pid": 999999999, "jvm_pid": null}')  # not a whole state
    assert server.status(tmp_path) is None


@pytest.mark.parametrize(("master", "cores"), [("local[3]", 3), ("local", 1), ("local[2,4]", 2)])
def test_a_local_master_s_task_slots(master, cores):
    assert _local_cores(master) == cores


def _args(remote=None, master=None, server=None):
    return argparse.Namespace(spark_remote=remote, spark_master=master, spark_server=server)


def test_remote_excludes_master_and_no_server():
    assert spark_choice(_args(master="spark://h:7077")) == {"remote": None, "master": "spark://h:7077", "server": None}
    assert spark_choice(_args(remote="sc://h:15002"))["remote"] == "sc://h:15002"
    for args in (_args(remote="sc://h:15002", master="spark://h:7077"), _args(remote="sc://h:15002", server=False)):
        with pytest.raises(CliError) as raised:
            spark_choice(args)
        assert raised.value.code == 2 and "--remote sc://h:15002" in str(raised.value)


def test_the_warm_up_goes_on_while_each_analysis_is_clearly_faster_than_the_last():
    assert not server.warmed([])
    assert not server.warmed([8.8])  # one analysis left the next real one paying the JIT
    assert not server.warmed([8.8, 2.9])  # 0.33 of the one before: still compiling
    assert not server.warmed([8.8, 2.9, 2.3])  # 0.79
    assert server.warmed([8.8, 2.9, 2.3, 2.2])  # 0.96: settled
    assert server.warmed([3.0, 3.3])  # slower: nothing left to gain


def test_the_warm_up_ends_after_its_most_analyses_even_if_each_is_faster():
    falling = [10.0 * 0.5**i for i in range(server.WARM_ANALYSES)]
    assert not server.warmed(falling[:-1])
    assert server.warmed(falling)
