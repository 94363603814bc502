"""Rule-based pieces of query rewriting: reference markers, salient entities, contrast follow-ups and the
rule rewrite.

A follow-up is *dependent* when it carries a reference marker (a pronoun, a demonstrative, an ellipsis cue
such as 那…/…呢/还有/what about/and …, or a definite noun phrase pointing back: "the movement"), when it
is a contrast follow-up ("那标准款呢？", "and the 512GB one?"), or when it is a question with hardly any
content of its own ("屏幕摔碎了换一块要多少钱？"). The rule rewrite then

- for a contrast follow-up, puts the new value into the previous question in place of the old value of
  its kind (a storage size, a screen size, a variant word, a colour, a product or another name), and
  otherwise carries the previous question's rest ("那保修期呢" after a price question -> "<product> 的保修期");
- else adds only what the question lacks: the most salient entity of the recent turns, in place of
  它/他/她/it(s)/her where it can, in front otherwise.

Entities come from the user's questions (and the summary); the service's answers contribute only short
model names and ids, read after their own framing (bracketed markers, source citations, document tags,
introductions) is removed, so neither "no LLM configured" nor a whole answer sentence can become a query's
subject. Order and phone numbers never stand in for a pronoun; an order number is added only to a
question about an order. Appending whole history turns hurts retrieval, so it is never done; bare keyword
queries ("Pollution") name their own subject and are left alone.

Everything here is plain string work (precompiled regexes, jieba for Chinese words and tags): no I/O.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import jieba
import jieba.posseg as pseg

from rag_core.text import EN_GENERIC_WORDS as _EN_STOP
from rag_core.text import HAN as _CJK
from rag_core.text import HAN_RUN as _CJK_RUN
from rag_core.text import fail_fast
from rag_core.text import has_han as is_chinese
from rag_service.facts import CATEGORIES, PLACES, VARIANT_WORDS, products
from rag_service.filler import is_courtesy
from rag_service.glossary import concepts
from rag_service.posseg_viterbi import install as _install_fast_viterbi

# The same tags, faster: the decoder is most of the cost of tagging a new question.
_install_fast_viterbi()


# The same questions are read again on every later turn of their conversation (and by several rules in
# one turn); jieba's segmentation and tagging are the costly part, so recent results are remembered.
@lru_cache(maxsize=8192)
def _tagged(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((str(word), str(flag)) for word, flag in pseg.lcut(text))


@lru_cache(maxsize=8192)
def _cut(text: str) -> tuple[str, ...]:
    return tuple(str(word) for word in jieba.lcut(text))


# --- the service's own framing ----------------------------------------------------------------------

# A bracketed marker ("[extractive answer, no LLM configured]", "【参考资料】", "[1]") and the introduction
# that follows it up to a colon on the same line ("知识库中最相关的原文：").
_MARKER_INTRO = re.compile(r"(?:\[[^\[\]\n]{0,160}\]|【[^【】\n]{0,160}】)(?:[^\n:：。.!?！？]{0,60}[:：])?")
_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>\n]*)?/?>")
# A line that only introduces what follows ("The most relevant passages:").
_INTRO_LINE = re.compile(r"^[^\n]{0,60}[:：][ \t]*$", re.MULTILINE)
_SOURCE_LINE = re.compile(
    r"^[ \t]*(?:sources?|references?|citations?|来源|出处|参考(?:资料|来源|文档)?|引用)[ \t]*[:：].*$",
    re.IGNORECASE | re.MULTILINE,
)
# A parenthetical closing a line or sentence: the source after a quoted line ("…（保修政策）", "… (FAQ)").
_CITATION = re.compile(r"[ \t]*[（(][^（）()\n]{1,80}[）)][ \t]*(?=[。.；;!?！？]?[ \t]*$)", re.MULTILINE)
_BULLET = re.compile(r"^[ \t]*(?:[-*•·>]+|\d{1,2}[.)、])[ \t]+", re.MULTILINE)


# Cached: every turn reads the answers of the rounds before it again (history texts, the rewriting prompt).
@lru_cache(maxsize=2048)
def strip_framing(text: str) -> str:
    """An answer (or summary) without the service's own framing: bracketed markers with their introduction,
    `<document …>` tags, introduction and source lines, source citations after quoted lines, list bullets.
    Only what the answer says about the subject is left to take entities from."""
    text = _MARKER_INTRO.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = _SOURCE_LINE.sub("", text)
    text = _INTRO_LINE.sub("", text)
    text = _CITATION.sub("", text)
    return _BULLET.sub("", text).strip()


# --- reference markers -----------------------------------------------------------------------------

# Pronouns and demonstratives point at something: a name before them inside the question is their
# antecedent ("Is Lyme Disease dangerous and how is it treated?"). Cues ("and …", "what about", 那…/…呢,
# "else") only say the question continues the conversation: a name of its own then makes it standalone.
_ONE_VERBS = ("get", "need", "want", "buy", "order", "request", "issue", "book", "rent", "send", "ask for", "apply for")
_AFTER_VERB = "|".join(rf"(?<=\b{verb} )" for verb in _ONE_VERBS)
_EN_PRONOUNS = re.compile(
    r"\b(?:it|its|itself|they|them|their|theirs|themselves|those|these|he|him|his|she|her|hers"
    r"|the former|the latter|that one|this one|such)\b"
    r"|\bthe same\b(?!\s+(?:\w+\s+)?as\b)"
    r"|\b(?:this|that)\s*[?.!]*\s*$"
    r"|(?:(?<=\bis )|(?<=\bwas ))(?:this|that)(?=\s+(?:a|an|the|still|really|true|safe|normal|possible)\b)"
    r"|\bthis\s+(?!(?:year|week|month|morning|afternoon|evening|weekend|summer|winter|spring|autumn|fall)\b)[a-z]{3,}"
    # "Can I still ask for one?", "Do I need one for that?": "one" as the object of a verb, with no noun after it.
    rf"|(?:{_AFTER_VERB})one\b"
    r"(?=\s*(?:[?.!,;]|$)|\s+(?:for|online|now|too|after|before|later|if|when|in|with|at|from|today|again|as|by)\b)",
    re.IGNORECASE,
)
# "that means …", "which one …": they continue what was said, but a name of their own is the subject.
_EN_CUES = re.compile(
    r"^\s*(?:what|how)\s+about\b|^\s*(?:and|also|so|then|but)\b|\bthe others\b"
    r"|\b(?:that|this)\s+(?:would|will|does|do|did|can|could|cost|costs|mean|means)\b"
    r"|\bwhich\s+(?:one|ones|type|types|kind|kinds|option|options)\b"
    r"|\bthe other(?:\s+ones?)?(?=\s*[?.!,]|\s*$)|\bothers\b|\belse\b|\bback then\b|\btell me more\b",
    re.IGNORECASE,
)
# Whole jieba tokens (so 应该/因此/其实 never count as 该/此/其).
_ZH_PRONOUN_WORDS = (
    "它 它们 他 他们 她 她们 这 那 这个 那个 这些 那些 这款 那款 这台 那台 这部 那部 这种 那种 这样 那样"
    " 那它 这它 该 此 其 上述 前者 后者"
)
_ZH_PRONOUNS = frozenset(_ZH_PRONOUN_WORDS.split())
_ZH_CUE_WORDS = frozenset(["还有", "其他", "其它", "另外", "别的", "另一个", "同样"])
_ZH_LEADING = frozenset(["那", "那么", "那要", "还", "再", "也", "而且", "另外", "然后"])
_ZH_TRAILING = frozenset(["呢"])

# "is it safer to ...", "it is better never ...": a dummy subject, not a reference. "What if it's a large item?":
# the noun says what is meant, a case rather than the thing the conversation is about.
# "It's a Kestrel K2, bought last May.": a sentence opening by naming what "it" is.
_IDENTIFIED_IT = r"(?:^|[.!?]\s+)\W*it(?:'s|’s|\s+is|\s+was)\s+(?:a|an|the|my|our)\s+(?-i:[A-Z])\w*"
_EXPLETIVE_IT = re.compile(
    r"\b(?:(?:is|was|isn't|wasn't)\s+it|it\s+(?:is|was|'s))\s+(?:\w+\s+){0,2}?\w+\s+"
    r"(?:to|that|never|not|if|when|whether)\b"
    r"|\bif\s+it(?:'s|’s|\s+is|\s+was)\s+(?:a|an)\s+\w+"
    # The weather's "it": "if it's windy", "once it snows".
    r"|\bit(?:'s|’s|\s+is|\s+was|\s+gets|\s+got)\s+(?:very\s+|too\s+|really\s+)?"
    r"(?:below\s+(?:zero|freezing)|freezing|raining|snowing|humid|windy)\b"
    r"|\bit\s+(?:rains|snows|rained|snowed|freezes)\b"
    # What doing something costs or takes: "does it cost extra to post …", "will it take long to mend".
    r"|\b(?:does|do|did|will|would|could|can|might|should)\s+it\s+(?:cost|take)\s+(?:\w+\s+){0,3}?to\s+(?=[a-z])"
    r"|\bit\s+(?:costs|takes|cost|took)\s+(?:\w+\s+){0,3}?to\s+(?=[a-z])"
    rf"|{_IDENTIFIED_IT}",
    re.IGNORECASE,
)


def identifies_it(question: str) -> bool:
    """Does the question say what the thing discussed is ("It's a Kestrel K2, bought last May.")? Its "it" needs
    no antecedent, and the name it gives is the conversation's thing, not a new subject."""
    return re.search(_IDENTIFIED_IT, question, re.IGNORECASE) is not None


@dataclass(frozen=True, slots=True)
class Marker:
    text: str
    pronoun: bool  # a pronoun or demonstrative (else an ellipsis cue)
    start: int  # where it is in the question (-1: at its end, as 呢)


# Remembered: the gate asks it of each recent question again on every turn (and of the question several times).
@lru_cache(maxsize=8192)
def find_marker(question: str) -> Marker | None:
    """The first reference marker in the question (a pronoun, demonstrative or ellipsis cue), if any."""
    question = _EXPLETIVE_IT.sub(lambda m: " " * len(m.group()), question)
    if is_chinese(question):
        words: list[str] = [str(w) for w in _cut(question)]
        spans: list[tuple[str, int]] = []
        pos = 0
        for w in words:
            if w.strip() and not _is_punct(w):
                spans.append((w, pos))
            pos += len(w)
        if spans and spans[0][0] in _ZH_LEADING:
            return Marker(spans[0][0], False, spans[0][1])
        for i, (w, start) in enumerate(spans):
            if w in _ZH_PRONOUNS:
                return Marker(w, True, start)
            if w in _ZH_CUE_WORDS and not _separately(w, spans[i + 1 : i + 2]):
                return Marker(w, False, start)
        if spans and spans[-1][0] in _ZH_TRAILING:
            return Marker(spans[-1][0], False, -1)
    found = [m for m in (_EN_PRONOUNS.search(question), _EN_CUES.search(question)) if m is not None]
    if not found:
        return None
    first = min(found, key=lambda m: m.start())
    return Marker(first.group().strip(), first.re is _EN_PRONOUNS, first.start())


def _separately(word: str, after: Sequence[tuple[str, int]]) -> bool:
    """Is 另外 inside a question the adverb "separately, extra" ("挂钩是另外卖的", "邮费另外算不"), no cue pointing back?
    The other one (另外的, 另外那款, 另外一个) is still a cue."""
    return word == "另外" and bool(after) and after[0][0][:1] not in _OTHER_ONE


_OTHER_ONE = frozenset("的一两几那这个款种")


def reference_marker(question: str) -> str | None:
    marker = find_marker(question)
    return marker.text if marker else None


def _is_punct(word: str) -> bool:
    return all(not ch.isalnum() for ch in word)


# --- entities --------------------------------------------------------------------------------------

_NAME_JOINERS = frozenset(["of", "de", "del", "la", "von", "van", "&"])
_ALNUM = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])")
_VERB_LIKE = re.compile(r"^[a-z]{3,}ed$")
_EN_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'’.][A-Za-z0-9]+)*")
_UNIT = r"\d+(?:\.\d+)?\s*-?\s*(?:gb|tb|mb|mah|w|hz|mm|g|kg|寸|英寸|inch|inches|in)"
_SPEC = re.compile(rf"^{_UNIT}(?:\+{_UNIT})*$|^\d+(?:\.\d+)?[kmb%]$|^ip[x\d]\d$", re.IGNORECASE)
_LATIN_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+\-]*(?:\s+[A-Za-z0-9][A-Za-z0-9.+\-]*)*")
_SENT_ENDS = frozenset(".!?。！？:：\n")
_ENTITY_ANSWER_CHARS = 1000  # of each answer, searched for entities
# Prepositions, adverbs and units of time the shared stop list lacks: a noun phrase ends at them ("leave above
# the door", "after ten days" are no subject, "the door" is).
_EN_BREAK_WORDS = """above below beneath underneath through throughout across behind beyond near around within along
    against toward towards upon per away inside outside onto amid besides day days week weeks month months year
    years hour hours minute minutes"""
_EN_BREAKS = frozenset(_EN_BREAK_WORDS.split())
# Words a question opens a clause or a sentence with that the stop list lacks ("While it's in, …", "Do we come
# back afterwards?"), and the adjectives of a language ("an English-speaking store"): never a subject, capitalised
# or not.
_EN_CLAUSE_WORD_LIST = """while whilst although though because unless whereas afterwards afterward beforehand meanwhile
    anyway anyhow otherwise later soon"""
_EN_CLAUSE_WORDS = frozenset(_EN_CLAUSE_WORD_LIST.split())
# Sentence adverbs a question ends or hedges with ("what's in it exactly?", "how much is it normally?"): never part
# of what a later question may be about.
_EN_ADVERBS = frozenset(
    [
        *("exactly", "usually", "normally", "generally", "roughly", "approximately", "basically", "probably"),
        *("definitely", "maybe", "perhaps", "anyway", "later", "soon", "often"),
    ]
)
# "Any delivery in August?": a day or a month says when, capitalised as it is; it is no new subject.
_EN_WHEN = (
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?"
    r"|january|february|march|april|june|july|august|september|october|november|december"
)
_EN_NOT_SUBJECT = re.compile(
    rf"^(?:{'|'.join(_EN_CLAUSE_WORDS)}|english|chinese|mandarin|cantonese)(?:-[a-z]+)?$|^(?:{_EN_WHEN})$",
    re.IGNORECASE,
)
# The customer's body ("my two eyes", "his head", "眼睛"): what a question is asked for, not the subject to carry
# into the next one.
_BODY_PART = re.compile(
    r"^(?:(?:my|his|her|our|their|your|two|both|one|left|right)\s+)*"
    r"(?:eyes?|head|face|hands?|arms?|legs?|feet|foot|ears?|nose|skin|teeth|tooth|hair|knees?|neck|shoulders?|wrists?)$"
    r"|^(?:眼睛|双眼|眼|头|脸|手|脚|耳朵|鼻子|皮肤|牙齿?|牙口|肠胃|关节|头发|膝盖|腰|脖子|肩膀?|手腕)$",
    re.IGNORECASE,
)
# A Chinese noun phrase holding a question word ("多长时间", "多少钱", "什么时候") asks; it names nothing.
_ZH_QUESTION_WORD = re.compile(r"多长|多久|多少|多大|多重|什么|怎么|怎样|哪|几")
_AUX = ("m", "re", "ve", "d", "ll")
# A subject pronoun or "be": the word after it is a verb or a complement ("it turns out", "should I leave",
# "to be faulty"), not a noun.
_EN_SUBJECTS = frozenset(
    [
        *("i", "you", "we", "they", "he", "she", "it", "be", "been", "being"),
        # A subject with its auxiliary in one word ("I'm flying home", "we've booked"): a verb follows all the same.
        *(f"{who}{apostrophe}{aux}" for who in ("i", "you", "we", "they") for apostrophe in "'’" for aux in _AUX),
    ]
)
# jieba's person/place/organisation tags; a tag makes a name only on a word that stands alone
# ("李宇春", "上海"), never inside a run of nouns ("电池续航": 续航 is tagged nr).
_ZH_NAME_TAGS = frozenset({"nr", "ns", "nt", "nrt", "nrfg"})
_ZH_NOUN_TAGS = frozenset({"n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "vn", "b", "an", "ng"})
_ZH_GENERIC_WORDS = (
    "东西 时候 问题 情况 事情 地方 方面 方法 办法 时间 钱 价格 多少钱 一下 什么 朋友 人 你们 我们 公司 店 客服"
    " 小时 今天 明天 昨天 现在 以后 之前 之后 一个 这个 那个 怎么 哪里 么 用户 客户 顾客 助手 原文 知识库 资料 内容"
    # "外国朋友", "官网下单", "需要提供什么信息": whose, where or what the customer says, never a subject of its own;
    # 要点 is jieba's noun for the colloquial 要(一)点 ("能先要点试用装吗").
    " 外国 官网 信息 要点"
)
_ZH_GENERIC = frozenset(_ZH_GENERIC_WORDS.split())
# Long digit runs are order, tracking or phone numbers, not product models (S25, X1, 15, M3, 6100mAh).
_ID_DIGITS = re.compile(r"\d{6,}")
_TITLE_WORD = re.compile(r"^[A-Z][a-z]*(?:[-'’][A-Z][a-z]+)+$")  # Tse-Tung, O'Brien
_YEAR = re.compile(r"^(?:1[89]|20)\d\d$")
_MONTH = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)\b",
    re.IGNORECASE,
)
# What the privacy masker leaves of a number: digits (or letters) around a run of asterisks.
_MASKED = re.compile(r"[A-Za-z0-9]*\*{3,}[A-Za-z0-9]*")
# The name of an identifier the customer gives (a phone, order, tracking, ID card or member number, an e-mail):
# what the number is, not a subject to carry into later questions ("手机号 押金多少").
_ID_LABEL = re.compile(
    r"(?:我的|my\s+|your\s+)?(?:手机号码?|电话号码?|联系电话|手机|订单号码?|订单编号|单号|运单号|快递单号|物流单号|身份证号?码?"
    r"|会员号|会员卡号|卡号|邮箱(?:地址)?|(?:mobile|cell|tele)?phone(?:\s+number)?|mobile(?:\s+number)?"
    r"|order\s+(?:number|no|id)|tracking\s+(?:number|no|id)|e-?mail(?:\s+address)?|id\s+number|member(?:ship)?\s+number)",
    re.IGNORECASE,
)
_PHONE = re.compile(r"^(?:\+?86[- ]?)?1[3-9]\d{9}$|^\+?\d[\d -]{9,}\d$")
# A quantity, an age or a date on its own ("100ml", "2 kg", "4-year-old", "3 岁", "14 November", "11月14日",
# "600 yuan"): a value the customer gives about what they buy, their pet or their plans, never the thing a later
# "it" or ellipsis is about (the product it measures is; a date is no thing at all).
_MEASURE_ONLY = re.compile(
    r"^\d+(?:\.\d+)?\s*-?\s*(?:ml|millilit(?:re|er)s?|毫升|kg|kilos?|g|grams?|克|公斤|斤|mg|oz|lbs?|cm|mm|厘米|毫米"
    r"|yuan|rmb|元|块|岁|个?月|周|天|日|号|年|years?|months?|weeks?|days?)$"
    r"|^\d+(?:\.\d+)?-(?:year|month|week|day)s?-old$"
    rf"|^\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_EN_WHEN})$|^(?:{_EN_WHEN})\s+\d{{1,2}}(?:st|nd|rd|th)?$"
    r"|^(?:\d{1,2}月)?\d{1,2}[日号]$|^\d{1,2}月(?:\d{1,2}[日号])?$",
    re.IGNORECASE,
)


def measure_only(text: str) -> bool:
    return _MEASURE_ONLY.match(text.strip()) is not None


@dataclass(frozen=True, slots=True)
class Entity:
    text: str
    named: bool  # a name, model or id (not just a noun phrase)

    @property
    def key(self) -> str:
        return normalize(self.text)

    @property
    def ident(self) -> bool:
        """An order, tracking or phone number."""
        return _ID_DIGITS.search(self.text) is not None

    @property
    def phone(self) -> bool:
        return _PHONE.match(self.text.strip()) is not None

    @property
    def model(self) -> bool:
        """A product model or code: a word mixing letters and digits (S25, M3), mixed case (iPhone,
        ThinkPad) or an acronym (HIV, FICA) — what an answer may contribute."""
        if not self.named:
            return False
        words = _EN_WORD.findall(self.text)
        if any(
            _is_model_word(w) and not _TITLE_WORD.match(w) and not (w.isalpha() and w.isupper() and len(w) < 3)
            for w in words
        ):
            return True  # not "Tse-Tung" (title case) nor "UK" (a place more often than a product)
        # A name with a model number: "Pixel 9", "小米 15 Pro" (a year or a date is no model number).
        if _MONTH.search(self.text):
            return False
        has_number = any(w.isdigit() and not _YEAR.match(w) for w in words)
        return has_number and (is_chinese(self.text) or any(w[0].isupper() for w in words))


# Remembered: every word of every new answer is asked about, and the same words recur.
@lru_cache(maxsize=16384)
def _is_model_word(word: str) -> bool:
    if any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word):
        return True
    return (len(word) > 1 and word.isupper()) or any(ch.isupper() for ch in word[1:])


@lru_cache(maxsize=8192)
def normalize(text: str) -> str:
    # Remembered: every entity's key and every history text are normalized again on each later turn.
    return re.sub(r"\s+", " ", text.lower()).strip()


# Remembered, like `normalize`: `mentions` squashes every history text again for each entity on each turn.
@lru_cache(maxsize=8192)
def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text.lower())


def entities(text: str) -> list[Entity]:
    """Candidate entities in order of appearance: names/models/ids (`named`) and noun phrases."""
    return list(_entities(text))


@lru_cache(maxsize=4096)
def _entities(text: str) -> tuple[Entity, ...]:
    # Cached by text: the same recent rounds and summary are read again on every turn of a session
    # (jieba's part-of-speech tagging is the costliest step of the gate).
    # A masked number ("138****5678", as memory stores a phone number) is no model: its digits would read as one.
    text = _MASKED.sub(" ", text)
    out = _latin_entities(text) if not is_chinese(text) else _chinese_entities(text)
    seen: set[str] = set()
    unique: list[Entity] = []
    for e in out:
        if _ID_LABEL.fullmatch(e.key):
            continue  # "手机号", "my order number": the customer's identifier, never what a question is about
        if _EN_NOT_SUBJECT.match(e.text) or _BODY_PART.match(e.text) or _ZH_QUESTION_WORD.search(e.text):
            continue
        if is_courtesy(e.text):
            continue  # "谢谢" tagged as a name: thanking is no subject
        if measure_only(e.text):
            continue
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

    previous = ""  # the word before, lowercase
    # Whether the word before `previous` ended a noun run ("a card which includes …": a relative clause's verb).
    noun_before, in_run = False, False
    for m in _EN_WORD.finditer(text):
        word = m.group()
        lower = word.lower()
        if last_end >= 0 and text[last_end : m.start()].strip():
            flush()  # punctuation between words ends a run
            previous, in_run = "", False
        last_end = m.end()
        relative = previous in _RELATIVES and noun_before
        # "How fast …", "how often …": the word after "how" is an adjective or an adverb, never a subject.
        after_how = previous == "how"
        after_subject, previous = previous in _EN_SUBJECTS or relative, lower
        # "one"/"something" stand for a noun: "the one that includes …" opens a relative clause as "the plan that …".
        noun_before, in_run = in_run, lower in _NOUN_PRONOUNS
        if kind == "name" and lower in _NAME_JOINERS:
            pending.append(word)
            continue
        # A capital anywhere in the word (its letters are ASCII, which `lower` changes only there), or a digit
        # with a letter.
        is_name = word != lower or _ALNUM.match(word) is not None
        if word.isdigit() and kind != "name":
            flush()  # a bare number starts nothing; it only continues a name ("Gen 12")
            continue
        verb = not is_name and (_VERB_LIKE.match(lower) is not None or (after_subject and kind != "name"))
        stop = lower in _EN_STOP or lower in _EN_CLAUSE_WORDS or lower in _EN_ADVERBS or (after_how and not is_name)
        if stop or (lower in _EN_BREAKS and not is_name) or verb or (_SPEC.match(word) and kind != "name"):
            flush()
            continue
        word_kind = "name" if is_name or word.isdigit() else "plain"
        if word_kind != kind:
            flush()
        run.extend(pending)
        pending = []
        possessive = _POSSESSIVE.search(word) if len(word) > 2 else None
        run.append(word[: possessive.start()] if possessive else word)
        in_run = True
        kind = word_kind
        named = named or _looks_named(word, _sentence_start(text, m.start()))
        if possessive:
            flush()  # "Dorothy Day's essay": the possessor is one entity, what it owns another
    flush()
    return out


_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)
# After a noun, these open a relative clause whose first word is its verb ("a card which lists the fees").
_RELATIVES = frozenset(["that", "which", "who"])
_NOUN_PRONOUNS = frozenset(["one", "ones", "something", "anything", "everything", "nothing", "someone", "anyone"])


def _sentence_start(text: str, at: int) -> bool:
    """Does a sentence start at `at`: the text before it is empty, or ends with a sentence's (or a line's) end and
    whitespace? Read backwards from `at`: a search of the whole text before each word made long answers quadratic."""
    i = at
    while i > 0 and text[i - 1].isspace():
        if text[i - 1] == "\n":
            return True
        i -= 1
    if i > 0:
        return text[i - 1] in _SENT_ENDS
    # Only whitespace before: the start of the text, or (as `$` matches before a final newline) a lone newline.
    return at == 0


def _looks_named(word: str, sentence_start: bool) -> bool:
    if _is_model_word(word):
        return True
    return word[0].isupper() and not sentence_start


# A Latin run inside Chinese text is a product name ("MateBook X Pro") unless it reads like English
# text: many words, or a lowercase function word ("Every phone and laptop sold by ...").
_MAX_NAME_WORDS = 5


def _chinese_entities(text: str) -> list[Entity]:
    """Latin product names inside Chinese text (with a Chinese brand just before them: 小米 15 Pro),
    long ids, Chinese proper nouns (a jieba nr/ns/nt word on its own) and runs of nouns (增值税专用发票).
    English sentences inside the text are read as English."""
    out: list[Entity] = []
    for m in _LATIN_RUN.finditer(text):
        words = m.group().split()
        if len(words) > _MAX_NAME_WORDS or any(w.lower() in _EN_STOP and not w[0].isupper() for w in words):
            out.extend(_latin_entities(m.group()))
            continue
        while words and _SPEC.match(words[-1]):
            words.pop()
        if not words:
            continue
        name = " ".join(words)
        # An id stands alone (订单 XC2025… is the order number, not a product of the brand 订单).
        brand = "" if _ID_DIGITS.search(name) else _brand_before(text[: m.start()])
        if brand and _MEASURE_LABEL.search(brand) and words[0][0].isdigit():
            continue  # "厚度 35 mm", "亮度 400": an attribute's value, not a model of a brand
        if _LONE_ATTRIBUTE.match(brand):
            brand = ""  # "版本 K2", "型号 X9": a label before its value, no brand
        if len(words) == 1 and words[0].isdigit() and len(words[0]) < 6 and not (brand and 2 <= len(words[0]) <= 3):
            continue  # a count or a price; after a brand a two- or three-digit number is the model: 小米 15
        out.append(Entity(f"{brand} {name}" if brand else name, True))
    for run in _CJK_RUN.finditer(text):
        phrase: list[tuple[str, str]] = []
        before: list[str] = []  # the words before the run of nouns
        for word, flag in (*_services_named(_tagged(run.group())), ("", "x")):
            # A doubled verb ("试试", "看看") is tagged a verbal noun: trying, no thing.
            if (
                flag in _ZH_NOUN_TAGS
                and word not in _ZH_GENERIC
                and not (flag == "vn" and word[:1] * 2 == word)
                and not (not phrase and _not_yet(before))
            ):
                phrase.append((word, flag))
                continue
            if not phrase:
                before = [*before[-1:], word]
                continue  # no run of nouns ends here
            joined = "".join([w for w, _ in phrase])
            named = len(phrase) == 1 and phrase[0][1] in _ZH_NAME_TAGS and len(joined) >= 2
            # "我是金卡", "我是油皮": what the customer is (a tier, a skin type), not what later questions ask about.
            own = before[-2:] == ["我", "是"]
            if len(joined) >= 2 and not own and not _inside_named(joined, out) and not _LONE_ATTRIBUTE.match(joined):
                out.append(Entity(joined, named))
            phrase, before = [], [word]
    return out


def _not_yet(before: Sequence[str]) -> bool:
    """Do the words before end with "not yet" (还没, 尚未, 未)? What follows is a verb, whatever jieba tags it
    ("还没发货": not shipped yet), no thing the customer asks about."""
    return bool(before) and (before[-1] in _NOT_YET or before[-2:] == ["还", "没"])


_NOT_YET = frozenset(["还没", "尚未", "未", "还未"])


# What asks a price right after a word: a service named by its verb before it ("干洗收费吗", "熨烫价格") is a thing
# the shop sells, a noun there.
_ZH_PRICE_WORDS = frozenset(["多少钱", "多少", "收费", "价格", "价钱", "费用"])


def _services_named(tagged: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The tagged words with a two-character verb that names what the shop sells retagged a verbal noun: right
    before a price word, or after "your" and before "have" ("你们<X>有…吗")."""
    out = list(tagged)
    for i in range(len(out) - 1):
        word, flag = out[i]
        if flag != "v" or len(word) != 2 or word[0] == word[1]:
            continue
        after, before = out[i + 1][0], out[i - 1][0] if i else ""
        if after in _ZH_PRICE_WORDS or (before in _ZH_SHOP_WORDS and after in _ZH_HAVE_WORDS):
            out[i] = (word, "vn")
    return tuple(out)


# "你们<X>有…的吗": what the shop has of a kind it sells, a noun after "your" even where it reads as a verb.
_ZH_SHOP_WORDS = frozenset(["你们", "你家", "您家", "贵店", "你们家", "店里"])
_ZH_HAVE_WORDS = frozenset(["有", "有没有", "都", "还有", "有无"])


# What a measured attribute's name ends with (长度, 重量, 功率, 电压, 直径, 容积, 水温, 单价, 运费): no brand.
_MEASURE_LABEL = re.compile(r"[度量率压重长宽高径积温价格费额]$")
# A two-character attribute on its own ("选哪个厚度", "要配什么度数", "什么颜色"): what is asked of a thing, never
# the thing (长 is left out: 家长, 店长 are people).
_LONE_ATTRIBUTE = re.compile(
    r"^(?:[\u4e00-\u9fff][度量率压重宽高径积温]|度数|尺寸|尺码|码数|大小|颜色|规格|型号|款式|材质|版本|配置)$"
)


def _brand_before(prefix: str) -> str:
    """The Chinese word right before a Latin name (at most one space between), if it is a noun: 小米 15 Pro."""
    stripped = prefix.rstrip()
    if not stripped or len(prefix) - len(stripped) > 1 or not _CJK.match(stripped[-1]):
        return ""
    word, flag = _tagged(stripped[-6:])[-1]
    return str(word) if len(word) >= 2 and flag in _ZH_NOUN_TAGS and word not in _ZH_GENERIC else ""


def _inside_named(phrase: str, found: Sequence[Entity]) -> bool:
    return any(phrase in e.text for e in found if e.named)


def mentions(question: str, entity: Entity) -> bool:
    """Does the question already name the entity? Case- and space-insensitive ("小米15 Pro" names
    "小米 15 Pro"); for Latin names, most of the name's words of three letters or more count ("covid" names
    "COVID-19", "X1 Carbon" names "ThinkPad X1 Carbon")."""
    q = normalize(question)
    if entity.key in q or _squash(entity.text) in _squash(question):
        return True
    if is_chinese(entity.text) and not entity.named:
        return False
    if is_chinese(entity.text):
        # "喂喂 F1" is named by its model number ("F1 能连 5G 吗"), as "X1 Carbon" names "ThinkPad X1 Carbon".
        tokens = [w for w in entity.text.split() if is_model_token(w)]
        if tokens and all(normalize(w) in _latin_words(q) for w in tokens):
            return True
    words = [w for w in re.split(r"[\s\-]+", entity.key) if len(w) >= 3 and w not in _EN_STOP]
    if not words:
        return False
    q_words = _latin_words(q)
    return sum(w in q_words for w in words) * 3 >= len(words) * 2


@lru_cache(maxsize=4096)
def _latin_words(normalized: str) -> frozenset[str]:
    # Remembered: each history text is split again for every Latin entity the gate asks about.
    return frozenset(re.split(r"[^a-z0-9]+", normalized))


def own_names(question: str) -> list[Entity]:
    return [e for e in entities(question) if e.named]


def _plural_noun_before(question: str, end: int) -> bool:
    """A plural noun before `end` that can be what they/them/their stand for: not the thing asked for
    ("When are they staffed?", "How long do they usually need?" ask about something of theirs)."""
    words = [w.lower() for w in _EN_WORD.findall(question[:end])]
    return any(
        len(w) >= 4
        and w.endswith("s")
        and not w.endswith("ss")
        and w not in _EN_STOP
        and not (i and words[i - 1] in _ASKED_FOR)
        for i, w in enumerate(words)
    )


_ASKED_FOR = frozenset(["what", "which", "many", "much", "whose"])

# "I bought a teapot here last month, can I exchange it?", "Can I return a lamp once it's unpacked?": a thing the
# customer bought, has or hands back, introduced with an article before "it", is what "it" stands for. A noun
# the question only asks about ("Is there a fee if I return it?") is no such thing: the verb must be one of having.
_OWNED_THING = re.compile(
    r"\b(?:bought|buy|purchased|ordered|got|have|has|received|return|returned|send back|sent back)\s+"
    r"(?:a|an|one|my|our)\s+(?:[\w'’-]+\s+){0,3}?[a-z]{3,}\b",
    re.IGNORECASE,
)
_IT_WORDS = frozenset(["it", "its", "itself"])
_THAT = frozenset(["that", "this"])
_FOR_THAT = re.compile(r"\bfor\s*$", re.IGNORECASE)


def antecedent_inside(question: str, marker: Marker, names: Sequence[Entity]) -> bool:
    """Does the question carry what its marker points at? A cue with a name of its own ("And about North
    Carolina's economy?"), a pronoun after a name ("Is Lyme Disease dangerous and how is it treated?") or
    they/them/their after a plural noun ("Do employers report their employees' salaries?")."""
    if not marker.pronoun:
        return bool(names)
    if marker.start < 0:
        return bool(names)
    head = normalize(question[: marker.start])
    squashed = _squash(question[: marker.start])
    if any(e.key in head or _squash(e.text) in squashed for e in names):
        return True
    if marker.text.lower() in _IT_WORDS:
        return _OWNED_THING.search(question[: marker.start]) is not None
    if _FOR_THAT.search(question[: marker.start]) is not None and normalize(marker.text).rstrip("?.! ") in _THAT:
        # "My lenses keep drying out. Anything for that?": what the customer said before is what "that" is.
        head = question[: marker.start]
        cut = max(head.rfind(ch) for ch in ",.;:!?")
        return cut > 0 and bool(entities(head[:cut]))
    return marker.text.lower() in {"they", "them", "their", "theirs", "themselves"} and _plural_noun_before(
        question, marker.start
    )


# --- salience and the rule rewrite -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryText:
    text: str
    source: str  # "user" | "assistant" | "summary"
    age: int  # rounds back from the question (the latest round is 0)


_SOURCE_WEIGHT = {"user": 1.0, "summary": 0.6, "assistant": 0.35}
_DECAY = 0.75
_ANSWER_ENTITY_WORDS = 4


@dataclass(slots=True)
class _Score:
    entity: Entity
    score: float = 0.0
    rounds: set[int] = field(default_factory=set)


@lru_cache(maxsize=4096)
def _weighed(text: str) -> tuple[tuple[Entity, str, float, float], ...]:
    """The text's entities with their keys and the factors of their salience for their kind (names, models and ids
    beat noun phrases) and their size (longer beats shorter). Remembered: each history text is weighed again on
    every later turn of its conversation."""
    out = []
    lowered = text.lower()
    for e in entities(text):
        size = len(e.text) / 2 if is_chinese(e.text) else len(e.key.split())
        kind = 3.0 if e.named else 1.0
        if not e.named and _for_owned(lowered, e.text.lower()):
            kind = _FOR_OWNED_WEIGHT
        out.append((e, e.key, kind, 1 + 0.25 * min(size, 3.0)))
    return tuple(out)


# "Where do I get a receipt for my web booking?": the customer's own thing after "for my" is what the thing asked
# about is for; a later "it" or "one" is the receipt. It weighs less than a noun phrase of one word.
_FOR_OWNED = tuple(f"for {whose} " for whose in ("my", "our", "his", "her", "their"))
_FOR_OWNED_WEIGHT = 0.6


def _for_owned(lowered: str, phrase: str) -> bool:
    """Does the (lowercased) text say "for my <phrase>" (our, his, her, their)?"""
    return any(f"{lead}{phrase}" in lowered for lead in _FOR_OWNED)


# Remembered: each answer entity of the recent rounds is asked about again on every turn.
@lru_cache(maxsize=8192)
def answer_entity(entity: Entity) -> bool:
    """What an answer may contribute: a short model name or code (小米 15 Pro, COVID-19), never a noun
    phrase, a capitalised phrase of the answer's own wording, an order/phone number or a sentence."""
    size = len(_EN_WORD.findall(entity.text)) + len(_CJK.findall(entity.text)) / 2
    return entity.model and not entity.ident and size <= _ANSWER_ENTITY_WORDS


def salient_entities(
    history: Sequence[HistoryText], limit: int = 2, known: Callable[[str], bool] | None = None
) -> list[Entity]:
    """Entities of the history, most salient first.

    A mention counts by its side (the user's questions most; answers only for short model names), its
    recency and its kind (names, models and ids beat noun phrases; longer beats shorter); an entity the
    user comes back to over several rounds is the conversation's subject and gains most (answers repeat
    the domain's own name everywhere, so their repetitions do not count). A one-word name inside a longer
    one ("Jackson" in "Reggie Jackson") adds to the longer one. `known`: the names of the knowledge base's
    products; when given, an answer contributes only those.
    """
    found: dict[str, _Score] = {}
    spelling: dict[str, str] = {}  # how answers capitalise what they may not contribute ("Bruno Mars")
    for item in history:
        for e, key, kind, size in _weighed(item.text):
            if item.source == "assistant" and not (answer_entity(e) and (known is None or known(e.text))):
                if e.named:
                    spelling.setdefault(key, e.text)
                continue
            weight = _SOURCE_WEIGHT[item.source] * _DECAY**item.age
            entry = found.setdefault(key, _Score(e))
            entry.score += weight * kind * size
            if item.source != "assistant":
                entry.rounds.add(item.age)
            if e.named and not entry.entity.named:
                entry.entity = e  # keep the capitalised spelling
    words_of = {key: frozenset(key.split()) for key in found}
    for key in sorted(found, key=len):
        words = words_of[key]
        if len(words) != 1 or not found[key].entity.named:
            continue
        longer = [k for k in found if k != key and words < words_of[k] and found[k].entity.named]
        if longer:
            best = max(longer, key=lambda k: found[k].score)
            found[best].score += found[key].score
            found[best].rounds |= found[key].rounds
            del found[key]
    for entry in found.values():
        if not entry.entity.named and entry.entity.key in spelling:
            entry.entity = Entity(spelling[entry.entity.key], False)  # the user's entity, the answer's spelling
    ranked = sorted(found.values(), key=lambda s: s.score * (1 + 0.5 * max(len(s.rounds) - 1, 0)), reverse=True)
    return [s.entity for s in ranked[:limit]]


_EN_IT = re.compile(r"\b(its|it|his|he|she|him|her)\b", re.IGNORECASE)
_ZH_IT = re.compile(r"[它他她]们|它|[他她](?!俩)")
_NOT_A_NOUN = _EN_STOP | {"own"}


def resolve(question: str, entity: Entity) -> str:
    """Put the entity into the question: in place of 它/他/她/it(s)/he/she/her when there is one, else in front.
    A product model never takes the place of he/she: "Can he ride it in the rain?" after a scooter's price asks
    about a person, and "Can <scooter> ride it" reads as nonsense to the embedder. Nor does a place: "When may I
    collect him?" after a question about the branch in a city asks about the customer's pet there."""
    personless = is_product_model(entity.text) or bool(place_names(entity.text))
    if is_chinese(question):
        m = _ZH_IT.search(question)
        if m is not None and personless and m.group()[0] in "他她":
            m = None
        if m is not None and _ANIMATE_IT.match(question, m.start()):
            m = None  # "它肠胃弱": the customer's pet, of whom the thing is asked
        if m is None:
            return f"{entity.text} {question.lstrip()}"
        before, after = question[: m.start()], question[m.end() :]
        # A Latin name inside Chinese text gets a space on each side that touches Chinese.
        left = " " if before and _CJK.match(before[-1]) and entity.text[0].isascii() else ""
        right = " " if after and _CJK.match(after[0]) and entity.text[-1].isascii() else ""
        return f"{before}{left}{entity.text}{right}{after}"
    dummies = [d.span() for d in _EXPLETIVE_IT.finditer(question)]
    dummies += [d.span() for d in _ANIMATE_IT.finditer(question)]
    for m in _EN_IT.finditer(question):
        if any(a <= m.start() < b for a, b in dummies):
            continue  # "is it better to ...": nothing to replace
        word = m.group(1).lower()
        if word in {"he", "she", "him", "her", "his"} and (not entity.named or personless):
            continue  # a person is a name, and no product model
        possessive = word in {"its", "his"} or (word == "her" and _noun_follows(question, m.end()))
        repl = f"{entity.text}'s" if possessive else entity.text
        return question[: m.start()] + repl + question[m.end() :]
    return f"{entity.text}: {question.lstrip()}"


# "它肠胃弱", "给它挑个窝", "its fur": "it" is an animal (the customer's pet), whose body a thing is asked for or
# for whom it is bought; the conversation's product put in its place would ask about the product's teeth.
_ANIMATE_IT = re.compile(
    r"[它他她]们?的?(?:牙口|牙齿?|眼睛|耳朵|皮肤|毛发?|肠胃|胃口?|关节|体重|岁数|年纪|身体|爪子)"
    r"|(?<=给)[它他她]们?(?=买|挑|选|办|投保|报名|预约|洗澡|美容|剪毛|吃|喝)"
    r"|\b(?:its|it's)\s+(?:teeth|tooth|fur|coat|paws?|stomach|tummy|joints?|gums|eyes|ears|skin)\b",
    re.IGNORECASE,
)


def is_product_model(text: str) -> bool:
    """A product's model name: a word mixing letters and digits ("S7", "X1"), a model number after a name
    ("Pixel 9") or a variant word ("Lumo Pro"); never a person's name, which an inner capital alone may
    also mark ("McCartney")."""
    words = _EN_WORD.findall(text)
    if any(_ALNUM.match(w) for w in words) or any(w.lower() in VARIANT_WORDS for w in words[1:]):
        return True
    return Entity(text, True).model and any(w.isdigit() for w in words)


def _noun_follows(question: str, end: int) -> bool:
    """ "her parents" (possessive), not "ask her" or "her?" (object)."""
    nxt = _EN_WORD.match(question[end:].lstrip())
    return nxt is not None and question[end : end + 1].isspace() and nxt.group().lower() not in _NOT_A_NOUN


_DETERMINERS = frozenset(["the", "this", "that", "these", "those"])
_LATIN_TOKEN = re.compile(r"[A-Za-z][A-Za-z-]*")


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


_DETERMINER = re.compile(r"\b(?:the|this|that|these|those)\s+[a-z]", re.IGNORECASE)


def has_determiner(question: str) -> bool:
    """Cheap pre-check for `definite_reference` (which needs the history's entities)."""
    return _DETERMINER.search(question) is not None


_DEMONSTRATIVE = re.compile(r"\b(?:this|that|these|those)\s+[a-z]", re.IGNORECASE)


def points_back(question: str, candidates: Sequence[Entity], previous: str) -> bool:
    """Does "that test", "this plan" point back to a noun phrase the previous question (`previous`) asked about,
    other than a product? Then the question asks about that thing, not about the product the conversation is on."""
    if _DEMONSTRATIVE.search(question) is None:
        return False
    found = definite_reference(question, candidates)
    if found is None or found[0].split()[0].lower() == "the" or found[1].named:
        return False
    at = _find(previous, found[1].text)
    # "that lens" after "the Acme 5 kids lens": the phrase ends the product's name there.
    return at is not None and not any(_find(previous, f"{p} {found[1].text}") for p in product_names(previous))


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


# A question about an order: the only kind that may take an order number from the history.
_ORDER_TOPIC = re.compile(
    r"订单|单号|物流|快递|发货|到货|送到|配送|签收|包裹|退款|运单"
    r"|\b(?:orders?|tracking|shipment|shipped|parcel|package|delivery|delivered|refund)\b",
    re.IGNORECASE,
)


def asks_about_order(question: str) -> bool:
    return _ORDER_TOPIC.search(question) is not None


def rule_rewrite(question: str, candidates: Sequence[Entity], names_only: bool = False) -> tuple[str, str]:
    """(query, detail): the question with the most salient entity it lacks, or unchanged.

    `candidates` are the history's entities, most salient first (`salient_entities`); `names_only`
    (for he/she) passes over noun phrases. A pronoun never stands for an order or phone number: an order
    number is only put in front of a question about the order that names none itself. A singular "it" never
    stands for a plural noun phrase."""
    singular = _SINGULAR_IT.search(question) is not None and _PLURAL_IT.search(question) is None
    handled = _HANDLED_IT.search(question) is not None
    candidates = [e for e in candidates if not attribute_only(e)]
    if candidates and place_names(question) and place_names(candidates[0].text):
        # "那如果人在<city>市区，…": the place the question names is where it asks about, not the conversation's.
        return question, "names its own place"
    # A Chinese word jieba tags as a name (回国, a breed) names no thing the aspect could be of.
    if (handled or concepts(question) & _THING_ASPECTS) and not any(
        not is_chinese(e.text) or place_names(e.text) for e in own_names(question)
    ):
        candidates = [e for e in candidates if not place_names(e.text)]
    if _DEVICE.search(question):
        # "那台什么价", "what does that model cost?": a name of the history, or its subject; never a place. "那台三星
        # S9" names its device itself.
        if own_names(question):
            return question, "names its own device"
        usable = [e for e in candidates if not e.ident and not place_names(e.text)]
        candidates = [e for e in usable if e.named] or usable
    definite = definite_reference(question, candidates)
    if definite is not None:
        span, entity = definite
        article = span.split()[0]
        return question.replace(span, f"{article} {entity.text}", 1), f"resolved {span!r} to {entity.text!r}"
    for entity in candidates:
        if entity.ident:
            if entity.phone or not asks_about_order(question) or any(e.ident for e in entities(question)):
                continue
            if not mentions(question, entity):
                return f"{entity.text} {question.lstrip()}", f"added order number {entity.text!r}"
            continue
        if entity.named or not names_only:
            if singular and not entity.named and _plural(entity.text):
                continue  # "it" is not "the guys" nor "the days"
            if not mentions(question, entity):
                return resolve(question, entity), f"added {entity.text!r}"
    return question, "no entity to add"


# What a question asks of a store or a place (its address, phone, opening hours), never the place itself.
_PLACE_ATTRIBUTES = frozenset(["address", "contact", "phone", "opening_hours"])
_ATTRIBUTE_WORDS = 2  # "the address", "phone number", "营业时间": the attribute's word alone, nothing it belongs to


def asks_of_store(question: str) -> bool:
    """Does the question ask only what a store has (its opening hours, phone, or address: "春节休息几天", "Open on
    Sundays?", "What's the address?") and name no thing and no person of its own? A bare "where" ("Where was he
    born?", "Where did this start?") asks where anything is, not a store's address."""
    ideas = concepts(question)
    if not ideas or not ideas <= _PLACE_ATTRIBUTES or own_names(question) or _PERSON_OR_GROUP.search(question):
        return False
    return ideas != {"address"} or _ADDRESS_WORD.search(question) is not None


# "they" / "he" asks of people (the staff just asked about, a relative), not of a store.
_PERSON_OR_GROUP = re.compile(r"\b(?:they|them|their|he|she|him|his|her)\b|[他她]", re.IGNORECASE)
_ADDRESS_WORD = re.compile(r"\baddress|地址|店", re.IGNORECASE)


# A store, a branch or the shop's hotline in an entity's words: what a store question may be asked of.
STORE_WORD = re.compile(r"店|门市|热线|客服|\b(?:store|branch|shop|outlet|hotline|service (?:number|line))s?\b", re.I)


def store_subject(entity: Entity, said: Sequence[str]) -> bool:
    """May a question asked of a store take the entity? A place, a store, a branch or a hotline, or a name the
    customer wrote before 店 or "store" ("湖滨店", "the Binjiang store": the district a branch goes by)."""
    if place_names(entity.text) or STORE_WORD.search(entity.text):
        return True
    return entity.named and any(_names_branch(entity.text.lower(), text.lower()) for text in said)


def _names_branch(name: str, text: str) -> bool:
    """Does the (lower-case) text write the name before 店 or "store" ("湖滨店", "the binjiang store")? A plain
    search: the name changes with every entity, and every turn's history entities are asked it (`_stray_tag`)."""
    at = text.find(name)
    while at >= 0:
        after = text[at + len(name) :]
        if after.startswith("店") or _BRANCH_AFTER.match(after):
            return True
        at = text.find(name, at + 1)
    return False


_BRANCH_AFTER = re.compile(r"\s+(?:store|branch|shop|outlet)\b")


def attribute_only(entity: Entity) -> bool:
    """Is the entity only the name of what a question asked of a place ("What's the address?", "电话多少")? It is
    no subject: "Is it open late?" after the address asks about the store, and a follow-up's ellipsis
    ("怎么停车") goes on about the store, not about its phone number."""
    if entity.named:
        return False
    ideas = concepts(entity.text)
    size = len(_CJK.findall(entity.text)) / 2 + len(_EN_WORD.findall(entity.text))
    return bool(ideas) and ideas <= _PLACE_ATTRIBUTES and size <= _ATTRIBUTE_WORDS


# "it" as the object of a hand's work ("set it up", "deliver it", "fold it"): a thing, never the city the
# customer named before ("I live in <city>, …").
_HANDLED_IT = re.compile(
    r"\b(?:set|put|take|bring|carry|deliver|install|assemble|return|send|ship|fold|charge|ride|wash|clean"
    r"|repair|fix|wear|unpack|unbox|mount|lift|move)\s+it\b",
    re.IGNORECASE,
)
_DEVICE = re.compile(r"[这那](?:款|台|部|个型号|种型号)|\b(?:that|this)\s+(?:model|version)\b", re.IGNORECASE)
_SINGULAR_IT = re.compile(r"\b(?:it|its|itself)\b", re.IGNORECASE)
_PLURAL_IT = re.compile(r"\b(?:they|them|their|theirs|these|those|both)\b", re.IGNORECASE)
# Plural in form, singular in use.
_SINGULAR_S = re.compile(r"(?:ics|ss|us|is|news|series|species|means)$")


def _plural(phrase: str) -> bool:
    """A lone lowercase plural ("guys", "days"); a longer phrase or a capitalised word may be a name
    ("bruno mars", "Texas")."""
    return (
        len(phrase) >= 4
        and phrase.isalpha()
        and phrase.islower()
        and phrase.endswith("s")
        and _SINGULAR_S.search(phrase) is None
    )


# --- the conversation's product ------------------------------------------------------------------------

# What a customer asks about a product without naming it again ("How long is the battery covered?", "屏幕有坏点
# 能换新吗" after a question about a phone): its price, warranty, parts, specifications and condition.
PRODUCT_ASPECTS = frozenset(
    [
        "warranty",
        "extended_warranty",
        "accident",
        "repair",
        "battery",
        "screen",
        "price",
        "color",
        "weight",
        "storage",
        "memory",
        "specs",
        "charger",
        "in_box",
        "release",
        "exchange",
        "quality",
        "customized",
        "condition",
        "trade_in",
        # What a product sheet lists ("What's the inner size?", "噪音多大", "滤网多久换").
        "dimensions",
        "occupancy",
        "waterproof",
        "material",
        "noise",
        "energy",
        "filter",
        "motor",
        "room_size",
    ]
)
# What a place does not have: "How much is it?" after "a stove for a trip to <place>" asks about the stove.
_THING_ASPECTS = frozenset(["price", "warranty", "extended_warranty", "weight", "battery", "charger", "in_box"])


def product_names(text: str) -> list[str]:
    """Product names in the text (models with a number, an inner capital or a variant word), not ids."""
    return list(_product_names(text))


# Remembered: the topic is read from each recent question's rewrite again on every turn.
@lru_cache(maxsize=4096)
def _product_names(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for p in products(text):
        words = p.text.split()
        at = text.find(p.text)
        lead = _DIGITS_BEFORE.search(text, 0, at) if at > 0 else None
        if lead is not None and words:
            words[0] = lead.group() + words[0]  # "65L Pro": the capacity is part of the model, not "L Pro"
        brand = _brand_before(text[:at]) if at > 0 and lead is None and words else ""
        if brand and not _NOT_BRAND.search(brand) and not _LONE_ATTRIBUTE.match(brand):
            # "飞燕 R5": the Chinese brand is part of the name (the page titles it "飞燕（Feiyan）…", and another
            # brand may use the same model number).
            words.insert(0, brand)
        while len(words) > 1 and words[0].isalpha() and words[0].islower():
            words.pop(0)  # "cracked Pixel 8": an adjective before the name
        # "MacBook Air M3 15 寸": a number before a size unit is the screen size, not part of the name.
        if len(words) > 1 and words[-1].isdigit() and _SIZE.match(text, _end_of(text, p.text)) is not None:
            words.pop()
        name = " ".join(words)
        if re.search(r"[^\W\d_]", name) and not _ID_DIGITS.search(name) and not _no_product(name) and name not in out:
            out.append(name)
    for m in _VARIANT.finditer(text):
        # "声眸 Pro": a Chinese brand and a variant word name a product with no model number, which the product
        # parser does not take alone (a lone "Pro" is only a variant of whatever the conversation is about).
        brand = _brand_before(text[: m.start()])
        if brand and not _NOT_BRAND.search(brand) and not _LONE_ATTRIBUTE.match(brand):
            name = f"{brand} {m.group()}"
            if not any(name in o or o in name for o in out):
                out.append(name)
    return tuple(out)


_DIGITS_BEFORE = re.compile(r"(?<![\w.])\d+$")
# What a Chinese word before a model number is when it is no brand: a label ("型号", "编号"), an attribute's name.
_NOT_BRAND = re.compile(r"[号款版型个度量率压重长宽高径积温价格费额]$")


def _end_of(text: str, name: str) -> int:
    """Where the last word of `name` starts in `text` (so a size pattern can be tried there), or 0."""
    i = text.find(name)
    if i < 0:
        return 0
    last = name.split()[-1]
    return i + name.rfind(last)


# "Which of the two lasts longer?", "两款哪个更轻": a question about the two products just discussed.
_PAIR = re.compile(
    r"\b(?:the|these|those)\s+two\b|\bboth\b|\beither\b|\bneither\b|[这那]?两(?:款|台|部|个型号|种型号|者)",
    re.IGNORECASE,
)


def asks_about_pair(question: str) -> bool:
    """Does the question compare two products it does not name?"""
    return _PAIR.search(question) is not None and not product_names(question)


_THEY = re.compile(r"\b(?:they|them|their)\b", re.IGNORECASE)


# The people a question asks for ("Can somebody on the line help in French?", "Do your staff …"): "they" in the
# next question stands for them.
_PEOPLE = re.compile(
    r"\b(?:some|any)(?:one|body)\b|\b(?:staff|agents?|people|employees?|technicians?|assistants?|advisers?|advisors?)\b",
    re.IGNORECASE,
)


def asks_of_people(question: str, previous: str) -> bool:
    """Does "they" in the question stand for the people the previous question asked for ("When do they start?" after
    "Can somebody on the line help in French?")? Then only a name that question said (a language, a branch) is
    theirs; a card or a product from further back is not."""
    if is_chinese(question) or _THEY.search(question) is None or _SINGULAR_IT.search(question) is not None:
        return False
    return _PEOPLE.search(previous) is not None


def plural_antecedent(question: str, previous: str) -> Entity | None:
    """What they/them stand for in "What do they cost?" after "Will side baskets fit on it?": the plural noun the
    previous question asked about. When that question called the product "it", they/them (with no "it") stand
    for something else: its plural noun. Not a plural asked for ("Which sizes …?")."""
    if is_chinese(question) or _THEY.search(question) is None or _SINGULAR_IT.search(question) is not None:
        return None
    # It asks something a shop's pages say of a thing (its price, size, warranty): "Did they tour …?" asks about
    # people, whom no plural object of the previous question stands for.
    if _SINGULAR_IT.search(previous) is None or not concepts(question):
        return None
    lowered, asked = previous.lower(), question.lower()
    for e in entities(previous):
        if e.named or not _plural(e.text.split()[-1]) or e.key in asked:
            continue
        before = _EN_WORD.findall(lowered[: max(0, lowered.find(e.key))])
        if before and before[-1] in _ASKED_FOR:
            continue
        return e
    return None


# Services of the whole shop that have amounts of their own: an instalment plan's minimum, the order total that
# ships free, a discount's size, the points to a tier.
_SHOP_AMOUNTS = frozenset(
    [
        "installment",
        "e_wallet",
        "payment",
        "bank_card",
        "interest",
        "cost_free",
        "shipping_fee",
        "order",
        "coupon",
        "discount",
        "member",
        "points",
        "student",
        "customs",
        "tax_refund",
    ]
)
# How a question asks for an amount or a size ("多少钱", "how much", "how big"): the aspect of whatever it names.
_AMOUNT_ASPECTS = frozenset(["price", "dimensions"])


def asks_about_product(question: str) -> bool:
    """Does the question ask about an aspect of a product (its price, warranty, battery …) without naming one?"""
    return not product_names(question) and bool(concepts(question) & PRODUCT_ASPECTS)


def asks_shop_amount(question: str) -> bool:
    """Is the only product aspect the question asks an amount, of a shop-wide service it names? "满多少钱包邮",
    "How big is the student discount?" ask the service's terms, which the conversation's product would only pull
    toward that product's page (and lengthen the query the turn embeds)."""
    ideas = concepts(question)
    aspects = ideas & PRODUCT_ASPECTS
    if not aspects or not aspects <= _AMOUNT_ASPECTS or not ideas & _SHOP_AMOUNTS:
        return False
    # "Is the silver edition dearer?", "that frost-free one": a version of a product, whose words only look like a
    # service's (a member tier, free shipping).
    return _VERSION.search(question) is None


_VERSION = fail_fast(
    re.compile(r"\b(?:one|ones|edition|version|model|variant)\b|款式|版本|型号|[这那哪]款", re.IGNORECASE)
)


# "haul off my old washer", "旧机回收": the customer's old appliance, not the product the conversation is about.
_OLD_ITEM = fail_fast(
    re.compile(
        r"\b(?:my|our|the|an?)\s+old\b|\bused\s+one\b|旧(?:机|的|家电|冰箱|洗衣机|空调|电视|手机|电脑|电池|锂电池|车|自行车|电动车)"
        r"|以旧换新",
        re.I,
    )
)


def old_item(question: str) -> bool:
    return _OLD_ITEM.search(question) is not None


SHIPPING_ASPECTS = frozenset(["shipping", "shipping_fee", "customs", "international", "pickup"])


def asks_about_shipping(question: str) -> bool:
    """A question about shipping that names no place of its own ("满多少包邮", "Who pays the duties?")."""
    return not place_names(question) and bool(concepts(question) & SHIPPING_ASPECTS)


def place_names(text: str) -> list[str]:
    """Countries, regions and cities named in the text, as written (not "us" the pronoun)."""
    return list(_place_names(text))


@lru_cache(maxsize=4096)
def _place_names(text: str) -> tuple[str, ...]:
    # Cached: the earlier questions' queries are read for their place on every later turn (`topic_product`),
    # and one scan for all the places is about as slow as a scan per place.
    return tuple(m.group() for m in _PLACE.finditer(text) if not (m.group().isascii() and m.group().islower()))


# --- contrast follow-ups -----------------------------------------------------------------------------

ContrastKind = Literal[
    "storage",
    "size",
    "colour",
    "place",
    "category",
    "term",
    "variant",
    "standard",
    "comparative",
    "pronoun",
    "named",
    "plain",
]

# "256G" and "1T" are storage sizes too (the sizes memory comes in: "5G" is a network, "4K" a resolution).
_STORAGE = re.compile(
    r"(?<![\w.])(?:\d+(?:\.\d+)?\s*(?:GB|TB)|(?:16|32|64|128|256|512)\s*G|[1248]\s*T)(?![A-Za-z])", re.IGNORECASE
)
_SIZE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:-?\s*inch(?:es)?(?![A-Za-z])|英寸|寸|吋|[\"”″])", re.IGNORECASE)
# A contrast on a size is also one on a bottle's or a bag's contents ("and the 50ml one?" after "… in 30ml"): the
# value replaces the previous question's, like a screen size, and the product stays the previous question's.
# So is a pack's size in words ("大包的呢", "小号呢"): a size of the same product, not a product of its own.
_SIZE_SLOT = re.compile(
    _SIZE.pattern + r"|(?<![\w.])\d+(?:\.\d+)?\s*(?:ml|毫升|kg|公斤|g|克|oz)(?![A-Za-z])"
    r"|[大中小](?:号|包|瓶|袋|罐|盒|桶|杯|份)装?",
    re.IGNORECASE,
)
_EN_COLOURS = (
    "black white silver gold blue red green pink purple yellow grey gray orange midnight starlight graphite titanium"
)
_COLOUR = re.compile(
    r"(?:\b(?:space|rose|sky|midnight|deep|light|dark|natural|desert)\s+)?\b(?:"
    + "|".join(_EN_COLOURS.split())
    + r")\b"
    r"|(?:深空|玫瑰|午夜|星光|沙漠|原|钛|天|深|浅|亮|哑光)?[黑白银金蓝红绿粉紫黄灰橙青棕]色",
    re.IGNORECASE,
)
_VARIANT_WORDS = ("Pro Max", "Pro", "Max", "Plus", "Ultra", "Air", "mini", "Lite", "SE")
_VARIANT = re.compile(r"(?<![\w])(?:" + "|".join(v.replace(" ", r"\s+") for v in _VARIANT_WORDS) + r")(?![\w])", re.I)
_STANDARD = re.compile(
    r"^(?:标准版|标准款|标准|基础版|基础款|普通版|普通款|standard(?:\s+(?:model|version|edition))?|base(?:\s+model)?"
    r"|basic(?:\s+model)?|regular(?:\s+(?:model|version))?|vanilla)$",
    re.IGNORECASE,
)
# A variant named by a word of its own: "2L", "X9", "Pro", "旗舰版" (a spec such as "230g" or "5000mm" is none).
_ZH_EDITION = re.compile(r"[\u4e00-\u9fff]{2}版")
_MODEL_TOKEN = re.compile(r"(?<![\w.])(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{2,6}(?![\w.])")


def _variant_tokens(text: str) -> list[str]:
    found = [m.group(0) for m in _MODEL_TOKEN.finditer(text) if not _SPEC.match(m.group(0))]
    found += [m.group(0) for m in _VARIANT.finditer(text)]
    found += [m.group(0) for m in _ZH_EDITION.finditer(text)]
    return found


def is_model_token(text: str) -> bool:
    """A model number of letters and digits on its own ("F1", "X9", "2L"), not a spec ("230g")."""
    return _MODEL_TOKEN.fullmatch(text) is not None and not _SPEC.match(text)


def variant_only(names: Sequence[Entity]) -> bool:
    """Are the question's names only variant words or model tokens ("the Pro", "the 45L", "2L 保修多长时间")?
    Such a name is a sibling of the conversation's product, not a subject of its own."""
    return bool(names) and all(
        _VARIANT.fullmatch(e.text) is not None
        or (_MODEL_TOKEN.fullmatch(e.text) is not None and not _SPEC.match(e.text))
        for e in names
    )


def with_family(question: str, product: str) -> str | None:
    """The question with its variant word or model token completed by `product`'s family, in place: "Which
    poles does the Pro use?" after "Acme 2" -> "… the Acme 2 Pro …", "How much is the 45L?" after "Acme 28L"
    -> "… the Acme 45L?", "Pro 的保修" after "Acme 2 Pro" -> "Acme 2 Pro 的保修". None when it names none."""
    tokens = [m.group(0) for m in _MODEL_TOKEN.finditer(question) if not _SPEC.match(m.group(0))]
    tokens += [m.group(0) for m in _VARIANT.finditer(question)]
    if not tokens:
        return None
    token = min(tokens, key=lambda t: question.find(t))
    base = _base_model(product, token)
    if base is not None:
        # "M3 呢" after "Acme M3 Plus": the model without the variant, named as the product names it.
        at = _find(question, token)
        return question if at is None or normalize(base) == normalize(token) else _replace_span(question, *at, base)
    family = sibling_family(product, question)
    if family is None:
        # The product's own variant ("Pro" of "Acme 2 Pro"), or a product with no variant to swap ("Acme 2").
        name = product if normalize(token) in normalize(product).split() else f"{product} {token}"
    else:
        name = f"{family} {token}".strip()
    span = _find(question, token)
    if span is None or normalize(name) == normalize(token):
        return None
    return _replace_span(question, *span, name)


def _edition(token: str) -> bool:
    """A variant word ("Pro", "Max") or a Chinese edition ("长续航版"), not a model number or capacity."""
    return _VARIANT.fullmatch(token) is not None or _ZH_EDITION.fullmatch(token) is not None


def _base_model(product: str, token: str) -> str | None:
    """The product's words up to its model token `token`, when the product goes on with a variant word the token
    lacks ("Acme M3" for "M3" of "Acme M3 Plus"); else None."""
    words = product.split()
    keys = [normalize(w) for w in words]
    key = normalize(token)
    if key not in keys or _MODEL_TOKEN.fullmatch(token) is None:
        return None
    at = keys.index(key)
    rest = words[at + 1 :]
    return " ".join(words[: at + 1]) if rest and any(_VARIANT.fullmatch(w) for w in rest) else None


def sibling_family(product: str, question: str) -> str | None:
    """The family a sibling variant belongs to, when the question names another variant than `product`'s
    ("2L 保修多长时间" after "Acme 3L Pro"): the product's words before its first variant word ("Acme"), which
    may be empty. None when the question names no other variant (or the product has none to swap)."""
    own = _variant_tokens(product)
    if not own:
        return None
    said = normalize(product)
    others = [t for t in _variant_tokens(question) if normalize(t) not in said]
    if not others:
        return None
    if all(_edition(t) for t in others) and not any(_edition(t) for t in own):
        # "Pro 版多少钱", "长续航版呢" after "Acme R5": a variant of that model, which names none (its model number is
        # no variant to swap): the whole product is the family.
        return product
    words = product.split()
    head: list[str] = []
    for word in words:
        if _variant_tokens(word) or any(normalize(t) in normalize(word) for t in own):
            break
        head.append(word)
    return " ".join(head)


_COMPARATIVE = re.compile(
    r"^(?:(?:a\s+)?(?:bit\s+|little\s+)?(?:cheaper|less\s+expensive|more\s+expensive|pricier|bigger|larger|smaller"
    r"|lighter|heavier|newer|older|faster|slower|thinner|cheapest|biggest|smallest|lightest|newest|latest))$"
    r"|^更?(?:便宜|贵|大|小|轻|重|新|快|薄)(?:一点|一些|点|些)?$",
    re.IGNORECASE,
)
_ZH_CONTRAST = re.compile(
    r"^\s*(?P<lead>那么?|那如果是|如果是|换成|要是|那要是)?\s*(?P<x>[^，,。？?！!；;]{1,24}?)\s*(?:的话)?\s*"
    r"(?P<tail>呢|怎么样|咋样|如何)?\s*[?？!！。.…~～]*\s*$"
)
_EN_CONTRAST = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|so|and|but|hmm+|oh|well)[,\s]+)*"
    r"(?P<lead>(?:what|how)\s+about|and|or|what\s+if\s+(?:i\s+(?:get|got|buy|choose|pick|want)|it'?s|it\s+is))\s+"
    r"(?P<x>.+?)(?:\s+(?:then|instead))?\s*[?.!]*\s*$",
    re.IGNORECASE,
)
# "and to a gift card?", "what about for teachers?": a preposition and its object. After "to" only a noun
# phrase (an article, a possessive, a name or a number) is a value: "and to do that?" is a clause.
_EN_PREP = re.compile(
    r"^(?:(to)\s+(?=(?:a|an|the|my|your|our|their|his|her|its)\b|[A-Z0-9])"
    r"|(for|with|in|on|at|from|via|by|into|during|after|before|under|over|without|within)\s+)",
)
_EN_X_BLOCK = re.compile(
    r"\b(?:what|how|why|when|where|who|which|is|are|was|were|do|does|did|can|could|would|should|will|have|has"
    r"|i|you|we|me|us|my|your|our|there|if|to)\b",
    re.IGNORECASE,
)
_ZH_X_BLOCK = re.compile(r"[吗么吧]|什么|怎么|怎样|多少|多久|多大|几|哪|是否|能不能|可不可以|可以|有没有|是不是|[你我]")
_X_PRONOUN = re.compile(r"\b(?:its|it|their|his|her)\b|[它他她]", re.IGNORECASE)
_EN_X_DET = re.compile(r"^(?:the|a|an|that|this)\s+", re.IGNORECASE)
_EN_X_TAIL = re.compile(r"\s+(?:one|ones|version|model|variant|edition|option|size)$", re.IGNORECASE)
# "那寄到香港呢": the destination is the value, the verb only repeats the previous question's.
_ZH_MOTION = re.compile(r"^(?:寄到|寄去|寄往|送到|送去|发到|发往|运到|邮到|快递到)(?=\S)")
_ZH_X_DET = re.compile(r"^(?:那款|这款|那个|这个|那种|这种)")
_ZH_X_TAIL = re.compile(r"(?:的|版本|型号|款|版)$")
_MAX_X_WORDS = 5
_MAX_X_CJK = 10


@dataclass(frozen=True, slots=True)
class Contrast:
    """A contrast follow-up: the new value `core` (cleaned of 那/呢/what about/the … one) and its kind."""

    core: str
    raw: str  # the value as the user wrote it ("the cheaper one", "便宜一点的")
    kind: ContrastKind
    chinese: bool
    # "and to a gift card?": the preposition the value came with (the value is the previous question's
    # object of it, or of its last name).
    prep: str = ""


# Remembered: the gate and the topic-switch reader both ask it of every question, the gate again on each turn.
@lru_cache(maxsize=4096)
def contrast_followup(question: str) -> Contrast | None:
    """ "那标准款呢？", "那 Air 呢", "悲惨世界呢", "and the 512GB one?", "what about the 15-inch?", "and the
    cheaper one?": a follow-up that only names a new value, to be read against the previous question."""
    if is_chinese(question):
        m = _ZH_CONTRAST.match(question)
        if m is None or not (m.group("lead") or m.group("tail")):
            return None
        raw = _ZH_MOTION.sub("", m.group("x").strip()) or m.group("x").strip()
        if _ZH_X_BLOCK.search(raw) or len(_CJK.findall(raw)) > _MAX_X_CJK:
            return None
        if (led := _verb_led_value(raw)) is not None:
            # "延两年呢", "那改 24 期呢", "改基础款的话呢": the verb repeats the previous question's, the value is new.
            return Contrast(led[0], raw, led[1], True)
        if _has_verb(raw):
            # "换个颜色的话呢": a condition on the previous question, carried with it; "觉得他怎么样", "还没呢" are
            # clauses of their own.
            if _CONDITION.search(question) and "的话" not in raw and not own_names(raw):
                return Contrast(raw, f"{raw}的话", "comparative", True)
            return None
        core = _ZH_X_TAIL.sub("", _ZH_X_DET.sub("", raw)).strip() if not _STANDARD.match(raw) else raw
        core = core or raw
        if _question_of_its_own(core):
            return None
        kind = _contrast_kind(core, raw)
        # Without 呢 ("那好吧", "那 256GB 的？") only a value of a known kind makes it a contrast.
        if not m.group("tail") and kind in ("plain", "pronoun", "comparative"):
            return None
        if kind == "plain" and not all(flag in _ZH_VALUE_TAGS for w, flag in _tagged(core) if w.strip()):
            return None  # "还没呢", "我老公呢": not a thing to ask the previous question about
        return Contrast(core, raw, kind, True)
    m = _EN_CONTRAST.match(question)
    if m is None:
        return None
    raw = m.group("x").strip()
    prep = _EN_PREP.match(raw)
    if prep is not None:
        raw = raw[prep.end() :].strip()
    if not raw or len(raw.split()) > _MAX_X_WORDS or _EN_X_BLOCK.search(_X_PRONOUN.sub(" ", raw)):
        return None
    core = _EN_X_TAIL.sub("", _EN_X_DET.sub("", raw)).strip() or raw
    if _question_of_its_own(core):
        return None
    kind = _contrast_kind(core, raw)
    if m.group("lead").lower() == "and" and kind == "plain" and len(core.split()) > 3:
        return None  # "And about the federal level …" is a sentence, not a value
    return Contrast(core, raw, kind, False, (prep.group(1) or prep.group(2)).lower() if prep is not None else "")


_CONDITION = re.compile(r"的话\s*呢\s*[?？!！。.…~～]*\s*$")
# What a noun value may be made of: nouns, names, idioms and set phrases (悲惨世界 is tagged i), 的, numbers.
_ZH_VALUE_TAGS = _ZH_NOUN_TAGS | {"i", "l", "uj", "m", "q", "eng", "x"}


def _has_verb(text: str) -> bool:
    """A verb or an adverb: the text is a clause ("觉得他", "还没"), not a value."""
    return any((flag.startswith("v") and flag != "vn") or flag == "d" for w, flag in _tagged(text) if _CJK.search(w))


def _question_of_its_own(core: str) -> bool:
    """ "iPhone 16 的保修期呢？": a name and more: the question names its own product, it is no contrast."""
    named = [e for e in entities(core) if e.named and not _VARIANT.fullmatch(e.text)]
    return bool(named) and _squash(named[0].text) != _squash(core)


# The kinds of value a verb may lead ("分 6 期", "换标准版", "选黑色的"): the value is all the contrast says.
_LED_KINDS = frozenset({"storage", "size", "colour", "term", "standard", "variant"})


def _verb_led_value(raw: str) -> tuple[str, ContrastKind] | None:
    """ "分 6 期" -> ("6 期", "term"), "换标准版" -> ("标准版", "standard"): a value of a known kind after a verb of one
    or two characters, which only repeats what the previous question did with the old value (分 3 期, 延保三年).
    None when the text is not a verb and such a value, or is a value of its own ("三年", "上海")."""
    if _value_kind(raw) is not None:
        return None
    for n in (1, 2):
        head, rest = raw[:n], raw[n:].strip()
        if rest and all(_CJK.match(ch) for ch in head) and (kind := _value_kind(rest)) in _LED_KINDS:
            return (rest if kind == "standard" else _ZH_X_TAIL.sub("", rest).strip()), kind
    return None


def _value_kind(text: str) -> ContrastKind | None:
    """The kind of value the text is, all of it (without a tail such as 的 or 版): "6 期" is a term, "延保一年" none."""
    core = text if _STANDARD.match(text) else _ZH_X_TAIL.sub("", text).strip()
    if not core:
        return None
    kind = _contrast_kind(core, text)
    pattern = _SLOTS.get(kind)
    if kind in ("standard", "variant"):
        return kind
    value = pattern.search(core) if pattern is not None else None
    return kind if value is not None and value.group().strip() == core else None


def _contrast_kind(core: str, raw: str) -> ContrastKind:
    if _X_PRONOUN.search(raw):
        return "pronoun"
    if _STANDARD.match(core):
        return "standard"
    if _COMPARATIVE.match(core) or _COMPARATIVE.match(_ZH_X_TAIL.sub("", raw)):
        return "comparative"
    for kind, pattern in (
        ("storage", _STORAGE),
        ("size", _SIZE_SLOT),
        ("colour", _COLOUR),
        ("term", _TERM),
        ("place", _PLACE),
        ("category", _CATEGORY),
    ):
        m = pattern.search(core)
        if m is not None and m.group().strip() and len(core) <= len(m.group()) + 2:
            return kind  # type: ignore[return-value]
    if _VARIANT.fullmatch(core.strip()):
        return "variant"
    found = entities(core)
    if len(found) == 1 and found[0].named and _squash(found[0].text) == _squash(core):
        return "named"
    if not is_chinese(core) and core[:1].isupper() and all(w[:1].isupper() or w[:1].isdigit() for w in core.split()):
        return "named"
    return "plain"


def subject(question: str) -> Entity | None:
    """What a question is about: its first product or name (not an order number), else its first noun phrase."""
    found = [e for e in entities(question) if not e.ident]
    return next((e for e in found if e.named), found[0] if found else None)


def _core(question: str) -> str:
    return question.strip().rstrip("?？!！。.…~～ ")


def _join(left: str, right: str) -> str:
    """Two pieces with a space where Latin meets anything (Chinese pieces join directly)."""
    if not left or not right:
        return left + right
    if (_CJK.match(left[-1]) and _CJK.match(right[0])) or right[0] in ",.:;?!，。：；？！":
        return left + right
    return f"{left} {right}"


def _replace_span(text: str, start: int, end: int, new: str) -> str:
    before, after = text[:start].rstrip(" "), text[end:].lstrip(" ")
    return _join(_join(before, new), after) if before else _join(new, after)


def _find(text: str, part: str) -> tuple[int, int] | None:
    i = text.lower().find(part.lower())
    if i >= 0:
        return i, i + len(part)
    # "小米 15 Pro" found in "小米15 Pro": match with optional spaces
    pattern = r"\s*".join(re.escape(ch) for ch in part if not ch.isspace())
    m = re.search(pattern, text, re.IGNORECASE) if pattern else None
    return m.span() if m else None


def _with_variant(name: str, variant: str | None) -> str:
    """The product name with its variant word replaced (None: removed, for 标准款/standard), or appended.
    Only a variant after the model number is removed ("iPhone 16 Pro" -> "iPhone 16"), not one that is part
    of the line's name ("MacBook Air M3")."""
    words = name.split()
    hits = [i for i, w in enumerate(words) if _VARIANT.fullmatch(w)]
    if variant is None:
        digit_at = next((i for i, w in enumerate(words) if any(ch.isdigit() for ch in w)), None)
        if digit_at is None and hits and hits[-1] == len(words) - 1 and is_chinese(words[0]):
            # "声眸 Pro": a Chinese brand with a variant word and no model number; its standard is the brand's.
            digit_at = 0
        keep = [w for i, w in enumerate(words) if not (i in hits and digit_at is not None and i > digit_at)]
        return " ".join(keep) if keep else name
    if hits:
        first, last = hits[0], hits[-1]
        return " ".join([*words[:first], variant, *words[last + 1 :]])
    digit_at = next((i for i, w in enumerate(words) if any(ch.isdigit() for ch in w)), None)
    if digit_at is not None and digit_at + 1 < len(words) and _EDITION_CODE.fullmatch(words[-1]):
        # "Acme T-5 GTX" + "Lite": an all-caps code after the model number is its edition, the slot the variant
        # takes ("Acme T-5 Lite"), not a part every sibling shares.
        return " ".join([*words[:-1], variant])
    return f"{name} {variant}"


_EDITION_CODE = re.compile(r"[A-Z]{2,5}")


# A place, a product category or a term ("两年", "24 期") replaces the previous question's value of its kind:
# "寄到日本运费多少" + "那寄到新加坡呢", "耳机延保一年多少钱" + "平板呢" + "三年的呢".
# Long alternations of names: behind a look-ahead for their first characters (`fail_fast`), a scan skips the
# positions no name starts at instead of trying every name there.
_PLACE = fail_fast(re.compile("|".join(f"(?:{p})" for p in PLACES.values()), re.IGNORECASE))
_CATEGORY = fail_fast(re.compile("|".join(f"(?:{p})" for p in CATEGORIES.values()), re.IGNORECASE))
_TERM = re.compile(
    r"(?<![\dA-Za-z.])(?:\d+|[一二两三四五六七八九十]+)\s?(?:个)?(?:年|个月|月|期)(?![\dA-Za-z])"
    r"|(?<![\dA-Za-z.])\d+\s?-?(?:years?|months?|instal+ments?)\b",
    re.IGNORECASE,
)
_NOUN_SLOTS = frozenset({"place", "category", "term"})
_SLOTS = {
    "storage": _STORAGE,
    "size": _SIZE_SLOT,
    "colour": _COLOUR,
    "place": _PLACE,
    "category": _CATEGORY,
    "term": _TERM,
}


def has_slot(query: str, kind: str) -> bool:
    pattern = _SLOTS.get(kind)
    return pattern is not None and pattern.search(query) is not None


def is_noun_slot(kind: str) -> bool:
    return kind in _NOUN_SLOTS


def substitute(previous: str, contrast: Contrast, question: str) -> tuple[str, str] | None:
    """(query, detail): the previous question with the contrast's value in place of the old value of its kind,
    or the previous question's rest carried over; None when there is nothing to read it against."""
    prev = _core(previous)
    if not prev:
        return None
    tail = previous.strip()[len(prev) :]  # the previous question's closing punctuation
    value, kind, subj = contrast.core, contrast.kind, subject(prev)
    span = _find(prev, subj.text) if subj is not None else None
    if span is not None and _POSSESSIVE.match(prev, span[1], span[1] + 2):
        # "What's Acme R8's noise level?": the name is edited with its possessive, which stays after it.
        span = (span[0], span[1] + 2)

    def put(start: int, end: int, new: str) -> str:
        return _replace_span(prev, start, end, new) + tail

    if kind in _SLOTS:
        old = _SLOTS[kind].search(prev)
        if old is not None:
            return put(*old.span(), value), f"replaced {old.group()!r} with {value!r}"
        if kind in _NOUN_SLOTS:
            kind = "plain"  # nothing of its kind to replace: a noun asked about the previous subject
    if contrast.prep and kind in ("plain", "named", "place", "category", "term"):
        return _prepositional(prev, tail, contrast)
    if kind in _SLOTS:
        if subj is not None and span is not None:
            return put(span[1], span[1], value), f"added {value!r} to {subj.text!r}"
        return _join(prev, value) + tail, f"added {value!r}"
    if kind == "comparative":
        query = f"{prev}，{contrast.raw}？" if contrast.chinese else f"{prev}, {contrast.raw}?"
        return query, f"carried the previous question with {contrast.raw!r}"
    if subj is None or span is None:
        if kind == "standard":
            return None
        return _join(value, previous.strip()), f"added the previous question to {value!r}"
    name = prev[span[0] : span[1]]
    if kind in ("variant", "standard"):
        if not subj.named:
            return None if kind == "standard" else (_join(prev, value) + tail, f"added {value!r}")
        # "Acme R8's" -> "Acme R8 Pro's": the variant goes with the name, before its possessive.
        owner = _POSSESSIVE.search(name)
        cut = owner.start() if owner is not None and owner.end() == len(name) else len(name)
        new_name = _with_variant(name[:cut], value if kind == "variant" else None)
        if kind == "standard" and not any(ch.isdigit() for ch in new_name):
            # "护童 Pro" -> "护童 标准版": with no model number the brand alone would name the whole line.
            new_name = f"{new_name} {value}"
        new_name += name[cut:]
        return put(*span, new_name), f"{name!r} -> {new_name!r}"
    if kind == "pronoun":
        # "那它的保修期呢" -> "<product> 的保修期"; "What about its warranty?" -> "What about <product>'s warranty?"
        return resolve(contrast.raw if contrast.chinese else question, subj), f"added {subj.text!r} to {contrast.raw!r}"
    if kind == "named":
        family = sibling_family(name, value) if variant_only([Entity(value, True)]) else None
        if subj.named and family:
            # "那 2L 呢" after "Acme 3L Pro …": a sibling of the same family, not a product called "2L".
            return put(*span, f"{family} {value}"), f"{name!r} -> {family} {value!r}"
        if subj.named:
            return put(*span, value), f"replaced {name!r} with {value!r}"
        return _join(value, previous.strip()), f"added the previous question to {value!r}"
    # A plain noun: after a name it is what is now asked about the name ("那保修期呢" -> "<product> 的保修期"),
    # after a plain subject it takes that subject's place ("发票怎么开" + "那收据呢" -> "收据怎么开").
    names = own_names(value) if subj.named else []
    if variant_only(names) and value.startswith(names[0].text) and (completed := with_family(value, subj.text)):
        # "Pro 的电池呢" after "Acme 9 …": the battery of the Acme 9 Pro, not a "Pro battery" of the Acme 9.
        return completed, f"completed the variant with {subj.text!r}"
    if subj.named:
        query = f"{subj.text} 的{value}" if contrast.chinese else f"{subj.text} {value}"
        return query, f"asked {value!r} about {subj.text!r}"
    return put(*span, value), f"replaced {name!r} with {value!r}"


_OBJECT_END = re.compile(
    r"[,;:?!.]|\s(?:to|for|with|in|on|at|from|via|by|into|during|after|before|under|over|and|or|but|if|when)\s",
    re.IGNORECASE,
)


def _prepositional(prev: str, tail: str, contrast: Contrast) -> tuple[str, str]:
    """ "and to a gift card?" read against the previous question: its object of the same preposition (the
    name in it, if it holds one: "… take to reach PayPal" -> "… take to reach a gift card"), else its last
    name, else the previous question with the preposition and the value added."""
    value = contrast.raw
    found = list(re.finditer(rf"\b{re.escape(contrast.prep)}\s+", prev, re.IGNORECASE))
    if found:
        start = found[-1].end()
        end_m = _OBJECT_END.search(prev, start)
        end = end_m.start() if end_m is not None else len(prev)
        obj = prev[start:end]
        names = [e for e in entities(obj) if e.named and not e.ident]
        span = _find(obj, names[0].text) if names and obj[:1].islower() else None
        if span is not None:
            start += span[0]  # "reach PayPal": the verb stays, its object changes
        return _replace_span(prev, start, end, value) + tail, f"replaced {prev[start:end]!r} with {value!r}"
    names = [e for e in entities(prev) if e.named and not e.ident]
    span = _find(prev, names[-1].text) if names else None
    if span is not None:
        old = prev[span[0] : span[1]]
        return _replace_span(prev, *span, value) + tail, f"replaced {old!r} with {value!r}"
    return f"{prev} {contrast.prep} {value}" + tail, f"added {contrast.prep} {value!r}"


# --- what a question says of its own -----------------------------------------------------------------

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
    # The verb after a subject is no entity but still says something ("Why can't I delete keys?").
    verbs = sum(
        1
        for m in _AFTER_SUBJECT.finditer(question)
        if m.group(1).lower() not in _EN_STOP and m.group(1).lower() not in _WEAK and not _VERB_LIKE.match(m.group(1))
    )
    return verbs + sum(1 for e in found for w in e.key.split() if w not in _WEAK)


_AFTER_SUBJECT = re.compile(r"\b(?:i|you|we|they|he|she|it|be|been|being)\s+([a-z]+)\b", re.IGNORECASE)


# Verbs that say nothing of a topic: "可以吗", "你给我讲讲" have no subject of their own.
_ZH_LIGHT_VERBS = frozenset(
    [
        "可以",
        "知道",
        "觉得",
        "喜欢",
        "认识",
        "需要",
        "应该",
        "能够",
        "希望",
        "想要",
        "告诉",
        "说说",
        "讲讲",
        "看看",
        "了解",
        "是不是",
        "没有",
        "有没有",
        "就是",
        "还是",
        "不是",
    ]
)


def has_subject(question: str) -> bool:
    """Does the question say what it is about? A name, a content word or (Chinese) a verb with a topic
    ("应该怎么申请退货？"). Only such a question can open a new topic."""
    if own_names(question) or content_size(question) >= 1:
        return True
    return is_chinese(question) and any(
        flag.startswith("v") and len(w) >= 2 and w not in _ZH_LIGHT_VERBS for w, flag in _tagged(question)
    )


_DEFINITE_NOUN = re.compile(r"\bthe\s+(?:[a-z]+\s+){0,2}?[a-z]{3,}\b")


def definite_without_name(question: str) -> bool:
    """ "Who was the enemy?", "What are the requirements?": an English question about a definite thing it
    does not name presupposes the conversation's topic; it continues it rather than opening one."""
    if is_chinese(question) or own_names(question):
        return False
    return any(m.group().split()[-1] not in _EN_STOP for m in _DEFINITE_NOUN.finditer(question))


@lru_cache(maxsize=4096)
def text_topic_words(text: str) -> frozenset[str]:
    """`topic_words` of the text's entities, remembered: a conversation's texts are read again every turn."""
    return frozenset(topic_words(entities(text)))


def topic_words(found: Iterable[Entity]) -> set[str]:
    """The words entities are made of (singular, lowercase, at least three letters; Chinese nouns of two
    characters or more): what a question shares with the history when it stays on topic."""
    out: set[str] = set()
    for e in found:
        if is_chinese(e.text):
            out.update(str(w) for w in _cut(e.text) if len(w) >= 2 and _CJK.match(w) and w not in _ZH_GENERIC)
        key = re.sub(r"(?<=[a-z])-(?=[a-z])", "", e.key)  # "co-signer" is "cosigner"
        out.update(_singular(w) for w in re.split(r"[^a-z0-9]+", key) if len(w) >= 3 and w not in _EN_STOP)
    return out


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
        return _ZH_QUESTION.search(question) is None and not any(f.startswith("v") for _, f in _tagged(question))
    words = [w.lower() for w in _EN_WORD.findall(question)]
    # "Any delivery in August?" asks when about what the conversation is about, not about a keyword of its own.
    when = any(_WHEN_WORD.match(w) for w in words)
    return len(words) <= 4 and not when and not any(w in _EN_QUESTION_WORDS for w in words)


_WHEN_WORD = re.compile(rf"^(?:{_EN_WHEN})$")


# What opens a message without asking anything: a greeting, or the customer giving an identifier ("你好，我的订单号是
# XK2025…，", "Hi, my phone number is …."). It says nothing of the page that answers the question after it.
_GREETING = re.compile(
    r"^(?:你好|您好|hi|hello|hey|嗨|哈喽|在吗|打扰了|(?:good\s+)?(?:morning|afternoon|evening))[!！~～\s]*$",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"(?<=[，,。！!；;])\s*|(?<=\.)\s+")
_ASKING = re.compile(
    r"[?？吗呢]|多少|什么|怎么|如何|哪|几|是否|能否|可以|^\s*(?:what|how|which|when|where|why|who|can|could|is|are|do|does)\b",
    re.IGNORECASE,
)


def without_preamble(question: str) -> str:
    """The question without the clauses that open it without asking (`_GREETING`, an identifier given), when a
    clause with a question of its own is left; else the question as it is."""
    parts = [p for p in _CLAUSE_END.split(question.strip()) if p.strip()]
    start = 0
    while start < len(parts) - 1:
        part = parts[start].strip().rstrip("，,。！!；;. ")
        identifier = bool(_ID_DIGITS.search(part) or _MASKED.search(part)) and _ID_LABEL.search(part) is not None
        if not (_GREETING.match(part) or (identifier and not _ASKING.search(part))):
            break
        start += 1
    rest = "".join(p if p.endswith(" ") or is_chinese(p) else p + " " for p in parts[start:]).strip()
    # The rest must say what it asks about ("到哪了？" after an order number is about that order).
    return rest if start and _ASKING.search(rest) and has_subject(rest) else question


def history_texts(summary: str, rounds: Sequence[tuple[str, str]]) -> list[HistoryText]:
    """The summary, then each round's question and answer (oldest first, answers without the service's
    framing), with their ages."""
    n = len(rounds)
    summary = strip_framing(summary)
    out = [HistoryText(summary, "summary", n)] if summary else []
    for i, (user, assistant) in enumerate(rounds):
        out.append(HistoryText(user, "user", n - 1 - i))
        answer = strip_framing(assistant)
        if answer:
            out.append(HistoryText(answer[:_ENTITY_ANSWER_CHARS], "assistant", n - 1 - i))
    return out


def _no_product(name: str) -> bool:
    """An age, a date or an amount is no product; a size alone ("150ml") still tells which product's page."""
    return measure_only(name) and _SIZE_SLOT.fullmatch(name) is None
