"""Questions about the conversation itself ("我之前报的订单号你还记得吗？", "what did you say the price was?"),
answered from the session's memory: the recent rounds verbatim, then the summary and its pinned facts.

The knowledge base cannot answer them, so the extractive answerer asks here first. Who said it decides
where to look (the customer's messages for "my order number", the assistant's for "you said"), and
"first"/"第一次" picks the earliest mention instead of the latest.

A line often holds several values ("1 年 299 元，2 年 499 元", "完好 1900 元，轻微划痕 1650 元"): each is read
with the few words around it (its label), and the values whose label matches what the question names
("一年", "完好", a threshold) are the answer. "Which one did you recommend" wants the product named in
the answer, not the sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_core.lexical import terms
from rag_service.domain import MemoryView
from rag_service.facts import BASE_WORDS, VALUE_PATTERNS, VARIANT_WORDS, Ask, Product, attributes, product_fit, products
from rag_service.glossary import ASPECTS, concepts

# When it was said: the words that make a question ask back ("刚才说的", "起初报的"), on either side.
_ZH_WHEN = (
    "之前|刚才|刚刚|前面|上面|先前|早先|最开始|一开始|刚开始|开始时|起初|最初|当初|第一次|头一次|上次|上回|方才|前头"
    "|早些时候|前边|最早|开头|上一条|上条|上一轮"
)
_RECALL_ZH = re.compile(
    rf"(?:{_ZH_WHEN})"
    r"[^，。？?]{0,10}"
    r"(?:说|提|报|讲|问|给|告诉|发|填|留|聊|推荐|算)"
    r"|刚(?:说|提|报|讲|问|推荐|给)|还记得|记得吗|记不记得|记住了吗|记住没|来着|是多少来着|我(?:报|说|给|留|提供|告诉你)的|再说一遍|再说一次|重复一下"
    # "我跟你说过…", "你报给我的…": who said it to whom is enough, with no time word.
    r"|[我你](?:之前|刚才|也)?(?:跟你|和你|对你|跟我|和我|给我|对我)?(?:说|提|讲|报|告诉)过|你(?:报|说|发|给)给我的"
    # "刚才我那个单号": a time word and something of mine.
    r"|(?:之前|刚才|刚刚|前面|一开始|最开始|开头)[^，。？?]{0,4}我(?:的|那个|那张|那笔|那单)"
)
_RECALL_EN = re.compile(
    r"\bwhat (?:did|was it) (?:you|i) (?:say|said|tell|told|mention|give|quote|recommend|suggest)"
    r"|\bdid you (?:say|mention|tell|quote|give|recommend|suggest|promise|offer)\b|\bdid i (?:say|mention|tell|give|ask|want|request|choose|pick|book)\b"
    r"|\bwhat was my\b|\brepeat (?:the|that|what)\b|\bremind me\b"
    r"|\bwhich (?:one|model|product)? ?did you (?:recommend|suggest)"
    r"|\byou (?:said|told me|mentioned|quoted|gave me|recommended|suggested)\b|\bi (?:told you|mentioned|gave you|said|provided|gave)\b"
    r"|\bremember\b|\b(?:again|earlier|before)\s*\??\s*$|\bat the (?:start|beginning)\b|\b(?:the )?first (?:time|one you)\b"
    r"|\b(?:i|we) (?:first )?(?:asked|enquired|inquired) (?:you )?about\b",
    re.IGNORECASE,
)
_ASKED_ABOUT = re.compile(
    r"我(?:之前|刚才|前面|第一次|最开始|一开始|最早|开头)?(?:问|咨询)|\bi (?:first )?(?:asked|enquired|inquired)\b",
    re.I,
)
_FIRST = re.compile(
    r"第一次|头一次|最开始|一开始|刚开始|起初|最初|最早|开头|\bfirst\b|\bat the (?:start|beginning)\b", re.I
)
_ASSISTANT_SIDE = re.compile(
    rf"你(?:们)?(?:{_ZH_WHEN}|刚)?(?:说|讲|报|提|告诉|推荐|给)|客服说"
    r"|\byou (?:said|told|mentioned|quoted|gave|recommended|suggested)|\bdid you\b|\bwhat was it you\b",
    re.I,
)
_USER_SIDE = re.compile(
    rf"我(?:{_ZH_WHEN}|刚|开始)?(?:说|讲|报|给|留|提|提供|告诉)|\bi (?:said|told|mentioned|gave|provided)|\bdid i\b|\bmy\b",
    re.I,
)

# How `summary.ExtractiveSummarizer` writes a folded round (here, so that summary.py may import this module).
USER_LINE, ANSWER_LINE = "- The user asked:", "Answer:"
PINNED_HEADER = "Pinned facts:"

_ORDER = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z0-9-]*\d)[A-Za-z]{0,4}-?\d[\dA-Za-z-]{5,}(?![A-Za-z0-9])")
# Mobiles (as stored: masked, "138****5678"), hotlines ("400-820-5177") and landlines with an area code,
# the last group often set apart by a space as printed ("021-6468 7715").
_PHONE = re.compile(
    r"(?<!\d)1[3-9]\d(?:\d{4}|\*{4})\d{4}(?!\d)|\+?\d{2,4}-\d{3,4}-\d{4}|(?<![\d-])0\d{2,3}-\d{3,4}[ -]?\d{4}(?!\d)"
)
_AMOUNT = re.compile(
    r"(?:[¥￥$]|\b(?:RMB|CNY|USD)\s?)\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:万元|元|块|yuan\b|RMB\b|CNY\b)", re.I
)
_DATE = re.compile(
    # A lunar date ("冬月初五", "腊月廿三") is how a customer often names a holiday stay.
    r"(?:正|冬|腊|[一二三四五六七八九十]{1,2})月(?:初[一二三四五六七八九十]|廿[一二三四五六七八九]|[二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]?(?![一二三四五六七八九十])|"
    r"\d{4}\s?[-/年]\s?\d{1,2}\s?[-/月]\s?\d{1,2}\s?[日号]?|\d{1,2}\s?月\s?\d{1,2}\s?[日号]|\b\w+ \d{1,2}, \d{4}\b|(?<!\d)\d{1,2}\s?号"
    r"|(?:下|这|本)?(?:周|星期)[一二三四五六日天]|\b(?:next |this )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s\d{1,2}(?:st|nd|rd|th)?\b|\b\d{1,2}(?:st|nd|rd|th)?\s(?:of\s)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
    re.I,
)
# A price the customer quotes may come without a currency ("别家卖 3299"): a bare number of 3+ digits that
# is no model number, size or identifier, looked for when no line on the side asked about has a currency.
_NO_UNIT = r"(?![\w.%+-]|\s?(?:GB|TB|mAh|W|Hz|(?:kg|g|ml|cm|mm|L)\b|英寸|寸|克|千克|公斤|斤|升|毫升|匹|号|年|月|日|天|期|分|个|台|次|%))"
_BARE_AMOUNT = re.compile(
    _AMOUNT.pattern
    + r"|(?<![\w.+-])\d{1,3}(?:,\d{3})+(?![\w.%+-])|(?<![\w.+-])\d{3,6}(?:\.\d+)?"
    + _NO_UNIT
    # Fewer digits right after the word that makes it a price ("隔壁报价 95", "they quoted 85").
    + r"|(?:(?<=报价)|(?<=价格)|(?<=要价)|(?<=开价)|(?<=标价)|(?<=卖)|(?<=\bquoted)|(?<=\bprice)|(?<=\bcharged))"
    + r"\s?\d{2,6}(?:\.\d+)?"
    + _NO_UNIT,
    re.I,
)
_DURATION = VALUE_PATTERNS[Ask.DURATION]
# A product is a value like any other, found by `facts.products` (see `_values`).
_PRODUCT = re.compile(r"(?!)")

_PRICE_CUE = re.compile(
    r"多少钱|价格|价钱|售价|起售价|起价|报价|金额|预算|费用|运费|邮费|门槛|回收价|几块|\bprices?\b|\bcosts?\b|\bhow much\b"
    r"|\bbudget\b|\bamount\b|\bfees?\b|\bthreshold\b|\bminimum spend|\bspend\b",
    re.I,
)
_DURATION_CUE = re.compile(
    r"多久|多长时间|多长|几天|几个月|几年|保修期|有效期|期限|时效|\bhow long\b|\bhow many (?:days|weeks|months|years)\b",
    re.I,
)
_PRODUCT_CUE = re.compile(
    r"哪一款|哪款|哪台|哪一台|哪部|哪个型号|什么型号|哪个产品|哪个牌子|哪一个|哪个"
    r"|\bwhich (?:one|model|product|laptop|phone|device|tablet|computer|notebook)\b(?! number)|\bwhat model\b",
    re.I,
)

_MODEL_ASKED = re.compile(
    r"哪一款|哪款|哪台|哪一台|哪部|型号|产品|牌子|\bwhich (?:model|product|laptop|phone|device|tablet|computer|notebook)\b"
    r"|\bwhat model\b",
    re.I,
)

_DISCOUNT_CUE = re.compile(r"几折|折扣|优惠多少|打折|费率|利率|\bdiscount\b|\bpercent|\brate\b|\b% off\b", re.I)
# A discount is said as a rate ("8 折", "5%") or as money off ("立减 300 元").
_DISCOUNT = re.compile(f"{VALUE_PATTERNS[Ask.PERCENT].pattern}|{_AMOUNT.pattern}", re.I)

# A fee may be a rate as well as an amount ("收取 8% 的手续费", "a 15 yuan service fee").
_FEE_CUE = re.compile(r"费(?!率)|\bfees?\b|\bcharges?\b|\bsurcharges?\b", re.I)
# "几点关门", "when do you shut on Sundays": a time of day, or the span of hours it is in ("10:00–22:00").
_TIME_CUE = re.compile(
    r"几点|营业到|开到|关门|开门|营业时间|\bwhat time\b|\bhow late\b|\bopen until\b|\bclos(?:e|es|ing)\b|\bopening hours\b",
    re.I,
)
_CLOCK = re.compile(r"(?<![\d.])\d{1,2}[:：]\d{2}(?:\s?[-–~至到]\s?\d{1,2}[:：]\d{2})?(?![\d.])")

# A membership level: a card or tier named by its metal or colour ("金卡", "黑卡会员", "gold", "Platinum tier"),
# also with a shop's own word in it ("银 X 会员"); a level named otherwise is quoted with its line.
_LEVEL_CUE = re.compile(
    r"等级|级别|什么卡|哪种卡|哪张卡|什么会员|哪个会员|几级|\blevel\b|\btier\b|\bwhat card\b|\bwhich card\b|\bstatus\b",
    re.I,
)
_LEVEL = re.compile(
    r"(?:白金|铂金|钻石|黄金|白银|黑金|金|银|黑|铜|普通|至尊)[\u4e00-\u9fff]?(?:卡|会员)|\bVIP\s?\d\b|\bV\d\b"
    r"|\b(?:gold|silver|platinum|black|diamond|bronze|premium|basic)(?:\s(?:card|member|tier|level))?\b",
    re.I,
)

_KINDS: list[tuple[str, re.Pattern[str], re.Pattern[str]]] = [
    # "订单金额", "the order total": an amount of the order, not its number.
    (
        "order",
        re.compile(
            r"订单(?!金额|总额|总价|价格|实付|满)|单号|\border\b(?!\s(?:amount|total|value|price|sum))|\btracking\b",
            re.I,
        ),
        _ORDER,
    ),
    ("fee", _FEE_CUE, _DISCOUNT),
    ("time", _TIME_CUE, _CLOCK),
    ("amount", _PRICE_CUE, _AMOUNT),
    ("duration", _DURATION_CUE, _DURATION),
    ("discount", _DISCOUNT_CUE, _DISCOUNT),
    ("product", _PRODUCT_CUE, _PRODUCT),
    ("phone", re.compile(r"电话|手机号|号码|联系方式|\bphone\b|\bnumber\b", re.I), _PHONE),
    ("level", _LEVEL_CUE, _LEVEL),
    ("date", re.compile(r"日期|哪天|哪一天|几号|几月几|什么时候|\bdate\b|\bwhen\b|\bwhat day\b", re.I), _DATE),
    # "多少" asks for a number of any kind ("电话是多少"): an amount only when nothing more specific is named.
    ("amount", re.compile(r"多少|\bminimum\b", re.I), _AMOUNT),
]

_NAMES = {
    "zh": {
        "order": "订单号",
        "phone": "电话号码",
        "amount": "金额",
        "date": "日期",
        "duration": "时长",
        "discount": "优惠",
        "product": "产品",
        "fee": "费用",
        "time": "时间",
        "level": "会员等级",
    },
    "en": {
        "order": "order number",
        "phone": "phone number",
        "amount": "amount",
        "date": "date",
        "duration": "duration",
        "discount": "discount",
        "product": "product",
        "fee": "fee",
        "time": "time",
        "level": "membership level",
    },
}


_LOWEST = re.compile(r"起售价|起价|最低|最便宜|\bstart(?:ing|s)?\b|\bcheapest\b|\blowest\b|\bfrom\b", re.I)
_HIGHEST = re.compile(r"最贵|最高|\bmost expensive\b|\bhighest\b|\btop\b", re.I)

# A threshold asked about ("门槛", "满多少", "the minimum spend") is the amount a condition names: "满 10000 元",
# "10000 元以上", "at least ¥600", "spend over $50".
_THRESHOLD_ASKED = re.compile(
    r"门槛|满多少|最低消费|起步|达到多少|要求多少|条件|\bthreshold\b|\bminimum\b|\bat least\b|\bqualif|\brequire|\bspend\b",
    re.I,
)
_THRESHOLD_BEFORE = re.compile(
    r"(?:满|达到|达|超过|不低于|至少|累计|累积|以上|\bat least|\bover|\babove|\bminimum(?: of)?|\bspend(?:s|ing)?|\breach(?:es)?)\s*$",
    re.I,
)
_THRESHOLD_AFTER = re.compile(r"^\s*(?:以上|及以上|起|或以上|\bor more\b|\band above\b|\band over\b)", re.I)

_CAP_BEFORE = re.compile(
    r"(?:最多|最高|封顶|上限|不超过|\bup to|\bat most|\bmaximum(?: of)?|\bcapped at|\bno more than)\s*$", re.I
)
_CAP_ASKED = re.compile(
    r"最多|最高|封顶|上限|\bup to\b|\bat most\b|\bmaximum\b|\bmax\b|\bcap\b|\blimit\b|\bmost\b", re.I
)

_KIND_IDEAS = {"amount": {"@price"}, "fee": {"@price"}, "duration": {"@time_limit"}, "time": {"@opening_hours"}}

# Where a value's label stops: a clause mark, or another value.
_CLAUSE = re.compile(r"[，,；;：:、。！!？?（）()\n]|\s-\s")
_LABEL_TERMS = 4
_CONNECTIVE = re.compile(r"\b(?:and|or|but|while|whereas|vs\.?)\b|和|而|以及|或者|与", re.I)

# "一年" and "1 年", "two years" and "2 years": a counted unit is one token whatever the spelling.
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_EN_DIGITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12,
}  # fmt: skip
_UNITS = [
    ("month", r"个月|months?"),
    ("year", r"年|years?"),
    ("week", r"周|星期|weeks?"),
    ("day", r"天|日|days?"),
    ("hour", r"小时|hours?"),
    ("period", r"期|instal+ments?"),
]
_QUANTITY = re.compile(
    r"(?P<n>\d+|[一二两三四五六七八九十]{1,3}|\b(?:"
    + "|".join(_EN_DIGITS)
    + r")\b)\s?-?(?P<unit>"
    + "|".join(f"(?P<{key}>{pattern})" for key, pattern in _UNITS)
    + r")",
    re.I,
)


def _number(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    if word.lower() in _EN_DIGITS:
        return _EN_DIGITS[word.lower()]
    if word == "十":
        return 10
    if "十" in word:  # 十二, 二十, 二十四
        tens, _, ones = word.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(word) if len(word) == 1 else None


# "a year", "yearly", "每年" are one year as much as "一年" is ("what does it cost a year" ~ "Yearly price: 799").
_PER_PERIOD = re.compile(
    r"\b(?:a|per|each|every) (?P<year>year)\b|\b(?P<year2>yearly|annual(?:ly)?)\b|每(?P<year3>年)"
    r"|\b(?:a|per|each|every) (?P<month>month)\b|\b(?P<month2>monthly)\b|每(?P<month3>月|个月)",
    re.I,
)


def _quantities(text: str) -> set[str]:
    out: set[str] = set()
    for m in _PER_PERIOD.finditer(text):
        out.add("#1year" if m.group("year") or m.group("year2") or m.group("year3") else "#1month")
    for m in _QUANTITY.finditer(text):
        n = _number(m.group("n"))
        unit = next((key for key, _ in _UNITS if m.group(key)), "")
        if n is not None and unit:
            out.add(f"#{n}{unit}")
    return out


def _amount(value: str) -> float:
    digits = re.search(r"\d[\d,]*(?:\.\d+)?", value)
    return float(digits.group().replace(",", "")) if digits else 0.0


# "劳驾瞅瞅我的单号", "what's my tracking number?": only the conversation knows the customer's own identifiers, so a
# question for one is about the conversation even without "之前"/"earlier" (unless it states one itself).
_OWN_IDENTIFIER = re.compile(
    r"我的(?:订单号|订单编号|单号|快递单号|运单号|手机号|手机号码|电话号码|联系电话)"
    r"|\bmy (?:order|tracking|phone|mobile|contact) (?:number|no\.?|id)\b|\bmy order (?:id|code)\b",
    re.I,
)


# "我的订单号在哪里看" asks the knowledge base how to find it, not what it was.
_WHERE_TO_FIND = re.compile(
    r"(?:在)?哪(?:里|儿)?(?:能)?(?:查|看|找)|怎么(?:查|看|找)|如何(?:查|看|找)"
    r"|\bhow (?:do|can|would) (?:i|we) (?:find|get|check|look up|see|locate)\b|\bwhere (?:do|can) (?:i|we) (?:find|see|get)\b",
    re.I,
)


def is_recall(question: str) -> bool:
    if _RECALL_ZH.search(question) or _RECALL_EN.search(question):
        return True
    return (
        bool(_OWN_IDENTIFIER.search(question))
        and not (_ORDER.search(question) or _PHONE.search(question))
        and not _WHERE_TO_FIND.search(question)
    )


@dataclass(frozen=True, slots=True)
class _Said:
    text: str
    side: str  # "user" | "assistant" | "summary"
    position: float  # order in the conversation (the summary comes first)
    asked: str = ""  # for an answer line: the question it answered


def _lines(memory: MemoryView) -> list[_Said]:
    said: list[_Said] = []
    if memory.summary:
        lines = [line.strip() for line in memory.summary.splitlines() if line.strip()]
        asked = ""
        for i, line in enumerate(lines):
            # The extractive summary says who said what; any other summary's lines may hold either side.
            position = (i + 1) / (len(lines) + 1)
            if line.startswith(PINNED_HEADER):
                # One fact per entry, each with its label: read apart, like the lines they came from.
                entries = [e.strip() for e in line.removeprefix(PINNED_HEADER).split("; ") if e.strip()]
                said.extend(_Said(e, "summary", position + j * 1e-4) for j, e in enumerate(entries))
            elif line.startswith(USER_LINE):
                asked = line.removeprefix(USER_LINE).strip()
                said.append(_Said(asked, "user", position))
            elif line.startswith(ANSWER_LINE):
                said.append(_Said(line.removeprefix(ANSWER_LINE).strip(), "assistant", position, asked))
            else:
                said.append(_Said(line, "summary", position))
    for i, r in enumerate(memory.rounds, start=1):
        said.append(_Said(r.user.content, "user", 2 * i))
        answer = [line.strip() for line in r.assistant.content.splitlines() if line.strip()]
        for j, line in enumerate(answer):
            if line.startswith("[extractive answer") or _digest(line, answer[:j] + answer[j + 1 :]):
                continue
            said.append(_Said(line, "assistant", 2 * i + 1, r.user.content))
    return said


def _digest(line: str, others: list[str]) -> bool:
    """A heading over figures the answer states again below ("Key figures: ¥1,299; 12 months"): its
    numbers say nothing the other lines do not, with what they are about."""
    head, sep, rest = line.partition(":") if ":" in line else line.partition("：")
    numbers = re.findall(r"\d[\d,.]*", rest)
    words = [t for t in terms(rest) if not t[0].isdigit()]
    # Only figures after the heading (a unit each at most), never a sentence ("金卡会员：满 10000 元即可升级").
    if not sep or not numbers or len(terms(head)) > 3 or len(words) > len(numbers):
        return False
    elsewhere = " ".join(others)
    return all(n in elsewhere for n in numbers)


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
        "给",
        "哪",
        "哪个",
        "哪一个",
        "一款",
        "哪款",
        "哪台",
        "推荐",
        "推荐给",
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
        "which",
        "one",
        "recommend",
        "recommended",
        "suggest",
        "suggested",
    ]
)


def _content(text: str) -> set[str]:
    """Words, customer-service concepts, named places and counted units of a text, so an English line can
    match a Chinese question ("gold" ~ "金卡", "美国" ~ "the United States", "一年" ~ "1 year")."""
    words = {t for t in terms(_PER_PERIOD.sub(" ", text)) if t not in _RECALL_WORDS}
    ideas = {f"@{c}" for c in concepts(text)}
    places = {f"@place:{p}" for p in attributes(text).get("place", ())}
    # "640 那台" is the BCD-640WX: a model number inside a product code counts as a word of its own.
    numbers = {t for p in products(text) for t in p.tokens if t.isdigit() and len(t) >= 2}
    return words | ideas | places | numbers | _quantities(text)


@dataclass(frozen=True, slots=True)
class _Value:
    text: str
    label: frozenset[str]  # the content of the few words around it
    words: tuple[str, ...]  # those words
    threshold: bool  # the amount a condition names ("满 10000 元")
    cap: bool = False  # the most that is paid or counted ("up to 15000 yuan", "最多抵 1800 元")
    named: bool = False  # its label names the kind of value asked ("售价 799 元", "the fee is 5%")

    def fit(self, wanted: set[str], threshold: bool, cap: bool = False) -> float:
        """How well the value's label fits the question: what they share, less the sub-topics it names that
        the question does not ask about ("顶盖更换价格 1680 元" is not the price of the model asked about)."""
        extra = len(_aspects(self.label) - wanted)
        # "Breeze 12 costs ¥1,299 and the Breeze 12 Max costs ¥1,899": a variant word not asked about.
        variants = len({w for w in self.words if w in VARIANT_WORDS} - wanted)
        shared = len(wanted & self.label)
        # A cap answers "at most how much", not "how much does it cost"; a value its label calls a price (or
        # a fee ...) is one.
        limit = (1.0 if cap else -1.0) if self.cap else 0.0
        return (
            shared
            + (2.0 if threshold and self.threshold else 0.0)
            + limit
            + 0.5 * self.named
            - 0.5 * min(extra, 2)
            - variants
        )


def _aspects(content: set[str] | frozenset[str]) -> set[str]:
    """The sub-topics (repair, shipping, trade-in ...) among a text's concepts."""
    return {w for w in content if w.startswith("@") and w[1:] in ASPECTS}


def _values(kind: str, pattern: re.Pattern[str], line: str) -> list[_Value]:
    """The values of `kind` in a line, each with its label: the words between it and the clause mark or value
    before it (the last few), and those after it up to the next."""
    if kind == "product":
        # A sentence's own product first; the cited page's title ("（… 商品详情）") only when it names none.
        body = _body(line)
        named = product_names(body) or (product_names(line[len(body) :]) if body != line else [])
        return [_Value(name, frozenset(), (), False) for name in named]
    matches = list(pattern.finditer(line))
    if kind == "order":
        matches = [m for m in matches if _order_number(line, m)]
    out: list[_Value] = []
    for i, m in enumerate(matches):
        start = matches[i - 1].end() if i else 0
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        before = line[start : m.start()]
        marks = list(_CLAUSE.finditer(before))
        if marks and not before[marks[-1].end() :].strip() and marks[-1].group() in ":：":
            # "Yearly price: 799 yuan": a value right after a colon is labelled by what the colon ends.
            before = before[marks[-2].end() if len(marks) > 1 else 0 : marks[-1].start()]
        else:
            before = before[marks[-1].end() :] if marks else before
        after = line[m.end() : end]
        # What follows a value belongs to it up to a clause mark, or a connective before the next value
        # ("¥1,299 and the Max costs ¥1,899": "Max" is the next value's).
        mark = _CLAUSE.search(after) or (_CONNECTIVE.search(after) if i + 1 < len(matches) else None)
        after = after[: mark.start()] if mark else after
        if i and not before.strip(" ,，、") and out:
            # "Saturday, July 6": a value right after another shares its label.
            prev = out[-1]
            out.append(_Value(m.group().strip(), prev.label, prev.words, prev.threshold, prev.cap, prev.named))
            continue
        words = terms(before)[-_LABEL_TERMS:] + terms(after)[:_LABEL_TERMS]
        content = _content(" ".join(words)) | _quantities(before) | _quantities(after)
        # Every amount is a price: the concept tells none of them apart, though a label may say it is one.
        ideas = _KIND_IDEAS.get(kind, set())
        threshold = bool(_THRESHOLD_BEFORE.search(before) or _THRESHOLD_AFTER.search(after))
        cap = bool(_CAP_BEFORE.search(before))
        priced = bool(ideas & content) and not threshold
        out.append(_Value(m.group().strip(), frozenset(content - ideas), tuple(words), threshold, cap, priced))
    return out


# A postal code, or a number too short to be an order's unless called one ("邮编 201100", "room 101100").
_POSTAL = re.compile(r"(?:邮编|邮政编码|\bpost(?:al)?\s?code|\bzip(?:\s?code)?)\W{0,3}$", re.I)
_ORDER_LABEL = re.compile(r"(?:订单|单号|编号|\border|\btracking|\bno\.?|#)\W{0,3}$", re.I)


def _order_number(line: str, m: re.Match[str]) -> bool:
    before = line[max(0, m.start() - 12) : m.start()]
    if _POSTAL.search(before) or any(p.start() <= m.start() < p.end() for p in _PHONE.finditer(line)):
        return False
    return not (m.group().isdigit() and len(m.group()) <= 6) or _ORDER_LABEL.search(before) is not None


def _body(line: str) -> str:
    """A quoted line without the page it cites at its end ("…售价 7999 元。（iPhone 16 Pro 商品详情）")."""
    for opening, closing in (("（", "）"), (" (", ")")):
        if line.endswith(closing) and opening in line:
            return line[: line.rindex(opening)].rstrip() or line
    return line


def _products(text: str) -> list[Product]:
    names = set(product_names(text))
    return [p for p in products(text) if p.text in names]


def product_names(text: str) -> list[str]:
    """Product names as a shop writes them: with a capital or a Chinese brand ("MacBook Air M3", "iPhone 16",
    "小米 15 Pro"), whole words only (not the "pro" of "processor")."""
    out: list[str] = []
    for p in products(text):
        at = text.find(p.text)
        whole = at >= 0 and not text[at + len(p.text) : at + len(p.text) + 1].isalpha()
        # An order number or a standard's code ("XC2025…", "MIL-STD-810H") is not a product.
        if re.search(r"\d{5}|[A-Z]+-[A-Z]+-", p.text):
            continue
        if whole and (any(ch.isupper() for ch in p.text.split()[0]) or not p.text[0].isascii()):
            out.append(p.text)
    return out


def _generic(word: str, generic: set[str]) -> bool:
    """A word that only names the kind of value asked for ("价格" for an amount)."""
    ideas = {f"@{c}" for c in concepts(word)}
    return bool(ideas) and ideas <= generic


def recall_answer(question: str, memory: MemoryView, lang: str) -> str | None:
    """The answer from memory, or None when the question is not about the conversation or memory holds
    nothing that answers it.

    Among what was said (on the side the question points at), the line that shares most with the question
    (or, for an answer, with the question it answered) and holds a value of the kind asked for wins; ties
    go to the latest mention, or the earliest for "第一次"/"first"."""
    if not is_recall(question) or not (memory.rounds or memory.summary):
        return None
    kind = next(((name, value) for name, cue, value in _KINDS if cue.search(question)), None)
    answer = _recall(question, memory, lang, kind)
    if answer is None and kind is not None and kind[0] == "level":
        answer = _recall(question, memory, lang, None)
    if answer is None and kind is not None and kind[0] == "product" and not _MODEL_ASKED.search(question):
        # "Which one" with no product in any line ("你推荐的尺码是哪个": a size is no product name): the line
        # about what is asked still answers, quoted whole. "哪一款" wants a model, which a quote need not name.
        answer = _recall(question, memory, lang, None)
    return answer


def _recall(question: str, memory: MemoryView, lang: str, kind: tuple[str, re.Pattern[str]] | None) -> str | None:
    side = "assistant" if _ASSISTANT_SIDE.search(question) else "user" if _USER_SIDE.search(question) else ""
    # A price or fee is asked back from the side that gave it: with no one named ("X 单价是几块来着") the shop's,
    # the customer's own figures ("合计 900 元") only as theirs ("我说的…").
    one_side = kind is not None and kind[0] in ("amount", "fee", "discount")
    if not side:
        side = "user" if kind is not None and kind[0] in ("order", "phone") else "assistant"
    # What the question asks about, without the words that make it a recall ("你之前推荐的" is no topic).
    topic = question
    for cue in (_RECALL_ZH, _RECALL_EN, _ASSISTANT_SIDE, _USER_SIDE, _FIRST):
        topic = cue.sub(" ", topic)
    wanted = _content(topic)
    # Whether the question names something beyond the kind of value ("典藏版多少钱", not just "价格是多少"):
    # only then does a value's label weigh in choosing the line (else when it was said decides).
    generic = _KIND_IDEAS.get(kind[0], set()) if kind else set()
    topic_words = {w for w in wanted if not w.startswith("@") and len(w) > 1 and not _generic(w, generic)}
    topical = bool(topic_words)
    first = _FIRST.search(question) is not None
    asked_about = _ASKED_ABOUT.search(question) is not None
    threshold = kind is not None and kind[0] in ("amount", "fee") and _THRESHOLD_ASKED.search(question) is not None
    cap = _CAP_ASKED.search(question) is not None
    best: tuple[tuple[float, float], _Said, list[_Value], bool] | None = None
    lines = _lines(memory)
    if kind and kind[0] == "amount":
        # A customer's price may come without a currency: on the side asked about, when no line there has one.
        asked_side = [said for said in lines if said.side in (side, "summary")]
        if not any(kind[1].search(said.text) for said in asked_side):
            kind = ("amount", _BARE_AMOUNT)
    asked_products = _products(topic)
    base_model = BASE_WORDS.search(question) is not None
    # Words that only name the kind of value ("价格" ~ "售价") are the concept, not a match of their own.
    matchable = {w for w in wanted if not _generic(w, generic)}
    wanted_aspects = _aspects(wanted)
    for said in lines:
        found = _values(kind[0], kind[1], said.text) if kind else []
        if (kind and not found) or (one_side and said.side not in (side, "summary")):
            continue
        if kind and kind[0] in ("amount", "fee") and not threshold and all(v.threshold for v in found):
            # "满 600 元可分期" names the spend a condition needs, no price or fee: not what was asked.
            continue
        content = _content(said.text)
        own = matchable & content
        # The question an answer line answered tells what it was about, where the line does not say.
        # "我第一次问的那只水壶": what the customer asked about names the thing, not what the answer said of it.
        # A word of the question the line already says as a concept ("dry" of a line saying 烘干) is not said
        # again by the question that line answered.
        told = {w for w in (topic_words & _content(said.asked)) - own if not {f"@{c}" for c in concepts(w)} & own}
        overlap = len(own) + (1.0 if asked_about else 0.5) * len(told)
        # With no value to look for, or a product "for students", the line must be about what is asked.
        if not overlap and (not kind or (kind[0] == "product" and wanted)):
            continue
        # "S8 多少钱" is not answered by the line about the S8 Pro, though both say "S8".
        named = _products(said.text)
        fit = product_fit(asked_products, base_model, named)
        # A line that names only other models than the one asked about ("MacBook" may be the MacBook Air).
        about = fit != 0 or any(a.tokens <= n.tokens for a in asked_products for n in named)
        if fit is not None:
            overlap += 2.0 * fit - 1.0
        if kind is not None:
            # A line about a sub-topic the question does not raise (a repair price for "15 英寸价格") answers
            # another question; what the line says counts, not the title of the page it cites.
            body = _aspects(_content(_body(said.text))) - wanted_aspects
            overlap -= 0.75 * min(2, len(body))
            if said.side == "assistant" and not body:
                # A line of a page about a sub-topic ("补胎：23 元" quoted from the repair price list) is that
                # sub-topic's, though the line says so only in the page it cites: less so.
                overlap -= 0.25 * min(2, len(_aspects(_content(said.text[len(_body(said.text)) :])) - wanted_aspects))
        if threshold and any(v.threshold for v in found):
            overlap += 1.5
        if found and topical and kind is not None and kind[0] != "product":
            # A label that shares only the word naming the kind of value ("a city scooter costs 45 yuan a day" for
            # "what did the Pro cost?") says nothing of what the value is of.
            overlap += 0.5 * max(v.fit(matchable, threshold, cap) for v in found)
        # The side asked about first, then what the line shares with the question, then when it was said.
        key = (3.0 * (said.side in (side, "summary")) + overlap, -said.position if first else said.position)
        if best is None or key > best[0]:
            best = (key, said, found, about)
    if best is None:
        return None
    _, said_line, found, about = best
    if not about:
        # Memory holds nothing about it (the earlier answer was about another model, or about something
        # else): the knowledge base answers instead.
        return None
    values = _pick(question, wanted, threshold, cap, found)
    quote = said_line.text if len(said_line.text) <= 160 else said_line.text[:160] + "…"
    if lang == "zh":
        who = "您" if said_line.side == "user" else "我"
        if kind:
            return f"根据我们之前的对话，{who}提到的{_NAMES['zh'][kind[0]]}是 {'、'.join(values)}。（原话：“{quote}”）"
        return f"根据我们之前的对话，{who}说过：“{quote}”"
    who = "you gave" if said_line.side == "user" else "I gave"
    if kind:
        return f'From our conversation: the {_NAMES["en"][kind[0]]} {who} was {", ".join(values)}. (Said earlier: "{quote}")'
    return f'From our conversation, {"you said" if said_line.side == "user" else "I said"}: "{quote}"'


def _pick(question: str, wanted: set[str], threshold: bool, cap: bool, found: list[_Value]) -> list[str]:
    """Of a line's values, those whose label fits the question best (all of them when no label tells them
    apart), then the lowest or highest when the question asks for one."""
    if not found:
        return []
    scores = [v.fit(wanted, threshold, cap) for v in found]
    top = max(scores)
    if top > min(scores):
        found = [v for v, s in zip(found, scores, strict=True) if s == top]
    texts = list(dict.fromkeys(v.text for v in found))
    extreme = (_LOWEST.search(question) and "min") or (_HIGHEST.search(question) and "max") or ""
    if extreme and len(texts) > 1 and all(_amount(t) for t in texts):
        texts = [(min if extreme == "min" else max)(texts, key=_amount)]
    return texts[:4]
