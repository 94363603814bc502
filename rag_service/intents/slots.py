"""Typed slot extractors: order numbers, phones, dates (Chinese and English forms), enum synonyms,
product names (the knowledge base's titles first), free text.

Each returns the value the utterance states last: a correction ("不对，订单号是 …", "not the iPhone, the
Xiaomi 15 Pro") names the new value after the old one. Regular expressions, not a model: they run in
microseconds on every turn and their mistakes can be read off the pattern.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rag_service.facts import products
from rag_service.glossary import concepts
from rag_service.intents.config import IntentSpec, SlotSpec
from rag_service.rewrite_rules import text_topic_words

_CJK = re.compile(r"[\u4e00-\u9fff]")


def language(text: str) -> str:
    """ "zh" when the text holds Chinese characters, else "en"."""
    return "zh" if _CJK.search(text) else "en"


def _key(text: str) -> str:
    """Case-, width- and space-blind form for matching names and synonyms."""
    out = []
    for ch in text.lower():
        code = ord(ch)
        if 0xFF01 <= code <= 0xFF5E:  # full-width ASCII
            ch = chr(code - 0xFEE0)
        if not ch.isspace() and ch not in "-_·":
            out.append(ch)
    return "".join(out)


# -- order numbers ------------------------------------------------------------------------------

# After the word for it: "订单号是 XC…", "order no. 3187…", "单号：…" (6+ characters, a digit among them).
_ORDER_LABELLED = re.compile(
    r"(?:订单(?:编号|号码|号)?|单号|(?<![A-Za-z])order(?:\s*(?:no\.?|number|num\.?|id|#))?)"
    r"[\s:：#＃=是为]{0,4}(?P<value>(?=[0-9A-Za-z-]*\d)[0-9A-Za-z][0-9A-Za-z-]{4,}[0-9A-Za-z])(?![0-9A-Za-z])",
    re.IGNORECASE,
)
# On its own: letters then 8+ digits (XC20250301000123), or a long run of digits that is not a phone.
_ORDER_BARE = re.compile(r"(?<![0-9A-Za-z])(?:[A-Za-z]{1,4}\d{8,24}|\d{12,24})(?![0-9A-Za-z])")


def order_numbers(text: str) -> list[str]:
    found: list[tuple[int, str]] = [(m.start("value"), m.group("value")) for m in _ORDER_LABELLED.finditer(text)]
    spans = {pos for pos, _ in found}
    for m in _ORDER_BARE.finditer(text):
        if m.start() not in spans:
            found.append((m.start(), m.group()))
    return [v.upper() for _, v in sorted(found)]


# -- phones -------------------------------------------------------------------------------------

_PHONE = re.compile(
    r"(?<![0-9A-Za-z])(?:(?:\+?86[\s-]?)?1[3-9]\d(?:[\s-]?\d{4}){2}|\+\d{1,3}[\s-]?\(?\d{1,4}\)?(?:[\s-]?\d{2,4}){2,4})(?![0-9])"
)


def phones(text: str) -> list[str]:
    out = []
    for m in _PHONE.finditer(text):
        digits = re.sub(r"[^\d+]", "", m.group())
        if digits.startswith("+86"):
            digits = digits[3:]
        elif digits.startswith("86") and len(digits) == 13:
            digits = digits[2:]
        out.append(digits)
    return out


# -- dates --------------------------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def _zh_number(text: str) -> int | None:
    """1-31 in Chinese numerals (三, 十一, 二十三, 三十一) or digits."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        head, _, tail = text.partition("十")
        tens = _ZH_DIGITS.get(head, 0) if head else 1
        ones = _ZH_DIGITS.get(tail, 0) if tail else 0
        return tens * 10 + ones
    if len(text) == 1 and text in _ZH_DIGITS:
        return _ZH_DIGITS[text]
    if text and all(ch in _ZH_DIGITS for ch in text):  # 二〇二五
        return int("".join(str(_ZH_DIGITS[ch]) for ch in text))
    return None


_ZN = r"[0-9]{1,4}|[零〇一二两三四五六七八九十]{1,4}"
_ZH_DATE = re.compile(rf"(?:(?P<y>{_ZN})\s?年\s?)?(?P<m>{_ZN})\s?月(?:份)?\s?(?:(?P<d>{_ZN})\s?[日号])?")
_ISO_DATE = re.compile(r"(?<!\d)(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?!\d)")
_US_DATE = re.compile(r"(?<!\d)(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})(?!\d)")
_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_EN_MDY = re.compile(
    rf"\b(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{{4}}))?\b", re.IGNORECASE
)
_EN_DMY = re.compile(
    rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH})\.?(?:,?\s+(?P<y>\d{{4}}))?\b", re.IGNORECASE
)
_EN_MY = re.compile(rf"\b(?:in\s+)?(?P<mon>{_MONTH})\.?\s+(?P<y>\d{{4}})\b", re.IGNORECASE)
_RELATIVE_DAYS = {
    "今天": 0,
    "今日": 0,
    "昨天": -1,
    "昨日": -1,
    "前天": -2,
    "大前天": -3,
    "today": 0,
    "yesterday": -1,
    "the day before yesterday": -2,
}
_RELATIVE = re.compile(
    r"大前天|前天|昨天|昨日|今天|今日|the day before yesterday|yesterday|today"
    r"|(?P<n>\d+|[一二两三四五六七八九十]+)\s?(?P<unit>天|周|个?星期|个月)前"
    r"|(?P<en_n>\d+|a|an|one|two|three|four|five|six)\s+(?P<en_unit>days?|weeks?|months?)\s+ago"
    r"|上(?P<zh_prev>周|个?星期|个月)|last\s+(?P<en_prev>week|month)",
    re.IGNORECASE,
)
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _make_date(year: int | None, month: int, day: int | None, today: dt.date) -> dt.date | None:
    if not 1 <= month <= 12:
        return None
    if year is None:
        # A date without a year is the latest such date not after today (purchases lie in the past).
        year = today.year if (month, day or 1) <= (today.month, today.day) else today.year - 1
    elif year < 100:
        year += 2000
    try:
        return dt.date(year, month, day or 1)
    except ValueError:
        return None


def _months_back(today: dt.date, n: int) -> dt.date:
    month = today.month - n
    year = today.year + (month - 1) // 12
    month = (month - 1) % 12 + 1
    day = min(today.day, 28)
    return dt.date(year, month, day)


def dates(text: str, today: dt.date | None = None) -> list[str]:
    """ISO dates (YYYY-MM-DD; the 1st for a month without a day) stated in the text, in order."""
    today = today or dt.date.today()
    found: list[tuple[int, dt.date]] = []
    taken: list[tuple[int, int]] = []

    def add(m: re.Match[str], value: dt.date | None) -> None:
        if value is not None and not any(a < m.end() and m.start() < b for a, b in taken):
            found.append((m.start(), value))
            taken.append(m.span())

    for m in _ISO_DATE.finditer(text):
        add(m, _make_date(int(m["y"]), int(m["m"]), int(m["d"]), today))
    for m in _US_DATE.finditer(text):
        add(m, _make_date(int(m["y"]), int(m["m"]), int(m["d"]), today))
    for m in _ZH_DATE.finditer(text):
        month = _zh_number(m["m"])
        if month is None:
            continue
        year = _zh_number(m["y"]) if m["y"] else None
        day = _zh_number(m["d"]) if m["d"] else None
        add(m, _make_date(year, month, day, today))
    for pattern in (_EN_MDY, _EN_DMY, _EN_MY):
        for m in pattern.finditer(text):
            month = _MONTHS[m["mon"].lower().rstrip(".")]
            day = int(m["d"]) if "d" in m.groupdict() and m["d"] else None
            add(m, _make_date(int(m["y"]) if m["y"] else None, month, day, today))
    for m in _RELATIVE.finditer(text):
        word = m.group().lower()
        if word in _RELATIVE_DAYS:
            add(m, today + dt.timedelta(days=_RELATIVE_DAYS[word]))
        elif m["unit"]:
            n = _zh_number(m["n"]) or 1
            unit = m["unit"]
            add(
                m, _months_back(today, n) if "月" in unit else today - dt.timedelta(days=n * (1 if unit == "天" else 7))
            )
        elif m["en_unit"]:
            n = int(m["en_n"]) if m["en_n"].isdigit() else _EN_NUMBERS[m["en_n"].lower()]
            unit = m["en_unit"].lower()
            if unit.startswith("month"):
                add(m, _months_back(today, n))
            else:
                add(m, today - dt.timedelta(days=n * (7 if unit.startswith("week") else 1)))
        elif m["zh_prev"] or m["en_prev"]:
            prev = (m["zh_prev"] or m["en_prev"]).lower()
            add(m, _months_back(today, 1) if "月" in prev or prev == "month" else today - dt.timedelta(days=7))
    return [d.isoformat() for _, d in sorted(found)]


# -- enums --------------------------------------------------------------------------------------


def _spaced(text: str) -> str:
    """Lower case, full-width ASCII folded, runs of spaces as one: synonyms match across spacing
    variants listed in the config ("12期", "12 期") while word boundaries stay visible."""
    out = []
    for ch in text.lower():
        code = ord(ch)
        if 0xFF01 <= code <= 0xFF5E:
            ch = chr(code - 0xFEE0)
        out.append(" " if ch.isspace() else ch)
    return re.sub(r" +", " ", "".join(out))


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def enum_values(text: str, values: dict[str, list[str]]) -> list[str]:
    """Enum values whose name or a synonym occurs in the text, in order of occurrence; the longest
    synonym wins where two overlap ("12期" is not "2期"), and a synonym must not start or end inside a
    Latin word or a number ("3" is not in "M3", "a year" not in "ideal year")."""
    low = _spaced(text)
    hits: list[tuple[int, int, str]] = []
    for value, synonyms in values.items():
        # The value's own name counts too, unless it is a bare number ("12" in "Gen 12" is no period count).
        for syn in {*synonyms, *(() if value.strip().isdigit() else (value,))}:
            k = _spaced(syn).strip()
            if not k:
                continue
            start = low.find(k)
            while start >= 0:
                end = start + len(k)
                before = low[start - 1] if start else ""
                after = low[end] if end < len(low) else ""
                clash = (_ascii_alnum(k[0]) and _ascii_alnum(before)) or (_ascii_alnum(k[-1]) and _ascii_alnum(after))
                if not clash:
                    hits.append((start, end, value))
                start = low.find(k, start + 1)
    hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
    out: list[tuple[int, str]] = []
    last_end = -1
    for start, end, value in hits:
        if start >= last_end:
            out.append((start, value))
            last_end = end
    return [v for _, v in out]


# -- products -----------------------------------------------------------------------------------

_TITLE_TAIL = re.compile(
    r"\s*(?:[-–—|｜]\s*[^-–—|｜]*$)|\s*(?:商品详情|产品详情|详情页|product details?|specs?)\s*$", re.IGNORECASE
)


# Chinese brand names and the Latin ones customers write in English ("Xiaomi 15 Pro" is "小米 15 Pro").
BRAND_ALIASES = {
    "小米": "xiaomi",
    "华为": "huawei",
    "三星": "samsung",
    "苹果": "apple",
    "联想": "lenovo",
    "荣耀": "honor",
    "红米": "redmi",
    "一加": "oneplus",
}


@dataclass(frozen=True, slots=True)
class ProductName:
    name: str
    key: str


class ProductCatalog:
    """Product names from the knowledge base's document titles: a title that names a product (a model
    name, as `facts.products` finds them), without the shop's suffix ("iPhone 16 Pro 商品详情 - 星辰数码"
    is "iPhone 16 Pro"). Matching is case-, width- and space-blind; the longest name wins."""

    def __init__(self, titles: Iterable[str]) -> None:
        titles = list(titles)
        names: dict[str, ProductName] = {}
        for title in titles:
            name = _TITLE_TAIL.sub("", _TITLE_TAIL.sub("", title.strip())).strip()
            if not name or not products(name):
                continue
            key = _key(name)
            names.setdefault(key, ProductName(name, key))
            # A Chinese brand prefix is often left out ("Galaxy S25 Ultra" for "三星 Galaxy S25 Ultra").
            bare = re.sub(r"^[\u4e00-\u9fff]{2}\s*(?=[A-Za-z0-9])", "", name)
            if bare != name:
                brand = name[:2]
                if bare[:1].isalpha():  # "Galaxy S25 Ultra": the model name alone says the product
                    names.setdefault(_key(bare), ProductName(name, _key(bare)))
                if brand in BRAND_ALIASES:
                    alias = BRAND_ALIASES[brand] + _key(bare)
                    names.setdefault(alias, ProductName(name, alias))
        self.names = sorted(names.values(), key=lambda p: -len(p.key))
        self.words = title_words(titles)
        self.concepts = title_concepts(self.words)

    def find(self, text: str) -> list[str]:
        key = _key(text)
        hits: list[tuple[int, int, str]] = []
        for p in self.names:
            start = key.find(p.key)
            while start >= 0:
                end = start + len(p.key)
                after = key[end] if end < len(key) else ""
                # "iphone16" must not match inside "iphone16pro" when the longer name exists: handled by
                # longest-first below; a trailing digit must not continue ("s25" in "s250").
                if not (p.key[-1].isdigit() and after.isdigit()):
                    hits.append((start, end, p.name))
                start = key.find(p.key, start + 1)
        hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
        out: list[tuple[int, str]] = []
        last_end = -1
        for start, end, name in hits:
            if start >= last_end:
                out.append((start, name))
                last_end = end
        found = [n for _, n in out]
        if found:
            return found
        # A product the catalog does not list is still a product ("Pixel 9"), an order number is not.
        return [p.text for p in products(text) if not order_numbers(p.text) and not _ORDER_WORD.search(p.text)]


# A word in this many of a knowledge base's titles or more is the shop's or a page kind's ("商品", "政策",
# the shop's name), not a family of products or a service.
_COMMON_TITLE_WORD = 3


def title_words(titles: Iterable[str]) -> frozenset[str]:
    """The topic words of the knowledge base's titles that name a family of products or a service of the
    shop ("空调", "睡袋", "rental", "发票"): a question naming one the conversation has not is likely about
    something new."""
    counts: dict[str, int] = {}
    for title in titles:
        for word in text_topic_words(title):
            counts[word] = counts.get(word, 0) + 1
    return frozenset(w for w, n in counts.items() if n < _COMMON_TITLE_WORD)


def title_concepts(words: Iterable[str]) -> frozenset[str]:
    """The glossary's concepts of the title words (`title_words`: not the shop's name or a page kind's word):
    a family or a service the titles name in one language ("电饭煲", "会员") is one a question names in the
    other ("rice cooker", "membership"). Word by word: the concepts of whole titles add the services every
    shop has a page on (payment, instalments), which mid-purchase side questions name too."""
    return frozenset().union(*(concepts(w) for w in words))


_ORDER_WORD = re.compile(r"^(?:order|no|number)\b", re.IGNORECASE)


# -- free text ----------------------------------------------------------------------------------

# Clause ends; a comma or dot before a digit belongs to a date or a number ("February 3, 2025").
_CLAUSE_END = re.compile(r"[，。！？；\n]|[,.!?;](?!\s?\d)")


def text_value(text: str, cues: Sequence[str]) -> str | None:
    """The clause holding one of `cues` (the last such clause), trimmed."""
    last = None
    keyed = [c.lower() for c in cues]
    for part in _CLAUSE_END.split(text):
        clause = part.strip()
        low = clause.lower()
        if clause and any(c in low for c in keyed):
            last = clause
    return last


# -- one intent's slots -------------------------------------------------------------------------


class SlotExtractor:
    def __init__(self, catalog: ProductCatalog | None = None, today: dt.date | None = None) -> None:
        self.catalog = catalog or ProductCatalog(())
        self.today = today

    def extract_slot(self, slot: SlotSpec, text: str) -> str | None:
        values: list[str]
        if slot.type == "order_no":
            values = order_numbers(text)
        elif slot.type == "phone":
            values = phones(text)
        elif slot.type == "date":
            values = dates(text, self.today)
        elif slot.type == "enum":
            values = enum_values(text, slot.values)
        elif slot.type == "product":
            values = self.catalog.find(text)
        else:
            found = text_value(text, slot.cues) if slot.cues else None
            values = [found] if found else []
        return values[-1] if values else None

    def extract(self, intent: IntentSpec, text: str, asked: str | None = None) -> dict[str, str]:
        """The slots of `intent` the text states. `asked` is the slot the previous turn asked for: a reply
        to it that no typed extractor reads (a fault described in free words) fills a text slot whole."""
        out: dict[str, str] = {}
        for slot in intent.slots:
            value = self.extract_slot(slot, text)
            if value is not None:
                out[slot.name] = value
        spec = intent.slot(asked) if asked else None
        if spec is not None and spec.type == "text" and spec.name not in out and text.strip():
            clean = text.strip()
            if not any(clean == v for v in out.values()):
                out[spec.name] = clean[:200]
        return out

    def validate(self, slot: SlotSpec, value: str) -> str | None:
        """A value from elsewhere (the LLM) read by the slot's own type: normalised, or None if it is not
        one (an order number the extractor cannot find in it is not an order number)."""
        if slot.type in ("text", "product"):
            value = value.strip()
            return value[:200] or None
        return self.extract_slot(slot, value)
