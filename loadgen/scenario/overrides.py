"""`--set PATH=VALUE` overrides: parse them and apply them to the raw YAML tree before validation.

Paths are dotted; list items are addressed by index or by group name: `consumers[0].prefetch`,
`consumers.0.prefetch`, `consumers.main.prefetch`, `queue.arguments.x-max-length`. The same
group-path syntax names the fields a timeline phase sets (`consumers.main.processing_ms`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from loadgen.scenario.errors import ScenarioError, did_you_mean, join_path, show
from loadgen.scenario.model import LEAF, YAML_LAYOUT

__all__ = [
    "Override",
    "BoundedLoader",
    "MAX_YAML_DEPTH",
    "parse_override",
    "apply_overrides",
    "blame_override",
    "parse_group_path",
    "resolve_group",
]

Token = str | int  # a key, or an index written as [n]
_SEGMENT = re.compile(r"^([^\[\]]*)((?:\[\d+\])*)$")
_ITEM_WORDS = {"producers": "producer group", "consumers": "consumer group", "timeline": "phase", "slo": "slo entry"}
_EXAMPLE = "consumers.main.prefetch=50"
# Sections that are only valid whole: a lone key can not be set while the section is absent.
_WHOLE_VALUE_EXAMPLES = {
    "processing": "{distribution: exponential, mean_ms: 4}",
    "codel": "{target_ms: 5, interval_ms: 100}",
    "outcomes": "{requeue: 0.05, discard: 0.01}",
}


class PathError(ValueError):
    """A path that does not address anything; `yaml_path` is how far it got."""

    def __init__(self, yaml_path: str, message: str) -> None:
        super().__init__(message)
        self.yaml_path = yaml_path
        self.message = message


@dataclass(frozen=True)
class Override:
    text: str
    path: str
    value: Any


MAX_YAML_DEPTH = 64
"""Deeper nesting is refused: no scenario needs it, and PyYAML recurses per level (a value nested
5,000 deep ran Python out of stack)."""


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_YAML_DEPTH (scenario files and --set values)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # PyYAML's stubs
                raise yaml.constructor.ConstructorError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_override(text: str, source: str) -> Override:
    """`"run.warmup_s=2"` -> Override; the value is read as a YAML scalar or flow collection."""
    if not isinstance(text, str) or "=" not in text:
        raise ScenarioError(source, "", text, f"expected PATH=VALUE, e.g. {_EXAMPLE}", override=str(text))
    path, _, value_text = text.partition("=")
    path = path.strip()
    if not path:
        raise ScenarioError(source, "", text, f"the path before '=' is empty, e.g. {_EXAMPLE}", override=text)
    try:
        value = yaml.load(value_text, Loader=BoundedLoader)  # a SafeLoader, depth-bounded
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ScenarioError(source, "", value_text, f"the value is not valid YAML: {problem}", override=text) from None
    return Override(text, path, value)


def apply_overrides(
    raw: dict[str, Any], overrides: Sequence[str], source: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """A copy of `raw` with every override applied in order, and {YAML path set: override text}."""
    tree = copy.deepcopy(raw)
    origins: dict[str, str] = {}
    for text in overrides:
        override = parse_override(text, source)
        try:
            yaml_path = _assign(tree, tokens(override.path), override.value)
        except PathError as err:
            raise ScenarioError(source, err.yaml_path, override.value, err.message, override=text) from None
        origins[yaml_path] = text
    return tree, origins


def blame_override(err: ScenarioError, origins: dict[str, str]) -> ScenarioError:
    """`err` pointed at the last override that set its YAML path (or a parent of it), if any."""
    if err.override is not None:
        return err
    for yaml_path, text in reversed(origins.items()):
        if err.yaml_path == yaml_path or err.yaml_path.startswith((yaml_path + ".", yaml_path + "[")):
            message = err.message if err.yaml_path == yaml_path else f"{err.yaml_path}: {err.message}"
            return ScenarioError(err.path, err.yaml_path, err.value, message, override=text)
    return err


def tokens(path: str) -> list[Token]:
    """`"consumers[0].processing_ms"` -> `["consumers", 0, "processing_ms"]`."""
    out: list[Token] = []
    for segment in path.split("."):
        match = _SEGMENT.match(segment)
        if not match or (not match.group(1) and not match.group(2)):
            raise PathError(
                path,
                f"malformed path {path!r}: expected keys separated by '.', "
                f"with optional [index], e.g. consumers[0].prefetch",
            )
        if match.group(1):
            out.append(match.group(1))
        out += [int(index) for index in re.findall(r"\d+", match.group(2))]
    return out


def _rejoin(toks: Sequence[Token]) -> str:
    text = ""
    for tok in toks:
        text += f"[{tok}]" if isinstance(tok, int) else (f".{tok}" if text else tok)
    return text


def parse_group_path(path: str) -> tuple[str, Token, str]:
    """`"consumers.main.count"` -> ("consumers", "main", "count"); the group may be an index."""
    toks = tokens(path)
    kind = toks[0] if toks else ""
    if kind not in ("producers", "consumers"):
        raise PathError(
            path,
            "expected producers.<group>.<field> or consumers.<group>.<field>"
            + did_you_mean(kind, ("producers", "consumers")),
        )
    middle, fieldname = toks[1:-1], toks[-1]
    if not middle or isinstance(fieldname, int):
        raise PathError(path, f"expected {kind}.<group>.<field>, e.g. {kind}.main.count")
    if len(middle) == 1:
        return str(kind), middle[0], fieldname
    if any(isinstance(tok, int) for tok in middle):
        raise PathError(path, f"expected {kind}.<group>.<field>, e.g. {kind}.main.count")
    return str(kind), ".".join(str(tok) for tok in middle), fieldname


def resolve_group(ref: Token, names: Sequence[Any], kind: str) -> int:
    """The index of the group a path names: by name first, then by index."""
    if isinstance(ref, str) and ref in names:
        return list(names).index(ref)
    if isinstance(ref, int) or ref.isdigit():
        index = int(ref)
        if index < len(names):
            return index
        raise ValueError(f"index {index} is out of range: {kind} has {len(names)} entries")
    known = ", ".join(str(n) for n in names) or "none"
    hint = did_you_mean(ref, names) or f" (known: {known})"
    raise ValueError(f"no {_ITEM_WORDS.get(kind, 'item')} named {ref!r}{hint}")


def _pick_item(items: list[Any], toks: list[Token], i: int, list_key: str, path: str) -> tuple[int, int]:
    """Which list item toks[i:] starts with, and how many tokens name it (names may hold dots)."""
    tok = toks[i]
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    if isinstance(tok, str) and list_key != "slo":
        for end in range(len(toks), i, -1):
            run = toks[i:end]
            if all(isinstance(t, str) for t in run) and ".".join(map(str, run)) in names:
                return names.index(".".join(map(str, run))), end - i
    if list_key == "slo" and isinstance(tok, str) and not tok.isdigit():
        raise PathError(path, f"slo entries are addressed by index, e.g. slo[0], not {tok!r}")
    try:
        return resolve_group(tok, names, list_key), 1
    except ValueError as err:
        raise PathError(path, str(err)) from None


def _assign(tree: dict[str, Any], toks: list[Token], value: Any) -> str:
    """Set `value` at the path in `tree`, creating missing mappings; return the YAML path."""
    node: Any = tree
    layout, path, i = "scenario", "", 0
    while True:
        if layout in ("{}", "{set}"):
            key = _rejoin(toks[i:])
            if layout == "{set}":
                _drop_same_target(tree, node, key)
            node[key] = value
            return join_path(path, key)
        if layout.startswith("["):
            list_key = path.rsplit(".", 1)[-1]
            index, used = _pick_item(node, toks, i, list_key, path)
            path, i = f"{path}[{index}]", i + used
            if i == len(toks):
                node[index] = value
                return path
            if layout == "[]":
                raise PathError(path, f"{path} is a single value; there is nothing below it")
            node, layout = node[index], layout[1:-1]
            if not isinstance(node, dict):
                raise PathError(path, f"{path} is {show(node)} in the file, not a mapping")
            continue
        tok = toks[i]
        if isinstance(tok, int):
            raise PathError(path, f"{path or 'the scenario'} is a mapping; use a key, not [{tok}]")
        allowed = YAML_LAYOUT[layout]
        child_path = join_path(path, tok)
        if tok not in allowed:
            hint = did_you_mean(tok, allowed) or f" (expected one of: {', '.join(allowed)})"
            raise PathError(child_path, f"unknown key {tok!r}{hint}")
        child = allowed[tok]
        if i == len(toks) - 1:
            node[tok] = value
            return child_path
        if child == LEAF:
            raise PathError(child_path, f"{child_path} is a single value; there is nothing below it")
        whole = _WHOLE_VALUE_EXAMPLES.get(child)
        example = f" (set the whole value, e.g. {child_path}={whole})" if whole else ""
        if node.get(tok) is None:
            if child.startswith("["):
                raise PathError(
                    child_path, f"the scenario has no {tok} to address; set the whole list instead, e.g. {tok}=[...]"
                )
            if whole:  # a lone parameter (no distribution; CoDel without its interval) is never valid
                raise PathError(child_path, f"{child_path} is not set{example}")
            node[tok] = {}  # other sections take defaults for the keys not set: network.down=true works
        nxt = node[tok]
        wanted = list if child.startswith("[") else dict
        if not isinstance(nxt, wanted):
            raise PathError(
                child_path, f"{child_path} is {show(nxt)}, not a {'list' if wanted is list else 'mapping'}{example}"
            )
        node, path, layout, i = nxt, child_path, child, i + 1


def _drop_same_target(tree: dict[str, Any], set_node: dict[str, Any], key: str) -> None:
    """Remove keys of a phase's `set` that name the same field as `key` in another spelling."""
    target = _set_target(tree, key)
    if target is None:
        return
    for other in [k for k in set_node if k != key and isinstance(k, str)]:
        if _set_target(tree, other) == target:
            del set_node[other]


def _set_target(tree: dict[str, Any], key: str) -> tuple[str, int, str] | None:
    try:
        kind, ref, fieldname = parse_group_path(key)
        items = tree.get(kind) or []
        names = [item.get("name") if isinstance(item, dict) else None for item in items]
        return kind, resolve_group(ref, names, kind), fieldname
    except (ValueError, AttributeError):
        return None
