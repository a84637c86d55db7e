"""ScenarioError, the one exception the scenario package raises, and how errors are worded and located.

An error names the file, where in it (a YAML path such as `consumers[0].prefetch`, or the
`--set` override that caused it), the bad value and, when there is one, the close match.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from loadgen.errors import LoadgenError

T = TypeVar("T")
_SAME: Any = object()

# Any scheme, not only amqp: a mistyped `--set broker.url=http://user:pw@host` must not leak.
_PASSWORD_IN_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)([^@\s]*)(@)")

__all__ = ["ScenarioError", "Invalid", "located", "join_path", "did_you_mean", "show", "mask_passwords"]


class ScenarioError(LoadgenError):
    """A scenario that can not be read, parsed or validated.

    `path` is the scenario file, `yaml_path` where in it (`""` for file-level problems such
    as bad YAML syntax, whose message carries the line), `value` the offending value,
    `message` what is wrong, and `override` the `--set PATH=VALUE` text when an override
    caused it. `str(err)` is `"<file>: <yaml_path>: <message>"`, with `--set <override>`
    in place of the YAML path when an override is to blame. Broker passwords are masked.
    """

    def __init__(self, path: str, yaml_path: str, value: Any, message: str, override: str | None = None) -> None:
        # Mask here, not only in __str__, so repr() and pickles never carry a password either.
        value = mask_passwords(value) if isinstance(value, str) else value
        override = mask_passwords(override) if override is not None else None
        super().__init__(path, yaml_path, value, message, override)
        self.path = path
        self.yaml_path = yaml_path
        self.value = value
        self.message = message
        self.override = override

    def __str__(self) -> str:
        where = f"--set {self.override}" if self.override is not None else self.yaml_path
        parts = [self.path, where, self.message] if where else [self.path, self.message]
        return mask_passwords(": ".join(parts))


def mask_passwords(text: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:****@host` anywhere in `text`, for any scheme."""
    return _PASSWORD_IN_URL.sub(r"\1****\3", text)


def did_you_mean(word: object, options: Iterable[object]) -> str:
    """`" (did you mean 'prefetch'?)"` when `word` is close to one of `options`, else `""`."""
    candidates = [str(option) for option in options]
    matches = difflib.get_close_matches(str(word), candidates, n=1)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def show(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it in YAML: `true`, `null`, `'poison'`, `-3`, `[1, 2]`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Invalid(ValueError):
    """A value that failed a check, before anyone knows where it sits; `located()` adds that.

    `sub_path` locates the culprit inside the checked value (`sigma` in a processing_ms
    mapping); `value` is the culprit when it is not the whole checked value.
    """

    def __init__(self, message: str, value: Any = _SAME, sub_path: str = "") -> None:
        super().__init__(message)
        self.message, self.value, self.sub_path = message, value, sub_path

    def within(self, key: str, checked: Any) -> Invalid:
        """The same problem seen from the mapping that holds the checked value under `key`."""
        return Invalid(self.message, checked if self.value is _SAME else self.value, join_path(key, self.sub_path))


def located(source: str, yaml_path: str, value: Any, check: Callable[[Any], T]) -> T:
    """`check(value)`, turning Invalid into a ScenarioError at `source`/`yaml_path`."""
    try:
        return check(value)
    except Invalid as bad:
        culprit = value if bad.value is _SAME else bad.value
        raise ScenarioError(source, join_path(yaml_path, bad.sub_path), culprit, bad.message) from None


def join_path(path: str, key: object) -> str:
    """`("consumers[0]", "prefetch")` -> `"consumers[0].prefetch"`; `"[1]"` keys append directly."""
    key = str(key)
    if not key or not path:
        return path or key
    return path + key if key.startswith("[") else f"{path}.{key}"
