"""Value checks and the mapping reader shared by every part of the scenario loader.

A check takes a raw YAML value and returns it validated (converted where needed) or raises
`Invalid`; `Reader` walks one YAML mapping, rejecting unknown keys and locating every error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

from loadgen.scenario.errors import Invalid, ScenarioError, did_you_mean, join_path, located, show
from loadgen.scenario.fields import REQUIRED, declared, layout

__all__ = [
    "Check",
    "REQUIRED",
    "Reader",
    "fail",
    "integer",
    "number",
    "optional_number",
    "boolean",
    "choice",
    "identifier",
    "amqp_name",
    "SHORT_STRING_BYTES",
    "MAX_SIZE_BYTES",
    "text",
    "sub",
    "known_keys",
    "mapping_fields",
]

Check = Callable[[Any], Any]

_NAME = re.compile(r"[A-Za-z0-9._-]+\Z")


def fail(source: str, yaml_path: str, value: Any, message: str) -> NoReturn:
    raise ScenarioError(source, yaml_path, value, message)


def _hint(value: Any) -> str:
    """Why a number may have arrived as text: quoted, or PyYAML reading `1e3` as a string."""
    numeric = isinstance(value, str) and re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", value)
    return " (that is text, not a number: drop the quotes; write 1e3 as 1000 or 1.0e+3)" if numeric else ""


def integer(low: int, high: int | None = None) -> Check:
    wanted = f"an integer >= {low}" if high is None else f"an integer between {low} and {high}"

    def check(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
            raise Invalid(f"expected {wanted}, got {show(value)}{_hint(value)}")
        return value

    return check


def number(low: float, strict: bool = False) -> Callable[[Any], float]:
    wanted = f"a number {'>' if strict else '>='} {low:g}"

    def check(value: Any) -> float:
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < low
            or (strict and value == low)
        ):
            raise Invalid(f"expected {wanted}, got {show(value)}{_hint(value)}")
        return float(value)

    return check


def optional_number(low: float, strict: bool = False, null_means: str = "") -> Check:
    """Like `number`, but null is allowed (and returned as None); `null_means` explains it."""
    wanted = f"a number {'>' if strict else '>='} {low:g} or null{f' ({null_means})' if null_means else ''}"
    inner = number(low, strict)

    def check(value: Any) -> float | None:
        if value is None:
            return None
        try:
            return inner(value)
        except Invalid:
            raise Invalid(f"expected {wanted}, got {show(value)}{_hint(value)}") from None

    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {show(value)}")
    return value


def choice(*options: str) -> Check:
    def check(value: Any) -> str:
        if value not in options or not isinstance(value, str):
            raise Invalid(f"expected one of {', '.join(options)}, got {show(value)}{did_you_mean(value, options)}")
        return value

    return check


MAX_SIZE_BYTES = 128 * 1024 * 1024
"""The largest message body a scenario or a replay file may ask for (RabbitMQ's own default limit)."""

SHORT_STRING_BYTES = 255
"""AMQP 0-9-1's short string (queue, exchange and consumer names, routing keys): at most 255 bytes."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _too_long(value: str) -> str:
    return f"{len(value.encode('utf-8')):,} bytes of UTF-8 (AMQP allows {SHORT_STRING_BYTES} in a name)"


def identifier(value: Any) -> str:
    """A scenario, group or phase name (part of the AMQP names sojourn derives from it)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise Invalid(f"expected a name made of letters, digits, '.', '_' or '-', got {show(value)}")
    if len(value) > SHORT_STRING_BYTES:
        raise Invalid(f"expected a name of at most {SHORT_STRING_BYTES} characters, got {_too_long(value)}")
    return value


def amqp_name(nonempty: bool = False, nullable: bool = False) -> Check:
    """A queue or exchange name or a routing key: a string the broker takes as an AMQP short
    string, at most 255 bytes of UTF-8, without control characters."""

    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        if not isinstance(value, str) or (nonempty and not value):
            raise Invalid(f"expected a {'non-empty ' if nonempty else ''}string, got {show(value)}")
        if len(value.encode("utf-8")) > SHORT_STRING_BYTES:
            raise Invalid(f"expected at most {SHORT_STRING_BYTES} bytes, got {_too_long(value)}")
        control = _CONTROL.search(value)
        if control:
            raise Invalid(
                f"expected no control characters, got {show(value)} (character {ord(control.group()):#04x} at "
                f"position {control.start()})"
            )
        return value

    return check


def text(nonempty: bool = False, nullable: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        if not isinstance(value, str) or (nonempty and not value):
            raise Invalid(f"expected a {'non-empty ' if nonempty else ''}string, got {show(value)}")
        return value

    return check


def sub(mapping: dict[Any, Any], key: Any, check: Check) -> Any:
    """`check(mapping[key])`, an error located at `key` inside the mapping."""
    try:
        return check(mapping[key])
    except Invalid as bad:
        raise bad.within(key, mapping[key]) from None


def known_keys(value: dict[str, Any], allowed: Collection[str], required: tuple[str, ...] = ()) -> None:
    """Refuse a key not in `allowed` (with a did-you-mean), and a missing required one; for a
    mapping checked as one value (codel, egress, bursts, replay, managed)."""
    for key in value:
        if key not in allowed:
            hint = did_you_mean(key, allowed) or f" (expected one of: {', '.join(allowed)})"
            raise Invalid(f"unknown key{hint}", value[key], str(key))
    for key in required:
        if key not in value:
            raise Invalid("missing required key", None, key)


def mapping_fields(value: dict[Any, Any], cls: type, **checks: Check) -> dict[str, Any]:
    """The declared fields of `cls` (by attribute) from a mapping checked as one value: unknown keys
    and missing required ones are refused first (known_keys), then each key is checked in field
    order, an absent one taking its declared default. `checks` supplies a check by attribute where
    the declaration leaves it to the parser (None), or replaces the declared one."""
    specs = declared(cls)
    known_keys(value, layout(cls), tuple(spec.key for _, spec in specs if spec.default is REQUIRED))
    return {
        attr: sub(value, spec.key, checks.get(attr) or spec.check or checks[attr])
        if spec.key in value
        else spec.default
        for attr, spec in specs
    }


class Reader:
    """One YAML mapping at a known path: rejects unknown keys, fetches checked fields.

    LAYOUT maps a section name to its allowed keys: each file kind's reader subclasses with its own
    (the scenario's YAML_LAYOUT in loader.py, a suite's in loadgen.suite.model); `at` reads a
    mapping inside the same file with the same kind of reader."""

    LAYOUT: Mapping[str, Collection[str]] = {}

    def __init__(self, source: str, raw: Any, yaml_path: str, section: str) -> None:
        self.source, self.yaml_path = source, yaml_path
        if not isinstance(raw, dict):
            fail(source, yaml_path, raw, f"expected a mapping, got {show(raw)}")
        allowed = self.LAYOUT[section]
        for key, value in raw.items():
            if key not in allowed:
                hint = did_you_mean(key, allowed) or f" (expected one of: {', '.join(allowed)})"
                fail(source, join_path(yaml_path, key), value, f"unknown key{hint}")
        self.raw = raw

    def get(self, key: str, check: Check, default: Any = REQUIRED) -> Any:
        path = join_path(self.yaml_path, key)
        if key not in self.raw:
            if default is REQUIRED:
                fail(self.source, path, None, "missing required key")
            return default
        return located(self.source, path, self.raw[key], check)

    def field(self, cls: type, attr: str, *default: Any) -> Any:
        """Declared field `attr` of `cls`, checked as declared; `default` replaces its declared one."""
        spec = dict(declared(cls))[attr]
        assert spec.check is not None  # a field read here has a check of its own
        return self.get(spec.key, spec.check, *(default or (spec.default,)))

    def fields(self, cls: type, **given: Any) -> dict[str, Any]:
        """Every declared field of `cls` (by attribute), read in field order, except those `given`
        (read already, or derived), which are taken as they are."""
        return {attr: given[attr] if attr in given else self.field(cls, attr) for attr, _ in declared(cls)}

    def section(self, key: str, section: str, required: bool = False) -> Reader:
        if key not in self.raw and required:
            fail(self.source, join_path(self.yaml_path, key), None, "missing required key")
        raw = self.raw.get(key)
        return self.at({} if raw is None and not required else raw, join_path(self.yaml_path, key), section)

    def at(self, raw: Any, yaml_path: str, section: str) -> Reader:
        """A reader of the same kind for `raw`, at `yaml_path` in the same file."""
        return type(self)(self.source, raw, yaml_path, section)

    def items(self, key: str) -> list[Any]:
        raw = self.raw.get(key)
        if raw is not None and not isinstance(raw, list):
            fail(self.source, join_path(self.yaml_path, key), raw, f"expected a list, got {show(raw)}")
        return raw or []
