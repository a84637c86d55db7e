"""The driver JVM's options (analysis.session.jvm_settings) against the Java Spark starts: the suite's
runs are small, so the larger traces' options are never otherwise given to a JVM here."""

from __future__ import annotations

import subprocess

import pytest

from analysis.session import java_binary, jvm_settings

GIB = 1 << 30


def _java() -> str:
    java = java_binary()
    if java is None:
        pytest.fail("no Java found: Spark needs one")
    return java


@pytest.mark.parametrize("rows", [12_000, 2_002_716, 20_026_291, 60_000_000])
def test_the_installed_java_starts_with_the_options_given_for_each_size_of_trace(rows):
    options = jvm_settings(rows * 37, rows, 24 * GIB)["spark.driver.extraJavaOptions"].split()
    # -XX:+PrintFlagsFinal lists the values the JVM took; an unknown or malformed option stops it
    done = subprocess.run([_java(), *options, "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    taken = {line.split()[1]: line.split()[3] for line in done.stdout.splitlines() if line.count("=") == 1}
    for option in options:
        name, _, value = option.removeprefix("-XX:").partition("=")
        if value:
            assert taken[name] == value, option
        else:  # -XX:+Flag
            assert taken[name.lstrip("+-")] == ("true" if name.startswith("+") else "false"), option
