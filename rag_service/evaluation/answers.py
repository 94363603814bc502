"""Answer evaluation: the conversation file, the string checks a customer-service reviewer would make,
and the per-kind / per-language report (`rag-eval answers`; the runs themselves are in `answer_run.py`).

A conversation file is JSON lines, one conversation a line::

    {"id": "c1", "turns": [{"q": "iPhone 16 多少钱", "expect_any": [["5999"]], "reject_any": ["7999"],
                            "doc": "iphone-16.html", "kind": "standalone"}, ...]}

An answer is correct when it contains every string of at least one list of `expect_any` and none of
`reject_any`. Strings are compared after NFKC and case folding, ignoring whitespace; a string that
starts or ends with a digit must not continue a longer number in the answer ("799" is not found in
"7999", "2.3%" not in "12.3%"), or a sibling's price would pass for the right one.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rag_core.text import has_han

Kind = Literal["standalone", "followup", "topic_switch", "recall"]
KINDS: tuple[str, ...] = ("standalone", "followup", "topic_switch", "recall")

_WHITESPACE = re.compile(r"\s+")
_DIGIT = re.compile(r"[0-9]")


# --- matching ----------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """NFKC, case-folded, without whitespace: the form in which strings are compared."""
    return _WHITESPACE.sub("", unicodedata.normalize("NFKC", text).casefold())


def _needle_pattern(needle: str) -> str:
    chars = normalize(needle)
    body = r"\s*".join(re.escape(c) for c in chars)
    # Digit edges must be number edges: "799" inside "7999" or "1,799" is another number.
    if _DIGIT.match(chars[:1]):
        body = r"(?<![0-9])(?<![0-9][.,])" + body
    if _DIGIT.match(chars[-1:]):
        body += r"(?![0-9])(?![.,][0-9])"
    return body


def contains(haystack: str, needle: str) -> bool:
    """Whether `needle` occurs in `haystack` (NFKC, case-folded, whitespace-insensitive, number-aware)."""
    if not normalize(needle):
        return False
    return re.search(_needle_pattern(needle), unicodedata.normalize("NFKC", haystack).casefold()) is not None


@dataclass(frozen=True, slots=True)
class FactCheck:
    """Whether one list of `expect_any` is wholly present; else the closest list's missing strings."""

    found: bool
    missing: tuple[str, ...]


def check_facts(text: str, expect_any: Sequence[Sequence[str]]) -> FactCheck:
    best: tuple[str, ...] | None = None
    for alternative in expect_any:
        missing = tuple(s for s in alternative if not contains(text, s))
        if not missing:
            return FactCheck(True, ())
        if best is None or len(missing) < len(best):
            best = missing
    return FactCheck(False, best or ())


@dataclass(frozen=True, slots=True)
class Verdict:
    correct: bool
    missing: tuple[str, ...]
    rejected: tuple[str, ...]

    def why(self) -> str:
        parts = []
        if self.missing:
            parts.append("missing " + ", ".join(repr(s) for s in self.missing))
        if self.rejected:
            parts.append("rejected string found: " + ", ".join(repr(s) for s in self.rejected))
        return "; ".join(parts)


def score_answer(answer: str, expect_any: Sequence[Sequence[str]], reject_any: Sequence[str] = ()) -> Verdict:
    facts = check_facts(answer, expect_any)
    rejected = tuple(s for s in reject_any if contains(answer, s))
    return Verdict(facts.found and not rejected, facts.missing, rejected)


def language_of(text: str) -> str:
    """ "zh" when the text holds a Han character, else "en"."""
    return "zh" if has_han(text) else "en"


# --- the conversation file ---------------------------------------------------------------------------


def _non_blank(values: Iterable[str], what: str) -> None:
    for v in values:
        if not normalize(v):
            raise ValueError(f"{what} holds an empty string")


class TurnSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    q: str = Field(min_length=1, description="the customer's question")
    expect_any: list[list[str]] = Field(min_length=1, description="alternatives: every string of one must appear")
    reject_any: list[str] = Field(default_factory=list, description="strings that make an answer wrong")
    doc: str | None = Field(default=None, description="the file that answers it; null: nothing to retrieve")
    kind: Kind
    lang: str | None = Field(default=None, pattern=r"^[a-z]{2,3}(-[A-Za-z0-9]+)?$")

    @field_validator("q")
    @classmethod
    def _question(cls, q: str) -> str:
        if not q.strip():
            raise ValueError("the question is blank")
        return q

    @field_validator("expect_any")
    @classmethod
    def _alternatives(cls, alternatives: list[list[str]]) -> list[list[str]]:
        for i, alternative in enumerate(alternatives):
            if not alternative:
                raise ValueError(f"alternative {i} is an empty list")
            _non_blank(alternative, f"alternative {i}")
        return alternatives

    @field_validator("reject_any")
    @classmethod
    def _rejects(cls, rejects: list[str]) -> list[str]:
        _non_blank(rejects, "reject_any")
        return rejects

    @field_validator("doc")
    @classmethod
    def _doc(cls, doc: str | None) -> str | None:
        if doc is not None and not doc.strip():
            raise ValueError("doc is blank (use null for a turn without a document)")
        return doc

    @model_validator(mode="after")
    def _satisfiable(self) -> TurnSpec:
        # A reject string inside every alternative would fail every answer, the right one included.
        blocked = [any(contains(s, r) for s in alt for r in self.reject_any) for alt in self.expect_any]
        if all(blocked):
            raise ValueError("every expect_any alternative contains a reject_any string: no answer can be correct")
        return self

    @property
    def language(self) -> str:
        return self.lang or language_of(self.q)


class ConversationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    turns: list[TurnSpec] = Field(min_length=1)


class ConversationFileError(ValueError):
    """A conversation file that cannot be used, with where (line, field) and what is wrong."""


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(line)"


def parse_conversations(lines: Iterable[str], name: str = "<conversations>") -> list[ConversationSpec]:
    """Every conversation of a JSON-lines text; all problems are reported at once."""
    out: list[ConversationSpec] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{name} line {number}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        try:
            conv = ConversationSpec.model_validate(row)
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(f"{name} line {number}: {_where(err['loc'])}: {err['msg']}")
            continue
        if conv.id in seen:
            problems.append(f"{name} line {number}: id {conv.id!r} is already used on line {seen[conv.id]}")
            continue
        seen[conv.id] = number
        out.append(conv)
    if problems:
        raise ConversationFileError("\n".join(problems))
    if not out:
        raise ConversationFileError(f"{name}: no conversations")
    return out


def load_conversations(path: Path) -> list[ConversationSpec]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversationFileError(f"{path}: cannot read ({exc})") from exc
    return parse_conversations(text.splitlines(), str(path))


def check_grounding(conversations: Sequence[ConversationSpec], documents: Mapping[str, str]) -> list[str]:
    """Problems that make a data set untrustworthy, given each document's loaded text by file name.

    - a turn's `doc` must exist, and the first list of `expect_any` (the document's own wording; later
      lists may be translations) must be wholly in it;
    - a turn without a document (recall) must ask for what was said earlier: the first list's strings
      must occur in earlier questions or earlier turns' expected strings of the same conversation;
    - the first reject string must occur somewhere in the documents (a sibling's value; later ones
      may be other ways to write it), else it guards against nothing.
    """
    problems: list[str] = []
    corpus = "\n".join(documents.values())
    for conv in conversations:
        said: list[str] = []
        for i, turn in enumerate(conv.turns):
            where = f"{conv.id} turn {i} ({turn.q!r})"
            first = turn.expect_any[0]
            if turn.doc is not None:
                text = documents.get(turn.doc)
                if text is None:
                    problems.append(f"{where}: no document named {turn.doc!r}")
                else:
                    absent = [s for s in first if not contains(text, s)]
                    if absent:
                        problems.append(f"{where}: {absent} not in {turn.doc}")
            else:
                earlier = "\n".join(said)
                absent = [s for s in first if not contains(earlier, s)]
                if absent:
                    problems.append(f"{where}: {absent} never said earlier in the conversation")
            if turn.reject_any and not contains(corpus, turn.reject_any[0]):
                problems.append(f"{where}: reject string {turn.reject_any[0]!r} is in no document")
            said.append(turn.q)
            said.extend(s for alt in turn.expect_any for s in alt)
    return problems


# --- results and the report --------------------------------------------------------------------------


@dataclass(slots=True)
class PassTurn:
    """One turn as one pass saw it."""

    answer: str = ""
    mode: str = ""
    rewritten_query: str = ""
    rewrite_action: str = ""
    topic_switch: bool = False
    sources: list[str] = field(default_factory=list)
    verdict: Verdict = field(default_factory=lambda: Verdict(False, (), ()))
    doc_hit: bool | None = None
    error: str | None = None
    # The LLM pass only: whether the answer request's messages held the expected strings.
    context_has_fact: bool | None = None
    context_missing: tuple[str, ...] = ()
    requests: list[int] = field(default_factory=list)

    def to_json(self, with_context: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "answer": self.answer,
            "mode": self.mode,
            "rewritten_query": self.rewritten_query,
            "rewrite_action": self.rewrite_action,
            "topic_switch": self.topic_switch,
            "top_sources": self.sources[:3],
            "sources": self.sources,
            "answer_correct": self.verdict.correct,
            "missing": list(self.verdict.missing),
            "rejected": list(self.verdict.rejected),
            "doc_hit_at_3": self.doc_hit,
            "error": self.error,
        }
        if with_context:
            out["context_has_fact"] = self.context_has_fact
            out["context_missing"] = list(self.context_missing)
            out["requests"] = self.requests
        return out


@dataclass(slots=True)
class TurnResult:
    conversation: str
    index: int
    spec: TurnSpec
    extractive: PassTurn
    llm: PassTurn | None = None

    @property
    def lang(self) -> str:
        return self.spec.language

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "conversation": self.conversation,
            "turn": self.index,
            "kind": self.spec.kind,
            "lang": self.lang,
            "question": self.spec.q,
            "doc": self.spec.doc,
            "expect_any": self.spec.expect_any,
            "reject_any": self.spec.reject_any,
            "extractive": self.extractive.to_json(with_context=False),
        }
        if self.llm is not None:
            out["llm"] = self.llm.to_json(with_context=True)
        return out


def doc_hit(sources: Sequence[str], doc: str | None, k: int = 3) -> bool | None:
    """Whether `doc` (a file name or a path under the KB) is among the first k sources; None without a doc."""
    if doc is None:
        return None
    return any(s == doc or Path(s).name == doc for s in sources[:k])


@dataclass(slots=True)
class Tally:
    n: int = 0
    correct: int = 0
    doc_n: int = 0
    doc_hits: int = 0
    llm_n: int = 0
    llm_correct: int = 0
    context_hits: int = 0

    def add(self, r: TurnResult) -> None:
        self.n += 1
        self.correct += r.extractive.verdict.correct
        if r.extractive.doc_hit is not None:
            self.doc_n += 1
            self.doc_hits += r.extractive.doc_hit
        if r.llm is not None:
            self.llm_n += 1
            self.llm_correct += r.llm.verdict.correct
            self.context_hits += bool(r.llm.context_has_fact)

    def to_json(self) -> dict[str, Any]:
        def rate(k: int, n: int) -> float | None:
            return round(k / n, 4) if n else None

        return {
            "n": self.n,
            "answer_correct": rate(self.correct, self.n),
            "answer_correct_count": self.correct,
            "doc_hit_at_3": rate(self.doc_hits, self.doc_n),
            "doc_hits": self.doc_hits,
            "doc_turns": self.doc_n,
            "context_has_fact": rate(self.context_hits, self.llm_n),
            "context_has_fact_count": self.context_hits,
            "llm_answer_correct": rate(self.llm_correct, self.llm_n),
            "llm_answer_correct_count": self.llm_correct,
            "llm_turns": self.llm_n,
        }


def summarize(results: Sequence[TurnResult]) -> dict[str, dict[str, Tally]]:
    """Tallies overall, per kind (in `KINDS` order) and per language (sorted)."""
    overall, kinds, langs = Tally(), {k: Tally() for k in KINDS}, dict[str, Tally]()
    for r in results:
        overall.add(r)
        kinds[r.spec.kind].add(r)
        langs.setdefault(r.lang, Tally()).add(r)
    return {
        "overall": {"all": overall},
        "kind": {k: t for k, t in kinds.items() if t.n},
        "lang": dict(sorted(langs.items())),
    }


def summary_json(results: Sequence[TurnResult]) -> dict[str, Any]:
    groups = summarize(results)
    return {
        "overall": groups["overall"]["all"].to_json(),
        "kind": {k: t.to_json() for k, t in groups["kind"].items()},
        "lang": {k: t.to_json() for k, t in groups["lang"].items()},
    }


def _cell(k: int, n: int) -> str:
    return f"{k / n:.3f} ({k}/{n})" if n else "–"


def markdown_table(results: Sequence[TurnResult]) -> str:
    groups = summarize(results)
    with_llm = any(r.llm is not None for r in results)
    head = ["", "n", "answer_correct", "doc@3"]
    if with_llm:
        head += ["context_has_fact", "answer_correct (LLM pass)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = [("overall", groups["overall"]["all"])]
    rows += [(f"kind: {k}", t) for k, t in groups["kind"].items()]
    rows += [(f"lang: {k}", t) for k, t in groups["lang"].items()]
    for label, t in rows:
        cells = [label, str(t.n), _cell(t.correct, t.n), _cell(t.doc_hits, t.doc_n)]
        if with_llm:
            cells += [_cell(t.context_hits, t.llm_n), _cell(t.llm_correct, t.llm_n)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
