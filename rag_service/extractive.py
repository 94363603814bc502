"""The answer without an LLM: the knowledge base's own sentences that answer the question asked.

A sentence is chosen for what the question wants, not for sharing words with it:
- the question's type decides what a good sentence carries (a price question wants an amount, "how long"
  a duration, "where" an address; `facts.question_asks`);
- it must be about the product the question names, and that model, not a sibling (the sentence's own
  product names, else its section heading, else the document title; `facts.product_fit`), and about the
  storage tier or screen size asked for when one is named;
- words shared with the question count by rarity, and so do customer-service concepts shared across
  languages (an English question over a Chinese page; `glossary`);
- page furniture (update dates, "this page describes ...", navigation) is never an answer.
A question about the conversation itself ("what was my order number?") is answered from the session's
memory (`recall`), not the knowledge base. The framing is in the question's language and the answer is
always marked as extractive.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rag_core.lexical import terms
from rag_core.text import EN_GENERIC_WORDS, HAN_CLASS, is_heading, language, name_aliases, split_sentences
from rag_service.bridge import says
from rag_service.bridge import stem as bridge_stem
from rag_service.domain import Chunk, GenerationInput
from rag_service.facts import (
    BASE_WORDS,
    TIER_KINDS,
    VALUE_PATTERNS,
    VARIANT_WORDS,
    Ask,
    Product,
    attribute_fit,
    attributes,
    has_value,
    places,
    product_fit,
    products,
    question_asks,
    shows,
    store_name,
    values,
)
from rag_service.glossary import ASPECTS, CATEGORIES, GENERIC, concepts, coverage, variant_terms, weight
from rag_service.privacy import order_numbers
from rag_service.recall import recall_answer
from rag_service.table_rows import (
    Row,
    asked_numbers,
    headers_of,
    holding_bound,
    reached_tier,
    span_fit,
    stated_figures,
    stated_spend,
    states_threshold,
    variant_clauses,
    variant_marks,
    with_variants,
)

ChatMessages = list[dict[str, Any]]

MARKER = "[extractive answer, no LLM configured]"

_FRAMES = {
    "zh": ("根据知识库：", "知识库中没有找到相关内容，请联系人工客服。", "要点："),
    "en": (
        "From the knowledge base:",
        "Nothing in the knowledge base answers this; please contact a human agent.",
        "Key figures: ",
    ),
}

_LINE_SPLIT = re.compile(r"\n+")
# A list item's marker ("- ", "1. ", "（2）"), not the whole part of a figure that opens the line: "2.5kg 装：99 元"
# read as item "2." of a list would quote another pack size ("5kg 装：99 元").
_LIST_MARK = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.、)](?!\d)|[（(]\d{1,2}[)）])\s*")
_BOILERPLATE = re.compile(
    r"^(?:更新日期|最后更新|更新时间|发布日期|last updated|updated on|updated:|effective date)"
    r"|本页(?:面)?(?:介绍|说明|列出|汇总)|本文(?:介绍|说明)|以下是|如下[。:：]?$|详见下文|请继续阅读"
    r"|^this (?:page|document|article|guide|section) (?:explains|describes|covers|lists|summari[sz]es|is about)"
    r"|版权所有|copyright|©|all rights reserved|返回顶部|首页\s*[>/·|｜]|^home\s*[>/·|]|skip to|上一页|下一页|cookie",
    re.IGNORECASE,
)


# A sentence that sends the reader to another document for the rule.
_POINTER = re.compile(
    r"(?:见|请看|参见|参阅|详见|请查看)\s?《[^》]{1,40}》|\b(?:see|refer to|check) (?:our |the )?[\"“'‘][^\"”'’]{1,60}[\"”'’]",
    re.I,
)


@dataclass(slots=True)
class Candidate:
    text: str
    chunk: Chunk
    rank: int
    section: str
    order: int
    words: set[str] = field(default_factory=set)
    ideas: frozenset[str] = frozenset()
    score: float = 0.0
    row: Row | None = None
    # How much of what the question asks about the sentence says, against the sentence that says most (`_said_of`).
    said: float = 1.0


def sentences_of(chunks: Sequence[Chunk]) -> list[Candidate]:
    """Each retrieved sentence once (overlapping chunks repeat them), with its section heading. A table
    row is one sentence, its cells named by the table's header (`table_rows`)."""
    out: list[Candidate] = []
    seen: set[str] = set()
    readers = headers_of((c.doc_id, c.text) for c in chunks)
    # Sentences of an overlap read without their heading, by page, with the best rank of a chunk holding them.
    overlap: dict[tuple[str, str], int] = {}
    for rank, chunk in enumerate(chunks):
        section = chunk.section
        reader = readers[chunk.doc_id]
        reader.reset()
        lines = [ln.strip() for ln in _LINE_SPLIT.split(chunk.text) if ln.strip() and ln.strip() != chunk.title]
        if section and section in lines[1:] and section not in lines[:1]:
            # A chunk that opens inside the overlap of the section before its own heading ("… Price: 99 yuan."
            # then "Libra K2"): the text before that heading is under one this chunk does not show (the chunk
            # before it has that text with its heading), so whose fact it states is unknown here.
            cut = lines.index(section)
            for line in lines[:cut]:
                for sentence in split_sentences(_LIST_MARK.sub("", line).strip(" #*")):
                    held = (chunk.doc_id, sentence)
                    overlap[held] = min(rank, overlap.get(held, rank))
            lines = lines[cut:]
        # A sentence that ends in a colon ("每周开放以下时段：") introduces the short lines below it: they
        # are its items, not headings, and it is quoted with them.
        intro: Candidate | None = None
        previous_body = False
        for i, line in enumerate(lines):
            got = reader.feed(line, lines[i + 1] if i + 1 < len(lines) else None)
            if got is True:
                continue
            if isinstance(got, Row):
                intro = None
                text = got.render()
                if text not in seen:
                    seen.add(text)
                    out.append(Candidate(text, chunk, rank, section, len(out), row=got))
                continue
            if (
                intro is not None
                and is_heading(line)
                and _ITEM_VALUE.search(line)
                and intro.text.count(_ITEM_JOIN) < _MAX_ITEMS
            ):
                intro.text += ("" if intro.text.endswith(_INTRO_ENDS) else _ITEM_JOIN) + line
                out.append(Candidate(line, chunk, rank, section, len(out)))
                continue
            intro = None
            after_body = previous_body
            previous_body = False
            if (
                is_heading(line)
                and not _flat_row(line)
                and not (after_body and _item_line(line))
                and not _amount_run(lines, i)
            ) or _asks_question(line, lines[i + 1] if i + 1 < len(lines) else None):
                section = line.strip("*_ ") or line  # "**Q: ...?**" is read as the question it sets in bold
                continue
            previous_body = True
            body = _LIST_MARK.sub("", line).strip(" #*")
            reply = ""
            for s in split_sentences(body):
                if _BARE_REPLY.fullmatch(s):
                    reply = f"{reply}{s} "  # "No." is read with what it answers no to
                    continue
                s, reply = reply + s, ""
                # The same line under two headings ("营业时间：9:00–20:30" of two stores) is two facts.
                key = f"{section}\n{s}"
                if len(s) < 4 or key in seen:
                    continue
                seen.add(key)
                out.append(Candidate(s, chunk, rank, section, len(out)))
                intro = out[-1] if s.endswith(_INTRO_ENDS) else None
    for c in out:
        # The same sentence under its own heading in another retrieved chunk is as well retrieved as the best
        # chunk that holds it.
        c.rank = min(c.rank, overlap.get((c.chunk.doc_id, c.text), c.rank))
    return out


# A table that a PDF's text layer flattened keeps a row a line, its cells run together with spaces ("1,000 to
# 2,999 yuan 129 yuan 299 yuan"): short and unpunctuated as a heading is, but a heading states no amounts.
_AMOUNT = re.compile(r"[¥￥]\s?\d|\d\s?(?:yuan|rmb|元|块|%)(?![A-Za-z])", re.I)


# A figure with its measure ("95 折", "1.2 倍", "2 次", "80 元"), not a bare one ("晶透 1.67 防蓝光" is a model's heading).
_ITEM_FIGURE = re.compile(r"\d\s?(?:%|元|块|折|倍|次|晚|天|个|件|张|份|只|人|小时|分钟|年|月)|，")


# "一、7 天无理由退货", "第二条 …": a heading by its numbering.
_NUMBERED_HEADING = re.compile(r"^\s*(?:[一二三四五六七八九十]+、|第[一二三四五六七八九十\d]+[章节条部分])")


def _item_line(line: str) -> bool:
    """A short unpunctuated line with a figure and its measure, or a comma, after the lines of a section ("积分 1.2 倍", "每年 2 次免费寄存" under
    a level's heading, as a web page's list comes out without its markers): an item of that section, not a
    heading of its own. Not a model's name ("鲜粒 5kg", "Tank 20")."""
    # A comma joins clauses, which a heading has not ("专属客服，优先排期").
    return (
        bool(_ITEM_FIGURE.search(line))
        and not _NUMBERED_HEADING.match(line)
        and not _MODEL_TOKEN.search(line)
        and not products(line)
        and not _model_name(line)
    )


def _model_name(line: str) -> bool:
    # "Lumen Tank 20": capitalised words and a figure name a model.
    return bool(re.fullmatch(r"(?:[A-Z][\w-]*\s)+\d[\w.]*", line.strip()))


def _amount_run(lines: Sequence[str], i: int) -> bool:
    """A short line stating an amount beside another such line ("3 periods 2.3%" over "6 periods 4.5%"): the
    rows of a table a PDF's text layer flattened to one value a row, not headings; a heading states no amount,
    and two in a row are a list."""
    if not _AMOUNT.search(lines[i]):
        return False
    return any(0 <= j < len(lines) and is_heading(lines[j]) and _AMOUNT.search(lines[j]) for j in (i - 1, i + 1))


def _flat_row(line: str) -> bool:
    return len(_AMOUNT.findall(line)) >= 2


_INTRO_ENDS = ("：", ":")
_BARE_INTRO = 0.1
_ITEM_JOIN = "；"
_MAX_ITEMS = 8
# An item states something ("周六 14:00–17:00"); a heading after the items ("退换说明") starts a section.
_ITEM_VALUE = re.compile(r"\d")


_BARE_REPLY = re.compile(
    r"(?:yes|no|yes,? you can|no,? you can(?:no|')t|是的|是|不是|可以|不可以|不能|能)[.!。！,，]?", re.I
)
_QUESTION_LINE = re.compile(r"[?？]\s*$")


def _asks_question(line: str, following: str | None) -> bool:
    """A line that is one question with more text after it (a FAQ's "Can I pay by card?" over its answer):
    the heading of what follows, never an answer itself."""
    # A FAQ may set its questions in bold ("**Q: Can I pay by card?**"): the emphasis is no part of it.
    line = line.strip().strip("*_ ")
    if following is None or not _QUESTION_LINE.search(line) or len(line) > 160:
        return False
    return len(split_sentences(line)) == 1


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    lang: str
    asks: tuple[Ask, ...]
    named: tuple[Product, ...]
    base_model: bool
    attrs: dict[str, set[str]]
    words: frozenset[str]
    ideas: frozenset[str]
    # Concepts of the previous question the current one leaves implicit ("and what does that option cost?").
    context: frozenset[str] = frozenset()
    added_ideas: frozenset[str] = frozenset()
    added_words: frozenset[str] = frozenset()
    editions: frozenset[str] = frozenset()
    # The Chinese variant words the English question's common words name ("the indoor one": 室内): they pick
    # a sibling on a Chinese page by the part of its name that tells it apart.
    variant_terms: frozenset[str] = frozenset()
    # Variant words a follow-up names alone ("and the Pro one?") that the product carried over lacks: the
    # sibling that has them, whatever its model number.
    picked_variants: frozenset[str] = frozenset()
    # The pages the previous answer quoted: a sibling picked by its variant word is on the same page.
    answered_pages: frozenset[str] = frozenset()
    # What the previous answer's quoted lines were about ("型号 晨星 16 寸" of a row it quoted), for a follow-up
    # that names no model of its own: "这款怎么卖" after an answer that settled on one of a page's siblings.
    answered_subjects: tuple[str, ...] = ()
    # The lines themselves the previous answer quoted, for the same follow-ups: a line quoted without the heading
    # that names its sibling ("10kg 装：310 元" under one formula's heading) still says which sibling was settled on.
    answered_lines: frozenset[str] = frozenset()
    # The same, for a question that names no model at all and has no rewrite naming one ("底座保修多久" after an
    # answer on one model): the section of the model settled on, among sections that repeat the same labelled lines.
    settled_lines: frozenset[str] = frozenset()
    # A follow-up that names what it moves on to ("配件呢"): the sibling quoted before holds only where it names none.
    moved_on: bool = False
    # The amount the customer says they spent, in this question or one just before: the tier it reaches.
    spend: float | None = None
    spend_carried: bool = False
    # What the customer said, newest first: the question, the query it was rewritten to, the questions before.
    recent: tuple[str, ...] = ()
    # The question's words in the collection's other language (`GenerationInput.translated`).
    translated: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def parse(cls, question: str, query: str, earlier: Sequence[str] = (), answered: str = "") -> Question:
        # The rewritten query carries what a follow-up leaves out ("那它的保修期呢" -> the product); the
        # question as asked decides the language and the type. `earlier` are the customer's last questions
        # before this one, oldest first: "256GB 的呢" after "回收价多少" asks for the same kind of value.
        # An order number and its label ("订单号 QX2026…,") say which purchase, not what about it is asked: no
        # product, no word a sentence should share.
        question, query = _without_order_number(question), _without_order_number(query)
        both = f"{query} {question}" if query and query != question else question
        # "65L 的呢" rewritten to "65L 的背带能拆吗": the rewrite asks what the customer asks again (a yes-or-no
        # question's mark ends the rewrite, not the two joined).
        asks = question_asks(question) or question_asks(both) or (question_asks(query) if query else [])
        if not asks and _FOLLOW_UP.search(question):
            # The nearest earlier question with a type ("三年的呢" after "平板呢" after "延保多少钱").
            asks = next((found for e in reversed(earlier) if (found := _typed(e))), [])
            if Ask.DURATION in asks and "out_of_warranty" in concepts(question):
                # "and if it breaks after the warranty?" after "how long is the warranty?": past the warranty
                # its length is known; what happens then (a cost, a rule) is asked.
                asks = []
        if not asks and _BARE_HOW_MUCH.search(question):
            # "网上卖 1280，店里多少": what it sells for here; "Pro 版卖多少", "买两个要多少": an amount. "那款呢，多少"
            # leans on the question before: the kind of value asked there.
            asks = [Ask.PRICE]
            if "呢" in question and not _SELLING.search(question):
                asks = next((found for e in reversed(earlier) if (found := _typed(e))), asks)
        previous = " ".join(earlier[-_CONTEXT_ROUNDS:])
        if not asks and has_value(question, Ask.DURATION):
            asks = [Ask.DURATION]  # "what if it stops working after 20 days?": the time limit that applies
        ideas = concepts(both)
        if "price" in ideas and Ask.PRICE not in asks and "price" not in concepts(_HOW_MUCH.sub(" ", both)):
            # "How much storage does it have?": the type reader found no price in "how much".
            ideas -= {"price"}
        if not asks and concepts(question) & _SPEC_UNITS.keys():
            asks = [Ask.SPEC]  # "what noise level on its quietest mode?": a figure in the concept's unit
        # What the rewriter added to the question ("Zone 2 客服周末上班吗") is weaker evidence than what the
        # customer asked, unless the question says nothing by itself ("专票呢" -> "专票什么时候能收到").
        # The tail of a contraction ("m" of "I'm") is no word of the question.
        own_ideas, own_words = concepts(question), _stems(terms(_CONTRACTION.sub(" ", question)))
        added_ideas = ideas - own_ideas if own_ideas else frozenset()
        words = _stems(terms(_CONTRACTION.sub(" ", both)))
        added_words = words - own_words if own_words - _GENERIC_ZH else set()
        # The tail of a contraction ("I'm 176 cm") is no model "m 183".
        named = products(_CONTRACTION.sub(" ", query or question)) or products(_CONTRACTION.sub(" ", question))
        # A volume or a length with its figure ("30ml", "5l") is a size of a model, not its name: "the Pro in
        # 30ml" asks for the Pro's 30ml row, which the size picks as a word of the question.
        named = tuple(n for p in named if (n := _without_size(p)) is not None)
        # What is left of "50ml Max" is a variant word alone: the sibling that has it, as for "and the Max?".
        sized_variants = frozenset(v for p in named if not p.core for v in p.variants)
        named = tuple(p for p in named if p.core)
        # The rewriter's editions ("the standard lens") are no evidence against the model the customer names
        # themself ("and the Pro version?"): only a question that names none takes the query's.
        named_editions = asked_editions(question) or (
            asked_editions(query) if not _names_own_subject(question) else frozenset()
        )
        if answered and _leans_on_previous(question, query) and not _names_own_subject(question):
            # "它的能效是几级" after an answer about one model: that model, whatever the rewriter carried over
            # from an earlier turn (it keeps the conversation's first product through "那双门那款呢").
            focus_named, focus_editions, subject = answer_subject(answered)
            # Only for a question that points back ("它", "that one") or whose query already names the
            # product's line ("凉川 2.0" for "凉川 2.0 匹柜机 标准版"): an answer that merely named a plan in
            # passing is no subject for "收货后几天内得申请".
            # A bare question ("要上油吗") names nothing and points at nothing either: the model the answer settled
            # on, not the one the rewriter carried.
            if (focus_named or focus_editions) and (
                _ANAPHOR.search(question)
                or _elliptic(question)
                or set(terms(subject)) & set(terms(query)) - _GENERIC_ZH
            ):
                named = focus_named or named
                named_editions = focus_editions or named_editions
        if named and _PICKS_SIBLING.search(question) and not products(question):
            # "4 人的那个是什么颜色": the customer picks a sibling by what it is or has; the product the rewriter
            # carried over is the one they are moving away from, so the page's sibling names decide.
            named = ()
        if not {Ask.PRICE, Ask.SPEC} & set(asks):
            # A size the rewriter carried over ("the 50ml Max" for "is the Max ok while pregnant?") picks a row of a
            # price or a size, not the line that answers another question about the model.
            carried = {w for w in added_words if _SIZE_WORD.fullmatch(w)}
            words -= carried
            added_words -= carried
        picked = _bare_variants(question) or sized_variants
        if picked and (
            any((n := _without_size(p)) is not None and n.core for p in products(question))
            or any(picked <= p.variants for p in named)
        ):
            picked = frozenset()
        if picked:
            named = ()
        # "能打几折" after "我今年花了 3500，是什么级别": the spend said before still picks the tier's row.
        spend = stated_spend(question)
        spend_carried = spend is None
        points_back = (
            bool(answered)
            and bool(_ANAPHOR.search(question) or _elliptic(question) or _FOLLOW_UP.search(question))
            and not _names_own_subject(question)
        )
        # "底座保修多久" after an answer on one model, with no rewrite naming one: that model's line.
        unnamed = bool(answered) and not (
            named or picked or products(query or question) or _names_own_subject(question)
        )
        if spend is None and not asked_numbers(question, []):
            spend = next((s for e in reversed(earlier[-_CONTEXT_ROUNDS:]) if (s := stated_spend(e)) is not None), None)
        return cls(
            text=question,
            recent=(question, query, *reversed(earlier[-_CONTEXT_ROUNDS:])),
            spend=spend,
            spend_carried=spend_carried,
            lang=language(question),
            asks=tuple(asks),
            named=named,
            picked_variants=picked,
            answered_pages=cited_pages(answered) if picked else frozenset(),
            # Only for a question that points back ("这个", "that one"): one with a topic of its own ("能开发票吗")
            # may have left the row the last answer quoted.
            # An elliptic question ("Weight?", "几斤？") names nothing and points at nothing either: only what
            # is on the table can be what it asks about.
            # A follow-up that moves on to another thing ("配件呢" after the silver level's discount on bikes) keeps
            # the sibling settled on, unless it names one of that page's siblings itself.
            answered_subjects=quoted_subjects(answered) if points_back else (),
            answered_lines=quoted_lines(answered) if points_back else frozenset(),
            settled_lines=quoted_lines(answered) if points_back or unnamed else frozenset(),
            moved_on=bool(_FOLLOW_UP.search(question)) and not (_ANAPHOR.search(question) or _elliptic(question)),
            base_model=BASE_WORDS.search(question) is not None,
            attrs=_with_place_pointed_at(attributes(question) or attributes(query), question, earlier),
            editions=named_editions,
            variant_terms=variant_terms(question)
            or (variant_terms(query) if query and not _names_own_subject(question) else frozenset()),
            words=frozenset(words),
            ideas=ideas,
            added_ideas=added_ideas,
            added_words=frozenset(added_words),
            # A follow-up ("that service", "这个活动", one the rewriter completed) is still about the
            # previous topic.
            # Only its topics: a price asked before ("how much is it?") is no topic of "how heavy is it?".
            context=concepts(previous) - ideas - GENERIC
            if previous and _leans_on_previous(question, query)
            else frozenset(),
        )


_RELATIVE_PRICE = re.compile(
    r"便宜多少|省多少|优惠多少|多收|加收|手续费|\bcheaper\b|\bsave\b|\bdiscount\b|\bsurcharge\b|\bfees?\b", re.I
)
# Only a volume in millilitres: litres and centimetres name models too ("行者 65L", "Shell 2L", "补光灯 30cm").
_SIZE_WORD = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?ml(?![\w])", re.I)


def _without_size(p: Product) -> Product | None:
    """The product named without the size the customer put beside its name ("50ml Max" is the Max, "30ml" alone
    names none)."""
    if not _SIZE_WORD.search(p.text):
        return p
    text = " ".join(_SIZE_WORD.sub(" ", p.text).split())
    if not text:
        return None
    kept = set(re.findall(r"[a-z]+|\d+", text.lower()))
    sized = {t for m in _SIZE_WORD.finditer(p.text) for t in re.findall(r"[a-z]+|\d+", m.group().lower())}
    return Product(text, frozenset(t for t in p.tokens if t not in sized or t in kept))


# "my order number is SY2026…": the label, a verb, then the number (the privacy pattern takes no verb between).
_ORDER_IS = re.compile(
    r"(?<![A-Za-z])order\s*(?:no\.?|number|num\.?|id|#)\s+(?:is|was)\s+(?=[0-9A-Za-z-]*\d)[0-9A-Za-z][0-9A-Za-z-]{4,}[0-9A-Za-z]",
    re.I,
)


def _without_order_number(text: str) -> str:
    found = order_numbers(text) or list(_ORDER_IS.finditer(text))
    if not found:
        return text
    for m in reversed(found):
        text = f"{text[: m.start()]} {text[m.end() :]}"
    return re.sub(r"^[\s,，:：。.]+", "", text)


# "What's the phone number there?", "那家店周二开吗": the place the customer named before.
_THERE = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bwas )\bthere\b(?!\s*(?:is|are|was|were|'s|will|be|any|a|an)\b)"
    r"|\bthat (?:store|shop|branch|location|city|place)\b|那里|那边|那儿|那家|那个(?:店|门店|城市|地方)|该店|该门店",
    re.I,
)


def _with_place_pointed_at(attrs: dict[str, set[str]], question: str, earlier: Sequence[str]) -> dict[str, set[str]]:
    """A question that points at a place ("there", "that store") without naming one is about the place the
    customer named last (the rewriter carries places for shipping questions only)."""
    if "place" in attrs or not _THERE.search(question):
        return attrs
    for before in reversed(earlier[-_CONTEXT_ROUNDS:]):
        found = places(before)
        if found:
            return {**attrs, "place": set(found)}
    return attrs


_WORD = re.compile(r"[A-Za-z]+\+?")
_PICK_NOUN = frozenset(["one", "model", "version", "edition", "variant"])


def _bare_variants(question: str) -> frozenset[str]:
    """Variant words used as a name ("the Pro one", "Max 呢"), not as an English word ("air fryer")."""
    words = [(m.group(), m.end()) for m in _WORD.finditer(question)]
    out: set[str] = set()
    for i, (w, _) in enumerate(words):
        following = words[i + 1][0].lower() if i + 1 < len(words) else ""
        if w.lower() in VARIANT_WORDS and (w[0].isupper() or following in _PICK_NOUN):
            if following and following not in _PICK_NOUN and following.islower() and len(following) > 2:
                continue  # "Air purifier"
            out.add(w.lower())
    return frozenset(out)


def _variant_fit(q: Question, c: Candidate) -> float | None:
    """1 when the sentence is about a model with the picked variant words, 0 about a model without them
    (its own name, a row's name cell, else its heading or page title); None when it names no model."""
    for text in (c.row.name if c.row is not None else c.text, c.section, c.chunk.title):
        if not text:
            continue
        marks = variant_marks(text) - {"base"}
        if marks:
            return 1.0 if q.picked_variants <= marks else 0.0
        if products(text):
            return 0.0
    return None


def _names_own_subject(question: str) -> bool:
    """Does the question say itself which product, edition, variant or tier it means ("那双门那款呢",
    "the quieter one")?"""
    return bool(
        _PICKS_SIBLING.search(question)
        or products(question)
        or editions(question)
        or BASE_WORDS.search(question)
        or {w.lower() for w in re.findall(r"[A-Za-z]+", question)} & VARIANT_WORDS
        or attributes(question)
        or _MODEL_TOKEN.search(question)
    )


# Letters and a figure written together ("2L", "X5", "65L"): a model's name or a sibling's distinguishing mark,
# which no generic word is.
_MODEL_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]+\d+[A-Za-z]*|\d+[A-Za-z]+)(?![A-Za-z0-9])")


# A model told by what it is or has: "能折叠的那款", "双门那台", "the quieter one" (not "那款", "那这个", "that one").
_PICKS_SIBLING = re.compile(
    rf"(?![那这]){HAN_CLASS}(?:的)?(?:那|这)(?:款|个|台|种|一款)|\bthe (?!same\b|other\b)[\w-]+(?: [\w-]+)? (?:one|model|version)\b",
    re.I,
)
_QUOTED_LINE = re.compile(r"^- (.+)$", re.M)
_SUBJECT_END = re.compile(r"[：，,。；]|: ")
_CLOSE = {"）": "（", ")": "("}


def _without_citation(line: str) -> str:
    """A quoted line without its trailing "（title）" / " (title)": a title may name every model of a page."""
    line = line.rstrip()
    if not line or line[-1] not in _CLOSE:
        return line
    depth = 0
    for i in range(len(line) - 1, -1, -1):
        ch = line[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _CLOSE.values():
            depth -= 1
            if depth == 0:
                return line[:i].rstrip()
    return line


def _page_title(c: Candidate) -> str:
    return c.chunk.title.split(" - ")[0].strip() or c.chunk.source


def cited_pages(answer: str) -> frozenset[str]:
    """The page titles an extractive answer cites (its quoted lines end in "（title）" / " (title)")."""
    out: set[str] = set()
    for m in _QUOTED_LINE.finditer(answer):
        line = m.group(1).rstrip()
        body = _without_citation(line)
        if body != line:
            out.add(line[len(body) :].strip()[1:-1].strip())
    return frozenset(out)


@lru_cache(maxsize=1024)
def answer_subject(answer: str) -> tuple[tuple[Product, ...], frozenset[str], str]:
    """The product (and edition) an earlier answer was about: what its first quoted sentence names, with
    the heading it was quoted under; else the one product a free-text answer names."""
    if answer.startswith(MARKER) and _QUOTED_LINE.search(answer) is None:
        return (), frozenset(), ""
    first = _QUOTED_LINE.search(answer)
    if first is not None:
        # Its subject: the heading it was quoted under ("霜川 X7 双门：…"), a row's first cell ("型号 X7，…"),
        # the words before its first comma; not the parts or specs it lists ("酷睿 Ultra 9 处理器").
        line = _without_citation(first.group(1))
        end = _SUBJECT_END.search(line)
        subject = line[: end.start()] if end else line
        return _named_in(subject), editions(subject), subject
    named = _named_in(answer)
    return (named, frozenset(), named[0].text) if len({p.text for p in named}) == 1 else ((), frozenset(), "")


# A page writes a model's name capitalised or in Chinese: "weighs 11" of "It weighs 11.9 kg" is a verb and a figure.
_LOWER_WORD = re.compile(r"[a-z]{3,}\b")


# A size written as figures times figures ("60 x 40 x 40 cm"): "x 40" of it is no model.
_DIMENSIONS = re.compile(r"\d(?:[\d.]*)\s?[x×*]\s?\d[\d.]*(?:\s?[x×*]\s?\d[\d.]*)*", re.I)


def _named_in(text: str) -> tuple[Product, ...]:
    return tuple(p for p in products(_DIMENSIONS.sub(" ", text)) if not _LOWER_WORD.match(p.text))


@lru_cache(maxsize=1024)
def quoted_subjects(answer: str) -> tuple[str, ...]:
    """What an extractive answer's quoted lines are about, each read as `answer_subject` reads its first one
    (the heading it was quoted under, a row's name cell, the words before the first comma), lowered. A
    free-text answer quotes none."""
    out: list[str] = []
    for m in _QUOTED_LINE.finditer(answer):
        line = _without_citation(m.group(1))
        end = _SUBJECT_END.search(line)
        out.append(line[: end.start()] if end else line)
    return tuple(o.strip().lower() for o in out)


@lru_cache(maxsize=1024)
def quoted_lines(answer: str) -> frozenset[str]:
    """The lines an extractive answer quoted, without their citations."""
    return frozenset(_without_citation(m.group(1)).strip() for m in _QUOTED_LINE.finditer(answer))


def _was_quoted(c: Candidate, lines: frozenset[str]) -> bool:
    # `_cite` may put the heading before the line ("Acme Pro：售价 99 元").
    return len(c.text) >= 4 and any(
        line == c.text or line.endswith(f"：{c.text}") or line.endswith(f": {c.text}") for line in lines
    )


_ANAPHOR = re.compile(r"\b(?:that|this|it|its|those|these|them|they)\b|这个|那个|这项|那项|该|它", re.I)


_CONTEXT_ROUNDS = 3
_HOW_MUCH = re.compile(r"\bhow much\b", re.I)
_BARE_HOW_MUCH = re.compile(r"多少[？?]?\s*$", re.I)
_SELLING = re.compile(r"卖|售|标价|\bsells?\b|\bsold\b|\bselling\b", re.I)


def _typed(question: str) -> list[Ask]:
    return [a for a in question_asks(question) if a is not Ask.YESNO]


def _elliptic(question: str) -> bool:
    """Is the question no more than what is asked ("What colours?", "保修几年"): at most three words, two
    Han characters counting as one? Not "门垫呢", "and the blue one?": those name what they move on to."""
    if _FOLLOW_UP.search(question):
        return False
    words = len(_LATIN_WORD.findall(_CONTRACTION.sub(" ", question)))
    han = len(_HAN_CHAR.findall(question))
    return words + (han + 1) // 2 <= _ELLIPTIC_WORDS


_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
_HAN_CHAR = re.compile(HAN_CLASS)
_ELLIPTIC_WORDS = 3


def _leans_on_previous(question: str, query: str) -> bool:
    return query != question or bool(_ANAPHOR.search(question) or _FOLLOW_UP.search(question))


# A question that leans on the one before: "那 256G 的呢", "and the blue one?", "what about in Europe?".
_FOLLOW_UP = re.compile(r"呢[？?]?\s*$|^\s*(?:那|那么)|^\s*(?:and|what about|how about)\b", re.I)


def _stems(words: Sequence[str] | set[str]) -> set[str]:
    """English plurals folded ("keyboards" ~ "keyboard", "installments" ~ "installment"); other words kept."""
    out: set[str] = set()
    for w in words:
        if w.isascii() and len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-3] + "y" if w.endswith("ies") else w[:-1]
        out.add(w)
    return out


def _context_products(c: Candidate, q: Question) -> list[Product]:
    """The products a sentence is about: those it names that touch the question's, else its section's,
    else its document's."""
    named_here = products(c.row.name) if c.row is not None else _line_products(c.text)
    own = [p for p in named_here if any(p.core & a.core for a in q.named)]
    if own:
        return own
    if named_here and c.text.startswith(named_here[0].text):
        return [named_here[0]]  # a row that starts with another model ("Nova 7 128GB：完好 900 元")
    for text in (c.section, c.chunk.title):
        named = list(products(text)) if text else []
        if named:
            # "Max 保修 2 年" on a page titled by the family: the family's Max.
            return with_variants(named, variant_marks(c.text)) if c.row is None else named
    return []


# A figure that goes on as a decimal or with a unit is a measurement, not a model number.
_UNIT_AFTER = re.compile(
    r"(?:\.\d|\s?(?:kg|g|cm|mm|m|km|l|ml|w|v|mah|wh|h|hours?|minutes?|days?|weeks?|months?|years?|yuan|rmb"
    r"|inch(?:es)?|元|块|%|°|℃|寸|岁|斤|公斤|克|升|小时|分钟|天|个月|年)(?![A-Za-z]))",
    re.I,
)
_LOWER_AND_FIGURE = re.compile(r"[a-z]+ \d+")


@lru_cache(maxsize=4096)
def _line_products(text: str) -> tuple[Product, ...]:
    """The products a quoted line names, less a lowercase word and a figure with a unit after it ("weighs 11" of
    "It weighs 11.9 kg"): a measurement in the page's prose. (`products` itself keeps them: customers type
    product lines lowercase, and the rewriter reads them so.)"""
    return tuple(
        p
        for p in products(text)
        if not (
            _LOWER_AND_FIGURE.fullmatch(p.text)
            and (at := text.find(p.text)) >= 0
            and _UNIT_AFTER.match(text, at + len(p.text))
        )
    )


def _on_asked_page(q: Question, c: Candidate) -> bool:
    """A sentence naming no model, in a chunk that names the asked model (or the picked variant): said of
    that model or of its whole family, not of another product."""
    if c.row is not None:
        return False
    if q.picked_variants:
        return q.picked_variants <= variant_marks(c.chunk.text)
    named = list(_line_products(c.chunk.text))
    return bool(named) and (product_fit(list(q.named), q.base_model, named) or 0.0) >= 0.8


def _family_wide(c: Candidate, q: Question) -> bool:
    """A sentence naming no model nor variant, on a page that names the asked variant by its variant
    word: it is said of the whole family (the page is no sibling's own page)."""
    if c.row is not None or _line_products(c.text) or variant_marks(c.text):
        return False
    if _heading_names_sibling(c, q) or _heading_names_base(c, q):
        return False  # "Price: ¥899" under its own model's heading is that model's, not the family's
    asked = {v for p in q.named for v in p.variants}
    return bool(asked) and asked <= variant_marks(c.chunk.text)


def _heading_names_sibling(c: Candidate, q: Question) -> bool:
    """The sentence's heading is another model's own (a product page with one section per model): a
    heading naming a product with a variant of its own, none of which is the asked one."""
    named = products(c.section) if c.section else ()
    return (
        bool(named)
        and product_fit(list(q.named), q.base_model, list(named)) == 0
        and any(n.variants or n.core != a.core for n in named for a in q.named)
    )


def _heading_names_base(c: Candidate, q: Question) -> bool:
    """The sentence's heading names the asked model's line without the variant asked ("Acme T5" for "Acme T5
    Plus"), in a page with a section of its own for the variant: the plain model's section, not the family's."""
    if not c.section or c.section == c.chunk.title or _FAMILY_AFTER.search(c.section):
        return False
    asked = [a for a in q.named if a.variants and not all(BASE_WORDS.fullmatch(v) for v in a.variants)]
    return any(n.core == a.core and not n.variants for n in products(c.section) for a in asked) and any(
        a.text.lower() in c.chunk.text.lower() for a in asked
    )


# A Chinese edition word names a sibling as surely as "Pro" does ("遥控版" vs "普通版", "青春版").
_EDITION = re.compile(f"({HAN_CLASS}{{2}})版")


@lru_cache(maxsize=4096)
def editions(text: str) -> frozenset[str]:
    return frozenset(m.group(1) for m in _EDITION.finditer(text)) if text else frozenset()


# The edition words of English questions over Chinese pages ("the flagship one" is the 旗舰版): what shops
# call their editions, not any one shop's.
_EN_EDITIONS = {
    "flagship": "旗舰", "standard": "标准", "family": "家庭", "basic": "基础", "classic": "经典", "youth": "青春",
    "kids": "儿童", "children's": "儿童", "deluxe": "豪华", "premium": "尊享", "enhanced": "增强",
    "high-altitude": "高原", "high altitude": "高原", "plateau": "高原", "portable": "便携", "travel": "旅行",
    "commercial": "商用", "limited": "限量", "collector's": "典藏",
    # "regular" names an edition only as one ("the regular one"), not in "regular price" or "regular use".
    "regular one": "标准", "regular version": "标准", "regular edition": "标准", "regular model": "标准",
}  # fmt: skip
_EN_EDITION = re.compile(r"\b(?:" + "|".join(re.escape(k) for k in _EN_EDITIONS) + r")(?![\w-])", re.I)


def asked_editions(text: str) -> frozenset[str]:
    """The editions a question names, in Chinese edition words: its own ("旗舰版") and English ones."""
    found = {_EN_EDITIONS[m.group().lower()] for m in _EN_EDITION.finditer(text)} if text.isascii() else set()
    return editions(text) | found


def _edition_fit(q: Question, c: Candidate) -> float:
    """Whether the sentence is about the edition asked for: its own edition words, else its heading's, else
    its page title's; 1 when the question names none or the sentence's context names none."""
    if not q.editions:
        return 1.0
    for text in (c.text, c.section, c.chunk.title):
        found = editions(text)
        if found:
            return 1.5 if found & q.editions else 0.3
        if text is c.text and _LATIN_EDITION.search(text):
            return 0.3  # "Pro 版 100ml 售价 129 元": an edition named in letters, not the one asked ("标准版")
    return 1.0


_LATIN_EDITION = re.compile(r"(?<![A-Za-z])[A-Za-z][A-Za-z0-9+]*\s?版")


_FAMILY_AFTER = re.compile(r"\s?(?:全?系列|全系|\s(?:series|range|line|family)\b)", re.I)
_FAMILY_BEFORE = re.compile(r"(?:\b(?:every|all|each|any)\s(?:of\s)?(?:the\s|our\s)?|全系|所有)$", re.I)


def _names_family(c: Candidate, q: Question) -> bool:
    """A sentence that names the asked model's family as such ("T5 系列整机保修 3 年", "every Brisa fan has
    ..."): it is said of every model of the family, the asked one included. A row is its name cell's ("松果 K2
    系列咖啡机" in a warranty table: the family's row)."""
    text = c.row.name if c.row is not None else c.text
    for n in products(text):
        if n.variants or not any(n.core <= a.core for a in q.named):
            continue
        at = text.find(n.text)
        if at < 0:
            continue
        if _FAMILY_AFTER.match(text, at + len(n.text)) or _FAMILY_BEFORE.search(text[max(0, at - 16) : at]):
            return True
    return False


# A model's name as a row's name cell or a section heading writes it ("远足 20L 城市包", "晨光 Mini", "冰川 0℃
# Nano"): its letters-and-digits runs and its Chinese runs.
_NAME_TOKEN = re.compile(rf"[a-z0-9]+(?:\.[0-9]+)?|{HAN_CLASS}+")
_EDITION_END = re.compile(r"[版款型]$")
_SIBLING_HIT, _SIBLING_MISS = 1.5, 0.35


@lru_cache(maxsize=4096)
def _name_tokens(name: str) -> frozenset[str]:
    return frozenset(_NAME_TOKEN.findall(name.lower()))


# "银卡会员", "Gold tier": one level of several; not "会员等级" nor "Membership level", which name the topic.
_TIER_HEADING = re.compile(
    r"^(?!会员|等级)\S{1,6}(?:会员|等级)$|^(?!member|membership\b)\w+ (?:tier|level|membership|member)$", re.I
)


@lru_cache(maxsize=4096)
def _model_heading(section: str) -> bool:
    if not section or len(section) > 40 or _QUESTION_LINE.search(section):
        return False
    if _TIER_HEADING.search(section):
        return True  # "银卡会员", "Gold tier": one of a page's levels, read as its siblings are
    # "晴川 Pro": a family word and a variant word name a model as surely as a model number does ("How to fold it"
    # uses the word as a verb: a name writes it capitalised).
    variant = any(w.lower() in VARIANT_WORDS and w[0].isupper() for w in _WORD.findall(section))
    return bool(re.search(r"\d", section) or _EDITION_END.search(section) or products(section) or variant)


def _sibling_name(c: Candidate) -> str:
    """The model a candidate is filed under, when its place says so: a row's name cell, a heading that reads
    like a model's name (a model number, a Latin name, an edition word; not a topic heading), or the name a
    list line opens with."""
    if c.row is not None:
        return c.row.name
    section = c.section.strip()
    if _model_heading(section) and section != c.chunk.title:
        return section
    # A list line that names its model before a colon ("Brook 3 canoe: 49 yuan per day").
    # Not a rule's label that states a value ("帐杆断裂另行保修 3 年：…", "满 99 元：…"): its figure is no model number.
    head = _SUBJECT_HEAD.match(c.text)
    if head is None or not re.search(r"\d", head.group(1)):
        return ""
    return "" if any(has_value(head.group(1), a) for a in _HEADING_VALUES) else head.group(1)


_CONTRACTION = re.compile(r"['’](?:m|s|d|re|ve|ll|t)\b")


def _quotes_sibling(subjects: tuple[str, ...], name: str) -> bool:
    """Is a quoted line about the sibling `name`: its subject is the sibling's heading, or a row's name cell
    after its header ("型号 晨星 16 寸")?"""
    lowered = name.strip().lower()
    return any(s == lowered or s.endswith(f" {lowered}") for s in subjects)


def _named_headings(candidates: Sequence[Candidate], filed: set[str]) -> set[tuple[str, str]]:
    """Headings that name a model only beside a sibling's: on a page with a section "Lumo Trail Max" (a model
    heading by its variant word), "Lumo Trail Dusk" and the bare "Lumo Trail" are models of the same family
    too, though neither a digit nor a variant word says so. A heading is one when it holds a filed model
    heading's family words and adds only capitalised Latin words (a name, not a topic such as "Lumo Trail 保养"
    or "Lumo Trail care")."""
    families: dict[str, list[frozenset[str]]] = {}
    for c in candidates:
        section = c.section.strip()
        if c.row is None and section in filed:
            family = _name_tokens(section) - VARIANT_WORDS
            if family:
                families.setdefault(c.chunk.doc_id, []).append(family)
    found: set[tuple[str, str]] = set()
    for c in candidates:
        section = c.section.strip()
        doc = c.chunk.doc_id
        if doc not in families or (doc, section) in found or section in filed or _sibling_name(c):
            continue
        if not section or section == c.chunk.title or len(section) > 40 or _QUESTION_LINE.search(section):
            continue
        tokens = _name_tokens(section)
        for family in families[doc]:
            rest = [w for w in _NAME_WORD.findall(section) if w.lower() not in family]
            if family <= tokens and all(w.isascii() and w[0].isupper() and w.isalpha() for w in rest):
                found.add((doc, section))
                break
    return found


_NAME_WORD = re.compile(rf"[A-Za-z0-9]+(?:\.[0-9]+)?|{HAN_CLASS}+")


def _shared_run(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@lru_cache(maxsize=1024)
def _distinct_parts(tokens: frozenset[str]) -> dict[str, str]:
    """Each Chinese name word without the longest head and tail it shares with another sibling's word: "银" of
    "银卡会员" beside "金卡会员", "室内" of "室内成猫粮" beside "成猫粮" (only words that share some)."""
    words = sorted(tokens)
    out: dict[str, str] = {}
    for w in words:
        head = tail = 0
        for o in words:
            if o == w:
                continue
            n = _shared_run(w, o)
            m = _shared_run(w[::-1], o[::-1])
            if n + m >= len(w):
                continue  # one is the other with more ("成猫粮" in "室内成猫粮"): the shorter tells nothing apart
            head, tail = max(head, n), max(tail, m)
        if head or tail:
            part = w[head : len(w) - tail]
            if part:
                out[w] = part
    return out


_SPACED_UNIT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s+(kg|g|ml|l|cm|mm|gb|tb|mah)\b")


class _Siblings:
    """Which of a page's sibling models (rows of one table, sections of one page) the question names, read
    by the words that tell them apart rather than by parsing a product name: "20L" picks "远足 20L 城市包"
    over "远足 35L 登山包", "标准款" the row "晨光 标准款" over "晨光 Mini", "0" of "Bingchuan 0" the row "冰川 0℃ Nano".
    The customer's own words count fully, the rewriter's additions less (it may carry an earlier model)."""

    def __init__(self, q: Question, candidates: Sequence[Candidate]) -> None:
        # The question's own words and the editions it names ("the flagship one": 旗舰); the products named
        # (perhaps carried over by the rewriter or read from the previous answer) and the query's other words
        # count less.
        # Without the tails of contractions: the "m" of "I'm" is no size M nor model M.
        own_text = _CONTRACTION.sub(" ", " ".join([q.text, *q.editions]).lower())
        # "the 10 kg bag" names the row "… 10kg" as a whole word, not by a "kg" every row's name has.
        own_text = _SPACED_UNIT.sub(r"\1\2", own_text)
        self.terms = q.variant_terms
        self.own = _name_tokens(own_text)
        self.own_text = own_text
        self.added = (q.words | {t for p in q.named for t in _name_tokens(p.text)}) - self.own
        by_doc: dict[str, set[str]] = {}
        # Siblings named by a row's name cell or a heading, not by the words a list line opens with (which may
        # be a sentence about the family: "Libra 系列共两款：…").
        filed: set[str] = set()
        for c in candidates:
            name = _sibling_name(c)
            if name:
                by_doc.setdefault(c.chunk.doc_id, set()).add(name)
                if c.row is not None or name == c.section.strip():
                    filed.add(name)
        self.named_headings = _named_headings(candidates, filed)
        for doc, heading in self.named_headings:
            by_doc.setdefault(doc, set()).add(heading)
            filed.add(heading)
        self.hits: dict[tuple[str, str], float] = {}
        self.best: dict[str, float] = {}
        # The words the page's sibling models are named by ("护童", "pro" of "护童 Pro"): they say which model,
        # which `fit` weighs, not what about it is asked.
        self.name_words: set[str] = set()
        # The words of the asked products' line ("Breeze Shell" of "Breeze Shell Lite"): on a page of another
        # line a shared variant word ("晨光 Lite") tells nothing.
        lines = [_name_tokens(p.text) - VARIANT_WORDS for p in q.named]
        if _PICKS_SIBLING.search(q.text) and any(
            (_name_tokens(n) - frozenset.intersection(*(_name_tokens(m) for m in names))) & self.own
            for names in by_doc.values()
            if len(names) > 1
            for n in names
        ):
            # "能坐 3 人的那款" where one sibling is named by "3": the customer picks it by what it is or has, and the
            # model the rewriter carried is the one they move away from (its words name no sibling then).
            self.added = frozenset()
        self.distinct: dict[str, str] = {}
        # The siblings whose lines the previous answer quoted.
        answered = (
            {(c.chunk.doc_id, n) for c in candidates if _was_quoted(c, q.answered_lines) and (n := self.name(c))}
            if q.answered_lines
            else set()
        )
        for doc, names in by_doc.items():
            if len(names) < 2:
                continue
            tokens = frozenset().union(*(_name_tokens(n) for n in names))
            self.distinct.update(_distinct_parts(frozenset(t for t in tokens if not t.isascii())))
            self.name_words |= tokens
            foreign = bool(lines) and not any(line & tokens for line in lines)
            common = frozenset.intersection(*(_name_tokens(n) for n in names))
            own = {
                name: sum(self._hit(t) for t in _name_tokens(name) - common if not (foreign and t in VARIANT_WORDS))
                for name in names
            }
            settled = not q.moved_on or not any(own.values())
            for name in names:
                hit = own[name]
                if settled and (
                    (name in filed and _quotes_sibling(q.answered_subjects, name)) or (doc, name) in answered
                ):
                    # The sibling the previous answer quoted, for a follow-up that names none ("那这款怎么卖"): the
                    # one the conversation settled on, weighed as the rewriter's additions are.
                    hit += _ADDED
                self.hits[(doc, name)] = hit
                self.best[doc] = max(self.best.get(doc, 0.0), hit)

    def _hit(self, token: str) -> float:
        if not token.isascii():
            # What tells the sibling apart ("银" of "银卡会员" beside "金卡会员", "室内" of "室内成猫粮" beside "成猫粮").
            part = self.distinct.get(token, "")
            ideas = concepts(token)
            if ideas & _TIERS or (ideas and (not part or concepts(part))):
                return 0.0  # a membership level or a category the glossary knows: its concepts weigh those
            stem = _EDITION_END.sub("", token) if len(token) > 2 else token
            if stem in self.own_text:
                return 1.0
            if not part:
                return 0.0
            # The part with the character after it ("金卡" of "金卡会员"), or itself when two characters long ("室内").
            at = token.find(part)
            said = token[at : at + len(part) + 1] if at + len(part) < len(token) else token[max(0, at - 1) :]
            if (len(part) > 1 and part in self.own_text) or (len(said) > 1 and said in self.own_text):
                return 1.0
            # An English question's variant word for that part ("the indoor one" for "室内…").
            return 1.0 if any(v in part for v in self.terms) else 0.0
        if token in self.own:
            return 1.0
        return _ADDED if token in self.added else 0.0

    def name(self, c: Candidate) -> str:
        heading = c.section.strip()
        return _sibling_name(c) or (heading if (c.chunk.doc_id, heading) in self.named_headings else "")

    def named_by_customer(self, c: Candidate) -> bool:
        """Do the customer's own words name the sibling the candidate is filed under (a whole word of its name,
        not the rewriter's additions nor the sibling the last answer settled on)?"""
        return self.hits.get((c.chunk.doc_id, self.name(c)), 0.0) >= 1

    def fit(self, c: Candidate) -> float:
        """> 1 for a sentence under the sibling the question names best, < 1 under one it does not name while
        it names another; 1 when the question tells none of the page's siblings apart."""
        best = self.best.get(c.chunk.doc_id, 0.0)
        hit = self.hits.get((c.chunk.doc_id, self.name(c)))
        if not best or hit is None:
            return 1.0
        # A sibling that shares only the family's word with the question ("Clara" of "Clara 1.74" for "Clara 1.56") is
        # not named while another is named by a whole word more.
        return _SIBLING_HIT if hit >= best else _SIBLING_MISS if hit == 0 or hit <= best - 1 else 1.0


def _keep_tightest(
    q: Question,
    span_fits: dict[int, float],
    figures: frozenset[str],
    asked: frozenset[str] | set[str],
    candidates: list[Candidate],
) -> None:
    """A size chosen by a figure ("a 7 kg cat", "chest 50 cm") is the one whose span holds it most tightly: of a
    page's sentences whose spans hold it as well as the best do, "up to 9 kg" beats "up to 16 kg" (and "from
    25" beats "from 10"); the looser ones are lifted no more than a span that misses."""
    # Among the lines of the product asked about ("Air Box" sizes, not a backpack's on the same page).
    scope = [c for c in candidates if not q.named or any(p.tokens <= _name_tokens(_filed_text(c)) for p in q.named)]
    held = frozenset(asked)
    bounds = {
        id(c): b
        for c in scope
        if span_fits.get(id(c), 1.0) > 1 and (b := holding_bound(figures, c.text, held)) is not None
    }
    best: dict[str, tuple[float, float, float]] = {}
    for c in scope:
        b = bounds.get(id(c))
        if b is not None:
            top = best.get(c.chunk.doc_id)
            if top is None or (b[0], -b[1], b[2]) > (top[0], -top[1], top[2]):
                best[c.chunk.doc_id] = b
    for c in scope:
        b, top = bounds.get(id(c)), best.get(c.chunk.doc_id)
        if b is not None and top is not None and b[0] == top[0] and (b[1] > top[1] or b[2] < top[2]):
            span_fits[id(c)] = 0.5
        elif b is None and top is not None and top[0] > 1.5 and span_fits.get(id(c), 1.0) == 1.0:
            # A line of the same product that states no span ("outside size 60 x 40 cm") does not choose the size.
            span_fits[id(c)] = _NO_SPAN


_NO_SPAN = 0.6


def _filed_text(c: Candidate) -> str:
    return f"{c.section} {c.row.name if c.row is not None else ''} {c.text}"


def _bridged(q: Question, candidates: list[Candidate]) -> dict[int, float]:
    """Per sentence in the collection's other language: the question's translated words it says
    (`Question.translated`), each weighing as a word does by how few sentences say it. Only words that no
    sentence in the question's own language says: where those say it, they are the evidence."""
    own = [c.text.lower() for c in candidates if c.chunk.lang == q.lang]
    groups = [g for w, g in q.translated if not any(part in t for t in own for part in w.split())]
    others = [c for c in candidates if c.chunk.lang != q.lang]
    if not groups or not others:
        return {}
    said = {id(c): says(groups, c.text) for c in others}
    n = len(candidates)
    weights = [math.log(1 + n / (sum(s[i] for s in said.values()) or 1)) for i in range(len(groups))]
    return {k: sum(w for w, hit in zip(weights, s, strict=True) if hit) for k, s in said.items()}


def score_candidates(q: Question, candidates: list[Candidate]) -> None:
    # Words of the page title and of the product asked about say which page a sentence is on; whether it
    # is the right page is `product_fit`'s and retrieval's call, so they do not count as shared words.
    named_words = {t for p in q.named for t in terms(p.text)}
    numbers = asked_numbers(q.text, [p.text for p in q.named])
    # A figure written with its unit as one word ("500ml", "5l"): a size that can name a row.
    sized = {t for t in terms(q.text) if _SIZED.fullmatch(t)}
    siblings = _Siblings(q, candidates)
    asked_words = q.words - named_words - siblings.name_words
    # Numbers the customer (or the rewriter) used for a model the name parser does not see as one.
    model_numbers = {w for w in q.words if w.isdigit() and len(w) >= 2} if not q.named else set()
    if _names_own_subject(q.text):
        model_numbers -= q.added_words  # "嵌入式那款" picks a sibling of the model the rewriter carried
    if model_numbers:
        model_numbers &= {t for c in candidates for p in _context_products(c, q) for t in p.tokens}
    # The question's own names of things the glossary has no concept for (a part: "集尘袋", "mop pad"), not
    # the rewriter's nor the product's words: a sentence that is about that thing names it first.
    own_words = {
        w
        for w in asked_words - q.added_words
        if len(w) > (3 if w.isascii() else 1) and not w.isdigit() and w not in EN_GENERIC_WORDS and not concepts(w)
    } - _GENERIC_ZH
    subject_found = bool(own_words) and any(_subject_words(c)[0] & own_words for c in candidates)
    primary = q.asks[0] if q.asks else Ask.GENERAL
    store = _store_in_focus(q, candidates)
    # The one pack size a price question states with its unit ("the 150ml tube", "2kg 的多少钱"), not a weight
    # of the customer's pet or of themself ("she weighs 5kg").
    asked_pack = _pack_size(q.text) if sized and primary is Ask.PRICE and not _OWN_WEIGHT.search(q.text) else None
    window = primary is Ask.DURATION and _WINDOW_ASKED.search(q.text) is not None
    often = primary is Ask.COUNT and _HOW_OFTEN.search(q.text) is not None
    # A length asked for ("how long should it last?"): a line's length in hours is what it states, not a sub-topic.
    lasting = primary is Ask.DURATION
    asked_states = _states(q.text)
    # "what if the basket is under that?": an amount on the other side of a threshold said before.
    short_of = _SHORT_OF.search(q.text) is not None
    # "that" is the threshold the previous answer quoted, when it quoted one: not another region's.
    said_threshold = short_of and any(states_threshold(c.text) and _was_quoted(c, q.answered_lines) for c in candidates)
    # "What are your opening hours?" asks the regular hours, not a holiday's.
    hours_asked = "opening_hours" in q.ideas
    special_day = hours_asked and _SPECIAL_DAY.search(q.text) is not None
    for c in candidates:
        # A FAQ's question heading frames its answer but is worded like the customer's question: its words
        # would make every answer under it look like the answer.
        heading = "" if _QUESTION_LINE.search(c.section) else c.section
        # A row whose cell says it has none of a column ("烘干容量 无烘干") does not say what the column names,
        # unless whether it has it is what is asked.
        stated = c.row.stated() if c.row is not None and primary is not Ask.YESNO else c.text
        c.words = _stems(set(terms(stated)) | set(terms(heading))) - _stems(terms(c.chunk.title)) - named_words
        c.ideas = concepts(f"{heading} {stated}") | (concepts(c.chunk.title) & CATEGORIES)
    n = len(candidates)
    df: Counter[str] = Counter(t for c in candidates for t in c.words)
    asked_aspects = q.ideas & ASPECTS
    # An amount asked relative to a price (how much cheaper, the fee on an order, a surcharge) is stated as a
    # share of it as often as in money.
    relative = primary is Ask.PRICE and _RELATIVE_PRICE.search(q.text) is not None
    if primary in _ASK_IDEA:
        # An amount is a price however it is written ("starts at ¥11999"), a duration a time limit.
        for c in candidates:
            if shows(c.text, primary) or (relative and shows(c.text, Ask.PERCENT)):
                c.ideas |= {_ASK_IDEA[primary]}
    priced = any(float(n) >= 50 for n in numbers)
    rows = (c.row for c in candidates if c.row is not None)
    tier = reached_tier(rows, q.spend) if q.spend is not None else None
    doc_places: dict[str, set[str]] = {}
    if "place" in q.attrs:
        for c in candidates:
            doc_places.setdefault(c.chunk.doc_id, set()).update(places(f"{c.section} {c.text}"))
    idf = {t: math.log(1 + n / (df[t] or 1)) * (_ADDED if t in q.added_words else 1.0) for t in asked_words}
    # A question with no topic of its own ("and what does that option cost?") takes the previous one's.
    context_weight = 0.8 if q.ideas - GENERIC else 1.5
    words_total = sum(idf.values())
    bridged = _bridged(q, candidates) if q.translated else {}
    topic_ideas = bool(q.ideas - GENERIC)
    own_tiers = (q.ideas - q.added_ideas) & _TIERS
    # "洗碗机搬上楼收费吗": the category says which product, the words say what about it.
    category_only = 0.3 if q.ideas and q.ideas <= CATEGORIES else 1.0
    # "身高 132 买几寸的", "I'm 176 cm, which size": the row or line whose span holds the figure, on a page
    # where one does (elsewhere a figure in a span is a coincidence).
    # Not for "700 度能配吗": a span that does not hold the figure answers a yes-or-no question too ("0–600 度").
    # A name of one letter and a figure ("m 186" of "I'm 186 cm") is no model's name.
    names = [p.text for p in q.named if any(len(t) > 1 and not t.isdigit() for t in p.tokens)]
    figures = stated_figures(q.text, asked_numbers(q.text, names))
    if not figures and _FOLLOW_UP.search(q.text) and len(q.recent) > 1:
        # "保一年呢" after "台灯八百多买的，保两年几块": the figure the rewriter carried still picks the band.
        figures = stated_figures(q.recent[1], asked_numbers(q.recent[1], names))
    span_fits = {id(c): span_fit(figures, c.text, asked_words) for c in candidates} if figures else {}
    if figures and primary is not Ask.YESNO:
        _keep_tightest(q, span_fits, figures, asked_words, candidates)
    # "安装要收钱吗", "do I pay the postage?": a sentence saying it is free, or who pays, answers it as an amount does.
    cost_yesno = Ask.YESNO in q.asks and _COST_ASKED.search(q.text) is not None
    spanned = {c.chunk.doc_id for c in candidates if span_fits.get(id(c), 1.0) > 1}
    asks_rate = _PER_PERIOD_ASKED.search(q.text) is not None
    asks_product = primary in (Ask.PRICE, Ask.SPEC) and bool(q.named or q.picked_variants) and not _PART.search(q.text)
    asks_part = primary in (Ask.PRICE, Ask.SPEC) and _PART.search(q.text) is not None
    asks_service = primary is Ask.PRICE and _SERVICE.search(q.text) is not None and not asks_part
    # "滤芯多久换一次": when the question's only concept is its type (a duration, a price), every sentence
    # of that type covers it; the type is weighed by `shows` below, and what the question says it is about
    # (its words) tells those sentences apart.
    type_idea = _ASK_IDEA.get(primary)
    type_only = 0.5 if type_idea is not None and q.ideas == {type_idea} else 1.0
    said = _said_of(q, asked_words, idf, primary, candidates)
    # "does your helpline have Japanese-speaking staff?": whether a channel has something (a language, a time) is
    # answered by the line that says so, number or not; a number that says nothing of it does not answer.
    contact_topic = (
        (q.ideas - q.added_ideas) - _CONTACT_LABEL_IDEAS - GENERIC - {"contact"}
        if primary is Ask.CONTACT and Ask.YESNO in q.asks
        else frozenset()
    )
    # "the Japanese-language helpline's number": a number asked for a purpose (a language, a service) that one of the
    # numbers is labelled with.
    purpose = (
        (q.ideas - q.added_ideas) - _CONTACT_LABEL_IDEAS - GENERIC - {"contact"}
        if primary is Ask.CONTACT and not contact_topic
        else frozenset()
    )
    if purpose and not any(purpose & c.ideas and shows(c.text, Ask.CONTACT) for c in candidates):
        purpose = frozenset()
    takes = primary is Ask.DURATION and _TAKES.search(q.text) is not None
    # An amount the customer states in a price question is theirs (what they spend), not the price asked for.
    echoed = primary is Ask.PRICE and Ask.YESNO not in q.asks and bool(numbers)
    own_statement = False
    placed: set[str] = set()  # the pages with a line naming the asked place
    for c in candidates:
        # How much of what the question says the sentence covers: its words (rarer ones weigh more) and
        # its concepts. In the question's language they are mostly the same evidence ("warranty" is both),
        # across languages only concepts match: the larger coverage counts, the other a little.
        shared = asked_words & c.words
        by_words = sum(idf[t] for t in shared)
        # A Chinese word written another way ("专票" ~ "专用发票", "碎了" ~ "碎裂") shares its characters.
        by_words += 0.5 * sum(idf[t] for t in asked_words - shared if _HAN_WORD.fullmatch(t) and _chars_in(t, c))
        # A one-character verb or noun of the question inside a word of the sentence ("戴" of "佩戴", "拆" of
        # "拆卸"): what is done, which tells sentences of the same type apart.
        by_words += 0.5 * sum(idf[t] for t in asked_words - shared if _HAN_CONTENT_CHAR.fullmatch(t) and t in c.text)
        by_words = by_words / words_total if words_total else 0.0
        if id(c) in bridged and words_total:
            # Across languages no word is shared: the question's words the dictionary bridge translated are.
            by_words = max(by_words, bridged[id(c)] / words_total)
        by_ideas = _coverage(q, c.ideas) * category_only * type_only
        score = 0.1 + max(by_words, by_ideas) + 0.25 * min(by_words, by_ideas)
        if q.context:
            # What the previous question was about still counts a little ("that service" = its topic).
            score *= 1 + context_weight * coverage(q.context, c.ideas)
        page_ideas = concepts(c.chunk.title) | c.ideas
        # A sentence about a sub-topic the question never raises (a repair price for "how much is it")
        # answers another question; one on a page that lacks the sub-topic asked ("国际运费" on the domestic
        # shipping page) too.
        unasked = (c.ideas & ASPECTS) - q.ideas
        if lasting and "opening_hours" in unasked and _HOURS_LONG.search(c.text) and not _OPENING.search(c.text):
            unasked -= {"opening_hours"}  # "leave it on for 48 hours" for "how long": a length, not the shop's hours
        score *= 0.7 ** min(2, len(unasked))
        score *= 0.5 ** min(2, len(asked_aspects - page_ideas))
        if topic_ideas:
            # The page whose title is the question's topic ("return policy" ~ "退换货政策") answers it; a title
            # that only shares a concept every page has ("价格表" for "多少钱") says nothing of the topic.
            score *= 1 + 1.2 * coverage(q.ideas, concepts(c.chunk.title))
        if primary is not Ask.GENERAL:
            fits = shows(c.text, primary) or bool(contact_topic and contact_topic & c.ideas)
            if often and not fits:
                fits = _EVERY.search(c.text) is not None  # "a delivery every 30, 60 or 90 days" says how often
            if relative and not fits:
                fits = shows(c.text, Ask.PERCENT)  # "members save 15%" states what a discount takes off
            if fits and primary is Ask.LOCATION:
                # "北京的检测站在哪儿": a sentence that names the asked place ("店内设有检测站") says it exists, not where.
                fits = any(not _names_asked_place(v, q.text) for v in values(c.text, Ask.LOCATION))
            # "49 yuan per day" is a rental or service rate, not what the thing costs: it carries no price
            # unless the question asks for a rate, nor does a heading over such rates ask for one.
            rate = (
                primary is Ask.PRICE and not asks_rate and (_PER_PERIOD.search(c.section) is not None or _rate(c.text))
            )
            fits = fits and not rate
            if fits and echoed and _echoes(c.text, numbers):
                fits = False  # "my basket is 900 yuan, what's the surcharge?": "满 900 元可分期" repeats the 900
            costed = cost_yesno and (
                shows(c.text, Ask.PRICE)
                or _FREE.search(c.text) is not None
                or (shows(c.text, Ask.PERCENT) and _SURCHARGE.search(c.text) is not None)
            )
            if primary is Ask.HOWTO:
                score *= 1.4 if fits else 0.9
                if _HOWTO_HEADING.search(c.section):
                    score *= 2.2  # under "如何申请" / "How to order": the steps themselves
            elif primary is Ask.YESNO:
                score *= 1.8 if costed else 1.3 if fits else 1.0
            elif primary is Ask.PRICE and costed:
                score *= 2.2
            else:
                score *= 2.2 if fits else 0.3
            # A FAQ's question heading ("what does the standard cover include?") may ask for another thing than
            # the customer does (the warranty of the model they asked about): only a topic heading counts.
            if primary in section_asks(c.section) and not _QUESTION_LINE.search(c.section) and not rate:
                score *= 1.5  # under "退款多久到账" / "Delivery times": the heading asks this question
            if primary is Ask.SPEC:
                # "内存多大" wants gigabytes, "多重" a weight: the unit of the concept asked about.
                units = [_SPEC_UNITS[i] for i in q.ideas if i in _SPEC_UNITS]
                if units:
                    score *= 2.0 if any(u.search(c.text) for u in units) else 0.5
        # Under a how-to heading ("怎么申请保修") a step's time is how long the procedure takes.
        if takes and (held := (c.ideas if not _HOWTO_HEADING.search(c.section) else concepts(c.text)) & _VALIDITY):
            # A time to do something, not how long a right holds.
            score *= 1.0 if held & q.ideas else _VALIDITY_MISS
        elif takes and _RIGHT_WITHIN.search(c.text):
            # "购买后 3 个月内…可免费换新": a time within which the customer may do something, not how long it takes.
            score *= _VALIDITY_MISS
        if (
            (priced or (short_of and (not said_threshold or _was_quoted(c, q.answered_lines))))
            and primary in (Ask.YESNO, Ask.GENERAL)
            and states_threshold(c.text)
        ):
            score *= 2.0  # "a 900 yuan basket, may I split it?": the amount from which one can
        context = _context_products(c, q)
        if model_numbers and context:
            # "霜川 502 尺寸多大": the section of the model whose number was said, not its sibling's.
            score *= 1.5 if any(model_numbers & p.tokens for p in context) else 0.6
        fit = product_fit(list(q.named), q.base_model, context)
        if fit == 0 and (_family_wide(c, q) or _names_family(c, q)):
            fit = 0.8  # "发热管均保修 3 年" on a page that covers the asked variant among others
        if q.picked_variants:
            fit = _variant_fit(q, c)
            if q.answered_pages and _page_title(c) not in q.answered_pages:
                score *= 0.4  # "and the Max?": the Max of the page we were on, not another line's Max
        # A heading the product reader finds only a looser naming of the asked model ("Acme T5" for "T5 Plus") is a
        # sibling's own when the page names the asked one too: the sibling names decide.
        sibling = siblings.fit(c) if (fit is None or 0 < fit < 1) and not q.picked_variants else 1.0
        if fit is None and sibling > 1:
            fit = 1.0  # under a heading or in a row naming the asked model in a way no product name reads
        elif fit is None and sibling == 1 and _on_asked_page(q, c):
            fit = 0.8  # "每天佩戴不少于 8 小时" on the asked model's page, under no other model's heading
        if q.named or q.picked_variants:
            score *= 0.5 if fit is None else 0.03 if fit == 0 else 2.0 * fit
        elif sibling > 1 and siblings.named_by_customer(c):
            # "远行 30L 卖几块": a model the product reader does not read, named by the customer's own words as one
            # of a page's siblings is: that model's lines, as for a model it reads.
            score *= 2.0
        score *= sibling
        score *= _edition_fit(q, c)
        if own_tiers:
            # "我是钻石会员，邮费如何收": the platinum level's row, not the rule for every level or the gold one's.
            tiers = c.ideas & _TIERS
            score *= 1.5 if tiers & own_tiers else 0.5 if tiers else 1.0
        sentence_attrs = attributes(c.text)
        for kind, found in attributes(c.section).items():
            sentence_attrs.setdefault(kind, found)  # "成都店" heading over "门店电话为 …"
        score *= attribute_fit(q.attrs, sentence_attrs)
        if store and (own_store := store_name(c.section)):
            # "周末开门吗" after "西溪店怎么走": that store's lines, not the same line of the shop's other stores.
            score *= _STORE_FIT if own_store == store else _STORE_MISS
        if c.chunk.doc_id in spanned:
            # A yes-or-no question is answered by a span that does not hold the figure too ("0–500 度" for "650
            # 度能配吗"): only the one holding it is lifted ("我 191，有我能穿的码吗": the 188–195 row).
            score *= max(1.0, span_fits[id(c)]) if primary is Ask.YESNO else span_fits[id(c)]
        if c.row is not None:
            row_fit = c.row.number_fit(numbers)  # "the 5-litre one": the row holding the figure
            if sized and row_fit < 1 and sized & set(terms(c.row.name)):
                row_fit = 1.5  # "a 500ml flask": the row named by the figure with its unit ("保温杯 500ml")
            score *= row_fit
            if tier is not None and (own := c.row.threshold()) is not None:
                # "I spent 4200 this year, which level am I?": the row of the highest threshold reached.
                # A spend said turns ago only rules the other tiers out: the question may be on another topic.
                score *= (1.0 if q.spend_carried else 3.0) if own == tier else 0.4
        elif (
            asked_pack is not None
            and (own_pack := _pack_size(c.text)) is not None
            and _other_pack(own_pack, asked_pack)
        ):
            # "and the 100ml one?": a line stating another pack size of the measure asked ("标准版 150ml 售价 119 元")
            # is a sibling's, whatever size the rewriter carried. The asked size is not lifted: another product's
            # pack of that size ("5kg 装" of the dog food for the cat food's 5kg) is no better for it.
            score *= _SIZE_MISS
        page_places = doc_places.get(c.chunk.doc_id)
        if page_places and "place" not in sentence_attrs and attribute_fit(q.attrs, {"place": page_places}) < 1:
            # A sentence that names no place, on a page that names others but not the one asked ("满 99 元包邮"
            # on the domestic page for a US question), is about somewhere else.
            score *= 0.4
        if (
            "place" in sentence_attrs
            and "place" in q.attrs
            and attribute_fit(q.attrs, {"place": sentence_attrs["place"]}) > 1
            and not _OTHERS.match(c.text)
        ):
            placed.add(c.chunk.doc_id)
        if any(
            kind not in sentence_attrs and not ((every := _EVERY_TIER.get(kind)) and every.search(c.text))
            for kind in q.attrs
            if kind in TIER_KINDS
        ):
            # Says nothing of the tier or size asked about. A line on the tiers as such ("存储容量每高一档，回收价加 300
            # 元") is about the asked one too.
            score *= 0.5
        score *= _label_fit(q, c, asked_words)
        if (
            primary is Ask.CONTACT
            and (channel := _CHANNEL_ASKED.get(_asked_channel(q.text)))
            and not contact_topic & c.ideas
        ):
            # "your service number" wants the line with a phone number, not the e-mail line beside it.
            score *= 1.5 if channel.search(c.text) else 0.2
        if primary is Ask.CONTACT:
            score *= _line_purpose_fit(q, c)
            if contact_topic and not contact_topic & c.ideas:
                score *= _OTHER_PURPOSE
            elif purpose and not purpose & c.ideas and shows(c.text, Ask.CONTACT):
                score *= _OTHER_PURPOSE  # a store's number for "the English-language line"
        head, under = _subject_words(c) if own_words else (set(), set())
        if head & own_words:
            score *= _SUBJECT_BONUS  # "滤网（2 片装）：49 元" for "滤网什么价", not a spec line naming it in passing
        elif subject_found and (head or under) and not under & own_words:
            score /= _SUBJECT_BONUS  # "S8 Pro：…，自动集尘基站，…" is about the machine, not the bag
        if asks_product and (_PART.search(c.text) or (c.section != c.chunk.title and _PART.search(c.section))):
            # "X 备用电池 … 1990 元", or any line under an "Accessories" heading, is a part for the model asked
            # about, not the model.
            score *= _PART_MISS
        elif asks_service and not _SERVICE.search(f"{c.section} {c.text}"):
            # "把手断了换新的收多少", "how much to have the lid fixed?": the price of doing it, not of the product.
            score *= _PART_MISS
        elif asks_part and not _PART.search(c.text):
            # "what would a replacement blade set me back?": the part's line, not the model's own price or specs.
            score *= _PART_MISS
        if asked_states and (written_for := _states(f"{c.section} {c.text}")):
            # "I broke the seal on the tin, may I send it back?": the rule for opened goods, not for unopened ones.
            for i, so in asked_states.items():
                if i in written_for:
                    score *= _STATE_HIT if written_for[i] == so else _STATE_MISS
        if window and shows(c.text, Ask.DURATION):
            # "几天以内得办好": the time within which it must be done ("签收后 30 天内购买"), not a length ("延保 1 年").
            score *= _WINDOW_HIT if _WINDOW_STATED.search(c.text) else _WINDOW_MISS
        if (
            hours_asked
            and "opening_hours" in c.ideas
            and _SPECIAL_DAY.search(f"{c.section} {c.text}")
            and not _REGULAR_DAYS.search(c.text)
        ):
            # "除夕当天所有门店提前到 18:00 关门" names the stores and the hours, but of days that are not regular ones.
            score *= _SPECIAL_HIT if special_day else _SPECIAL_MISS
        if _BOILERPLATE.search(c.text):
            score *= 0.05
        elif c.row is None and c.text.endswith(_INTRO_ENDS):
            score *= _BARE_INTRO  # "按身高选尺码：" without the items it introduces states nothing
        elif _POINTER.search(c.text):
            score *= 0.3  # "详见《售后服务说明》": the answer is on the page it points to
        if _EXCEPTION_MARK.search(c.text) and not _raises_exception(q, c.text):
            # "唯一的例外是过敏：…可以退货" beside "已开封的商品不退不换": an exception answers only a question on its case;
            # for one that does not raise it the rule is the answer, however many words the exception shares.
            score *= _EXCEPTION_MISS
        if primary is Ask.GENERAL:
            # "What is your return policy?": a page states its main rule first.
            score *= 1 + 0.5 / (1 + c.chunk.index)
        c.said = said.get(id(c), 1.0)
        score *= c.said
        c.score = score / _rank_discount(c)
        if fit is not None and fit >= 0.8 and (primary is Ask.GENERAL or shows(c.text, primary)):
            own_statement = True
    if own_statement or placed:
        # "其他品牌镜架：1 年", "Other models: 1 year": the default for what has no line of its own, and the asked
        # product has one among the sentences. "其余地区：每单 15 元" is the default for the places its page does
        # not list, and the asked place has a line of its own there ("青海、西藏：不包邮").
        for c in candidates:
            if _OTHERS.match(c.text) and not products(c.text) and (own_statement or c.chunk.doc_id in placed):
                c.score *= _OTHERS_MISS
    if q.settled_lines:
        _settled_section(q, candidates)
    _by_size(q, candidates)


# A line that is the exception to a rule beside it ("唯一的例外是过敏：…", "The one exception is a faulty item: …"),
# and the case it names after the mark. Not a rule with a carve-out ("偏远地区除外", "except sale items",
# "unless it is faulty"): that line is still the rule.
_EXCEPTION_MARK = re.compile(r"例外|\bexceptions?\b", re.I)
_EXCEPTION_CASE = re.compile(
    r"(?:例外(?:情况)?(?:是|为)?|\bexceptions?\b(?:\s+(?:is|are)\b)?)\s*([^:：,，.。;；!！?？]+)",
    re.I,
)
_EXCEPTION_MISS = 0.4


def _raises_exception(q: Question, text: str) -> bool:
    """Does the question name the case an exception line is about (its words, its concepts, or their translation)?
    A line whose case cannot be read counts as raised: no evidence against it."""
    cases = [case for m in _EXCEPTION_CASE.finditer(text) if (case := m.group(1).strip())]
    if not cases:
        return True
    for case in cases:
        if _stems(terms(case)) & q.words or concepts(case) & (q.ideas - GENERIC):
            return True
        if q.translated and any(says([g for _, g in q.translated], case)):
            return True
        # A Chinese word of the question inside the case ("过敏" of "过敏反应"), however the segmenter cut it.
        if any(len(w) > 1 and not w.isascii() and w in case for w in q.words):
            return True
    return False


# A line naming a kind of tier as such, not one value of it: a rule for every storage size or screen size.
_EVERY_TIER = {
    "storage": re.compile(r"存储容量|存储空间|内存容量|\bstorage (?:size|capacity|tier)s?\b", re.I),
    "screen": re.compile(r"屏幕尺寸|\bscreen sizes?\b", re.I),
}
_SETTLED_MISS = 0.5
# A line's label, a decimal figure in it too ("2.5kg 装：…").
_LINE_LABEL = re.compile(r"^((?:[^:：，,。.!?！？]|(?<=\d)\.(?=\d)){1,24})[:：]\s*\S")


def _settled_section(q: Question, candidates: list[Candidate]) -> None:
    """Sections of a page that repeat the same labelled lines ("1kg 装：…", "3kg 装：…" under each formula) are
    siblings, and the one the previous answer quoted from is the one a follow-up points back at ("那它 3 kg 装的呢"
    after "1kg 装：35 元" was quoted from the adult formula's section): the same label under another is a sibling's."""
    settled = {(c.chunk.doc_id, c.section) for c in candidates if c.row is None and _was_quoted(c, q.settled_lines)}
    if not settled:
        return
    labelled: dict[tuple[str, str], set[str]] = {}
    for c in candidates:
        if c.row is None and (m := _LINE_LABEL.match(c.text)):
            labelled.setdefault((c.chunk.doc_id, m.group(1).strip()), set()).add(c.section)
    for c in candidates:
        if c.row is None and (m := _LINE_LABEL.match(c.text)) and (c.chunk.doc_id, c.section) not in settled:
            sections = labelled[(c.chunk.doc_id, m.group(1).strip())]
            if any((c.chunk.doc_id, s) in settled for s in sections):
                c.score *= _SETTLED_MISS


# "大包的呢", "the big bottle", "小袋": the largest (or smallest) pack among the lines that answer, by its size.
_BIG = re.compile(
    r"大(?:包|袋|瓶|盒|桶|罐|箱|份|装)|\b(?:big|bigger|biggest|large|larger|largest)\s(?:bag|bottle|box|pack|tin|can|tub)s?\b",
    re.I,
)
_SMALL = re.compile(
    r"小(?:包|袋|瓶|盒|桶|罐|箱|份|装)|\b(?:small|smaller|smallest|little)\s(?:bag|bottle|box|pack|tin|can|tub)s?\b",
    re.I,
)
_PACK_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?(kg|千克|公斤|g|克|ml|毫升|l|升)(?![a-z])", re.I)
_IN_BASE = {"kg": ("mass", 1000.0), "千克": ("mass", 1000.0), "公斤": ("mass", 1000.0), "g": ("mass", 1.0),
            "克": ("mass", 1.0), "ml": ("volume", 1.0), "毫升": ("volume", 1.0), "l": ("volume", 1000.0),
            "升": ("volume", 1000.0)}  # fmt: skip
_SIZE_FIT, _SIZE_MISS, _SIZE_AMONG = 1.5, 0.6, 6
_OWN_WEIGHT = re.compile(r"体重|重|\bweigh", re.I)


def _other_pack(own: tuple[str, float], asked: tuple[str, float]) -> bool:
    return own[0] == asked[0] and own[1] != asked[1]


def _pack_size(text: str) -> tuple[str, float] | None:
    """The one pack size a line states ("5kg 装：472 元", "规格 360 ml"); None for none or several."""
    found = {(_IN_BASE[u.lower()][0], float(n) * _IN_BASE[u.lower()][1]) for n, u in _PACK_SIZE.findall(text)}
    return next(iter(found)) if len(found) == 1 else None


def _by_size(q: Question, candidates: list[Candidate]) -> None:
    """For a question that picks a pack by being the big or the small one, among the best lines of a page that
    state one pack size each in the same measure: the largest (smallest) lifted, the others lowered."""
    big, small = _BIG.search(q.text), _SMALL.search(q.text)
    if bool(big) == bool(small):
        return
    top = sorted((c for c in candidates if c.score > 0), key=lambda c: -c.score)[:_SIZE_AMONG]
    groups: dict[tuple[str, str, str], list[tuple[float, Candidate]]] = {}
    for c in top:
        size = _pack_size(c.text)
        # Packs of one product: rows whose names start alike ("水沁 护理液", "水沁 护理液 便携装"), lines of one section.
        name = _NAME_TOKEN.findall(c.row.name.lower())[:1] if c.row is not None else [c.section]
        if size is not None:
            groups.setdefault((c.chunk.doc_id, size[0], name[0] if name else ""), []).append((size[1], c))
    for sized in groups.values():
        values = {v for v, _ in sized}
        if len(values) < 2:
            continue
        wanted = max(values) if big else min(values)
        for v, c in sized:
            c.score *= _SIZE_FIT if v == wanted else _SIZE_MISS


def _names_asked_place(value: str, question: str) -> bool:
    """Is a location value only the name of the kind of place the question asks for ("…设有检测站" for "检测站在哪儿"):
    its closing word, two characters before the building word, in the question?"""
    return not re.search(r"\d", value) and len(value) >= 4 and value[-4:] in question


# A time limit asked as a window ("几天以内", "多长时间内", "how long from the purchase may I …") and stated as one
# ("30 天内", "within 30 days").
_WINDOW_ASKED = re.compile(
    r"(?:多久|多长时间|几天|几个月|多少天)(?:之内|以内|内)|\bhow long (?:after|from)\b|\bwithin how (?:long|many)\b",
    re.I,
)
_WINDOW_STATED = re.compile(
    r"\d\s?(?:个)?(?:工作日|自然日|天|日|小时|周|个月|年)(?:之内|以内|内)|\bwithin \d|\bwithin (?:one|two|three|seven|thirty)\b",
    re.I,
)
_WINDOW_HIT, _WINDOW_MISS = 1.5, 0.7
# The state of the goods a customer says theirs is in ("I broke the seal", "穿过两回", "never worn") against the state a
# rule is written for: "未开封的茶叶 10 天内可换" is the rule for unopened goods, not for an opened tin. Per state: what
# says it is not so (read first), and what says it is.
_STATES = (
    (
        re.compile(
            r"(?:未|没有?|尚未|不曾)(?:拆封|开封|拆开|打开|拆)|\bunopened\b|\bsealed\b|\bnot (?:been )?opened\b", re.I
        ),
        re.compile(r"拆封|开封|拆开|打开过|开过|拆过|\bopened\b|\bunsealed\b", re.I),
    ),
    (
        re.compile(
            r"(?:未|没有?|尚未|不曾)(?:使用|用过|穿过|穿着|佩戴|戴过|骑行|骑过)|\bun(?:used|worn)\b"
            r"|\b(?:not|never) (?:been )?(?:used|worn|ridden)\b",
            re.I,
        ),
        re.compile(
            r"用过|使用过|已使用|使用后|穿过|穿出去|戴过|骑过|已骑行|\b(?:used|worn|wore|ridden|rode)\b(?! (?:for|to)\b)",
            re.I,
        ),
    ),
    # Why the goods go back: a change of mind ("不喜欢", "don't want it any more") against a fault.
    (
        re.compile(
            r"无理由|不喜欢|不想要|不合适|不满意|改变主意|\bchange of mind\b|\bchanged my mind\b"
            r"|\bdo(?:n't| not) (?:like|want)\b|\bno longer (?:want|need)\b|\bno reason\b",
            re.I,
        ),
        re.compile(r"质量问题|故障|损坏|破损|\bdefect|\bfaulty\b|\bdamaged\b|\bquality (?:problem|issue)", re.I),
    ),
)
_STATE_MISS, _STATE_HIT = 0.5, 1.5


def _states(text: str) -> dict[int, bool]:
    """The goods' states a text names, as not so (False) or so (True): {0: False} for "未拆封"."""
    out: dict[int, bool] = {}
    for i, (negated, stated) in enumerate(_STATES):
        if negated.search(text):
            out[i] = False
        elif stated.search(text):
            out[i] = True
    return out


# A length in hours ("for 48 hours", "a 2-hour class") names no opening hours unless the line says what opens.
_HOURS_LONG = re.compile(r"\d\s?-?(?:hours?|hrs?)\b", re.I)
_OPENING = re.compile(r"\bopen|\bclos|营业|开门|关门", re.I)
# A holiday or a date: the hours of a day that is not a regular one ("除夕当天提前到 18:00 关门", "closed on
# Christmas Day"). A question on the hours that names none asks the regular ones; one that names a day asks that day's.
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)(?![a-z])\.?"
)
_SPECIAL_DAY = re.compile(
    r"节假日|假日|假期|法定假|春节|除夕|大年|年三十|过年|正月|腊月|元旦|国庆|劳动节|五一|清明|端午|中秋|元宵|圣诞"
    r"|\d{1,2}\s?月\s?\d{1,2}\s?[日号]"
    r"|\b(?:holidays?|christmas|xmas|new year|easter|thanksgiving|national day|golden week|labou?r day|may day"
    r"|spring festival|lunar|mid-autumn|dragon boat|boxing day)\b"
    rf"|\b{_MONTH}\s\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s(?:of\s)?{_MONTH}(?![a-z])",
    re.I,
)
# A line that states the regular week names a holiday only in passing ("每天 9:00–21:00（除夕休息）", "daily, holidays
# included"): it is the regular hours.
_REGULAR_DAYS = re.compile(
    r"每天|每日|天天|全年|工作日|周[一二三四五六日天末]|星期|礼拜"
    r"|\b(?:daily|every day|weekdays?|weekends?|mon(?:day)?s?|tue(?:s|sday)?s?|wed(?:nesday)?s?|thu(?:rs|rsday)?s?"
    r"|fri(?:day)?s?|sat(?:urday)?s?|sun(?:day)?s?|year-round|all year)\b",
    re.I,
)
_SPECIAL_MISS = 0.4
_SPECIAL_HIT = 1.5
# Not "above it" (a clearance), not "不满意" (a complaint).
_SHORT_OF = re.compile(
    r"\b(?:below|under|above|over|less than|more than)\s(?:that|the (?:threshold|minimum|limit))\b|不满(?!意)|低于|没满|达不到",
    re.I,
)
# "How often does it come?": a frequency, stated as a count ("twice a year") or as an interval ("every 30 days",
# "每 2 小时", "每月一次").
_HOW_OFTEN = re.compile(r"\bhow often\b|\bhow frequently\b|多久一次|多长时间一次|隔多久|多久.{0,6}一次", re.I)
_EVERY = re.compile(
    r"\bevery\s(?:\d|other\b|few\b|day\b|week\b|month\b|year\b|two\b|three\b|six\b)|\b(?:once|twice)\s(?:a|per|every)\b"
    r"|每(?:隔)?\s?(?:\d|[一两二三四五六七八九十半])|每(?:天|日|周|月|年|季度)",
    re.I,
)


_SIZED = re.compile(r"\d+(?:\.\d+)?[a-z]{1,3}")
_STORE_FIT = 2.0
_STORE_FACTS = frozenset({"opening_hours", "address", "contact"})
_STORE_MISS = 0.35


def _store_in_focus(q: Question, candidates: Sequence[Candidate]) -> str:
    """The store the customer is asking about when the retrieved lines are of several stores ("周末开门吗",
    "what's the address?"): the one their question names, else the one named last before (by the rewriter
    or in an earlier question). A city named in the question itself overrules stores named before it."""
    cities: dict[str, frozenset[str]] = {}
    for c in candidates:
        if (n := store_name(c.section)) and n not in cities:
            cities[n] = places(c.section)
    if len(cities) < 2:
        return ""
    own_place = bool(places(q.text))
    # A city picks its store only for what a store's own lines state (its hours, address, phone): a rule's threshold
    # asked after a store's city was named is asked of the rule's page, not of that store's lines.
    by_city = bool(q.ideas & _STORE_FACTS) or bool(set(q.asks[:1]) & {Ask.TIME, Ask.LOCATION, Ask.CONTACT})
    for i, text in enumerate(q.recent):
        lowered = text.lower()
        said = {n for n in cities if n in lowered}
        if len(said) > 1:
            return ""  # "湖滨店和滨江店哪家近": a choice between stores, none in focus
        if said:
            return said.pop()
        if by_city and (named := places(text)) and (in_city := _stores_in(cities, named)):
            return in_city  # "青岛那边的门店": the one store the shop has in the city named
        if own_place and i == 0:
            return ""
    return ""


def _stores_in(cities: dict[str, frozenset[str]], named: frozenset[str]) -> str:
    """The one store in the place named, by its city before its province: "深圳" names the Shenzhen store, not the
    Guangzhou one that shares its province. "" when the place has none or several."""
    for level in (frozenset(p for p in named if not p.endswith("_")), named):
        found = [n for n, own in cities.items() if own & level]
        if found:
            return found[0] if len(found) == 1 else ""
    return ""


# "How long will fitting it take?", "要多长时间才能好": how long something lasts to do, not how long a right holds (a
# warranty, a return window, a validity).
_TAKES = re.compile(
    r"\bhow long (?:does|will|would|did|do) (?:it|this|that|they|[\w' -]{1,40}?) (?:take|last)\b|\bhow long to\b"
    r"|多久(?:能|才能|可以)|多长时间(?:能|才能|可以)?(?:好|完|搭|装|修|做)|要多久|几天能|需要多(?:久|长时间)"
    r"|等(?:几天|多久|多长时间)",
    re.I,
)
_VALIDITY = frozenset({"warranty", "extended_warranty", "return", "expiry"})
_VALIDITY_MISS = 0.2
# A right that holds within a time: "收货后 20 天内 … 可以免费调换", "within 20 days you may swap it".
_RIGHT_WITHIN = re.compile(
    r"\d\s?(?:个)?(?:工作日|自然日|天|日|周|个月|年)(?:之内|以内|内)[^。；;]{0,30}?(?:可以|可|能|免费)"
    r"|\bwithin \d+ (?:days?|weeks?|months?|years?)\b[^.;]{0,40}?\b(?:can|may|free)\b",
    re.I,
)


# A line about what the others have ("其他品牌镜架：", "其余型号", "Other brands:", "All other models"): a default.
_OTHERS = re.compile(r"(?:其他|其它|其余)|(?:all |any )?other\b", re.I)
_OTHERS_MISS = 0.3


# A Chinese word that asks rather than says ("多久", "怎么办", "几天", "要钱吗"): no part of what is asked about.
_HAN_ASKING = re.compile(r"[几多怎啥咋哪吗呢么没]")
_SAID_WEIGHT = 3.0
# "How long", "how often": the words that ask for a kind of value.
_EN_ASKING = re.compile(
    r"\bhow (?:long|much|many|often|far|big|old|soon|late|early|heavy|wide|tall|large|small|high|low)\b", re.I
)


def _content_terms(
    q: Question, asked_words: set[str] | frozenset[str], idf: dict[str, float], primary: Ask
) -> dict[str, float]:
    """The words of the customer's own question that say what about the product is asked ("换" of "滤芯多久换一次",
    "lid" of "does it come with a lid?"), with their weight: not the product's name, not the rewriter's
    additions, not the words that only ask ("多久", "how much") or name the kind of value asked for."""
    kind = {_ASK_IDEA[primary]} if primary in _ASK_IDEA else set()
    asking = _stems(terms(" ".join(m.group() for m in _EN_ASKING.finditer(q.text))))
    out: dict[str, float] = {}
    for w in asked_words - q.added_words - _GENERIC_ZH - asking:
        if w.isdigit() or w in EN_GENERIC_WORDS or (w.isascii() and len(w) < 3):
            continue
        if not w.isascii() and (_HAN_ASKING.search(w) or (len(w) == 1 and not _HAN_CONTENT_CHAR.fullmatch(w))):
            continue
        ideas = concepts(w)
        if ideas and ideas <= kind | GENERIC:
            continue
        out[w] = idf.get(w, 1.0)
    return out


def _says(
    word: str,
    c: Candidate,
    text: str,
    lang: str,
    stems: set[str],
    other: frozenset[str] | None = None,
    lift: bool = True,
) -> float | None:
    """How much of a question word a sentence (with its heading and page title: `text`, lowered; `stems`, its
    English word stems) says: the word, its characters ("换芯" ~ "更换滤芯"), or, across languages, its
    concept, the word itself (a name, a size: "pro", "100ml") or its translation (`other`, the dictionary
    bridge's words for it; with `lift` false, a translation only tells a line that lacks it); None when the
    sentence (in the other language) has no evidence either way (a word with neither a concept nor a
    translation)."""
    ideas = concepts(word)
    if ideas and ideas <= c.ideas:
        return 1.0
    # A Chinese word against an English page: the page title's concepts count, as a Chinese page's title words do
    # (`text` holds the title): "学生" is said by every line of the "Student Discount Program" page, the one stating
    # the discount too. Not the other way: an English word's concept in a Chinese page's title ("deliver" in
    # "配送说明") lifted a line naming the asked city over the one stating the time (dev, run of the replay).
    if ideas and lang == "en" and not word.isascii() and ideas <= c.ideas | concepts(c.chunk.title):
        return _TITLE_SAYS
    if word.isascii() and lang == "en":
        return 1.0 if word in stems else 0.0
    if word.isascii() or lang != "zh":
        # Across languages: a name or a size written in letters ("Pro 版", "100ml 装"), the translation said or
        # not, the concept the sentence lacks, are evidence as a word is in the question's language.
        if word.isascii() and word in text and re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z])", text):
            return 1.0
        # The page title names the product ("空气炸锅" for "air fryer"): a translation is read off the heading and
        # the line.
        if other:
            return (1.0 if lift else None) if says([other], f"{c.section} {c.text}".lower())[0] else _ACROSS_MISS
        if ideas & c.ideas:
            # Some of the word's concepts: "installments" is also read as "install*", which no instalment line says.
            return _ACROSS_PART
        return _ACROSS_MISS if ideas else None
    if word in text:
        return 1.0
    # A word written another way ("专票" ~ "专用发票") has all its characters there; a few of them are chance.
    return 0.5 if all(ch in text for ch in word) else 0.0


_TITLE_SAYS = 1.0  # the title's concept: said as by the line itself
_ACROSS_PART = 0.5
_ACROSS_MISS = 0.0  # a concept or a translation the line lacks (0.5 lost more than it won: run 2)
# Steps after the first need not repeat what the question names: they are read by their section. A contact or
# an address line is told by its channel and place ("customer service", "维修中心" name every one of them).
_SAID_BY_PLACE = (Ask.HOWTO, Ask.CONTACT, Ask.LOCATION)


def _said_of(
    q: Question,
    asked_words: set[str] | frozenset[str],
    idf: dict[str, float],
    primary: Ask,
    candidates: list[Candidate],
) -> dict[int, float]:
    """A factor per sentence: how much of what the question asks about (its own content words) the sentence
    says, against the sentence that says most. Two sentences of the asked type ("安装周期：2 个工作日" and
    "滤芯每 6 个月更换一次" for "滤芯多久换一次") are told apart by what is done or to what, not by the type.
    A sentence in the other language is judged by what it can say: the words' concepts, their translations, the
    names and sizes written in letters; one with none of these for any word is left as it is."""
    # Steps after the first need not repeat what the question names: they are read by their section. A
    # contact line is told by its channel and place ("customer service" names every one of them).
    wanted = _content_terms(q, asked_words, idf, primary) if primary not in _SAID_BY_PLACE else {}
    if not wanted:
        return {}
    english = any(w.isascii() for w in wanted)
    # The dictionary bridge's other-language words for the question's words (by their stems, as it reads them).
    bridge = {w: g for w, g in q.translated if " " not in w}
    translation = {w: bridge.get(w) or bridge.get(bridge_stem(w)) for w in wanted} if bridge else {}
    hits: dict[int, float] = {}
    read = [(c, f"{c.section} {c.text} {c.chunk.title}".lower(), language(c.text)) for c in candidates]
    # The question's own language first: a word one of its sentences says is evidence there, and its
    # translation does not lift the other language's lines to stand beside it (as in `_bridged`); a line
    # without the translation still lacks the word.
    read.sort(key=lambda r: r[2] != q.lang)
    own_said: set[str] = set()
    for c, text, lang in read:
        # The sentence's stems, read once, and only when an English word can be asked of it.
        stems = _stems(terms(text)) if lang == "en" and english else set()
        got = total = 0.0
        for w, weight_ in wanted.items():
            said = _says(w, c, text, lang, stems, translation.get(w), lift=w not in own_said)
            if said == 1.0 and lang == q.lang:
                own_said.add(w)
            if said is None:
                continue
            total += weight_
            got += weight_ * said
        if total:
            hits[id(c)] = got / total
    best = max(hits.values(), default=0.0)
    if best <= 0:
        return {}
    return {k: (1 + _SAID_WEIGHT * h) / (1 + _SAID_WEIGHT * best) for k, h in hits.items()}


_COST_ASKED = re.compile(
    r"要钱|收钱|收费|付费|花钱|免费|另收|谁出|谁付|加钱|多收|加收|\bfree\b|\bcharged?\b|\bcosts?\b|\bfees?\b|\bsurcharges?\b"
    # "do I pay the postage?", not "can I pay with a card?" (a way to pay).
    r"|\b(?:do|will|would|must|should) (?:i|we) (?:have to |need to )?pay\b(?! (?:with|by|in|via|using)\b)",
    re.I,
)
_FREE = re.compile(
    r"免费|不收费|不另收费|免收|不收取|包邮|自理|自付|承担|\bfree\b|\bno (?:extra )?charge\b|\bat no (?:extra )?cost\b"
    r"|\bat (?:your|the customer's) (?:own )?(?:cost|expense)\b|\byou pay\b|\bpaid by\b",
    re.I,
)

# A share added to the price ("每晚加收 30%", "a 3% card fee is added"): what an extra charge asked about costs.
_SURCHARGE = re.compile(r"加收|另收|多收|上浮|\bfees?\b|\bsurcharges?\b", re.I)


# What marks a part or an add-on sold for a model rather than the model: "备用电池", "仅适配 X", "spare
# battery", "sold separately".
_PART = re.compile(
    r"备用|配件|专用|适配|兼容|选配|另购|另外买|另外购买|单独买|单独购买|单独出售|\b(?:spare|replacement|compatible|accessor(?:y|ies))\b"
    r"|\bsold separately\b",
    re.I,
)
_PART_MISS = 0.5
# Doing something for a product (a repair, a replacement, cleaning, fitting, a visit): its price is the service's.
_SERVICE = re.compile(
    r"换|修|清洗|洗护|干洗|安装|加装|装机|上门|保养|翻新|除尘|清灰|放气"
    r"|\b(?:repair\w*|replac\w*|fix|clean\w*|install\w*|servic\w*|bleed\w*)\b",
    re.I,
)


_PHONE_ASKED = re.compile(r"电话|热线|号码|打给|\b(?:phone|call|hotline|telephone|number|helpline)\b", re.I)
_EMAIL_ASKED = re.compile(r"邮箱|邮件|\be-?mail\b", re.I)
_CHANNEL_ASKED = {
    "phone": re.compile(r"\+?\d{2,4}[-\s]\d{2,4}[-\s]?\d{3,4}|\b1[3-9]\d{9}\b|\b400[-\s]?\d{3}[-\s]?\d{4}\b"),
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+"),
}


def _asked_channel(question: str) -> str:
    """Which way of reaching the shop a contact question wants, when it names only one."""
    phone, email = bool(_PHONE_ASKED.search(question)), bool(_EMAIL_ASKED.search(question))
    return "phone" if phone and not email else "email" if email and not phone else ""


_PER_PERIOD = re.compile(
    r"\b(?:per|a|each)\s(?:day|night|week|month|hour)\b|/\s?(?:day|night|天|日|晚)\b|每(?:天|日|晚|周|月|小时)", re.I
)
# How far a period may stand from the amount it prices: "59 yuan per day", "每晚房费 98 元", not "每天最多 10 餐" in
# the same row as "售价 439 元".
_RATE_GAP = 8


def _rate(text: str) -> bool:
    """Does the sentence price something by the period ("49 元/天", "each night 98 yuan"), the period next to an
    amount, not a period said of another cell or clause ("每天最多 10 餐，…，售价 439 元")?"""
    periods = [m.span() for m in _PER_PERIOD.finditer(text)]
    if not periods:
        return False
    return any(
        0 <= start - m.end() <= _RATE_GAP or 0 <= m.start() - end <= _RATE_GAP
        for m in VALUE_PATTERNS[Ask.PRICE].finditer(text)
        for start, end in periods
    )


_PER_PERIOD_ASKED = re.compile(
    r"\b(?:per|a|each|daily|weekly|monthly|nightly|rent\w*|hire)\b|每|一天|一晚|一个月|租|天|日租", re.I
)
# A spec sheet's line "Label: value" (a list item or a cell): the label says what the value is.
_LABEL = re.compile(r"^([^:：，,。.!?！？]{1,24})[:：]\s*\S")
_PAREN = re.compile(r"[(（][^)）]*[)）]")


_LABEL_CONCEPTS = frozenset(
    ["weight", "distance", "dimensions", "occupancy", "waterproof", "material", "color", "storage", "memory", "battery",
     "screen", "noise", "temperature", "room_size", "warranty", "specs", "in_box", "altitude"]
)  # fmt: skip


def _label_fit(q: Question, c: Candidate, asked_words: set[str] | frozenset[str]) -> float:
    """> 1 for a "Label: value" line whose label is what the question asks about ("what sizes ...": "Sizes:
    S to XXL", not "Weight (size M): 280 g"; "多重": "重量：2.1 kg"), by the label's own words or, across
    languages, its concepts. A parenthesised qualifier of the label is not what it states."""
    if c.row is not None or (q.asks and q.asks[0] is not Ask.SPEC):
        return 1.0  # a spec's label; a time, price or rule is told by its value and wording
    m = _LABEL.match(c.text)
    if m is None:
        return 1.0
    label = _PAREN.sub(" ", m.group(1))
    if ((q.ideas - q.added_ideas) & ASPECTS) - concepts(label):
        return 1.0  # "the keyboard after the warranty": a sub-topic the label does not name
    own = asked_words - q.added_words
    if _stems(terms(label)) & own:
        return 1.6
    # Across languages only a spec concept tells labels apart ("门店电话" is about stores, but it is no
    # answer to "is there a store in ...").
    wanted = (q.ideas - q.added_ideas) & _LABEL_CONCEPTS
    if wanted and concepts(label) & wanted:
        return 1.6
    if any(len(w) >= 2 and _HAN_WORD.fullmatch(w) and w[-1] in label for w in own):
        return 1.2  # "多重" ~ "重量": the word's head character
    return 1.0


def _line_purpose_fit(q: Question, c: Candidate) -> float:
    """A contact line labelled for a purpose ("维修预约专线：…", "Complaints line: …") serves that purpose: for a
    number asked with no such purpose (or one the conversation is not on), the general line ("客服热线") is
    the answer. A store's or a place's own line is told apart by the place, not here."""
    m = _LABEL.match(c.text)
    if m is None:
        return 1.0
    purposes = concepts(m.group(1)) - _CONTACT_LABEL_IDEAS - GENERIC
    if purposes and not purposes & (q.ideas | q.context):
        return _OTHER_PURPOSE
    return 1.0


_CONTACT_LABEL_IDEAS = frozenset(["contact", "store", "location", "hours"])
_OTHER_PURPOSE = 0.4


_SUBJECT_BONUS = 2.0
_SUBJECT_HEAD = re.compile(r"^((?:[^：:。，,；;（(]|[（(][^）)]{0,30}[）)]){2,40})[：:]")


def _subject_words(c: Candidate) -> tuple[set[str], set[str]]:
    """The words of what a sentence is about: what it names first ("拖布（2 块装）：建议每 2 个月更换"), and the
    heading it sits under when that is a name ("集尘袋"), not a question nor the page's title."""
    if c.row is not None:
        return set(), set()
    head = _SUBJECT_HEAD.match(c.text)
    section = c.section.strip()
    under = section and section != c.chunk.title and len(section) <= 24 and not _QUESTION_LINE.search(section)
    return (_stems(terms(head.group(1))) if head else set()), (_stems(terms(section)) if under else set())


def _rank_discount(c: Candidate) -> float:
    # A sentence of a better-retrieved chunk wins a tie.
    return 1 + 0.12 * c.rank


_ADDED = 0.4
_GENERIC_ZH = frozenset(["呢", "那", "那么", "的", "吗"])


def _coverage(q: Question, got: frozenset[str]) -> float:
    """`glossary.coverage` with the rewriter's additions weighing less."""
    total = hit = 0.0
    for c in q.ideas:
        w = weight(c) * (_ADDED if c in q.added_ideas else 1.0)
        total += w
        if c in got:
            hit += w
    return hit / total if total else 0.0


_HAN_WORD = re.compile(f"{HAN_CLASS}{{2,4}}")
# One Chinese character that is a word of its own and says what is done or to what ("戴", "拆", "折"), not a
# function or question character, whose presence in a sentence says nothing.
_HAN_CONTENT_CHAR = re.compile(
    f"(?![要的了是在有能会可就都也还吗呢吧啊多少几个我你他她它这那和与或把被给让到去来上下不没很太最更再又才只用做买卖说看啥咋怎么谁哪呀嘛么之其等])"
    f"{HAN_CLASS}"
)


def _chars_in(word: str, c: Candidate) -> bool:
    return all(ch in c.text or ch in c.section for ch in word)


@lru_cache(maxsize=4096)
def section_asks(section: str) -> frozenset[Ask]:
    """The question a heading answers ("五、退款多久到账" -> a duration, "开具时间" -> a date)."""
    return frozenset(question_asks(section)) - {Ask.YESNO, Ask.HOWTO} if section else frozenset()


_HOWTO_HEADING = re.compile(
    r"如何|怎么|怎样|流程|步骤|指南|方法|办理方式|申请方式|\bhow to\b|\bsteps?\b|\bprocess\b|\bprocedure\b", re.I
)
_STEPS_HEADING = re.compile(r"步骤|流程|\bsteps?\b|\bprocedure\b", re.I)
_SPEC_UNITS = {
    "memory": re.compile(r"\d\s?GB", re.I),
    "storage": re.compile(r"\d\s?(?:GB|TB)", re.I),
    "weight": re.compile(r"\d\s?(?:克|千克|公斤|kg|g)\b|\d\s?(?:克|千克|公斤)", re.I),
    "battery": re.compile(r"\d\s?(?:mAh|小时|hours?|Wh|km|公里)", re.I),
    "distance": re.compile(r"\d\s?(?:km|公里|千米|kilomet)", re.I),
    "screen": re.compile(r"\d\s?(?:英寸|寸|inch|\"|Hz)", re.I),
    "noise": re.compile(r"\d\s?(?:dB|分贝)", re.I),
    "temperature": re.compile(r"\d\s?(?:℃|°C|度)", re.I),
    "room_size": re.compile(r"\d\s?(?:m²|㎡|平方米|平米|square met)", re.I),
}
_ASK_IDEA = {Ask.PRICE: "price", Ask.DURATION: "time_limit"}


# "the cheapest one", "续航最长的是哪款": the model at one end of the figures asked about (-1: the lowest).
_LOWEST = re.compile(
    r"最便宜|最低价|最实惠|最轻|最小|最短|最少|\bcheapest\b|\bleast expensive\b|\blowest price\b|\blightest\b"
    r"|\bsmallest\b|\bshortest\b|\bfewest\b",
    re.I,
)
_HIGHEST = re.compile(
    r"最贵|最重|最大|最长|最久|最多|最高|\bmost expensive\b|\bheaviest\b|\bbiggest\b|\blargest\b|\blongest\b"
    r"|\bhighest\b|\bmost (?:storage|capacity|power|range)\b",
    re.I,
)


def superlative(question: str) -> int:
    """-1 for a question after the lowest figure, 1 for the highest, 0 for neither."""
    low, high = _LOWEST.search(question), _HIGHEST.search(question)
    return -1 if low and not high else 1 if high and not low else 0


def _figure(c: Candidate, q: Question, ask: Ask) -> float | None:
    """The figure of the kind asked a sentence states first: in the asked concept's unit ("续航" in hours
    or km) when there is one, else its first value of the asked type."""
    for unit in (_SPEC_UNITS[i] for i in q.ideas if i in _SPEC_UNITS):
        for m in unit.finditer(c.text):
            digits = re.search(r"\d+(?:\.\d+)?$", c.text[: m.start() + 1])
            if digits:
                return float(digits.group())
    figure = _first_number(c.text, ask)
    return None if figure == math.inf else figure


def _extreme(q: Question, ranked: list[Candidate], direction: int) -> list[Candidate]:
    """`ranked` with the sentence at the asked end of the figures first: among the best sentence's page's
    sentences of the asked type that compete with it (the siblings' rows or lines)."""
    best = ranked[0]
    ask = q.asks[0]
    floor = _SUPERLATIVE_FLOOR * best.score
    # "Which of the three lasts longest?" names no model: the model the rewriter carried is one of those compared,
    # and each sibling's own line ("镜架保修 2 年" under each model's heading) competes whatever its score.
    wording = _FIGURES.sub("#", best.text) if best.row is None and not products(q.text) else None
    rivals = [
        (figure, c)
        for c in ranked
        if c.chunk.doc_id == best.chunk.doc_id
        and (c.score >= floor or (wording is not None and c.row is None and _FIGURES.sub("#", c.text) == wording))
        and (c.row.header if c.row else None) == (best.row.header if best.row else None)
        and shows(c.text, ask)
        and (figure := _figure(c, q, ask)) is not None
    ]
    if len(rivals) < 2:
        return ranked
    _, top = max(rivals, key=lambda fc: fc[0] * direction)
    return [top, *(c for c in ranked if c is not top)]


_SUPERLATIVE_FLOOR = 0.75
# A sibling picked by its price ("便宜那款", "the cheaper one"): -1 for the cheaper end, 1 for the dearer.
_PRICE_PICK = re.compile(
    # "好些的那款": a better one of a price list is the dearer; "好的这个" is no pick.
    r"(便宜|实惠|贵|高档|好(?=一点|一些|点|些))(?:一点|一些|点|些)?的?(?:那|这)(?:款|个|台|种|一款)"
    r"|\b(cheaper|cheapest|less expensive|least expensive|pricier|more expensive|most expensive)\b",
    re.I,
)
# The picked row's score against the best row's: the carried model's row is lifted by the rewriter's words.
_PRICE_PICK_FLOOR = 0.1


def _price_pick(question: str) -> int:
    m = _PRICE_PICK.search(question)
    if m is None:
        return 0
    word = (m.group(1) or m.group(2)).lower()
    return -1 if word in ("便宜", "实惠") or word.startswith(("cheap", "less", "least")) else 1


# An option picked by where it stands among the prices, as a thing ("the pricier one"), not a comparison asked
# ("does the large size cost more, is it more expensive?").
_ONE_PICKED_EN = re.compile(
    r"\b(cheaper|less expensive|pricier|more expensive|better|nicer|fancier)\s+(?:one|option|version|model)s?\b", re.I
)


def _one_picked(question: str) -> int:
    m = _PRICE_PICK.search(question)
    if m is not None and m.group(1):
        return _price_pick(question)
    en = _ONE_PICKED_EN.search(question)
    if en is None:
        return 0
    return -1 if en.group(1).lower().startswith(("cheap", "less")) else 1


_FIGURES = re.compile(r"\d+(?:[.,]\d+)*")


def _section_values(ranked: Sequence[Candidate], best: Candidate, primary: Ask) -> list[Candidate]:
    """The lines of the best line's section that state the asked value, within 0.75 of it, compared without
    their chunks' rank (a list is one whatever chunks the overlap cut it into). A row that says less of what
    the question asks about is another item of the list, not one of the asked item's tiers or cases."""
    floor = 0.75 * best.score * _rank_discount(best)
    return [
        c
        for c in ranked
        if c.chunk.doc_id == best.chunk.doc_id
        and c.section == best.section
        and shows(c.text, primary)
        and c.score * _rank_discount(c) >= floor
        and not _other_row(c, best)
    ]


def _pick(q: Question, ranked: list[Candidate], limit: int) -> list[Candidate]:
    primary = q.asks[0] if q.asks else Ask.GENERAL
    direction = superlative(q.text) if primary in (Ask.PRICE, Ask.SPEC, Ask.DURATION) else 0
    if direction:
        # One answer, the extreme: not the whole price list.
        return _extreme(q, ranked, direction)[:1]
    best = ranked[0]
    if primary is not Ask.PRICE and best.row is not None and (by_price := _price_pick(q.text)):
        # "实惠点的那个手电配啥电池", "and the dearer one, how bright is it?": the row of that end of the prices
        # among the best row's table rows that say as much of the question; the rewriter's carried model is no
        # evidence (the customer moves from it to the cheaper one).
        rivals = [
            (price, c)
            for c in ranked
            if c.row is not None
            and c.chunk.doc_id == best.chunk.doc_id
            and c.row.header == best.row.header
            and c.said >= best.said
            and c.score >= _PRICE_PICK_FLOOR * best.score
            and (price := _first_number(c.text, Ask.PRICE)) != math.inf
        ]
        if len(rivals) >= 2:
            return [max(rivals, key=lambda pc: pc[0] * by_price)[1]]
    # "the Z6 with the G2 gimbal": the item the question names by a word only the best line says; a line of the same
    # page stating the value of the asked type without that word is a sibling item's value, not the asked one's.
    # Read only of the lines that would be quoted.
    no_item: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    said, unsaid = _item_words(q, best) if primary in _ITEM_VALUES and shows(best.text, primary) else no_item
    # A price list under one heading ("128GB 7999 元 / 256GB 8999 元 ...") answers "how much is it" as a
    # whole when no tier was named: the rows of the best sentence's section that carry the value.
    if primary in (Ask.PRICE, Ask.SPEC, Ask.PERCENT) and not q.attrs and shows(best.text, primary):
        rows = [
            c
            for c in _section_values(ranked, best, primary)
            if not (said and _sibling_value(c, best, said, unsaid, primary))
        ][: limit + 3]
        if len(rows) >= 2 and primary is Ask.PRICE and (by_price := _one_picked(q.text)):
            # "贵点的那个呢", "and the pricier one?": one option of the list, the one at that end of the prices.
            return [max(rows, key=lambda c: _first_number(c.text, primary) * by_price)]
        if len(rows) >= 2:
            return sorted(rows, key=lambda c: _first_number(c.text, primary))
    if primary in (Ask.DURATION, Ask.TIME) and not q.attrs and not q.named and shows(best.text, primary):
        # "多久能到", "what are your hours?": a question naming no case (no region, no store, no variant) of a list of
        # parallel lines, one per case ("江浙沪 次日 / 偏远地区 4 到 7 天"), is answered by the list, as a price
        # question naming no tier is; one line alone reads as if it held for every case. A line that says less of
        # the question than the best one is no parallel case: the question named the best one's.
        cases = [
            c
            for c in _section_values(ranked, best, primary)
            if c.said >= best.said and (c is best or _parallel(c.text, best.text))
        ][: limit + 2]
        if len(cases) >= 2:
            # The list first; what else the best line's peers say (another rule with its own time) still follows.
            listed = sorted(cases, key=lambda c: (c.rank, c.order))
            more = [c for c in ranked if c not in listed and c.score >= 0.75 * best.score and not _other_row(c, best)]
            return listed + more[: max(0, limit - len(listed))]
    if primary is Ask.HOWTO and (shows(best.text, primary) or _STEPS_HEADING.search(best.section)):
        # Steps read together, in the document's order. Under a heading that names steps ("搭建步骤", "Setup
        # steps") a line is a step without a number or a step word of its own; a heading that asks how ("怎么获得积分")
        # is a topic whose lines are rules, each read on its own.
        steps = [c for c in ranked if c.chunk.doc_id == best.chunk.doc_id and c.section == best.section]
        steps = [c for c in steps if c.score >= 0.4 * best.score][: limit + 2]
        if len(steps) >= 2:
            return sorted(steps, key=lambda c: (c.rank, c.order))
    if _QUESTION_LINE.search(best.section) and primary in (Ask.YESNO, Ask.GENERAL):
        # A FAQ's answer is one unit: "Yes, in our two lakeside stores." goes on with what it costs and what to bring.
        rest = sorted(
            (
                c
                for c in ranked
                if c.chunk is best.chunk
                and c.section == best.section
                and c.order > best.order
                and not _QUESTION_LINE.search(c.text)  # the next question, run into the answer's paragraph
            ),
            key=lambda c: c.order,
        )
        if rest:
            return [best, *rest[: limit - 1]]
    picked = [best]
    for c in ranked[1:]:
        if len(picked) >= limit:
            break
        if (
            c.score >= 0.75 * best.score
            and not _other_row(c, best)
            and not _other_table(c, best, q)
            and not (said and _sibling_value(c, best, said, unsaid, primary))
        ):
            picked.append(c)
    return picked


_ITEM_VALUES = (Ask.PRICE, Ask.SPEC, Ask.PERCENT)
_SHAPE_WORD = re.compile(rf"[a-z]+|{HAN_CLASS}+")


def _shape(text: str) -> frozenset[str]:
    """What a line says once its figures are left out: its English words and the pairs of its Chinese characters."""
    out: set[str] = set()
    for w in _SHAPE_WORD.findall(text.lower()):
        out.update((w,) if w.isascii() else (w[i : i + 2] for i in range(max(1, len(w) - 1))))
    return frozenset(out)


def _parallel(a: str, b: str) -> bool:
    """Two lines of one list, one per case: the same wording around another case and figure ("江浙沪 一般 1 到 2 天送达"
    beside "偏远地区一般 4 到 7 天送达"), not two rules of one section that each state a time."""
    sa, sb = _shape(a), _shape(b)
    return bool(sa and sb) and len(sa & sb) >= 0.4 * min(len(sa), len(sb))


def _mentions(text: str, word: str) -> bool:
    """Is the word in the (lower-case) text, an English one not as the end of a longer word or figure? A plain
    search: the word changes with every question, and a pattern compiled for each cost a compilation a turn."""
    if not word.isascii():
        return word in text
    at = text.find(word)
    while at >= 0:
        if at == 0 or text[at - 1] not in _WORD_BEFORE:
            return True
        at = text.find(word, at + 1)
    return False


_WORD_BEFORE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.")


def _item_words(q: Question, best: Candidate) -> tuple[frozenset[str], frozenset[str]]:
    """The question's words that name an item ("g2", "1.60", "旅行装"), not its family (the best line's heading or
    page title, which every line of the page is about) nor what is asked ("price", "售价"): those the best line
    itself says, and those it does not (another item the question names too: "A2 和 A3 分别多少钱")."""
    own = best.text.lower()
    frame = f"{best.section} {best.chunk.title}".lower()
    said: set[str] = set()
    unsaid: set[str] = set()
    for w in q.words:
        if w.isdigit() or w in EN_GENERIC_WORDS or w in _GENERIC_ZH or concepts(w):
            continue
        if len(w) < (2 if not w.isascii() or _has_figure(w) else 3) or _mentions(frame, w):
            continue
        (said if _mentions(own, w) else unsaid).add(w)
    return frozenset(said), frozenset(unsaid)


def _sibling_value(c: Candidate, best: Candidate, said: frozenset[str], unsaid: frozenset[str], ask: Ask) -> bool:
    """A line of the best line's page stating a value of the asked type that does not name the asked item, in itself
    or by its heading: another item's value ("The bundle costs ¥5299" beside the "G2" line). A model number
    or size the question names ("g2", "1.60") must be there; other words, one of them. A line naming another item
    the question names is asked too."""
    if c.chunk.doc_id != best.chunk.doc_id or not shows(c.text, ask):
        return False
    text = f"{c.section} {c.text}".lower()
    figured = [w for w in said if _has_figure(w)]
    if figured:
        # A name read across languages ("gimbal" beside "云台") is no other item: only another number is.
        return not all(_mentions(text, w) for w in figured) and not any(
            _mentions(text, w) for w in unsaid if _has_figure(w)
        )
    return not any(_mentions(text, w) for w in said | unsaid)


def _has_figure(word: str) -> bool:
    return any(ch.isdigit() for ch in word)


def _other_row(c: Candidate, best: Candidate) -> bool:
    """A row of the best row's table that says less of what the question asks about: another item of the
    list ("精细调律 … 460 元" beside "常规调律 … 单独上门调律 280 元" for "单独上门调律多少钱")."""
    return (
        c.row is not None
        and best.row is not None
        and c.chunk.doc_id == best.chunk.doc_id
        and c.row.header == best.row.header
        and c.said < best.said
    )


def _other_table(c: Candidate, best: Candidate, q: Question) -> bool:
    """A bare line of figures on another page than the best line's, which says no word of the question and no
    concept but its value's: a row of another list ("below 1,000 yuan 59 yuan 149 yuan" of an extended warranty's
    price table after "上门检测费 60 元"), which only its own table's header would explain."""
    return (
        c.chunk.doc_id != best.chunk.doc_id
        and "price" in c.ideas
        and not (c.ideas - {"price"} - GENERIC)
        and not (c.words & q.words)
    )


def _echoes(text: str, numbers: frozenset[str]) -> bool:
    """Every amount the sentence states is one the customer stated."""
    found = [re.sub(r"[^\d.]", "", v.replace(",", "")) for v in values(text, Ask.PRICE)]
    return bool(found) and all(f in numbers for f in found)


def _first_number(text: str, ask: Ask) -> float:
    found = values(text, ask)
    digits = re.search(r"\d+(?:\.\d+)?", found[0].replace(",", "")) if found else None
    return float(digits.group()) if digits else math.inf


_ZH_UNITS = [
    (re.compile(r"(\d+(?:\.\d+)?)\s?个?工作日"), r"\1 business days"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?(?:天|日)"), r"\1 days"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?个?小时"), r"\1 hours"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?分钟"), r"\1 minutes"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?(?:周|星期)"), r"\1 weeks"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?个月"), r"\1 months"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?年"), r"\1 years"),
    (re.compile(r"(\d+(?:[.,]\d+)*)\s?(?:元|块)"), r"¥\1"),
]
_EN_UNITS = [
    (re.compile(r"(\d+(?:\.\d+)?)\s?(?:business|working) days?", re.I), r"\1 个工作日"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?days?", re.I), r"\1 天"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?hours?", re.I), r"\1 小时"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?minutes?", re.I), r"\1 分钟"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?weeks?", re.I), r"\1 周"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?months?", re.I), r"\1 个月"),
    (re.compile(r"(\d+(?:\.\d+)?)\s?years?", re.I), r"\1 年"),
    (re.compile(r"[¥￥]\s?(\d+(?:[.,]\d+)*)"), r"\1 元"),
]


def render_value(value: str, lang: str) -> str:
    """A value in the question's language: "7 天" -> "7 days", "¥150" -> "150 元"."""
    for pattern, repl in _ZH_UNITS if lang == "en" else _EN_UNITS:
        if pattern.search(value):
            out = pattern.sub(repl, value, count=1)
            return re.sub(r"^1 (\w+?)s$", r"1 \1", out) if lang == "en" else out
    return value


def _key_figures(q: Question, quoted: list[str]) -> list[str]:
    """Values of the quoted sentences, rendered in the question's language, when the sentences are in the
    other language (the customer may not read them)."""
    if language(quoted[0]) == q.lang:
        return []
    kinds = [a for a in q.asks if a not in (Ask.HOWTO, Ask.YESNO, Ask.GENERAL)] or [Ask.PRICE, Ask.DURATION]
    out: list[str] = []
    for text in quoted:
        if language(text) == q.lang:
            continue
        for kind in kinds:
            for v in values(text, kind):
                rendered = render_value(v, q.lang)
                if rendered not in out:
                    out.append(rendered)
    return out[:6]


_CLAUSE = re.compile(r"(?<=[，；;])")
# Levels a rule is written per: membership tiers, and large vs small appliances ("大家电 … 5%，小家电 … 10%").
_TIERS = frozenset({"gold_tier", "silver_tier", "large_appliance", "small_appliance"})


def trim_clauses(q: Question, text: str) -> str:
    """The clauses of a sentence that concern what was asked:
    - the tier, size, place or membership level asked about: "13 英寸屏幕更换价格为 4299 元，15 英寸屏幕更换价格为
      4999 元。" for "15 寸换屏" is its second clause;
    - of several clauses that each carry a value of the asked kind, those told apart by what was asked:
      "微信 1 到 2 天到账，信用卡 5 到 10 天到账" for "how long to WeChat?" is its first.
    Clauses that carry neither stay (they carry the shared context)."""
    by_variant = variant_clauses(text, _asked_variants(q))
    if by_variant is not None:
        text = by_variant  # "重量：基础款 2 kg，Pro 3 kg" for the Pro: its clause
    clauses = [c for c in _CLAUSE.split(text) if c.strip()]
    if len(clauses) < 2:
        return text
    wanted = dict(q.attrs)
    if q.ideas & _TIERS:
        wanted["tier"] = set(q.ideas & _TIERS)
    kept: list[str] = []
    for clause in clauses:
        named = attributes(clause)
        tiers = concepts(clause) & _TIERS
        if tiers:
            named["tier"] = set(tiers)
        if any(kind in named and not named[kind] & values_ for kind, values_ in wanted.items()):
            continue  # another tier, size or place than the one asked about
        kept.append(clause)
    if not kept:
        return text
    primary = q.asks[0] if q.asks else Ask.GENERAL
    if primary not in (Ask.GENERAL, Ask.HOWTO, Ask.YESNO):
        # A concept only one value clause names tells the clauses apart ("支付宝" vs "银行卡"): a clause that
        # is told apart by what the question does not ask loses to one told apart by what it asks.
        ideas = {i: concepts(c) - GENERIC for i, c in enumerate(kept) if shows(c, primary)}
        asked = q.ideas - q.added_ideas
        unique = {i: found - set().union(*(o for j, o in ideas.items() if j != i)) for i, found in ideas.items()}
        if any(u & asked for u in unique.values()):
            drop = {i for i, u in unique.items() if u - asked and not u & asked}
            kept = [c for i, c in enumerate(kept) if i not in drop]
    if len(kept) == len(clauses):
        return text
    out = "".join(kept).rstrip("，,；; ")
    return out if re.search(r"[。.!?！？]$", out) else out + ("。" if language(out) == "zh" else ".")


def _asked_variants(q: Question) -> frozenset[str]:
    if q.base_model:
        return frozenset({"base"})
    return frozenset(v for p in q.named for v in p.variants)


def _subject(c: Candidate, text: str) -> str:
    """The heading a quoted sentence needs to say whose fact it is: a store's or a model's heading over
    "营业时间：9:00–20:30" when the sentence names no place nor product of its own ("" when it does, or
    the heading names neither)."""
    section = c.section.strip()
    if c.row is not None or not section or section == c.chunk.title or len(section) > 40:
        return ""
    if places(section):
        return "" if places(text) else section
    # "Acme Pro" names a model by its family and variant word as surely as a parsed product name does.
    variant = any(w.lower() in VARIANT_WORDS and w[0].isupper() for w in _WORD.findall(section))
    if _heading_product(section) or editions(section) or variant or _named_by_heading(section):
        return "" if _line_products(text) or editions(text) or variant_marks(text) - {"base"} else section
    if _DENYING_HEADING.search(section) and not _NEGATION.search(text) and not _QUESTION_LINE.search(section):
        # An item of a list headed by what the shop does not do ("不能无理由退货的商品", "Not covered"): the item
        # ("已经在户外使用过的鞋子") says what, its heading says no.
        return section
    return ""


# A heading that denies what the items below it are ("以下情况不予退换", "不保修的情况", "Items we cannot take back").
# "无理由退货" is a kind of return, not a refusal of one.
_DENYING_HEADING = re.compile(
    r"不(?:能|可|予|支持|提供|接受|适用|退|换|保|包)|除外|\b(?:not|cannot|can't|non-returnable|exclusions?|excluded)\b",
    re.I,
)
# Any negation in the item itself: then it states its own verdict ("拆封后不退").
_NEGATION = re.compile(r"不|没|非|禁|无(?!理由)|\b(?:not|no|never|cannot|without)\b|n't", re.I)


def _heading_product(section: str) -> bool:
    """The heading names a product, not a figure of a value it states ("months 1" read in "3 months 1.9%", a
    table's first row taken for a heading; "Brewer Club Duo - 399 yuan per year" names its plan)."""
    found = products(section)
    if not found:
        return False
    spans = [m.span() for a in _HEADING_VALUES if (p := VALUE_PATTERNS.get(a)) for m in p.finditer(section)]
    for n in found:
        at = section.find(n.text)
        if at < 0 or not any(lo < at + len(n.text) and at < hi for lo, hi in spans):
            return True
    return False


def _named_by_heading(section: str) -> bool:
    """A heading that reads like a model's name ("晶透 1.74 超薄": a figure that is no value), not a topic that
    states a time, a price or a period ("15 天质量问题换货", "下午 13:00–18:00")."""
    return _model_heading(section) and not any(has_value(section, a) for a in _HEADING_VALUES)


_HEADING_VALUES = (Ask.DURATION, Ask.TIME, Ask.DATE, Ask.PRICE, Ask.PERCENT)


def _cite(c: Candidate, lang: str, text: str) -> str:
    subject = _subject(c, text)
    if subject:
        text = f"{subject}：{text}" if language(subject) == "zh" else f"{subject}: {text}"
    title = _page_title(c)
    return f"- {text}（{title}）" if lang == "zh" else f"- {text} ({title})"


class ExtractiveGenerator:
    """Quotes the sentences that answer the question; says it is extractive."""

    mode = "extractive"

    def __init__(self, max_sentences: int = 3) -> None:
        self.max_sentences = max_sentences

    async def complete(self, messages: ChatMessages, turn: GenerationInput) -> str:
        return self.answer(turn)

    async def stream(self, messages: ChatMessages, turn: GenerationInput) -> AsyncIterator[str]:
        for line in self.answer(turn).splitlines(keepends=True):
            yield line

    def answer(self, turn: GenerationInput) -> str:
        lang = language(turn.question)
        intro, empty, figures = _FRAMES[lang]
        if turn.memory is not None:
            recalled = recall_answer(turn.question, turn.memory, lang)
            if recalled is not None:
                return f"{MARKER} {recalled}"
        candidates = sentences_of(turn.chunks)
        if not candidates:
            return f"{MARKER} {empty}"
        rounds = turn.memory.rounds if turn.memory is not None else ()
        q = Question.parse(
            turn.question,
            turn.query,
            [r.user.content for r in rounds[-_CONTEXT_ROUNDS:]],
            rounds[-1].assistant.content if rounds else "",
        )
        q = with_aliases(q, turn.chunks)
        if turn.translated:
            q = dataclasses.replace(q, translated=turn.translated)
        score_candidates(q, candidates)
        ranked = sorted(candidates, key=lambda c: (-c.score, c.rank, c.order))
        picked = _pick(q, ranked, self.max_sentences)
        lines = [f"{MARKER} {intro}"]
        quoted = [(c, c.text if c.row is not None else trim_clauses(q, c.text)) for c in picked]
        # The figures of what is quoted, not of the clauses or rows trimmed away.
        key = _key_figures(q, [text for _, text in quoted])
        if key:
            lines.append(figures + "; ".join(key))
        lines.extend(_cite(c, lang, text) for c, text in quoted)
        return "\n".join(lines)


def with_aliases(q: Question, chunks: Sequence[Chunk]) -> Question:
    """The question's products named as the pages name them: "Linyu 4" is "林语 4" on a page that
    introduces "林语（Linyu）" (`rag_core.text.name_aliases`), so the Chinese page's models can be told apart."""
    if not q.named:
        return q
    aliases = {k.lower(): v for c in chunks for k, v in name_aliases(c.text).items()}
    if not aliases:
        return q
    named: list[Product] = []
    for p in q.named:
        hits = p.tokens & aliases.keys()
        if not hits:
            named.append(p)
            continue
        text = p.text
        for latin in hits:
            text = re.sub(rf"\b{re.escape(latin)}\b", aliases[latin], text, flags=re.I)
        named.append(Product(text, (p.tokens - hits) | {aliases[h] for h in hits}))
    return dataclasses.replace(q, named=tuple(named))


def _sentence_texts(chunks: Sequence[Chunk]) -> tuple[str, ...]:
    # Every turn's receipt reads its sources' sentences, and the same chunks come back turn after turn
    # (with other scores): remembered by what `sentences_of` reads of them.
    return _sentences_read(tuple((c.doc_id, c.title, c.section, c.text) for c in chunks))


@lru_cache(maxsize=1024)
def _sentences_read(chunks: tuple[tuple[str, str, str, str], ...]) -> tuple[str, ...]:
    read = [Chunk("", doc, "", title, text, 0.0, 0, section) for doc, title, section, text in chunks]
    return tuple(x.text for x in sentences_of(read))


def sources_payload(chunks: Sequence[Chunk], answer: str | None = None) -> list[dict[str, Any]]:
    """One `Source` per document, best first: its best score, how many chunks were used, their text, and
    the sentences used — those the answer quotes when it quotes any (the extractive answer does), else
    the chunks' text. The same document six times is noise to a reader."""
    groups: dict[str, list[Chunk]] = {}
    for c in chunks:
        groups.setdefault(c.doc_id, []).append(c)
    out: list[dict[str, Any]] = []
    for doc_chunks in groups.values():
        first = doc_chunks[0]
        quoted = [x for x in _sentence_texts(doc_chunks) if x in answer] if answer else []
        used = quoted or list(dict.fromkeys(c.text for c in doc_chunks))
        out.append(
            {
                "doc_id": first.doc_id,
                "source": first.source,
                "title": first.title,
                "text": "\n".join(dict.fromkeys(c.text for c in doc_chunks)),
                "sentences": used,
                "chunks": len(doc_chunks),
                "score": round(max(c.score for c in doc_chunks), 6),
            }
        )
    return sorted(out, key=lambda e: -float(e["score"]))
