"""Query rewriting: turn a follow-up into a standalone query for retrieval.

Every turn first goes through the `Gate` (history = the summary and the last `history_rounds` rounds):
- no history                                                    -> "first": unchanged ("skipped");
- a contrast follow-up ("那标准款呢？", "and the 512GB one?", "what about Japan?") -> "dependent";
- a pronoun with its antecedent inside the question ("Is Herpes lethal, how is it spread?"), or an
  ellipsis cue (and …/那…/…呢/else) with a name of its own      -> treated as having no marker;
- a reference marker (它/这个/那…/…呢/it/they/what about/the movement…) -> "dependent";
- a subject of its own (a name, or a noun when the question is similar to nothing recent) that shares
  no word with the conversation: a name the history never mentioned, or low similarity to the recent
  questions                                                     -> "switch": unchanged, `topic_switch=True`;
- a name of its own                                             -> "standalone": unchanged ("skipped");
- at most one noun phrase of its own (ellipsis: "那保修期呢", "population back then") -> "dependent";
- otherwise                                                     -> "standalone".

A switch needs both: no shared word and (with an embedder) low similarity. Similarity alone fires on
every short, differently worded follow-up ("Which one protects more?", "Explain Spark."), and a false
switch both leaves a dependent question unresolved and cuts the session's topic. Even then it is weak
evidence: a switch on similarity (nothing announced, no new name) is searched as asked but its retrieval
still leans on the previous question's pages (`Decision.carries`), which a page fitting its own words
clearly better outweighs.

`RuleRewriter` rewrites dependent questions: a contrast follow-up is read against the previous question
(itself rewritten first, so chains such as "那标准款呢" -> "那 512GB 呢" work); otherwise it adds only
the salient history entity the question lacks (`rewrite_rules`). `LLMRewriter` asks a small model and
checks its reply, falling back to the rules on a timeout, an upstream error or a reply that is empty, too
long or reads like an answer. The user's question is never lost: the query is the question, the
question with an entity, the previous question with the new value, or a checked LLM rewrite.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal, Protocol

import numpy as np

from rag_core.embedding import Embedder, Vector
from rag_core.recent import Recent
from rag_core.settings import LLMEndpoint, RewriteSettings, Settings
from rag_core.text import has_han as is_chinese
from rag_service.domain import MemoryView, RewriteResult, Round
from rag_service.filler import search_text
from rag_service.glossary import concepts, wording
from rag_service.intents.slots import ProductCatalog
from rag_service.intents.switch import _PERSON_WORDS, _ZH_PERSON_WORDS, _announcement, _back, _marker
from rag_service.llm import ChatClient, ChatMessages, UpstreamError
from rag_service.recall import is_recall
from rag_service.rewrite_rules import (
    Contrast,
    Entity,
    HistoryText,
    antecedent_inside,
    asks_about_pair,
    asks_about_product,
    asks_about_shipping,
    asks_of_people,
    asks_of_store,
    asks_shop_amount,
    content_size,
    contrast_followup,
    definite_reference,
    definite_without_name,
    find_marker,
    has_determiner,
    has_slot,
    has_subject,
    history_texts,
    identifies_it,
    is_fragment,
    is_model_token,
    is_noun_slot,
    mentions,
    normalize,
    old_item,
    own_names,
    personal_pronoun,
    place_names,
    plural_antecedent,
    points_back,
    product_names,
    resolve,
    rule_rewrite,
    salient_entities,
    sibling_family,
    store_subject,
    strip_framing,
    substitute,
    text_topic_words,
    variant_only,
    with_family,
    without_preamble,
)

log = logging.getLogger(__name__)


class Rewriter(Protocol):
    async def rewrite(self, question: str, view: MemoryView, tenant: str | None = None) -> RewriteResult: ...


class NoRewriter:
    """Retrieval sees the question as asked."""

    async def rewrite(self, question: str, view: MemoryView, tenant: str | None = None) -> RewriteResult:
        return RewriteResult(question, "none", detail="rewriting is off")


Titles = Callable[[str], Awaitable[Sequence[str]]]


class KnownNames:
    """The products a knowledge base names in its document titles (as `ProductCatalog` reads them): the only
    names an answer may lend a follow-up. An extractive answer quotes sentences from several pages, and the
    codes, zones and figures in them ("Zone 1", "MIL-STD-810H") are no subject of the conversation."""

    def __init__(self, titles: Iterable[str]) -> None:
        titles = list(titles)
        self.keys = frozenset(p.key for p in ProductCatalog(titles).names)
        # The brands the titles spell with their romanisation ("<brand>（<Latin>）…"): a brand jieba reads as a verb or
        # splits is still the brand before a model number in a question.
        self.brands = tuple(dict.fromkeys(m.group(1) for t in titles for m in _SPELLED_BRAND.finditer(t)))

    def __call__(self, text: str) -> bool:
        key = _squash(text)
        return len(key) >= 2 and any(k in key or (len(key) >= 4 and key in k) for k in self.keys)


def _squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).lower().split())


_SPELLED_BRAND = re.compile(r"([\u4e00-\u9fff]{2,4})\s*[（(]\s*[A-Za-z][A-Za-z -]*[)）]")


def with_brand(name: str, texts: Iterable[str], known: KnownNames | None) -> str:
    """A bare model number ("F1") with the knowledge base's brand the customer wrote before it ("喂喂 F1"), when the
    rules' reading of the words did not take the brand as a noun; else the name as it is."""
    if known is None or not known.brands or not is_model_token(name):
        return name
    for text in texts:
        for brand in known.brands:
            if _after_brand(text, brand, name, 0, " ") is not None:
                return f"{brand} {name}"
    return name


def _branded(entity: Entity, said: Sequence[str], known: KnownNames | None) -> Entity:
    """The entity with the knowledge base's brand the customer wrote before it: a model number ("喂喂 F1"), or a
    Chinese noun the brand's line goes by ("<brand>老年犬粮" for "犬粮", the brand read as no noun), then a name."""
    if entity.named:
        return Entity(with_brand(entity.text, said, known), True)
    if known is None or not known.brands or not is_chinese(entity.text):
        return entity
    for text in said:
        for brand in known.brands:
            if (found := _after_brand(text, brand, entity.text, _BRAND_GAP, "")) is not None:
                return Entity(found, True)
    return entity


_BRAND_GAP = 4  # Chinese characters between a brand and the noun its line goes by ("老年" in "<brand>老年犬粮")


def _after_brand(text: str, brand: str, name: str, gap: int, spaces: str) -> str | None:
    """The text from `brand` to `name` when `name` follows the brand with at most `gap` Chinese characters (or only
    `spaces`) between, and ends a word; else None. Plain string search: the pair changes with every entity, and a
    pattern compiled for each pair cost more than the rest of the rewrite."""
    at = text.find(brand)
    while at >= 0:
        start = at + len(brand)
        end = text.find(name, start, start + gap + len(name) + (1 if spaces else 0))
        between = text[start:end] if end >= 0 else ""
        fits = between.strip(spaces) == "" if spaces else all("\u4e00" <= ch <= "\u9fff" for ch in between)
        after = text[end + len(name) : end + len(name) + 1] if end >= 0 else ""
        if end >= 0 and fits and not (after.isascii() and after.isalnum()):
            return text[at : end + len(name)]
        at = text.find(brand, at + 1)
    return None


class History:
    """The conversation as the rules see it (the summary and the recent rounds); entities are extracted
    once, on first use."""

    def __init__(
        self,
        summary: str,
        rounds: Sequence[Round],
        view: MemoryView | None = None,
        known: KnownNames | None = None,
        asked: Sequence[str] | None = None,
    ) -> None:
        self.summary, self.rounds = summary, rounds
        # The rounds' questions as the rewriter made them standalone (None: as asked): a follow-up's subject
        # is the one its predecessors were about, not the aspect the last one asked ("屏幕碎了还收吗").
        self.asked = asked
        # The knowledge base's product names (None: no knowledge base to ask, answers lend short model names).
        self.known = known
        # All the rounds memory holds (the rules look at `rounds`, the latest few; earlier questions are read
        # against all of theirs).
        self.view = view or MemoryView(summary, 0, tuple(rounds))

    @cached_property
    def texts(self) -> list[HistoryText]:
        return history_texts(self.summary, [(r.user.content, r.assistant.content) for r in self.rounds])

    @cached_property
    def candidates(self) -> list[Entity]:
        """Salient entities, most salient first."""
        texts = self.texts
        if self.asked is not None:
            pairs = [(q, r.assistant.content if q else "") for q, r in zip(self.asked, self.rounds, strict=True)]
            texts = history_texts(self.summary, pairs)
        found = salient_entities(texts, limit=5, known=self.known)
        said = [t.text for t in texts if t.source != "assistant"]
        return [_branded(e, said, self.known) for e in found if not _stray_tag(e, said, self.known)]

    @cached_property
    def words(self) -> set[str]:
        """The words the conversation is about: those of the user's questions, the summary and the answers
        (asking about what an answer said is following it up, not changing the topic)."""
        out: set[str] = set()
        for t in self.texts:
            out |= text_topic_words(t.text)
        return out

    def knows(self, entity: Entity) -> bool:
        return any(entity.key in normalize(t.text) or mentions(t.text, entity) for t in self.texts)

    def shares(self, question: str) -> bool:
        """Does the question use a word of the conversation's topic?"""
        return not self.words.isdisjoint(text_topic_words(question))


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Literal["first", "standalone", "switch", "dependent"]
    reason: str
    history: History
    contrast: Contrast | None = None
    product: str | None = None
    pair: tuple[str, str] | None = None
    # The question names another variant than the conversation's product ("How much is the 45L?" after the
    # 28L): like a contrast to another model, it leaves the previous question's pages.
    sibling: bool = False
    # A standalone follow-up that stays in the conversation (no switch, no other service): "Is the evening
    # slot available in <city>?" after a question about delivery slots. Its retrieval leans on the previous
    # question's pages like a dependent one's (its own words still win where they fit another page clearly).
    # So does a switch on similarity alone: unlike every recent question, but nothing announced or newly named.
    carries: bool = False
    # The conversation lends the question only its product (or the place it ships to): the question says the
    # rest in its own words and refers to nothing ("Is a carry case included?"), so the rules' reading
    # (that name put in) is the whole rewrite; a model asked would write the same at the cost of a call, so
    # `LLMRewriter` does not ask.
    lent: bool = False


class Gate:
    """Decides whether a question needs the conversation at all."""

    def __init__(self, settings: RewriteSettings, embedder: Embedder | None = None) -> None:
        self.settings, self.embedder = settings, embedder

    def recent(self, view: MemoryView) -> tuple[Round, ...]:
        n = self.settings.history_rounds
        return view.rounds[-n:] if n > 0 else ()

    def decide(
        self,
        question: str,
        view: MemoryView,
        topic: Topic | None = None,
        known: KnownNames | None = None,
        asked: Sequence[str] | None = None,
    ) -> Decision:
        """`topic`: the product and place the conversation is about (`RuleRewriter.topic_product`); `asked`:
        the recent rounds' questions as rewritten (`History.asked`)."""
        rounds = self.recent(view)
        history = History(view.summary, rounds, view, known, asked)
        if not rounds and not view.summary:
            return Decision("first", "first turn", history)
        if _is_recall(question):
            # "What was my order number again?": answered from the conversation itself; a subject added to it
            # would only pull a page toward a question no page answers.
            return Decision("standalone", "asks about the conversation", history)
        contrast = contrast_followup(question)
        if contrast is not None:
            return Decision("dependent", f"contrast follow-up ({contrast.kind} {contrast.core!r})", history, contrast)
        if topic is not None and topic.pair is not None and asks_about_pair(question):
            return Decision("dependent", f"compares {' and '.join(topic.pair)!r}", history, pair=topic.pair)
        if announces_new_subject(question):
            # "对了，单独验光多少钱", "Unrelated, but how much is the travel kit?": the customer says the subject is a
            # new one, and nothing in the rest refers back; the conversation's product glued on would keep the
            # retrieval on the old page.
            return Decision("switch", "announces a new subject", history)
        if announces_shop_service(question):
            # "By the way: my cart is ¥800, may I split that into 3 payments?": a new subject, a service of
            # the whole shop; "it" is the sum the question names, not the conversation's product.
            return Decision("switch", "announces a shop-wide service", history)
        if announces_want(question):
            # "另外还想给孩子配副眼镜…": besides, the customer wants something else; the conversation's product glued
            # on would keep the search on its page. Read as asked, but no switch: the topic does not restart.
            return Decision("standalone", _ANOTHER_WANT_REASON, history)
        # A word jieba tags as a name that names nothing the shop knows (续保 in a follow-up to a question about a
        # plan) is no new subject: read as a switch, the follow-up lost the plan's page.
        names = own_names(question)
        if names and known is not None:
            said = [r.user.content for r in rounds]
            names = [e for e in names if not _unknown_tag(e, said, known)]
        # A standalone question with a customer-service concept of its own is matched to its page by the
        # reranker's concept bonuses; one with none ("充满电能亮多久") has only the conversation to go on.
        ideas = concepts(question)
        if topic is not None and topic.product is not None and variant_only(names) and not old_item(question):
            # "Which poles does the Pro use?", "How much is the 45L?": a sibling of the conversation's product.
            sibling = sibling_family(topic.product, question) is not None
            return Decision(
                "dependent", f"names a variant of {topic.product!r}", history, product=topic.product, sibling=sibling
            )
        # (A jieba name tag alone is no new subject: 包邮 and 续航 are tagged as names.)
        new_names = [e for e in names if not history.knows(e) and (not is_chinese(e.text) or place_names(e.text))]
        found = find_marker(question)
        if topic is not None and not new_names:
            # "How long is the battery covered?" after a phone's price: its own words are the aspect, the
            # product is the conversation's (unless it names something new: "ship to Singapore, how much?");
            # so is the place of a question about shipping there ("满多少包邮" after "寄到美国运费多少").
            if (
                topic.product is not None
                and asks_about_product(question)
                # Pointing at something ("that fragrance-free one"), the amount is the thing's.
                and not (found is None and asks_shop_amount(question))
                and not old_item(question)
                and not points_back(question, history.candidates, rounds[-1].user.content)
                and plural_antecedent(question, rounds[-1].user.content) is None
            ):
                # Without a reference marker of its own ("it", 这种, "that one") the name is all the question lacks.
                lent = found is None
                return Decision("dependent", f"asks about {topic.product!r}", history, product=topic.product, lent=lent)
            if topic.place is not None and asks_about_shipping(question):
                return Decision(
                    "dependent",
                    f"asks about shipping to {topic.place!r}",
                    history,
                    product=topic.place,
                    lent=found is None,
                )
        marker = found.text if found is not None and not antecedent_inside(question, found, names) else None
        if pointed_service(question, history):
            # "Would you arrange that for my son's bike?" after a question about a service: "that" is the service.
            return Decision("dependent", "that: the previous question's service", history)
        if found is not None and not found.pronoun and old_item(question):
            # "家里还有台旧…能抵多少", "I also have an old …": the cue adds the customer's own old item, which the
            # question is about; the conversation's product glued on would lead to that product's page.
            marker = None
        if trade_in_words(question, history):
            # "I've also got an old battery, what would it fetch?" in a conversation about a trade-in: another
            # old item for the same trade-in.
            return Decision("dependent", "another old item for the trade-in", history)
        if found is None and has_determiner(question):
            definite = definite_reference(question, history.candidates)
            marker = definite[0] if definite else None
        if marker is not None:
            return Decision("dependent", f"reference marker {marker!r}", history)
        shared = history.shares(question)
        if names:
            if not shared and not identifies_it(question):
                new = [e for e in names if not history.knows(e)]
                if len(new) == len(names):
                    return Decision("switch", f"new entity {new[0].text!r}", history)
                sim = self.similarity(question, rounds)
                if sim is not None and sim < self.settings.topic_similarity:
                    return self._unlike(sim, history)
            # A product of its own is another page; a place or another name only qualifies the conversation's.
            moves = any(not history.knows(Entity(p, True)) for p in product_names(question))
            return Decision("standalone", f"names {names[0].text!r}", history, carries=not moves and not ideas)
        # "背长能调吗" after a product's price: a short question about an attribute the glossary does not know
        # asks it of the conversation's product; only similarity would call it a switch, and similarity fires on
        # every short, differently worded follow-up.
        attribute = topic is not None and topic.product is not None and content_size(question) <= 1
        attribute = attribute and not ideas and not is_fragment(question)
        if not shared and has_subject(question) and not definite_without_name(question) and not attribute:
            sim = self.similarity(question, rounds)
            if sim is not None and sim < self.settings.topic_similarity:
                return self._unlike(sim, history)
        if content_size(question) <= 1 and not is_fragment(question):
            service = _services(own_concepts(question))
            # "办了以后能退吗": returning what the customer took out (a plan, a card) is returning the service the
            # conversation is about, which its own page writes the terms of; no other service.
            took_out = service == {"return"} and _TOOK_OUT.search(question) is not None
            if service and not took_out and not any(service & _services(concepts(r.user.content)) for r in rounds):
                # "售后热线周末有人接吗" after questions about an invoice: another of the shop's services, which
                # the previous subject would only pull toward the previous page. A return question still leans on
                # the previous pages: a product's or a service's own page writes its exceptions to the return
                # policy (made to order, opened, hygiene, a plan's cooling-off days), which the policy page lacks.
                returning = service == {"return"}
                return Decision(
                    "standalone", f"asks about another service ({min(service)})", history, carries=returning
                )
            return Decision("dependent", "ellipsis: too little of its own", history)
        return Decision("standalone", "has content of its own", history, carries=not ideas)

    def similarity(self, question: str, rounds: Sequence[Round]) -> float | None:
        """Highest cosine between the question and recent user questions.

        Questions without a marker were embedded as asked (without filler, as retrieval embeds them:
        `search_text`) on their own turn (by this gate or by retrieval), so the embedder's query LRU already
        holds them; questions with one are compared only if none without one is left, so a turn costs at
        most the question's own embedding (which retrieval reuses when the question stays unchanged).
        """
        if self.embedder is None:
            return None
        previous = [r.user.content for r in rounds if r.user.content.strip()]
        plain = [q for q in previous if find_marker(q) is None] or previous[-1:]
        if not plain:
            return None
        q = self.embedder.embed_query(search_text(question))
        return max(_cosine(q, self.embedder.embed_query(search_text(p))) for p in plain)

    def _unlike(self, sim: float, history: History) -> Decision:
        """A switch on similarity alone: unlike every recent question, nothing announced or newly named. Its
        retrieval still leans on the previous question's pages (`carries`)."""
        return Decision("switch", f"similarity {sim:.2f} < {self.settings.topic_similarity:.2f}", history, carries=True)


# The customer's relatives and friends ("my son", "my cousin", "我儿子"): whom a later he/she stands for.
# So are the customer's pets ("my cat", "our old dog", "我家狗"): a pet shop's he/she is most often one of them.
_PETS = r"dogs?|cats?|pupp(?:y|ies)|kittens?|pets?|rabbits?|bunn(?:y|ies)|hamsters?|parrots?|budgies?"
_ZH_PETS = r"狗狗?|猫咪?|小狗|小猫|宠物|兔子|仓鼠|鹦鹉"
_RELATIVE = re.compile(
    rf"\b(?:my|our)\s+(?:[a-z-]+\s+)?(?:{_PERSON_WORDS}|{_PETS})\b"
    rf"|(?:我(?:的|家|有个|有一个|有位)?|家里(?:的)?)[\u4e00-\u9fff]{{0,2}}?(?:{_ZH_PERSON_WORDS}|{_ZH_PETS})",
    re.IGNORECASE,
)


# Remembered (as `_is_recall`): the gate decides about the question again on every turn it is rewritten (by
# the LLM rewriter's gate, and for each later question's topic), and the announcement's patterns are long.
@lru_cache(maxsize=4096)
def announces_new_subject(question: str) -> bool:
    """Does the question open with the words of a new subject ("对了，…", "By the way, …", "Different thing: …")
    and refer back nowhere after them (a pronoun pointing at what the question itself states after the
    announcement does not refer back: "Another thing: I bought a lamp here. Can I return it?")?"""
    announced = _announcement(question)
    if announced is None:
        return False
    rest = question[: announced.start()] + " " * len(announced.group()) + question[announced.end() :]
    return _marker(question, rest, announced) is None and _back(question, announced) is None


_is_recall = lru_cache(maxsize=4096)(is_recall)

# "另外想…", "另外还要…": besides (what was discussed), the customer wants something; "另外想问…" is `_announcement`'s.
_ANOTHER_WANT = re.compile(r"^\W*另外(?:还|再|也)?(?:想|要|打算|准备)(?!问|请教|咨询)")


_ANOTHER_WANT_REASON = "announces another want"
# Taking out a service (办了, 办理完, 开通了): what is had afterwards is a plan, a card or a subscription, no product.
_TOOK_OUT = re.compile(r"(?:办理|办|开通)(?:了|完|好)")


@lru_cache(maxsize=4096)  # as `announces_new_subject`
def announces_want(question: str) -> bool:
    """Does the question open with "besides, I want …" (另外想 + a verb) and refer back nowhere after it? A pronoun
    after 给 is whom the new thing is for (给它买…: the customer's pet), no reference to the conversation's product."""
    want = _ANOTHER_WANT.match(question)
    if want is None:
        return False
    rest = " " * want.end() + question[want.end() :]
    found = find_marker(rest)
    return found is None or (found.pronoun and found.start > 0 and rest[found.start - 1] == "给")


# The shop's services that do not depend on the product bought: how to pay (instalments included), membership,
# the store, invoices. (A return does: a product's own page writes its exceptions.)
_SHOP_WIDE = frozenset(["payment", "member", "store", "invoice"])
# "my cart is ¥800, may I split that": "it"/"that" after a sum of money the question names is that sum.
_SUM_BEFORE_IT = re.compile(
    r"(?:[¥￥$]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:yuan|rmb|cny|usd|dollars?)\b)[^.?!]{0,40}?\b(?:it|that)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=4096)  # as `announces_new_subject`: the gate reads each earlier question again on every turn
def announces_shop_service(question: str) -> bool:
    """Does the question announce a new subject ("Another thing: …", "另外，…") that is a service of the whole shop
    (paying, instalments, membership, invoices), and refer back to nothing but a sum it names itself? The
    conversation's product glued on would lead the search to the product's page."""
    if _announcement(question) is None or not (_services(own_concepts(question)) & _SHOP_WIDE):
        return False
    if own_names(question):
        return False  # "另外，X1 能分期吗": the service for a product it names (read as usual)
    return find_marker(question) is None or _SUM_BEFORE_IT.search(question) is not None


def _cosine(a: Vector, b: Vector) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0


class RuleRewriter:
    """The default without an LLM, and the LLM's fallback."""

    def __init__(
        self, settings: RewriteSettings, embedder: Embedder | None = None, titles: Titles | None = None
    ) -> None:
        self.settings = settings
        self.gate = Gate(settings, embedder)
        # Earlier questions are read again on every turn (a follow-up is read against the previous question
        # as rewritten, which was read against its own): each is rewritten once per session history.
        self._memo: Recent[tuple[str, str, tuple[str, ...], KnownNames | None], RewriteResult] = Recent(_MEMO_SIZE)
        # Each stored question's reading on the turn it was asked, by the message (its text and time): the memo's key
        # holds the rounds before the question, which a compression (a new summary, fewer verbatim rounds) or a
        # sliding window changes, and the rules would then decide every kept question again, each against its own
        # earlier ones. The question keeps the reading it was searched with. The round before it is in the key too:
        # a client's own history (the OpenAI route) stamps all its messages with the request's time, and the same
        # question may come twice in it.
        self._readings: Recent[tuple[str, float, tuple[str, str], KnownNames | None], RewriteResult] = Recent(
            _MEMO_SIZE
        )
        self._titles = titles
        self._known: dict[str, tuple[float, KnownNames]] = {}

    async def rewrite(self, question: str, view: MemoryView, tenant: str | None = None) -> RewriteResult:
        # Run on the event loop, like retrieval: see the note on `ChatPipeline._prepare`.
        return self.rewrite_now(question, view, await self.known(tenant))

    async def known(self, tenant: str | None) -> KnownNames | None:
        """The tenant's product names (its documents' titles, re-read every `_TITLES_TTL_S`); None without a
        knowledge base to ask."""
        if self._titles is None:
            return None
        key, now = tenant or "", time.monotonic()
        cached = self._known.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            titles = await self._titles(key)
        except Exception as exc:  # the index being down must not fail the turn: answers lend no names then
            log.warning("product names unavailable for rewriting: %s", exc)
            titles = []
        known = KnownNames(titles)
        self._known[key] = (now + _TITLES_TTL_S, known)
        return known

    def rewrite_now(self, question: str, view: MemoryView, known: KnownNames | None = None) -> RewriteResult:
        key = (question, view.summary, _round_texts(view.rounds), known)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        d = self.gate.decide(question, view, self.topic_product(view, known), known, self.asked(view, known))
        if d.kind == "dependent" or (d.kind == "standalone" and not self.settings.skip_standalone):
            result = self.resolve(question, d, "rule")
            if d.kind == "dependent":
                result = dataclasses.replace(result, continues=self.continuity(view, d))
        elif d.kind == "standalone" and (service := carried_service(question, d.history)):
            # "Where do I post it to?" after "Who pays the postage of a return?": asked in words of its own, it
            # still asks how the previous question's service goes, whose page the question's words alone miss.
            query = f"{service} {without_preamble(question)}"
            result = RewriteResult(query, "rule", False, f"{d.reason}; carried {service!r}")
            result = dataclasses.replace(result, continues=self.continuity(view, d))
        else:
            result = RewriteResult(without_preamble(question), "skipped", d.kind == "switch", d.reason)
            if d.carries:
                result = dataclasses.replace(result, continues=self.continuity(view, d))
        self._memo.put(key, result)
        return result

    def resolve(self, question: str, decision: Decision, action: str, why: str = "") -> RewriteResult:
        query, detail = "", ""
        if decision.contrast is not None:
            previous = self.previous_query(decision.history, decision.contrast)
            read = substitute(previous, decision.contrast, question) if previous else None
            if read is not None:
                query, detail = read
        if not query and decision.pair is not None:
            joined = " 和 ".join(decision.pair) if is_chinese(question) else " and ".join(decision.pair)
            query, detail = f"{joined}: {question.strip()}", f"added {joined!r}"
        if not query and decision.product is not None:
            # "2L 保修多长时间" after "Acme 3L Pro": the family of the sibling it names, not the old model glued on.
            family = sibling_family(decision.product, question)
            completed = with_family(question, decision.product) if variant_only(own_names(question)) else None
            if completed is not None:
                query, detail = completed, f"completed the variant with {decision.product!r}"
            elif family is None:
                query, detail = resolve(question, Entity(decision.product, True)), f"added {decision.product!r}"
            elif family and not mentions(question, Entity(family, True)):
                query, detail = resolve(question, Entity(family, True)), f"added family {family!r}"
            else:
                query, detail = question, f"names a sibling of {decision.product!r}"
        if not query and (service := pointed_service(question, decision.history)):
            query, detail = f"{service} {question.strip()}", f"that: {service!r}"
        personal = personal_pronoun(question)
        if not query and personal and any(_RELATIVE.search(r.user.content) for r in decision.history.view.rounds):
            # "How long will his eyes stay blurry?" after "… for my son": he is the customer's relative, whom no
            # page is about; a place or a product of the conversation put in his stead would mislead retrieval.
            query, detail = question, "he/she is the customer's relative"
        if not query and (service := trade_in_words(question, decision.history)):
            query, detail = f"{service} {question.strip()}", f"carried {service!r} for the customer's old item"
        if not query and decision.kind == "dependent" and (service := traded_in(question, decision.history)):
            query, detail = f"{service} {question.strip()}", f"carried {service!r}, not the customer's old item"
        rounds = decision.history.rounds
        if not query and rounds and (plural := plural_antecedent(question, rounds[-1].user.content)) is not None:
            query, detail = resolve(question, plural), f"they: {plural.text!r}"
        if not query and rounds and asks_of_people(question, rounds[-1].user.content):
            named = own_names(rounds[-1].user.content)
            query = resolve(question, named[0]) if named else question
            detail = f"they: the people asked for{f' ({named[0].text!r})' if named else ''}"
        if not query:
            lendable = self.lendable(decision.history)
            if asks_of_store(question):
                # "星期天几点关门", "What's the address?": asked of a store, whose place or name is all the conversation
                # may lend; a product, a payment card or the customer's pet put in front would pull the search off
                # the store's page.
                said = [t.text for t in decision.history.texts if t.source != "assistant"]
                said += [q for q in decision.history.asked or () if q]  # a store an answer named, put in before
                lendable = answered_store(rounds) or [e for e in lendable if store_subject(e, said)]
            query, detail = rule_rewrite(question, lendable, personal)
        if decision.kind == "dependent" and (query != question or brings(question)) and decision.contrast is None:
            service = carried_service(question, decision.history)
            if service and service not in query:  # not twice: the entity put in may be the service's word
                query, detail = f"{service} {query}", f"{detail}; carried {service!r}"
        if len(query) > self.settings.max_query_chars:
            query, detail = question, "rewrite would exceed max_query_chars"
        return RewriteResult(query, action, False, f"{why or decision.reason}; {detail}")

    def lendable(self, history: History) -> list[Entity]:
        """The history's entities a follow-up may take as its subject. When the previous question was asked as it
        stood and moved on (a switch, or a question continuing nothing), a noun phrase of an older question that it
        does not mention is no subject any more: the customer moved on ("Where is your nearest branch?" after a
        question about a trip), and the old phrase put in for "it" or an ellipsis would pull the search back to that
        question's page. Names (products, models, brands, order numbers) stay: a question on a policy in between
        does not end the conversation's product."""
        candidates = latest_place_first(history.candidates, history.rounds[-1].user.content if history.rounds else "")
        rounds = history.view.rounds
        if len(history.rounds) < 2 or not candidates:
            return candidates
        previous = self.previous_at(history.view, len(rounds) - 1, history.known)
        last = rounds[-1].user.content
        moved_on = previous is not None and (previous.topic_switch or not previous.continues)
        if previous is None or previous.action != "skipped" or not moved_on or _is_recall(last):
            return candidates
        return [e for e in candidates if e.named or mentions(last, e)]

    def continuity(self, view: MemoryView, decision: Decision) -> tuple[str, ...]:
        """The earlier questions (as rewritten) a dependent follow-up continues: the previous one, and the
        ones it continued in turn, back to the question that set the topic (at most `_CONTEXT_DEPTH`).
        Nothing when the follow-up moves to another product or name ("What about the Pro?", "悲惨世界呢"):
        it leaves the previous question's pages."""
        if decision.sibling or (decision.contrast is not None and decision.contrast.kind in _SUBJECT_CHANGES):
            return ()
        for i in range(len(view.rounds) - 1, -1, -1):
            previous = self.previous_at(view, i, decision.history.known)
            if previous is not None:
                return (previous.query, *previous.continues)[:_CONTEXT_DEPTH]
        return ()

    def previous_query(self, history: History, contrast: Contrast | None = None) -> str:
        """The previous question as this rewriter made it standalone (its own previous question read the
        same way), so a chain of contrast follow-ups keeps every value the user chose. A place, category or
        term is read against the latest of the last `history_rounds` questions that named one of its kind
        ("那寄到香港呢" after "寄美国运费多少" and a question in between)."""
        rounds = history.view.rounds
        slot = contrast is not None and is_noun_slot(contrast.kind)
        back = max(len(history.rounds), _SLOT_ROUNDS) if slot else len(history.rounds)
        latest = ""
        for i in range(len(rounds) - 1, max(-1, len(rounds) - 1 - back), -1):
            result = self.previous_at(history.view, i, history.known)
            if result is None:
                continue
            if not slot:
                return result.query
            assert contrast is not None
            # The value the customer typed (or chose by an earlier contrast), not one the rules added.
            typed = has_slot(rounds[i].user.content, contrast.kind) or result.detail.startswith("contrast")
            if typed and has_slot(result.query, contrast.kind):
                return result.query
            latest = latest or result.query
        return latest

    def asked(self, view: MemoryView, known: KnownNames | None) -> list[str]:
        """The recent rounds' questions as rewritten (each against the rounds before it)."""
        first = len(view.rounds) - len(self.gate.recent(view))
        out: list[str] = []
        for i in range(first, len(view.rounds)):
            result = self.previous_at(view, i, known)
            if result is not None and (hard_switch(result) or wants_another(result)):
                # What came before a change of topic lends nothing; nor does what came before "besides, I want
                # …": the later follow-ups are about the thing wanted, not the product asked about before it.
                out = [""] * len(out)
            # A question left as it was counts as asked (its search query may have lost an opening identifier).
            said = view.rounds[i].user.content
            if result is not None and wants_another(result):
                said = wanted(said)  # "另外打算买<X>，哪种…": the thing wanted, not the aspect then asked
            out.append(said if result is None or result.action == "skipped" else result.query)
        return out

    def previous_at(self, view: MemoryView, i: int, known: KnownNames | None = None) -> RewriteResult | None:
        """Round `i`'s question as rewritten against the rounds before it (when first read: `_readings`)."""
        message = view.rounds[i].user
        if not message.content.strip():
            return None
        key = (message.content, message.created_at, _last_round(view.rounds[:i]), known)
        reading = self._readings.get(key)
        if reading is None:
            reading = self.rewrite_now(message.content, MemoryView(view.summary, 0, view.rounds[:i]), known)
            self._readings.put(key, reading)
        return reading

    def topic_product(self, view: MemoryView, known: KnownNames | None = None) -> Topic:
        """What the conversation is about: the product and the place of the latest questions (as rewritten)
        that name one, back to the latest topic switch or `_SLOT_ROUNDS` rounds."""
        rounds = view.rounds
        named: list[str] = []  # the products, latest first
        place = None
        # As far back as a contrast looks for its slot: a product stays the topic over a few questions that do
        # not name it ("Will you take my old one away?", "How many days for a refund?") until another or a switch.
        back = max(self.settings.history_rounds, _SLOT_ROUNDS)
        for i in range(len(rounds) - 1, max(-1, len(rounds) - 1 - back), -1):
            result = self.previous_at(view, i, known)
            if result is None:
                continue
            said = (result.query, rounds[i].user.content)
            named.extend(q for p in product_names(result.query) if (q := with_brand(p, said, known)) not in named)
            place = place or next(iter(place_names(result.query)), None)
            if (len(named) >= 2 and place) or result.topic_switch or wants_another(result):
                break
        pair = (named[1], named[0]) if len(named) >= 2 else None
        return Topic(named[0] if named else None, place, pair)


def latest_place_first(candidates: list[Entity], last: str) -> list[Entity]:
    """The candidates with the place the latest question named before the other places: "明天营业吗" after a
    question about the store in one city goes on about that city, though an earlier city the customer lives in
    was said (and put in) more often."""
    if not last or not place_names(last):
        return candidates
    places = [i for i, e in enumerate(candidates) if place_names(e.text)]
    latest = [i for i in places if mentions(last, candidates[i])]
    if not latest or not places or latest[0] == places[0]:
        return candidates
    out = list(candidates)
    out.insert(places[0], out.pop(latest[0]))
    return out


def wants_another(result: RewriteResult) -> bool:
    """Was the question read as "besides, I want …" (`announces_want`)? No switch (the retrieval topic goes on), but
    the product asked about before it is no subject of the follow-ups after it: "防水吗" after "另外打算给孩子买块手表" asks
    about the watch wanted, not the shoes priced before."""
    return result.action == "skipped" and result.detail == _ANOTHER_WANT_REASON


# "Which of your stores …?", "哪家店…": the customer asked the shop to name a store.
_WHICH_STORE = re.compile(r"\bwhich\b[^?]{0,40}?\b(?:stores?|branch(?:es)?|shops?)\b|哪(?:家|个|些)(?:门)?店", re.I)
# The store an answer names: "the Chunxi Road store", "成都春熙路店".
_NAMED_STORE = re.compile(r"\b(?:The )?((?:[A-Z][a-z]+ ){1,3})(store|branch|shop)\b|([\u4e00-\u9fff]{2,6}店)")


def answered_store(rounds: Sequence[Round]) -> list[Entity]:
    """The store the latest answer named when the question before it asked which store (has English-speaking
    staff, does repairs …): "What's the address?" asks about that store, which no question of the customer named."""
    if not rounds or _WHICH_STORE.search(rounds[-1].user.content) is None:
        return []
    found = _NAMED_STORE.search(rounds[-1].assistant.content)
    if found is None:
        return []
    return [Entity(found.group(3) or f"{found.group(1)}{found.group(2)}", True)]


def _stray_tag(entity: Entity, said: Sequence[str], known: KnownNames | None) -> bool:
    """A word jieba tags a person's or a place's name that names nothing the shop knows: no title spells it, it is
    no place, no branch (written before 店), no word the glossary reads (延保, 金卡 are the shop's own services). A
    breed (柯基) or 续保 so tagged is no subject a later question is about."""
    return _unknown_tag(entity, said, known) and not concepts(entity.text)


def _unknown_tag(entity: Entity, said: Sequence[str], known: KnownNames | None) -> bool:
    """A Chinese word jieba tags as a name that is no title's product, no place and no branch: a breed, or a word of
    the shop's services (续保). As a question's own name it is no new subject to switch to."""
    text = entity.text
    if known is None or not entity.named or not is_chinese(text) or " " in text or any(c.isdigit() for c in text):
        return False
    return not (place_names(text) or known(text) or store_subject(entity, said))


def wanted(question: str) -> str:
    """The clause of a "besides, I want …" question that says what is wanted (up to the first clause break)."""
    want = _ANOTHER_WANT.match(question)
    if want is None:
        return question
    cut = _CLAUSE_BREAK.search(question, want.end())
    return question[: cut.start()] if cut is not None else question


_CLAUSE_BREAK = re.compile(r"[，,。；;？?！!]")


def hard_switch(result: RewriteResult) -> bool:
    """A topic switch that ends the subjects earlier questions lend: announced, or a new name. A switch on
    similarity alone (it still continues the previous question's pages) does not: a differently worded question
    about use ("游泳时能戴吗" after a product's price) would otherwise leave a later "那款几种颜色" only the words of the
    questions after it to take a subject from, often an attribute. It still ends the topic's product
    (`topic_product`): a question without a marker is not glued to the product of before such a switch ("How
    many wipes are in a pack?" moved on to a thing an answer offered)."""
    return result.topic_switch and not result.continues


def _round_texts(rounds: Sequence[Round]) -> tuple[str, ...]:
    return tuple(t for r in rounds for t in (r.user.content, r.assistant.content))


def _asked_key(tenant: str | None, question: str, before: Sequence[Round]) -> tuple[str, str, tuple[str, str]]:
    return (tenant or "", question, _last_round(before))


def _last_round(rounds: Sequence[Round]) -> tuple[str, str]:
    return (rounds[-1].user.content, rounds[-1].assistant.content) if rounds else ("", "")


@dataclass(frozen=True, slots=True)
class Topic:
    product: str | None = None
    place: str | None = None
    # The two latest products, the earlier first ("Which of the two …?" compares them).
    pair: tuple[str, str] | None = None


_MEMO_SIZE = 512
# The shop's services a question can ask about with no product in mind (glossary concepts), by family: a
# store's hours follow a question about the store, a refund one about a return.
SHOP_SERVICES = {
    "contact": "store",
    "opening_hours": "store",
    "store": "store",
    "address": "store",
    "payment": "payment",
    "e_wallet": "payment",
    "bank_card": "payment",
    "installment": "payment",
    "invoice": "invoice",
    "member": "member",
    "points": "member",
    "return": "return",
    "refund": "return",
    "tax_refund": "tax_refund",
}
# The order total that ships free is the shop's, whatever the conversation's product; a fee alone may be the
# product's (a bulky item's delivery), and "free" alone anything's (parking).
_FREE_SHIPPING = frozenset(["cost_free", "shipping"])


# After-sales services a question asks of a product: a follow-up that asks nothing of its own ("Which papers
# should I bring along?", "要多久") goes on asking about the service, not about the product.
CARRIED_SERVICES = (
    "warranty",
    "out_of_warranty",
    "extended_warranty",
    "repair",
    "return",
    "exchange",
    "refund",
    "trade_in",
    "installment",
    "rental",
    "install",
)


def carried_service(question: str, history: History) -> str:
    """The words by which the previous question asked for an after-sales service, when the follow-up asks
    only how the service goes (what to bring, where, how long): "Which papers should I bring along?" after "Does the
    warranty cover the brake?" is about the warranty; the product alone would lead to the product's page. A
    follow-up with a concept of its own ("多少钱" after "能分期吗" may ask the product's price) or one asking
    something else of the product ("可以机洗吗" after its warranty) is left as the rules read it."""
    if not history.rounds or _PROCEDURE.search(question) is None:
        return ""
    # The latest question that asked for something: one in between with no concept of its own ("Would you pay
    # for the cream as well?") went on with the same service and does not end it.
    previous, ideas = history.rounds[-1].user.content, frozenset[str]()
    for r in reversed(history.rounds):
        previous, ideas = r.user.content, concepts(r.user.content)
        if ideas:
            break
    # A concept the previous question had too is no subject of the follow-up's own: "多久能寄回来" after "保修寄修
    # 运费谁出" still asks how the warranty goes (the sending is part of it).
    if own_concepts(question) - _PROCEDURE_CONCEPTS - ideas:
        return ""
    return _asked_services(previous, ideas, CARRIED_SERVICES)


def _asked_services(previous: str, ideas: frozenset[str], among: Sequence[str]) -> str:
    """The words by which `previous` (whose concepts are `ideas`) asked for the services of `among`, in order."""
    words = [w for c in among if c in ideas and (w := wording(previous, c))]
    return " ".join(dict.fromkeys(words))


# A bare "that"/"this" as a verb's object ("Would you arrange that for …?", "Could you do this as well?"): no noun
# of its own after it, so it stands for what the previous question asked.
_THAT_OBJECT = re.compile(
    r"\b(?:get|do|handle|arrange|book|have|add|order|want|need|use)\s+(?:that|this)"
    r"(?=\s*(?:[?.!,]|$)|\s+(?:for|too|as well|on|with|at|in|here|there)\b)",
    re.IGNORECASE,
)
# "that service", "this offer", "这个活动", "这项服务": a demonstrative before a word for a service names none of its own.
_SERVICE_POINTER = re.compile(
    r"\b(?:that|this)\s+(?:service|offer|deal|promotion|scheme)\b|[这那](?:个|项)?(?:活动|服务|业务)", re.IGNORECASE
)
# The services a bare "that" can stand for: what the shop does for the customer, not a product's aspect.
_POINTABLE = (
    *CARRIED_SERVICES,
    *("rush", "registration", "maintenance", "cleaning", "pickup", "customized", "same_day"),
)


def pointed_service(question: str, history: History) -> str:
    """The words by which the previous question (as rewritten) asked for a service, when the question takes a
    bare "that" as its object: "Would you arrange that for my son's bike?" after "What does the express repair
    add to the bill?". "Is that service free?", "这项服务要预约吗": the latest recent question that asked for one."""
    if not history.rounds:
        return ""
    said = history.asked or [""] * len(history.rounds)
    asked = [a or r.user.content for a, r in zip(said, history.rounds, strict=True)]
    if _THAT_OBJECT.search(question) is not None:
        return _asked_services(asked[-1], concepts(asked[-1]), _POINTABLE)
    if _SERVICE_POINTER.search(question) is None:
        return ""
    for previous in reversed(asked):
        if words := _asked_services(previous, concepts(previous), _POINTABLE):
            return words
    return ""


def traded_in(question: str, history: History) -> str:
    """The words by which the previous question asked for a trade-in, when it was about the customer's old item
    and the follow-up names nothing and points at nothing ("上限是多少" after "旧电视参加以旧换新折多少"): the
    follow-up goes on about the trade-in, and the old item is no product of the shop's to put in front of it."""
    if not history.rounds or own_names(question) or find_marker(question) is not None:
        return ""
    # As rewritten: a trade-in follow-up that carried the service is followed up in turn.
    previous = history.asked[-1] if history.asked and history.asked[-1] else history.rounds[-1].user.content
    if not old_item(previous):
        return ""
    return wording(previous, "trade_in") or ""


def trade_in_words(question: str, history: History) -> str:
    """The words by which an earlier question of the conversation asked for a trade-in, when the question names
    an old item of the customer's (`old_item`), points at nothing and asks for no service itself. Any question
    memory holds: the questions in between may have named the new product the trade-in is for (a new subject to
    the rules)."""
    marker = find_marker(question)
    if not old_item(question) or (marker is not None and marker.pronoun):
        return ""  # "我的旧空调能换这个吗": this is the product
    ideas = concepts(question)
    if ideas & set(CARRIED_SERVICES) or _services(ideas):
        return ""
    for r in reversed(history.view.rounds):
        if words := wording(r.user.content, "trade_in"):
            return words
    return ""


_TIME_CONCEPTS = frozenset(["time_limit", "business_days"])
# What a question about a service's course asks by its own words (how long, where to): no subject of its own.
_PROCEDURE_CONCEPTS = _TIME_CONCEPTS | {"address"}
# What a customer shows at a service counter: in "Should I take my receipt along?" the receipt is no invoice
# question but part of the service the conversation is about.
_BROUGHT = frozenset(["invoice", "proof", "order", "packaging", "in_box", "account"])


def brings(question: str) -> bool:
    return "bring" in concepts(question)


def own_concepts(question: str) -> frozenset[str]:
    """The question's concepts, without its asking what to bring along and what it brings (`_BROUGHT`): the
    procedure of the service the conversation is about."""
    ideas = concepts(question)
    return ideas - _BROUGHT - {"bring"} if "bring" in ideas else ideas


# What a question about the course of a service asks: what to bring, where to go, how long it takes.
_PROCEDURE = re.compile(
    r"\b(?:bring|where|how long|how many days|what documents|what papers|procedure|process)\b"
    r"|带什么|带上|要带|哪里|哪儿|在哪|去哪|多久|几天|流程|手续(?!费)|怎么办理",
    re.IGNORECASE,
)


def _services(ideas: frozenset[str]) -> frozenset[str]:
    found = frozenset(SHOP_SERVICES[c] for c in ideas if c in SHOP_SERVICES)
    return found | {"shipping"} if ideas >= _FREE_SHIPPING else found


_TITLES_TTL_S = 60.0
# Contrast kinds that name another subject: the follow-up is read against the previous question, but its
# answer is on another page.
_SUBJECT_CHANGES = frozenset({"variant", "standard", "named"})
# How many earlier questions a follow-up's retrieval leans on (the previous one, and what it continued).
_CONTEXT_DEPTH = 2
# How far back a place, category or term contrast looks for the question whose value it replaces.
_SLOT_ROUNDS = 6


class LLMRewriter:
    def __init__(self, client: ChatClient, settings: RewriteSettings, rules: RuleRewriter) -> None:
        self.client, self.settings, self.rules = client, settings, rules
        self.timeout_s = client.endpoint.timeout_s
        self.max_tokens = min(client.endpoint.max_tokens, max(64, settings.max_query_chars))
        # What this rewriter made of each recent question: a follow-up continues the queries retrieval
        # actually searched for the turns before it (the retriever remembers their candidates), not the
        # rules' reading of those questions (another search, of another text, maybe finding another page).
        self._asked: Recent[tuple[str, str, tuple[str, str]], RewriteResult] = Recent(_MEMO_SIZE)

    async def rewrite(self, question: str, view: MemoryView, tenant: str | None = None) -> RewriteResult:
        result = await self._rewrite(question, view, tenant)
        self._asked.put(_asked_key(tenant, question, view.rounds), result)
        return result

    async def _rewrite(self, question: str, view: MemoryView, tenant: str | None) -> RewriteResult:
        known = await self.rules.known(tenant)
        topic, asked = self.rules.topic_product(view, known), self.rules.asked(view, known)
        d = self.rules.gate.decide(question, view, topic, known, asked)
        continues = self.continuity(view, d, tenant) if d.kind == "dependent" or d.carries else ()
        if d.kind in ("first", "switch") or (d.kind == "standalone" and self.settings.skip_standalone):
            return RewriteResult(without_preamble(question), "skipped", d.kind == "switch", d.reason, continues)
        if d.lent:
            return dataclasses.replace(self.rules.resolve(question, d, "rule"), continues=continues)
        messages = rewrite_messages(self.settings.prompt, question, view.summary, self.rules.gate.recent(view))
        try:
            reply = await asyncio.wait_for(
                self.client.complete(messages, max_tokens=self.max_tokens, timeout_s=self.timeout_s), self.timeout_s
            )
        except TimeoutError:
            problem = f"timed out after {self.timeout_s:g}s"
        except UpstreamError as exc:
            problem = str(exc)
        else:
            query, problem_or_none = check_output(reply, question, self.settings.max_query_chars)
            if problem_or_none is None:
                return RewriteResult(query, "called", False, d.reason, continues)
            problem = problem_or_none
        return dataclasses.replace(self.rules.resolve(question, d, "fallback", f"llm {problem}"), continues=continues)

    def continuity(self, view: MemoryView, decision: Decision, tenant: str | None) -> tuple[str, ...]:
        """`RuleRewriter.continuity`, with the earlier questions as this rewriter rewrote them when it
        remembers them (the rules' reading where it does not: after a restart, or once a compression
        changed the history they were rewritten against)."""
        rules = self.rules.continuity(view, decision)
        for i in range(len(view.rounds) - 1, -1, -1):
            asked = view.rounds[i].user.content
            if not asked.strip():
                continue
            # The round before it names the turn (a compression moves the start of the rounds memory holds,
            # so the whole history would not); without one the rounds it followed are folded in the summary.
            mine = self._asked.get(_asked_key(tenant, asked, view.rounds[:i])) if i or not view.summary else None
            return rules if mine is None or not rules else (mine.query, *mine.continues)[:_CONTEXT_DEPTH]
        return rules


_PROMPT_ANSWER_CHARS = 400  # of each answer, shown to the rewriting model


def rewrite_messages(prompt: str, question: str, summary: str, rounds: Sequence[Round]) -> ChatMessages:
    parts: list[str] = []
    if summary:
        parts.append(f"Conversation summary:\n{summary}")
    if rounds:
        lines = []
        for r in rounds:
            lines.append(f"User: {r.user.content}")
            if r.assistant.content:
                # The model sees what the answer said, not the service's framing around it.
                lines.append(f"Assistant: {_clip(strip_framing(r.assistant.content), _PROMPT_ANSWER_CHARS)}")
        parts.append("Conversation:\n" + "\n".join(lines))
    parts.append(f"Last question: {question}")
    return [{"role": "system", "content": prompt}, {"role": "user", "content": "\n\n".join(parts)}]


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


_PREFIX = re.compile(
    r"^(?:(?:standalone|rewritten|search|final)\s+)*(?:query|question|rewrite)\s*[:：]\s*"
    r"|^(?:改写后?的?(?:问题|查询)?|查询|问题|检索词)\s*[:：]\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'`“”‘’「」『』«»"
_ANSWER_START = re.compile(
    r"^(?:yes\b|no\b|sure\b|sorry\b|certainly\b|of course\b|i\b|i'm\b|i am\b|as an ai\b|the answer\b|according to\b"
    r"|here is\b|here's\b|based on\b|是的|不是|好的|抱歉|对不起|您好|你好|根据|当然|答案)",
    re.IGNORECASE,
)


def check_output(reply: str, question: str, max_chars: int) -> tuple[str, str | None]:
    """(query, problem): the reply cleaned of prefixes and quotes, and why it is unusable (None if usable)."""
    lines = [_PREFIX.sub("", line.strip()).strip().strip(_QUOTES).strip() for line in reply.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return question, "returned an empty reply"
    if len(lines) > 1:
        return question, "returned several lines"
    text = lines[0]
    if len(text) > max_chars:
        return question, f"reply longer than max_query_chars ({len(text)} > {max_chars})"
    if len(text) > 2 * len(question) + 60:
        return question, f"reply too long for the question ({len(text)} chars)"
    if _ANSWER_START.match(text) and not _ANSWER_START.match(question.strip()):
        return question, "reply reads like an answer"
    return text, None


_REWRITE_DEFAULTS = {"temperature": 0.0, "timeout_s": 5.0, "max_tokens": 128}


def rewrite_endpoint(settings: Settings) -> LLMEndpoint:
    """`Settings.rewrite_endpoint()`, with a rewriter's own defaults (temperature 0, 5 s timeout, 128 tokens)
    for whatever `rewrite.llm` does not set itself, instead of the answer generator's values."""
    endpoint = settings.rewrite_endpoint()
    explicit = settings.rewrite.llm.model_fields_set if settings.rewrite.llm else set()
    return endpoint.model_copy(update={k: v for k, v in _REWRITE_DEFAULTS.items() if k not in explicit})
