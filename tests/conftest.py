"""What every test shares: the analysis's local Spark server (analysis.server) of this test session.

A `sojourn` command a test starts analyses on the warm local server, as a user's does, starting one
when none runs. The tests' server lives in a directory of this test session's, on a free port, so
that a user's own server (~/.cache/sojourn/spark, port 15052) is neither used nor disturbed, and it
is stopped when the tests end: nothing of it outlives them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from loadgen.broker.local import free_loopback_port


@pytest.fixture(scope="session", autouse=True)
def spark_server_dir():
    """The test session's server directory (SOJOURN_SPARK_DIR) and port (SOJOURN_SPARK_PORT)."""
    saved = {key: os.environ.get(key) for key in ("SOJOURN_SPARK_DIR", "SOJOURN_SPARK_PORT")}
    with tempfile.TemporaryDirectory(prefix="sojourn-tests-spark-") as directory:
        os.environ["SOJOURN_SPARK_DIR"] = directory
        os.environ["SOJOURN_SPARK_PORT"] = str(free_loopback_port())
        try:
            yield Path(directory)
        finally:
            from analysis import server

            for each in (Path(directory), *Path(directory).glob("master-*")):  # a cluster's too
                server.stop(each)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def shared_server_url() -> str:
    """The Spark Connect URL of the test session's server (SOJOURN_SPARK_DIR, set by
    spark_server_dir), started, unwarmed, if none runs yet."""
    from analysis import server

    directory = server.state_dir()
    return server.url_of(server.ensure(directory), directory)
