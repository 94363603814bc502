"""Rule-based pieces of query rewriting: reference markers, salient entities, and the rule rewrite.

A follow-up is *dependent* when it carries a reference marker (a pronoun, a demonstrative, an ellipsis cue
such as 那…/…呢/还有/what about/and …, or a definite noun phrase pointing back: "the movement"), or when
it is a question with hardly any content of its own ("屏幕摔碎了换一块要多少钱？"). The rule rewrite then
adds only what the question lacks: the most salient entity of the recent turns (product names, model and
order numbers, proper nouns, noun phrases), in place of 它/他/她/it(s) where it can, in front otherwise.
Appending whole history turns is what hurts retrieval, so it is never done; bare keyword queries
("Pollution") name their own subject and are left alone.

Everything here is plain string work (precompiled regexes, jieba for Chinese words and tags): no I/O.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import jieba
import jieba.posseg as pseg

_CJK = re.compile(r"[\u3400-\u9fff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")

# --- reference markers -----------------------------------------------------------------------------

_EN_MARKERS = re.compile(
    r"\b(?:it|its|itself|they|them|their|theirs|themselves|those|these|he|him|his|she|her|hers"
    r"|the former|the latter|the same|that one|this one|such)\b"
    r"|^\s*(?:what|how)\s+about\b|^\s*(?:and|also|so|then|but)\b|\bthe others?\b|\bothers\b|\belse\b"
    r"|\b(?:this|that)\s*[?.!]*\s*$|\b(?:that|this)\s+(?:would|will|does|do|did|can|could|cost|costs|mean|means)\b",
    re.IGNORECASE,
)
# Whole jieba tokens (so 应该/因此/其实 never count as 该/此/其).
_ZH_PRONOUN_WORDS = (
    "它 它们 他 他们 她 她们 这 那 这个 那个 这些 那些 这款 那款 这台 那台 这部 那部 这种 那种 这样 那样"
    " 该 此 其 上述 前者 后者 还有 其他 其它 另外 别的 另一个 同样"
)
_ZH_PRONOUNS = frozenset(_ZH_PRONOUN_WORDS.split())
_ZH_LEADING = frozenset(["那", "那么", "那要", "还", "再", "也", "而且", "另外", "然后"])
_ZH_TRAILING = frozenset(["呢"])


def is_chinese(text: str) -> bool:
    return bool(_CJK.search(text))


# "is it safer to ...", "it is better to ...": a dummy subject, not a reference.
_EXPLETIVE_IT = re.compile(
    r"\b(?:(?:is|was|isn't|wasn't)\s+it|it\s+(?:is|was|'s))\s+(?:\w+\s+){0,2}?\w+\s+(?:to|that)\b", re.I
)


def reference_marker(question: str) -> str | None:
    """The first reference marker in the question (a pronoun, demonstrative or ellipsis cue), if any."""
    question = _EXPLETIVE_IT.sub(" ", question)
    if is_chinese(question):
        words: list[str] = [str(w) for w in jieba.lcut(question) if w.strip() and not _is_punct(w)]
        if words and words[0] in _ZH_LEADING:
            return words[0]
        if words and words[-1] in _ZH_TRAILING:
            return words[-1]
        for w in words:
            if w in _ZH_PRONOUNS:
                return w
    m = _EN_MARKERS.search(question)
    return m.group().strip() if m else None


def _is_punct(word: str) -> bool:
    return all(not ch.isalnum() for ch in word)


# --- entities --------------------------------------------------------------------------------------

_EN_STOP_WORDS = """a an the and or but if then so than as of to in on at by for from with without about into over under
    after before between during since until up down out off again further once here there when where why how what
    which who whom whose this that these those it its itself they them their theirs he him his she her hers we us
    our ours you your yours i me my mine is are was were be been being am do does did doing done have has had
    having can could would should will shall may might must not no nor yes only just also too very really quite
    more most much many some any all each every both either neither other others another such same own few lot
    lots tell know explain give get got make made want need like think say said mean means let please thanks
    thank okay ok well oh hi hello sure right thing things something anything everything nothing way ways kind
    kinds type types information info question questions answer example examples sort part bit one ones use used
    using go going come still even ever yet already now today currently back else instead really actually
    please would like could possible able new old good bad best better great big small speaking regarding
    mentioned talking talk saying seems seem understand see look looking thinking wondering name time times
    i'm i’m you're it's it’s that's what's there's don't doesn't didn't isn't aren't can't won't i'd i've
    written known given taken seen gone born became become went first last vs via
    buy bought pay paid cost costs ship send sent return work works help happen happened start started end ended
    play played call called find found keep put take try turn show live believe bring begin run write read
    provide include continue set learn change lead watch follow stop create speak allow add spend grow open
    win offer remember love consider appear wait serve die expect build stay fall reach kill remain suggest
    sell require decide apply check cancel"""
_EN_STOP = frozenset(_EN_STOP_WORDS.split())
_NAME_JOINERS = frozenset(["of", "de", "del", "la", "von", "van", "&"])
_ALNUM = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])")
_VERB_LIKE = re.compile(r"^[a-z]{3,}ed$")
_EN_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'’.][A-Za-z0-9]+)*")
_SPEC = re.compile(r"^\d+(?:\.\d+)?\s*(?:gb|tb|mb|mah|w|hz|mm|g|kg|寸|英寸|核)$", re.IGNORECASE)
_LATIN_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+\-]*(?:\s+[A-Za-z0-9][A-Za-z0-9.+\-]*)*")
_SENT_START = re.compile(r"(?:^|[.!?。！？\n]\s*)$")
_ANSWER_CHARS = 1000
_ZH_NAME_TAGS = frozenset({"nr", "ns", "nt", "nz", "nrt", "nrfg", "eng"})
_ZH_NOUN_TAGS = frozenset({"n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "vn", "b", "an", "ng"})
_ZH_GENERIC_WORDS = (
    "东西 时候 问题 情况 事情 地方 方面 方法 办法 时间 钱 价格 多少钱 一下 什么 朋友 人 你们 我们 公司 店 客服"
    " 小时 今天 明天 昨天 现在 以后 之前 之后 一个 这个 那个 怎么 哪里 么"
)
_ZH_GENERIC = frozenset(_ZH_GENERIC_WORDS.split())


@dataclass(frozen=True, slots=True)
class Entity:
    text: str
    named: bool  # a name, model or id (not just a noun phrase)

    @property
    def key(self) -> str:
        return normalize(self.text)


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def entities(text: str) -> list[Entity]:
    """Candidate entities in order of appearance: names/models/ids (`named`) and noun phrases."""
    return list(_entities(text))


@lru_cache(maxsize=4096)
def _entities(text: str) -> tuple[Entity, ...]:
    # Cached by text: the same recent rounds and summary are read again on every turn of a session
    # (jieba's part-of-speech tagging is the costliest step of the gate).
    out = _latin_entities(text) if not is_chinese(text) else _chinese_entities(text)
    seen: set[str] = set()
    unique: list[Entity] = []
    for e in out:
        if e.key and e.key not in seen:
            seen.add(e.key)
            unique.append(e)
    return tuple(unique)


def _latin_entities(text: str) -> list[Entity]:
    """Name runs (capitalised words, with digits and of/de/&/-joined parts: "ThinkPad X1 Carbon Gen 12",
    "Bank of America") and noun-phrase runs (consecutive lowercase non-stopwords: "student discount").
    A run is `named` when a word is capitalised mid-sentence, mixed-case (iPhone), all-caps (HIV) or
    carries a digit (X1, S25); a lone capitalised first word of a sentence is not."""
    out: list[Entity] = []
    run: list[str] = []
    kind = ""  # "name" | "plain"
    named = False
    pending: list[str] = []  # connectors inside a name run, kept only if another name word follows
    last_end = -1

    def flush() -> None:
        nonlocal run, named, kind, pending
        while run and _SPEC.match(run[-1]):
            run.pop()
        if run and not (len(run) == 1 and run[0].isdigit()):
            out.append(Entity(" ".join(run), named))
        run, named, kind, pending = [], False, "", []

    for m in _EN_WORD.finditer(text):
        word, lower = m.group(), m.group().lower()
        if last_end >= 0 and text[last_end : m.start()].strip():
            flush()  # punctuation between words ends a run
        last_end = m.end()
        if kind == "name" and lower in _NAME_JOINERS:
            pending.append(word)
            continue
        is_name = word[0].isupper() or any(ch.isupper() for ch in word[1:]) or _ALNUM.match(word) is not None
        if word.isdigit() and kind != "name":
            flush()  # a bare number starts nothing; it only continues a name ("Gen 12")
            continue
        if lower in _EN_STOP or (not is_name and _VERB_LIKE.match(lower)):
            flush()
            continue
        word_kind = "name" if is_name or word.isdigit() else "plain"
        if word_kind != kind:
            flush()
        run.extend(pending)
        pending = []
        run.append(word)
        kind = word_kind
        named = named or _looks_named(word, bool(_SENT_START.search(text[: m.start()])))
    flush()
    return out


def _looks_named(word: str, sentence_start: bool) -> bool:
    if any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word):
        return True
    if len(word) > 1 and word.isupper():
        return True
    if any(ch.isupper() for ch in word[1:]):
        return True
    return word[0].isupper() and not sentence_start


def _chinese_entities(text: str) -> list[Entity]:
    """Latin product names inside Chinese text (with a Chinese brand just before them: 小米 15 Pro),
    long ids, Chinese proper nouns (jieba tags nr/ns/nt/nz) and runs of nouns (增值税专用发票)."""
    out: list[Entity] = []
    for m in _LATIN_RUN.finditer(text):
        words = m.group().split()
        while words and _SPEC.match(words[-1]):
            words.pop()
        if not words or (len(words) == 1 and words[0].isdigit() and len(words[0]) < 6):
            continue
        name = " ".join(words)
        brand = _brand_before(text[: m.start()])
        out.append(Entity(f"{brand} {name}" if brand else name, True))
    for run in _CJK_RUN.finditer(text):
        phrase: list[str] = []
        named = False
        for word, flag in [*pseg.lcut(run.group()), ("", "x")]:
            if flag in _ZH_NOUN_TAGS and word not in _ZH_GENERIC:
                phrase.append(word)
                named = named or (flag in _ZH_NAME_TAGS and len(word) >= 2)
                continue
            joined = "".join(phrase)
            if len(joined) >= 2 and not _inside_named(joined, out):
                out.append(Entity(joined, named))
            phrase, named = [], False
    return out


def _brand_before(prefix: str) -> str:
    """The Chinese word right before a Latin name (at most one space between), if it is a noun: 小米 15 Pro."""
    stripped = prefix.rstrip()
    if not stripped or len(prefix) - len(stripped) > 1 or not _CJK.match(stripped[-1]):
        return ""
    word, flag = pseg.lcut(stripped[-6:])[-1]
    return str(word) if len(word) >= 2 and flag in _ZH_NOUN_TAGS and word not in _ZH_GENERIC else ""


def _inside_named(phrase: str, found: Sequence[Entity]) -> bool:
    return any(phrase in e.text for e in found if e.named)


def mentions(question: str, entity: Entity) -> bool:
    """Does the question already name the entity? Case-insensitive; for Latin names, most of the name's
    words of three letters or more count ("covid" names "COVID-19", "X1 Carbon" names "ThinkPad X1 Carbon")."""
    q = normalize(question)
    if entity.key in q:
        return True
    if is_chinese(entity.text) and not entity.named:
        return False
    words = [w for w in re.split(r"[\s\-]+", entity.key) if len(w) >= 3 and w not in _EN_STOP]
    if not words:
        return False
    q_words = set(re.split(r"[^a-z0-9]+", q))
    return sum(w in q_words for w in words) * 3 >= len(words) * 2


# --- salience and the rule rewrite -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryText:
    text: str
    source: str  # "user" | "assistant" | "summary"
    age: int  # rounds back from the question (the latest round is 0)


_SOURCE_WEIGHT = {"user": 1.0, "summary": 0.6, "assistant": 0.35}
_DECAY = 0.75


@dataclass(slots=True)
class _Score:
    entity: Entity
    score: float = 0.0
    rounds: set[int] = field(default_factory=set)


def salient_entities(history: Sequence[HistoryText], limit: int = 2) -> list[Entity]:
    """Entities of the history, most salient first.

    A mention counts by its side (the user's questions most; answers only for names), its recency and
    its kind (names, models and ids beat noun phrases; longer beats shorter); an entity the user comes
    back to over several rounds is the conversation's subject and gains most (answers repeat the
    domain's own name everywhere, so their repetitions do not count). A one-word name inside a longer one
    ("Jackson" in "Reggie Jackson") adds to the longer one.
    """
    found: dict[str, _Score] = {}
    for item in history:
        for e in entities(item.text):
            if item.source == "assistant" and not e.named:
                continue
            size = len(e.text) / 2 if is_chinese(e.text) else len(e.key.split())
            weight = _SOURCE_WEIGHT[item.source] * _DECAY**item.age
            entry = found.setdefault(e.key, _Score(e))
            entry.score += weight * (3.0 if e.named else 1.0) * (1 + 0.25 * min(size, 3.0))
            if item.source != "assistant":
                entry.rounds.add(item.age)
            if e.named and not entry.entity.named:
                entry.entity = e  # keep the capitalised spelling
    for key in sorted(found, key=len):
        words = set(key.split())
        if len(words) != 1 or not found[key].entity.named:
            continue
        longer = [k for k in found if k != key and words < set(k.split()) and found[k].entity.named]
        if longer:
            best = max(longer, key=lambda k: found[k].score)
            found[best].score += found[key].score
            found[best].rounds |= found[key].rounds
            del found[key]
    ranked = sorted(found.values(), key=lambda s: s.score * (1 + 0.5 * max(len(s.rounds) - 1, 0)), reverse=True)
    return [s.entity for s in ranked[:limit]]


_EN_IT = re.compile(r"\b(its|it|his|he|she|him|her)\b", re.IGNORECASE)
_ZH_IT = re.compile(r"[它他她]们|它|[他她](?!俩)")


def resolve(question: str, entity: Entity) -> str:
    """Put the entity into the question: in place of 它/他/她/it(s)/he/she when there is one, else in front."""
    if is_chinese(question):
        m = _ZH_IT.search(question)
        if m is None:
            return f"{entity.text} {question.lstrip()}"
        before, after = question[: m.start()], question[m.end() :]
        # A Latin name inside Chinese text gets a space on each side that touches Chinese.
        left = " " if before and _CJK.match(before[-1]) and entity.text[0].isascii() else ""
        right = " " if after and _CJK.match(after[0]) and entity.text[-1].isascii() else ""
        return f"{before}{left}{entity.text}{right}{after}"
    dummies = [d.span() for d in _EXPLETIVE_IT.finditer(question)]
    for m in _EN_IT.finditer(question):
        if any(a <= m.start() < b for a, b in dummies):
            continue  # "is it better to ...": nothing to replace
        if m.group(1).lower() in {"he", "she", "him", "her", "his"} and not entity.named:
            continue  # a person is a name
        repl = f"{entity.text}'s" if m.group(1).lower() in {"its", "his"} else entity.text
        return question[: m.start()] + repl + question[m.end() :]
    return f"{entity.text}: {question.lstrip()}"


def own_names(question: str) -> list[Entity]:
    return [e for e in entities(question) if e.named]


_DETERMINERS = frozenset(["the", "this", "that", "these", "those"])
_LATIN_TOKEN = re.compile(r"[A-Za-z][A-Za-z-]*")


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


_DETERMINER = re.compile(r"\b(?:the|this|that|these|those)\s+[a-z]", re.IGNORECASE)


def has_determiner(question: str) -> bool:
    """Cheap pre-check for `definite_reference` (which needs the history's entities)."""
    return _DETERMINER.search(question) is not None


def definite_reference(question: str, candidates: Sequence[Entity]) -> tuple[str, Entity] | None:
    """A definite noun phrase that points back to a recent multi-word entity headed by the same word
    ("the movement" -> "Quit India Movement", "the city" -> "City of Monterey Park"): (span, entity)."""
    tokens = list(_LATIN_TOKEN.finditer(question))
    for i, det in enumerate(tokens):
        if det.group().lower() not in _DETERMINERS:
            continue
        phrase: list[re.Match[str]] = []  # the lowercase non-stopwords right after it: "the stock market"
        for tok in tokens[i + 1 :]:
            gap = question[(phrase[-1] if phrase else det).end() : tok.start()]
            if gap.strip() or not tok.group().islower() or tok.group() in _EN_STOP:
                break
            phrase.append(tok)
        if not phrase:
            continue
        head = _singular(phrase[-1].group())
        for e in candidates:
            parts = e.key.split()
            heads = {_singular(parts[-1])} | {_singular(w) for w, nxt in itertools.pairwise(parts) if nxt == "of"}
            if len(parts) >= 2 and head in heads and not mentions(question, e):
                return question[det.start() : phrase[-1].end()], e
    return None


_PERSONAL = re.compile(r"\b(?:he|him|his|she|her|hers)\b|[他她]", re.IGNORECASE)


def personal_pronoun(question: str) -> bool:
    return _PERSONAL.search(question) is not None


def rule_rewrite(question: str, candidates: Sequence[Entity], names_only: bool = False) -> tuple[str, str]:
    """(query, detail): the question with the most salient entity it lacks, or unchanged.

    `candidates` are the history's entities, most salient first (`salient_entities`); `names_only`
    (for he/she) passes over noun phrases."""
    definite = definite_reference(question, candidates)
    if definite is not None:
        span, entity = definite
        article = span.split()[0]
        return question.replace(span, f"{article} {entity.text}", 1), f"resolved {span!r} to {entity.text!r}"
    for entity in candidates:
        if (entity.named or not names_only) and not mentions(question, entity):
            return resolve(question, entity), f"added {entity.text!r}"
    return question, "no entity to add"


# Words that say little about what is asked: they do not make a question standalone.
_WEAK_WORDS = """big bigger biggest large larger largest small smaller smallest best worst main major important different
    same typical general common usual usually possible necessary available interesting popular good great
    tho though btw hmm lol maybe perhaps anyway really exactly basically generally"""
_WEAK = frozenset(_WEAK_WORDS.split())


def content_size(question: str) -> int:
    """How much the question says of its own: content words of its entities (English, without weak
    words such as "biggest" or "tho"), or entities and noun phrases (Chinese)."""
    found = entities(question)
    if is_chinese(question):
        return len(found)
    return sum(1 for e in found for w in e.key.split() if w not in _WEAK)


_EN_QUESTION_WORD_LIST = """what what's how why when where who whom whose which is are was were do does did can could
    should would will shall may might must has have had tell explain describe show give list compare need want"""
_EN_QUESTION_WORDS = frozenset(_EN_QUESTION_WORD_LIST.split())
_ZH_QUESTION = re.compile(
    r"[吗么呢吧]|什么|怎么|怎样|如何|多少|多久|多大|多重|几|哪|是否|能不能|可不可以|可以|能否|有没有|是不是|要不要"
)


def is_fragment(question: str) -> bool:
    """A bare keyword query ("Pollution", "Investments?", "固安"): no question word (and in Chinese no
    verb). It names its own subject, so it is left alone rather than completed with the history's."""
    if is_chinese(question):
        return _ZH_QUESTION.search(question) is None and not any(f.startswith("v") for _, f in pseg.lcut(question))
    words = [w.lower() for w in _EN_WORD.findall(question)]
    return len(words) <= 4 and not any(w in _EN_QUESTION_WORDS for w in words)


def history_texts(summary: str, rounds: Sequence[tuple[str, str]]) -> list[HistoryText]:
    """The summary, then each round's question and answer (oldest first), with their ages."""
    n = len(rounds)
    out = [HistoryText(summary, "summary", n)] if summary else []
    for i, (user, assistant) in enumerate(rounds):
        out.append(HistoryText(user, "user", n - 1 - i))
        if assistant:
            out.append(HistoryText(assistant[:_ANSWER_CHARS], "assistant", n - 1 - i))
    return out
