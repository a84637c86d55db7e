"""The pika internals loadgen.amqp relies on are checked at import: what is missing is named with
pika's version, and the patching modules fall back to pika's own behaviour (issue 48)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pika
import pika.channel

from loadgen.amqp import cancel, fastio, internals, kstamp


def test_the_installed_pika_has_everything_each_module_relies_on():
    for module in internals.NEEDED:
        assert internals.missing(module) == [], module
    assert fastio.MISSING == [] and kstamp.MISSING == [] and cancel.MISSING == []


def test_a_missing_attribute_is_named_with_pikas_version(monkeypatch, caplog):
    monkeypatch.delattr(pika.channel.Channel, "_on_deliver")
    with caplog.at_level(logging.WARNING, logger="sojourn"):
        gone = internals.check("cancel")
    assert gone == ["pika.channel.Channel._on_deliver"]
    assert f"pika {pika.__version__} lacks: pika.channel.Channel._on_deliver" in caplog.text
    assert "requeued by pika unseen" in caplog.text  # what falls back


def test_an_instance_attribute_counts_when_the_class_assigns_it():
    needed = {"x": (("pika.channel", "Channel", ("_cancelled", "_no_such_attribute")),)}
    assert internals.missing("x", needed) == ["pika.channel.Channel._no_such_attribute"]
    gone = {"x": (("pika.channel", "NoSuchClass", ("a",)), ("pika.no_such_module", "C", ("a",)))}
    assert internals.missing("x", gone) == ["pika.channel.NoSuchClass", "pika.no_such_module.C"]


def test_cancel_falls_back_to_pika_when_internals_are_missing(monkeypatch):
    channel = SimpleNamespace(_on_deliver=lambda *a: None, _cancelled=set())
    original = channel._on_deliver
    monkeypatch.setattr(cancel, "MISSING", ["pika.channel.Channel._cancelled"])
    assert cancel.keep_deliveries_across_cancel(channel, lambda *a: None) is False
    assert channel._on_deliver is original
    monkeypatch.setattr(cancel, "MISSING", [])
    assert cancel.keep_deliveries_across_cancel(SimpleNamespace(_on_deliver=original), lambda *a: None) is False
    assert cancel.keep_deliveries_across_cancel(channel, lambda *a: None) is True
    assert channel._on_deliver is not original


def test_fastio_and_kstamp_fall_back_when_internals_are_missing(monkeypatch):
    monkeypatch.setattr(fastio, "MISSING", ["x"])
    assert fastio.tune(SimpleNamespace()) is False
    monkeypatch.setattr(kstamp, "MISSING", ["pika.X._consume"])
    monkeypatch.setattr(kstamp, "platform_reason", lambda: None)
    reason = kstamp.enable(SimpleNamespace())
    assert isinstance(reason, str) and f"pika {pika.__version__}" in reason and "pika.X._consume" in reason
