"""A consumer group's `handler`: the user's own Python function as the processing of each delivery
(docs/handlers.md). The spec and its check, which imports the function so that a scenario naming
one that is not there fails at `sojourn validate`, naming the file, the field and the import error.

The module is imported with `directory` (default: the scenario file's directory) first on
sys.path, then PYTHONPATH's and the installed packages; a resolved scenario (run.json) records the
directory as an absolute path. Nothing here calls the function: loadgen/users/handler.py does.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadgen.scenario.checks import Check, choice, integer, mapping_fields, text
from loadgen.scenario.errors import Invalid, show
from loadgen.scenario.fields import yaml

__all__ = ["HandlerSpec", "handler", "resolve", "HANDLER_EXAMPLE"]

HANDLER_EXAMPLE = '{path: "orders.handlers:handle", mode: thread, threads: 4}'
_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _path(value: Any) -> str:
    if not isinstance(value, str) or not _PATH.match(value):
        raise Invalid(
            'expected "package.module:function" (a module importable from the scenario\'s directory '
            f"or PYTHONPATH), got {show(value)}"
        )
    return value


@dataclass(frozen=True)
class HandlerSpec:
    """The function at `path` ("package.module:function") processes each delivery. `mode`: `thread`
    calls it in a pool of `threads` threads per consumer, so blocking code never blocks the I/O loop,
    and that many deliveries are processed at once; `inline` calls it in the consumer's greenlet, for
    code that only waits through gevent (one delivery at a time). `on_error`: how a delivery the
    function raised on is settled: `discard` (nack without requeue, the default: a poison message
    can not loop) or `requeue`. `directory`: searched first for the module."""

    path: str = field(metadata=yaml(_path))
    mode: str = field(default="thread", metadata=yaml(choice("thread", "inline")))
    threads: int = field(default=1, metadata=yaml(integer(1, 256)))
    on_error: str = field(default="discard", metadata=yaml(choice("discard", "requeue")))
    directory: str | None = field(default=None, metadata=yaml(text(nullable=True)))

    @property
    def concurrency(self) -> int:
        """How many deliveries a consumer processes at once."""
        return self.threads if self.mode == "thread" else 1


def resolve(spec: HandlerSpec) -> Callable[[Any], Any]:
    """The function `spec.path` names, imported with `spec.directory` first on sys.path. Raises
    Invalid naming the import error (the module's own exception, with its type) or what is missing."""
    module_name, _, attribute = spec.path.partition(":")
    if spec.directory and spec.directory not in sys.path:
        sys.path.insert(0, spec.directory)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any error of the user's module is its import error
        raise Invalid(
            f"can not import {module_name!r}: {type(err).__name__}: {err} (searched {spec.directory or 'nothing'} "
            "first, then PYTHONPATH and the installed packages)"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise Invalid(f"module {module_name!r} ({getattr(target, '__file__', '?')}) has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise Invalid(f"{spec.path} is a {type(target).__name__}, not a function")
    function: Callable[[Any], Any] = target
    return function


def handler(scenario_dir: str) -> Check:
    """The check for `handler`: a mapping whose function imports (relative to `scenario_dir`
    unless `directory` says otherwise), or null for simulated processing."""

    def check(value: Any) -> HandlerSpec | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = {"path": value}
        if not isinstance(value, dict):
            raise Invalid(f"expected a mapping such as {HANDLER_EXAMPLE}, or null, got {show(value)}")
        spec = HandlerSpec(**mapping_fields(value, HandlerSpec))
        directory = spec.directory or scenario_dir
        if not os.path.isabs(directory):
            directory = os.path.normpath(os.path.join(scenario_dir, directory))
        spec = HandlerSpec(spec.path, spec.mode, spec.threads, spec.on_error, directory)
        try:
            resolve(spec)
        except Invalid as bad:
            raise Invalid(bad.message, spec.path, "path") from None
        return spec

    return check
