"""Questions about the conversation itself ("我之前报的订单号你还记得吗？", "what did you say the price was?"),
answered from the session's memory: the recent rounds verbatim, then the summary and its pinned facts.

The knowledge base cannot answer them, so the extractive answerer asks here first. Who said it decides
where to look (the customer's messages for "my order number", the assistant's for "you said"), and
"first"/"第一次" picks the earliest mention instead of the latest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_core.lexical import terms
from rag_service.domain import MemoryView
from rag_service.facts import attributes
from rag_service.glossary import concepts

_RECALL_ZH = re.compile(
    r"(?:之前|刚才|刚刚|前面|上面|先前|早先|最开始|一开始|开始时|第一次|头一次|上次|前边|最早|开头)[^，。？?]{0,10}"
    r"(?:说|提|报|讲|问|给|告诉|发|填|留|聊|推荐|算)"
    r"|还记得|记得吗|记不记得|记住了吗|记住没|来着|是多少来着|我(?:报|说|给|留|提供|告诉你)的"
)
_RECALL_EN = re.compile(
    r"\bwhat (?:did|was it) (?:you|i) (?:say|said|tell|told|mention|give|quote|recommend)"
    r"|\byou (?:said|told me|mentioned|quoted|gave me|recommended)\b|\bi (?:told you|mentioned|gave you|said|provided|gave)\b"
    r"|\bremember\b|\b(?:again|earlier|before)\s*\??\s*$|\bat the (?:start|beginning)\b|\b(?:the )?first (?:time|one you)\b",
    re.IGNORECASE,
)
_FIRST = re.compile(r"第一次|头一次|最开始|一开始|最早|开头|\bfirst\b|\bat the (?:start|beginning)\b", re.I)
_ASSISTANT_SIDE = re.compile(
    r"你(?:们)?(?:之前|刚才|刚刚|前面|上面|第一次|最开始|一开始)?(?:说|讲|报|提|告诉|推荐|给)|客服说|\byou (?:said|told|mentioned|quoted|gave|recommended)|\bdid you\b|\bwhat was it you\b",
    re.I,
)
_USER_SIDE = re.compile(
    r"我(?:之前|刚才|刚刚|前面|第一次|最开始|一开始)?(?:说|报|给|留|提|提供|告诉)|\bi (?:said|told|mentioned|gave|provided)|\bdid i\b|\bmy\b",
    re.I,
)

_ORDER = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z0-9-]*\d)[A-Za-z]{0,4}-?\d[\dA-Za-z-]{5,}(?![A-Za-z0-9])")
_PHONE = re.compile(r"(?<!\d)1[3-9]\d{9}(?!\d)|\+?\d{2,4}-\d{3,4}-\d{4}")
_AMOUNT = re.compile(r"[¥￥$]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:元|块|yuan\b|RMB\b)", re.I)
_DATE = re.compile(r"\d{4}[-/年]\d{1,2}[-/月]\d{1,2}日?|\d{1,2}月\d{1,2}[日号]|\b\w+ \d{1,2}, \d{4}\b")

_KINDS: list[tuple[str, re.Pattern[str], re.Pattern[str]]] = [
    ("order", re.compile(r"订单|单号|\border\b|\btracking\b", re.I), _ORDER),
    ("phone", re.compile(r"电话|手机号|号码|联系方式|\bphone\b|\bnumber\b", re.I), _PHONE),
    (
        "amount",
        re.compile(
            r"多少钱|价格|价钱|售价|起售价|报价|金额|预算|费用|运费|门槛|多少|\bprices?\b|\bcosts?\b|\bhow much\b|\bbudget\b"
            r"|\bamount\b|\bfees?\b|\bthreshold\b|\bminimum\b",
            re.I,
        ),
        _AMOUNT,
    ),
    ("date", re.compile(r"日期|哪天|几号|什么时候|\bdate\b|\bwhen\b", re.I), _DATE),
]

_NAMES = {
    "zh": {"order": "订单号", "phone": "电话号码", "amount": "金额", "date": "日期"},
    "en": {"order": "order number", "phone": "phone number", "amount": "amount", "date": "date"},
}


_LOWEST = re.compile(r"起售价|起价|最低|最便宜|\bstart(?:ing|s)?\b|\bcheapest\b|\blowest\b|\bfrom\b", re.I)
_HIGHEST = re.compile(r"最贵|最高|\bmost expensive\b|\bhighest\b|\btop\b", re.I)


def _amount(value: str) -> float:
    digits = re.search(r"\d[\d,]*(?:\.\d+)?", value)
    return float(digits.group().replace(",", "")) if digits else 0.0


def is_recall(question: str) -> bool:
    return bool(_RECALL_ZH.search(question) or _RECALL_EN.search(question))


@dataclass(frozen=True, slots=True)
class _Said:
    text: str
    side: str  # "user" | "assistant" | "summary"
    position: int  # order in the conversation (the summary comes first)


def _lines(memory: MemoryView) -> list[_Said]:
    said: list[_Said] = []
    if memory.summary:
        said.extend(_Said(line, "summary", 0) for line in memory.summary.splitlines() if line.strip())
    for i, r in enumerate(memory.rounds, start=1):
        said.append(_Said(r.user.content, "user", 2 * i))
        for line in r.assistant.content.splitlines():
            if line.strip() and not line.startswith("[extractive answer"):
                said.append(_Said(line.strip(), "assistant", 2 * i + 1))
    return said


_RECALL_WORDS = frozenset(
    [
        "之前",
        "刚才",
        "刚刚",
        "前面",
        "上面",
        "先前",
        "早先",
        "最开始",
        "一开始",
        "第一次",
        "上次",
        "说",
        "说过",
        "提",
        "提到",
        "报",
        "讲",
        "告诉",
        "记得",
        "还记得",
        "来着",
        "多少",
        "是",
        "的",
        "你",
        "我",
        "what",
        "did",
        "you",
        "say",
        "said",
        "tell",
        "told",
        "mention",
        "mentioned",
        "again",
        "earlier",
        "before",
        "remember",
        "going",
        "back",
        "was",
        "were",
        "is",
        "the",
    ]
)


def _content(text: str) -> set[str]:
    """Words, customer-service concepts and named places of a text, so an English line can match a
    Chinese question ("gold" ~ "金卡", "美国" ~ "the United States")."""
    words = {t for t in terms(text) if t not in _RECALL_WORDS}
    ideas = {f"@{c}" for c in concepts(text)}
    places = {f"@place:{p}" for p in attributes(text).get("place", ())}
    return words | ideas | places


def recall_answer(question: str, memory: MemoryView, lang: str) -> str | None:
    """The answer from memory, or None when the question is not about the conversation or memory holds
    nothing that answers it.

    Among what was said (on the side the question points at), the line that shares most with the question
    ("那台三星 1TB" -> the line about the Galaxy's 1TB price) and holds a value of the kind asked for wins;
    ties go to the latest mention, or the earliest for "第一次"/"first"."""
    if not is_recall(question) or not (memory.rounds or memory.summary):
        return None
    kind = next(((name, value) for name, cue, value in _KINDS if cue.search(question)), None)
    side = "assistant" if _ASSISTANT_SIDE.search(question) else "user" if _USER_SIDE.search(question) else ""
    if not side:
        side = "user" if kind is not None and kind[0] in ("order", "phone") else "assistant"
    wanted = _content(question)
    first = _FIRST.search(question) is not None
    best: tuple[tuple[float, int], _Said, list[str]] | None = None
    for said in _lines(memory):
        found = [m.group().strip() for m in kind[1].finditer(said.text)] if kind else []
        if kind and not found:
            continue
        overlap = len(wanted & _content(said.text))
        if not kind and not overlap:
            continue
        # The side asked about first, then what the line shares with the question, then when it was said.
        key = (3.0 * (said.side in (side, "summary")) + overlap, -said.position if first else said.position)
        if best is None or key > best[0]:
            best = (key, said, found)
    if best is None:
        return None
    _, said_line, found = best
    found = list(dict.fromkeys(found))
    extreme = (_LOWEST.search(question) and "min") or (_HIGHEST.search(question) and "max") or ""
    if kind and kind[0] == "amount" and extreme and len(found) > 1:
        found = [(min if extreme == "min" else max)(found, key=_amount)]
    quote = said_line.text if len(said_line.text) <= 160 else said_line.text[:160] + "…"
    if lang == "zh":
        who = "您" if said_line.side == "user" else "我"
        if kind:
            return (
                f"根据我们之前的对话，{who}提到的{_NAMES['zh'][kind[0]]}是 {'、'.join(found[:4])}。（原话：“{quote}”）"
            )
        return f"根据我们之前的对话，{who}说过：“{quote}”"
    who = "you gave" if said_line.side == "user" else "I gave"
    if kind:
        return f'From our conversation: the {_NAMES["en"][kind[0]]} {who} was {", ".join(found[:4])}. (Said earlier: "{quote}")'
    return f'From our conversation, {"you said" if said_line.side == "user" else "I said"}: "{quote}"'
