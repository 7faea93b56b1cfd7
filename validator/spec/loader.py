"""Load challenge specs; every error names the file, the line and the broken rule."""

from __future__ import annotations

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


def parse_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Return (data, node tree) or raise SpecError with the YAML parser's line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(path, [(None, f"cannot read the spec: {exc}")]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, [(line, f"invalid YAML: {problem}")]) from None
    return data, node


def validate(path: Path, data: Any, node: yaml.Node | None,
             extra: Callable[[Challenge], list[tuple[tuple, str]]] | None = None) -> Challenge:
    """Validate parsed data; ``extra`` adds rule checks that need the whole challenge."""
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


def load_challenge(path: str | Path) -> Challenge:
    from validator.checks import validate_check_params  # the registry knows each test's parameters

    path = Path(path)
    data, node = parse_yaml(path)
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
