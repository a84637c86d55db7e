"""One declaration per scenario field: a dataclass field's metadata says its YAML key, how the loader
checks its value, and its default when the key is absent. The YAML layout, the loader's reading
(checks.Reader.fields for a section, checks.mapping_fields for a mapping checked as one value) and
`to_dict` are all derived from it (`dataclasses.fields()`), so a new field is a single edit:

    count: int = field(metadata=yaml(integer(0), default=1))  # YAML default 1; positional in Python
    leave: str = field(default="clean", metadata=yaml(choice("clean", "crash")))  # the same default
    processing: Processing = field(metadata=yaml(processing, Processing.fixed(0.0), "processing_ms", "processing"))

The YAML layout lists a section's keys in field order, and so does `to_dict`, except for a field
declared `written_after` another key: to_dict writes it right after that key (the order run.json
has always had, where it differs from the order the layout and its error messages list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, fields, is_dataclass
from typing import Any

__all__ = ["LEAF", "REQUIRED", "YamlField", "yaml", "declared", "written", "layout", "to_plain", "plain_dict"]

LEAF = "leaf"
REQUIRED: Any = object()
"""The default of a key that must be present."""
_UNSET: Any = object()
_DECLARED: dict[type, tuple[tuple[str, YamlField], ...]] = {}
_WRITTEN: dict[type, tuple[tuple[str, YamlField], ...]] = {}

Check = Callable[[Any], Any]


@dataclass(frozen=True)
class YamlField:
    """How a dataclass field reads from YAML: `key` (the field's name when None), the `check` of its
    value (None: the loader supplies it, as for `replay`, whose check needs the scenario file's
    directory), the `default` when the key is absent (REQUIRED: it must be there), `layout`,
    what lies below the key in YAML_LAYOUT, and `written_after`: the key to_dict writes it after
    (None: in field order)."""

    key: str
    check: Check | None
    default: Any
    layout: str
    written_after: str | None = None


def yaml(
    check: Check | None,
    default: Any = _UNSET,
    key: str | None = None,
    layout: str = LEAF,
    written_after: str | None = None,
) -> dict[str, Any]:
    """The metadata of a field read from YAML (`field(metadata=yaml(...))`). Without `default`, the
    YAML default is the dataclass field's own default, and a field without one is required."""
    return {"yaml": (check, default, key, layout, written_after)}


def declared(cls: type) -> tuple[tuple[str, YamlField], ...]:
    """(attribute, declaration) for each field of dataclass `cls` read from YAML, in field order."""
    if cls not in _DECLARED:
        _DECLARED[cls] = tuple((f.name, _resolve(f)) for f in fields(cls) if "yaml" in f.metadata)
    return _DECLARED[cls]


def _resolve(f: Field[Any]) -> YamlField:
    check, default, key, layout, written_after = f.metadata["yaml"]
    if default is _UNSET:
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = REQUIRED
    return YamlField(key or f.name, check, default, layout, written_after)


def written(cls: type) -> tuple[tuple[str, YamlField], ...]:
    """declared(cls) in the order to_dict writes the keys: field order, each field declared
    `written_after` a key moved to just after it (in field order when two follow one key)."""
    if cls not in _WRITTEN:
        order = [(attr, spec) for attr, spec in declared(cls) if spec.written_after is None]
        for attr, spec in declared(cls):
            if spec.written_after is not None:
                after = next(i for i, (_, other) in enumerate(order) if other.key == spec.written_after)
                order.insert(after + 1, (attr, spec))
        _WRITTEN[cls] = tuple(order)
    return _WRITTEN[cls]


def layout(cls: type) -> dict[str, str]:
    """The YAML_LAYOUT entry of a section read into `cls`: each key and what lies below it."""
    return {spec.key: spec.layout for _, spec in declared(cls)}


def plain_dict(obj: Any) -> dict[str, Any]:
    """`obj`'s YAML fields as plain data under their YAML keys, in the order to_dict writes them
    (`written`). A field laid out as a mapping ("{}", "{set}") and held as (key, value) pairs is
    written as a mapping."""
    out = {}
    for attr, spec in written(type(obj)):
        value = getattr(obj, attr)
        if spec.layout.startswith("{") and isinstance(value, tuple):
            value = dict(value)
        out[spec.key] = to_plain(value)
    return out


def to_plain(value: Any) -> Any:
    """A value as plain data: its own `to_dict()` when it has one, its YAML fields (plain_dict) when
    its class declares them, lists for tuples."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type) and declared(type(value)):
        return plain_dict(value)
    if is_dataclass(value) and not isinstance(value, type):
        return to_plain(asdict(value))
    if isinstance(value, Mapping):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [to_plain(item) for item in value]
    return value
