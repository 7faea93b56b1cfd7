"""Which submissions' code is suspiciously alike: winnowed fingerprints of a normalised token stream.

Evidence for a person, never a grade change. The method is MOSS's (Schleimer, Wilkerson and Aiken,
"Winnowing: local algorithms for document fingerprinting", 2003), over Python's own tokenizer:

1. **Normalise** each file (:func:`normalise`): comments, docstrings, type annotations, layout,
   parentheses and trailing commas are dropped; every name the file binds itself (parameters, local
   and global variables, its functions and classes, attributes it assigns, ``import ... as`` aliases)
   becomes ``V``, while the names it only uses (``torch``, ``.rsqrt``, ``keepdim=``) stay, so renaming
   and reformatting change nothing and the library calls a solution makes still count; numbers and
   strings are compared by value.
2. **Fingerprint**: hash every run of :data:`K` tokens and keep the smallest hash of each window of
   :data:`W` runs, so any match of at least ``K + W - 1`` tokens is found, whatever surrounds it.
3. **Exclude boilerplate**: every run of the handout's stub (and of files given as boilerplate) is
   removed from every submission.
4. **Score** each pair by the fingerprints they share, each weighted by how rare it is in the class
   (``log((N + 1) / df)``: a line everyone writes counts little), as a share of the smaller of the two
   (containment, so copying part of a file still shows), and optionally against known public solutions.

Why not copydetect (MIT, on PyPI, which implements the same winnowing): it needs matplotlib, jinja2,
tqdm and pygments in the grader's environment, its HTML report is not self-contained, and its
filter turns every name, attribute and library call alike into ``V``, which for layers of a few
lines (``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``) throws away most of what tells two
solutions apart. The whole method here is ~200 lines on the standard library (and torch for the
pairwise sums).
"""

from __future__ import annotations

import ast
import hashlib
import io
import keyword
import math
import os
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from validator.reachability import walk

K = 12  # tokens per fingerprinted run (the noise threshold: shorter matches are ignored)
W = 6  # the winnowing window: every match of K + W - 1 tokens or more is found
THRESHOLD = 0.7  # pairs at or above this score are flagged for a person to look at
MAX_TEXT = 256 * 1024  # characters of one file kept for the side-by-side view
MAX_FILES, MAX_TOTAL = 200, 16 * 1024 * 1024
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_DROP_OPS = {"(", ")", ";"}
_FSTRING_ENDS = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_END") if hasattr(tokenize, n)}
_CLOSERS = {")", "]", "}"}
_MASK = (1 << 61) - 1
_BASE = 1_000_003


# -- normalising one file -------------------------------------------------------------------------
def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """ast's UTF-8 byte column as tokenize's character column."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text.isascii():
        return min(byte_col, len(text))
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_STORES = (ast.Store, ast.Del)


def _facts(source: str):
    """From the syntax tree: the names and attributes the file binds, where keyword-argument names and
    docstrings and annotations sit. None when the file does not parse.

    A node is told by its exact type, as ``ast.parse`` makes no subclasses."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = source.splitlines()
    names, attrs, keywords_at, spans, annotations = set(), set(), set(), [], []

    def span(node: ast.AST, into: list) -> None:
        if getattr(node, "end_lineno", None) is None:
            return
        into.append(((node.lineno, _char_col(lines, node.lineno, node.col_offset)),
                     (node.end_lineno, _char_col(lines, node.end_lineno, node.end_col_offset))))

    for node in walk(tree):
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) in _STORES:
                names.add(node.id)
        elif kind is ast.Attribute:
            if type(node.ctx) in _STORES:
                attrs.add(node.attr)
        elif kind is ast.arg:
            names.add(node.arg)
            if node.annotation is not None:
                span(node.annotation, annotations)
        elif kind in _DEFS:
            names.add(node.name)
            if node.returns is not None:
                span(node.returns, annotations)
        elif kind is ast.ClassDef:
            names.add(node.name)
        elif kind is ast.AnnAssign:
            span(node.annotation, annotations)
        elif kind is ast.alias:
            if node.asname:
                names.add(node.asname)
        elif kind is ast.ExceptHandler:
            if node.name:
                names.add(node.name)
        elif kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)
        elif kind is ast.keyword:
            if node.arg is not None and getattr(node, "lineno", None):
                keywords_at.add((node.lineno, _char_col(lines, node.lineno, node.col_offset)))
        elif kind is ast.Expr:
            if type(node.value) is ast.Constant and isinstance(node.value.value, str):
                span(node, spans)
    return names, attrs, keywords_at, sorted(spans), sorted(annotations)


def _inside_marks(positions: list[tuple[int, int]], spans: list) -> list[bool]:
    """For each of ``positions`` (in source order), whether it lies in the last of the sorted ``spans`` that
    starts at or before it: one sweep instead of a search per token."""
    marks, j, last = [], -1, len(spans) - 1
    for position in positions:
        while j < last and spans[j + 1][0] <= position:
            j += 1
        marks.append(j >= 0 and position < spans[j][1])
    return marks


def _literal(text: str) -> str:
    """A number by its value (``1e-5`` and ``0.00001`` alike), without compiling it where it is plain."""
    for parse in (lambda t: int(t, 0), float):
        try:
            return repr(parse(text))
        except ValueError:
            pass
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text


_FIELDS = re.compile(r"\{[^{}]*\}")
_PLAIN = re.compile(r"""\A(?:'[^'\\\n]*'|"[^"\\\n]*")\Z""")
_PREFIX = re.compile(r"(?i)^([rbuf]*)('{3}|\"{3}|'|\")")


def _string_body(text: str) -> tuple[str, bool]:
    """A string token's content, whatever its quotes: its value, or an f-string's text between the quotes."""
    if _PLAIN.match(text):
        return text[1:-1], False  # a plain one-line literal: its value without compiling it
    match = _PREFIX.match(text)
    if match and "f" in match.group(1).lower():
        quote = match.group(2)
        body = text[match.end():len(text) - len(quote)] if text.endswith(quote) else text
        return _FIELDS.sub("{}", body), True  # the names inside the fields may be renamed
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text, False
    return (value.decode("latin-1") if isinstance(value, bytes) else str(value)), False


def normalise(source: str) -> list[tuple[str, int, int]]:
    """The file as (normalised token, first line, last line): what two copies of it have in common."""
    facts = _facts(source)
    names, attrs, keywords_at, skip_spans, annotations = facts if facts else (None, set(), set(), [], [])
    raw = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type not in _SKIP:
                raw.append(tok)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # keep what was read before the error
    out: list[tuple[str, int, int]] = []
    string_at = -2  # the index in ``raw`` of the last string token kept
    positions = [tok.start for tok in raw]
    skipped = _inside_marks(positions, skip_spans) if skip_spans else None
    annotated = _inside_marks(positions, annotations) if annotations else None
    for i, tok in enumerate(raw):
        start = tok.start
        if skipped is not None and skipped[i]:
            continue
        if annotated is not None and annotated[i]:
            continue
        text = tok.string
        nxt = raw[i + 1] if i + 1 < len(raw) else None
        if tok.type == tokenize.OP:
            if text in _DROP_OPS:
                continue
            if text == "," and nxt is not None and nxt.string in _CLOSERS:
                continue
            if text in (":", "->") and nxt is not None and annotated is not None and annotated[i + 1]:
                continue
        elif tok.type == tokenize.NAME and not keyword.iskeyword(text):
            after_dot = i > 0 and raw[i - 1].string == "."
            if after_dot:
                text = "V" if text in attrs else text
            elif start in keywords_at:
                pass
            elif names is None or text in names:
                text = "V"
        elif tok.type == tokenize.NUMBER:
            text = _literal(text)
        elif tok.type in _FSTRING_ENDS:  # Python 3.12+ splits an f-string into tokens: its quotes do not count
            text = "f"
        elif tok.type == tokenize.STRING:  # adjacent literals are one string, whatever their quotes
            body, formatted = _string_body(text)
            if string_at == i - 1 and out:
                string_at = i
                prev = out.pop()
                formatted = formatted or prev[0][0] == "f"
                out.append((("f" if formatted else "s") + repr(ast.literal_eval(prev[0][1:]) + body),
                            prev[1], tok.end[0]))
                continue
            text = ("f" if formatted else "s") + repr(body)
            string_at = i
        out.append((text, tok.start[0], tok.end[0]))
    return out


# -- fingerprints ---------------------------------------------------------------------------------
_TOKEN_HASHES: dict[str, int] = {}


def _token_hash(text: str) -> int:
    h = _TOKEN_HASHES.get(text)
    if h is None:
        h = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big") & _MASK
        if len(_TOKEN_HASHES) < 200_000:
            _TOKEN_HASHES[text] = h
    return h


def kgram_hashes(tokens: Sequence[tuple[str, int, int]], k: int = K) -> list[int]:
    """A hash for every run of ``k`` consecutive tokens (a rolling polynomial hash, stable across runs)."""
    if len(tokens) < k:
        return []
    hs = [_token_hash(t[0]) for t in tokens]
    top = pow(_BASE, k - 1, _MASK)
    h = 0
    for x in hs[:k]:
        h = (h * _BASE + x) % _MASK
    out = [h]
    for i in range(k, len(hs)):
        h = ((h - hs[i - k] * top) * _BASE + hs[i]) % _MASK
        out.append(h)
    return out


def winnow(hashes: Sequence[int], w: int = W) -> list[int]:
    """Positions of the fingerprints: the smallest hash of each window of ``w`` (rightmost on ties)."""
    if not hashes:
        return []
    if len(hashes) <= w:
        return [min(range(len(hashes)), key=lambda i: (hashes[i], -i))]
    picked, last = [], -1
    for start in range(len(hashes) - w + 1):
        best = start
        for i in range(start + 1, start + w):
            if hashes[i] <= hashes[best]:
                best = i
        if best != last:
            picked.append(best)
            last = best
    return picked


@dataclass
class Doc:
    """One submission (or public solution) as its files and fingerprints."""

    name: str
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text (capped for the view)
    prints: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)  # hash -> (file, first, last line)
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "k": K, "w": W, "name": self.name, "tokens": self.tokens, "files": self.files,
                "prints": [[h, *where] for h, spots in self.prints.items() for where in spots]}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "Doc":
        if data.get("format") != 1 or data.get("k") != K or data.get("w") != W:
            raise ValueError("fingerprints of another format: regrade to recompute them")
        doc = Doc(name=str(data["name"]), files={str(k): str(v) for k, v in (data.get("files") or {}).items()},
                  tokens=int(data.get("tokens", 0)))
        for h, f, a, b in data.get("prints", []):
            doc.prints.setdefault(int(h), []).append((int(f), int(a), int(b)))
        return doc


def fingerprint(name: str, files: Mapping[str, str]) -> Doc:
    doc = Doc(name=name)
    for index, (rel, text) in enumerate(sorted(files.items())):
        doc.files[rel] = text[:MAX_TEXT]
        tokens = normalise(text)
        doc.tokens += len(tokens)
        hashes = kgram_hashes(tokens)
        for pos in winnow(hashes):
            doc.prints.setdefault(hashes[pos], []).append((index, tokens[pos][1], tokens[pos + K - 1][2]))
    return doc


def all_kgrams(files: Iterable[str]) -> set[int]:
    """Every run's hash (not only the winnowed ones): what boilerplate removes from the submissions."""
    out: set[int] = set()
    for text in files:
        out.update(kgram_hashes(normalise(text)))
    return out


# -- reading sources -------------------------------------------------------------------------------
def read_sources(folder: str | Path) -> dict[str, str]:
    """The Python files of one submission folder, read as the grader's intake reads them (no links,
    regular files, at most 1 MiB each): ``layers.py`` and its helper modules, or every ``.py`` of a
    package submission (at most 200 files, 16 MiB; hidden folders, caches and virtual environments skipped)."""
    from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file
    from validator.package import is_package_root

    folder = Path(folder)
    if is_package_root(folder):
        candidates = []
        for root, dirs, files in os.walk(folder, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                             and not (Path(root) / d / "pyvenv.cfg").exists())
            candidates += [Path(root) / f for f in sorted(files) if f.endswith(".py")]
    else:
        candidates = sorted(folder.glob("*.py"))
    out, total = {}, 0
    for path in candidates[:MAX_FILES]:
        try:
            data = read_submission_file(path, cap=MAX_SOURCE_BYTES)
        except (IntakeError, OSError):
            continue
        total += len(data)
        if total > MAX_TOTAL:
            break
        out[path.relative_to(folder).as_posix()] = data.decode("utf-8", errors="replace")
    return out


def default_boilerplate() -> list[Path]:
    """The handout's stub: what every submission starts from."""
    from validator import paths

    stub = paths.PROJECT_ROOT / "student" / "layers.py"
    return [stub] if stub.is_file() else []


def boilerplate_kgrams(paths_: Iterable[str | Path]) -> set[int]:
    texts = []
    for p in map(Path, paths_):
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        texts += [f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file()]
    return all_kgrams(texts)


def public_docs(folder: str | Path) -> list[Doc]:
    """Known public solutions: each sub-folder, or each top-level ``.py`` file, is one document."""
    folder = Path(folder)
    docs = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            files = {p.relative_to(entry).as_posix(): p.read_text(encoding="utf-8", errors="replace")
                     for p in sorted(entry.rglob("*.py")) if p.is_file()}
        elif entry.suffix == ".py" and entry.is_file():
            files = {entry.name: entry.read_text(encoding="utf-8", errors="replace")}
        else:
            continue
        if files:
            docs.append(fingerprint(f"public:{entry.name}", files))
    return docs


# -- ranking pairs -----------------------------------------------------------------------------------
@dataclass
class Pair:
    a: str
    b: str
    score: float
    shared: int  # fingerprints in common (boilerplate excluded)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "score": round(self.score, 4), "shared": self.shared}


@dataclass
class Similarity:
    pairs: list[Pair]  # the highest-scoring pairs, best first
    histogram: list[int]  # every pair's score in 20 bins of 0.05
    compared: int  # pairs scored
    threshold: float = THRESHOLD
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.score >= self.threshold]

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "compared": self.compared, "histogram": list(self.histogram),
                "flagged": len(self.flagged), "pairs": [p.to_dict() for p in self.pairs], "notes": list(self.notes),
                "method": f"winnowing (k={K} tokens, window {W}) over renamed, reformatted tokens; boilerplate removed; "
                          "shared fingerprints weighted by rarity, as a share of the smaller submission"}


def rank(docs: Sequence[Doc], *, boilerplate: set[int] = frozenset(), public: Sequence[Doc] = (),
         threshold: float = THRESHOLD, keep: int = 50) -> Similarity:
    """Score every pair of ``docs`` (and each doc against each ``public`` one); keep the best ``keep``
    pairs and every flagged one (at most 500)."""
    import torch

    everyone = list(docs) + list(public)
    n_docs, n = len(docs), len(everyone)
    sets = [set(d.prints) - boilerplate for d in everyone]
    df: dict[int, int] = {}
    for s in sets:
        for h in s:
            df[h] = df.get(h, 0) + 1
    idf = {h: math.log((n + 1) / c) for h, c in df.items()}
    totals = torch.tensor([sum(idf[h] for h in s) for s in sets], dtype=torch.float64)
    columns = {h: i for i, h in enumerate(h for h, c in df.items() if c >= 2)}
    shared_weight = torch.zeros(n, n, dtype=torch.float64)
    if columns:
        rows, cols = [], []
        for r, s in enumerate(sets):
            for h in s:
                c = columns.get(h)
                if c is not None:
                    rows.append(r)
                    cols.append(c)
        weights = torch.zeros(len(columns), dtype=torch.float64)
        for h, c in columns.items():
            weights[c] = idf[h]
        rows_t, cols_t = torch.tensor(rows), torch.tensor(cols)
        chunk = 4096
        for lo in range(0, len(columns), chunk):
            hi = min(lo + chunk, len(columns))
            pick = (cols_t >= lo) & (cols_t < hi)
            m = torch.zeros(n, hi - lo, dtype=torch.float64)
            m[rows_t[pick], cols_t[pick] - lo] = 1.0
            shared_weight += (m * weights[lo:hi]) @ m.T
    smaller = torch.minimum(totals[:, None], totals[None, :])
    scores = torch.where(smaller > 0, shared_weight / smaller.clamp_min(1e-12), torch.zeros_like(smaller)).clamp(0, 1)
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    mask[n_docs:, n_docs:] = False  # public solutions are not compared with each other
    values = scores[mask]
    i_idx, j_idx = mask.nonzero(as_tuple=True)
    histogram = torch.histc(values.float(), bins=20, min=0.0, max=1.0).long().tolist() if values.numel() else [0] * 20
    order = torch.argsort(values, descending=True, stable=True)
    flagged = int((values >= threshold).sum())
    pairs = []
    for idx in order[:min(max(keep, flagged), 500)].tolist():
        i, j = int(i_idx[idx]), int(j_idx[idx])
        pairs.append(Pair(everyone[i].name, everyone[j].name, float(values[idx]), len(sets[i] & sets[j])))
    notes = [] if n_docs >= 2 else ["fewer than two submissions: nothing to compare"]
    return Similarity(pairs=pairs, histogram=histogram, compared=int(values.numel()), threshold=threshold, notes=notes)


def matched_lines(a: Doc, b: Doc, boilerplate: set[int] = frozenset()) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """For a side-by-side view: the lines of each file of ``a`` and of ``b`` that the shared fingerprints cover."""
    shared = (set(a.prints) & set(b.prints)) - boilerplate

    def lines(doc: Doc) -> dict[str, set[int]]:
        names = sorted(doc.files)
        out: dict[str, set[int]] = {}
        for h in shared:
            for f, first, last in doc.prints[h]:
                if f < len(names):
                    out.setdefault(names[f], set()).update(range(first, last + 1))
        return out

    return lines(a), lines(b)
