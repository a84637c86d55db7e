"""The Spark driver's class archive (analysis.session): which JVM options a new analysis gets."""

from __future__ import annotations

import os
import time

import pytest

from analysis import session


@pytest.fixture
def install(tmp_path, monkeypatch):
    """A Java install of its own (JAVA_HOME) and an empty cache directory."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SOJOURN_SPARK_CDS", raising=False)
    return java


def _options(archive) -> list[str]:
    settings = session.jvm_settings(10_000, 1_000, 8 << 30, archive)
    return [o for o in settings["spark.driver.extraJavaOptions"].split() if o.startswith("-XX:") and "Archive" in o]


def test_without_an_archive_the_jvm_writes_one_at_exit_to_a_file_of_this_process(install, tmp_path):
    archive = session.class_archive()
    assert archive.parent == tmp_path / "cache" / "sojourn" and archive.name.endswith(".jsa")
    assert not archive.exists()
    assert _options(archive) == [f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp"]


def test_an_archive_that_exists_is_started_from(install):
    archive = session.class_archive()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert _options(archive) == [f"-XX:SharedArchiveFile={archive}"]


def test_while_another_process_writes_the_archive_a_second_one_is_not_written(install):
    archive = session.class_archive()
    archive.parent.mkdir(parents=True)
    other = archive.with_name(f"{archive.name}.999999.tmp")
    other.write_bytes(b"being written")
    assert _options(archive) == []
    assert other.exists()


def test_a_pending_archive_left_for_ten_minutes_is_removed_and_written_again(install):
    archive = session.class_archive()
    archive.parent.mkdir(parents=True)
    other = archive.with_name(f"{archive.name}.999999.tmp")
    other.write_bytes(b"abandoned")
    old = time.time() - 11 * 60
    os.utime(other, (old, old))
    assert _options(archive) == [f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp"]
    assert not other.exists()


def test_a_new_java_install_gets_an_archive_of_its_own(install):
    before = session.class_archive()
    later = time.time() + 60
    os.utime(install, (later, later))
    assert session.class_archive() != before


def test_pyspark_installed_again_at_the_same_path_gets_an_archive_of_its_own(install, tmp_path, monkeypatch):
    # the JVM rejects an archive whose class path jars differ in size or time from those it was written with
    import pyspark

    package = tmp_path / "site-packages" / "pyspark"
    (package / "jars").mkdir(parents=True)
    jar = package / "jars" / "spark-core_2.13-4.0.1.jar"
    jar.write_bytes(b"classes")
    monkeypatch.setattr(pyspark, "__file__", str(package / "__init__.py"))
    before = session.class_archive()
    assert session.class_archive() == before  # the same install: the same archive
    later = time.time() + 60
    os.utime(jar, (later, later))  # the same jar, written again
    assert session.class_archive() != before


def test_archives_can_be_turned_off(install, monkeypatch):
    monkeypatch.setenv("SOJOURN_SPARK_CDS", "0")
    assert session.class_archive() is None
    assert _options(None) == []


def test_an_archive_started_from_is_marked_as_used_now(install):
    archive = session.class_archive()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    long_ago = time.time() - 30 * 86400
    os.utime(archive, (long_ago, long_ago))
    _options(archive)
    assert time.time() - archive.stat().st_mtime < 60


def test_a_new_archive_in_place_leaves_the_most_recently_used_others_and_removes_the_rest(install):
    archive = session.class_archive()
    cache = archive.parent
    cache.mkdir(parents=True)
    now = time.time()
    others = []
    for age_days in (1, 2, 3, 4, 5):  # five other installs' archives, the first used a day ago
        other = cache / f"spark-classes-{age_days:016d}.jsa"
        other.write_bytes(b"old archive")
        os.utime(other, (now - age_days * 86400, now - age_days * 86400))
        others.append(other)
    being_written = cache / f"spark-classes-{9:016d}.jsa.4242.tmp"  # another JVM's, at its exit
    being_written.write_bytes(b"partial")
    unrelated = cache / "notes.txt"
    unrelated.write_text("mine")
    pending = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    pending.write_bytes(b"new archive")

    session.put_in_place(pending, archive)

    assert archive.read_bytes() == b"new archive" and not pending.exists()
    # the new one and the two most recently used others: three in all
    assert session.KEPT_ARCHIVES == 3
    assert sorted(cache.glob("*.jsa")) == sorted([archive, others[0], others[1]])
    assert being_written.exists() and unrelated.exists()


def test_with_few_archives_none_is_removed(install):
    archive = session.class_archive()
    archive.parent.mkdir(parents=True)
    other = archive.parent / f"spark-classes-{1:016d}.jsa"
    other.write_bytes(b"old archive")
    pending = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    pending.write_bytes(b"new archive")
    session.put_in_place(pending, archive)
    assert sorted(archive.parent.glob("*.jsa")) == sorted([archive, other])
