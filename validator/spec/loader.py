"""Load challenge specs; every error names the file, the line and the broken rule."""

from __future__ import annotations

import functools

from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from pydantic import ValidationError

from validator.spec.schema import Challenge


class SpecError(Exception):
    """A challenge spec that cannot be used; ``str()`` is ready to print."""

    def __init__(self, path: Path | str, problems: list[tuple[int | None, str]]):
        self.path = str(path)
        self.problems = problems
        lines = [f"{self.path}:{line}: {msg}" if line else f"{self.path}: {msg}"
                 for line, msg in problems]
        super().__init__("\n".join(lines))


def _node_at(node: yaml.Node, loc: Iterable[Any]) -> yaml.Node:
    """Follow a pydantic error location into the YAML node tree (best effort)."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    node = v
                    break
            else:
                return node
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return node
    return node


def _fmt_loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or "[" in str(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed: ~10x faster


def parse_yaml(path: Path) -> tuple[Any, Callable[[], yaml.Node]]:
    """Return (data, a function giving the node tree) or raise SpecError with the YAML parser's line.

    The node tree maps a validation error to its line; it costs a second, pure-Python parse,
    so it is only built when a spec has a problem to report.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(path, [(None, f"cannot read the spec: {exc}")]) from None
    try:
        data = yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, [(line, f"invalid YAML: {problem}")]) from None
    return data, functools.cache(lambda: yaml.compose(text, Loader=yaml.SafeLoader))


def validate(path: Path, data: Any, node: yaml.Node | Callable[[], yaml.Node] | None,
             extra: Callable[[Challenge], list[tuple[tuple, str]]] | None = None) -> Challenge:
    """Validate parsed data; ``extra`` adds rule checks that need the whole challenge.

    ``node`` (the YAML node tree, or a function that builds it) locates errors by line.
    """
    if callable(node):
        try:
            challenge = _validate(path, data, None, extra)
        except SpecError:
            challenge = None
        if challenge is not None:
            return challenge
        node = node()
    return _validate(path, data, node, extra)


def _validate(path: Path, data: Any, node: yaml.Node | None,
              extra: Callable[[Challenge], list[tuple[tuple, str]]] | None) -> Challenge:
    if not isinstance(data, dict):
        raise SpecError(path, [(1, "a challenge spec must be a YAML mapping (key: value)")])
    try:
        challenge = Challenge.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err["loc"]
            line = _node_at(node, loc).start_mark.line + 1 if node is not None else None
            msg = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            where = _fmt_loc(loc)
            detail = f"{where}: {msg}" if where else msg
            if err["type"] in ("missing", "extra_forbidden") or isinstance(got, (dict, list)):
                problems.append((line, detail))
            else:
                problems.append((line, f"{detail} (got {got!r})"))
        raise SpecError(path, problems) from None
    if extra is not None:
        problems = [(_node_at(node, loc).start_mark.line + 1 if node is not None else None,
                     f"{_fmt_loc(loc)}: {msg}") for loc, msg in extra(challenge)]
        if problems:
            raise SpecError(path, problems)
    if challenge.id != path.stem:
        raise SpecError(path, [(_node_at(node, ["id"]).start_mark.line + 1 if node is not None else None,
                                f"id: {challenge.id!r} must match the file name {path.stem!r}")])
    return challenge


MERGED_MAPPINGS = ("dims", "inputs", "forbidden")
MERGED_LISTS = ("checks", "questions")


def _merge_by_id(path: Path, key: str, parent: list, child: list) -> list:
    """Items of ``child`` update the parent's item with the same id, or are appended; ``drop: true`` removes."""
    out = [dict(item) for item in parent if isinstance(item, dict)]
    index = {item.get("id"): i for i, item in enumerate(out)}
    dropped: set[int] = set()
    for item in child:
        if not isinstance(item, dict) or "id" not in item:
            raise SpecError(path, [(None, f"{key}: every item needs an `id` (to override or extend the parent's)")])
        item = dict(item)
        drop = item.pop("drop", False)
        i = index.get(item["id"])
        if drop:
            if i is None:
                raise SpecError(path, [(None, f"{key}: cannot drop {item['id']!r}: the parent has no such item")])
            dropped.add(i)
        elif i is None:
            index[item["id"]] = len(out)
            out.append(item)
        else:
            out[i] = {**out[i], **item}
    return [item for i, item in enumerate(out) if i not in dropped]


def merge_specs(path: Path, parent: dict, child: dict) -> dict:
    """A variant's spec over its parent's: see docs/authoring.md ("Variants").

    - ``dims``, ``inputs``, ``forbidden``: merged name by name (the child's entry wins);
    - ``checks``, ``questions``: merged by ``id``: a child item updates the parent's
      item key by key, ``drop: true`` removes it, a new id is appended; an empty
      list (``questions: []``) clears the parent's;
    - every other key (``entries``, ``contract``, ``tolerance``, ...) is replaced.
    """
    merged = {k: v for k, v in parent.items() if k != "extends"}
    for key, value in child.items():
        if key in MERGED_MAPPINGS and isinstance(value, dict) and isinstance(parent.get(key), dict):
            merged[key] = {**parent[key], **value}
        elif key in MERGED_LISTS and value and isinstance(value, list) and isinstance(parent.get(key), list):
            merged[key] = _merge_by_id(path, key, parent[key], value)
        else:
            merged[key] = value
    return merged


def resolve_extends(path: Path, data: Any, seen: tuple[Path, ...] = ()) -> Any:
    """Follow ``extends: <id>`` to ``<id>.yaml`` beside ``path``, recursively, and merge."""
    if not isinstance(data, dict) or not data.get("extends"):
        return data
    parent_id = data["extends"]
    parent_path = path.parent / f"{parent_id}.yaml"
    if parent_path.resolve() in seen or parent_path.resolve() == path.resolve():
        raise SpecError(path, [(None, f"extends: {parent_id!r} leads back to this spec (a cycle)")])
    if not parent_path.exists():
        raise SpecError(path, [(None, f"extends: no spec {parent_path.name} beside this file")])
    parent, _ = parse_yaml(parent_path)
    parent = resolve_extends(parent_path, parent, seen + (path.resolve(),))
    if not isinstance(parent, dict):
        raise SpecError(parent_path, [(1, "a challenge spec must be a YAML mapping (key: value)")])
    merged = merge_specs(path, parent, data)
    merged["extends"] = parent_id
    return merged


def resolve_parts(path: Path, data: Any, seen: tuple[Path, ...] = ()) -> Any:
    """Fill ``forbidden.parts_runtime`` from ``forbidden.parts``: each part's ``<id>.yaml`` beside ``path`` gives its
    ``forbidden.runtime`` and, recursively, its own parts' (a composite forbids what its parts forbid)."""
    forbidden = data.get("forbidden") if isinstance(data, dict) else None
    if not isinstance(forbidden, dict) or not forbidden.get("parts"):
        return data
    parts = forbidden["parts"]
    if not isinstance(parts, list) or not all(isinstance(x, str) for x in parts):
        return data  # the schema says what is wrong
    inherited: dict[str, list[str]] = {}
    for part in parts:
        part_path = path.parent / f"{part}.yaml"
        if part_path.resolve() in seen or part_path.resolve() == path.resolve():
            raise SpecError(path, [(None, f"forbidden.parts: {part!r} leads back to this spec (a cycle)")])
        if not part_path.exists():
            raise SpecError(path, [(None, f"forbidden.parts: no spec {part_path.name} beside this file")])
        part_data, _ = parse_yaml(part_path)
        part_data = resolve_parts(part_path, resolve_extends(part_path, part_data), seen + (path.resolve(),))
        part_forbidden = (part_data or {}).get("forbidden") or {}
        inherited[part] = list(part_forbidden.get("runtime") or [])
        for sub, ops in (part_forbidden.get("parts_runtime") or {}).items():
            inherited.setdefault(sub, list(ops))
    data = dict(data)
    data["forbidden"] = dict(forbidden, parts_runtime=inherited)
    return data


def load_challenge(path: str | Path) -> Challenge:
    from validator.checks import validate_check_params  # the registry knows each test's parameters

    path = Path(path)
    data, node = parse_yaml(path)
    data = resolve_parts(path, resolve_extends(path, data))
    return validate(path, data, node, extra=validate_check_params)


def load_catalogue(directory: str | Path) -> dict[str, Challenge]:
    """Every ``*.yaml`` spec in a directory, by id; all errors together in one SpecError."""
    directory = Path(directory)
    out: dict[str, Challenge] = {}
    errors: list[SpecError] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            challenge = load_challenge(path)
        except SpecError as exc:
            errors.append(exc)
            continue
        out[challenge.id] = challenge
    if errors:
        combined = SpecError(errors[0].path, errors[0].problems)
        combined.args = ("\n".join(str(e) for e in errors),)
        raise combined
    return out
