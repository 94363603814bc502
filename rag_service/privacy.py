"""PII masking: mainland mobile numbers, Chinese resident ID numbers, bank card numbers and e-mail
addresses, in stored message content and in log lines.

    13812345678            -> 138****5678          (first 3, last 4)
    11010519491231002X     -> 110105********002X   (first 6, last 4)
    6222021234567890128    -> ***************0128  (last 4)
    alice@example.com      -> a***@example.com     (first character and the domain)

A long digit run is not PII by its length alone: Taobao-style order numbers are 18-19 digits, the very
thing the conversation memory exists to keep. So a 16-19 digit run is a bank card only when its Luhn
check digit is right, an 18-character run an ID number only when its GB 11643 check character and birth
date are (python-stdnum implements both), and a number right after 订单 / 订单号 / 单号 / order / order
no. / order number / order # is an order number and is never masked, whatever checks it passes. A random
number passes the Luhn check one time in ten, so those checks alone would still mask one order number in
ten; the context rule keeps it.

Numbers are only recognised between non-alphanumeric characters (Chinese text counts as a boundary), so
an order number such as XC20250301000123 is never touched, and the shop hotline 400-820-1234 matches
no pattern (and is listed among the spans that are always kept, in case an override is broader).
"""

from __future__ import annotations

import datetime
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stdnum import luhn
from stdnum.cn import ric
from stdnum.exceptions import ValidationError

from rag_core.settings import PrivacySettings

_B = r"(?<![0-9A-Za-z])"  # ASCII boundaries: \b would not separate digits from Chinese characters
_E = r"(?![0-9A-Za-z])"

DEFAULT_PATTERNS: dict[str, str] = {
    "email": r"(?<![A-Za-z0-9._%+-])(?P<value>[A-Za-z0-9._%+-]+)@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}",
    "id_card": _B + r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]" + _E,
    "bank_card": _B + r"(?:\d{16,19}|\d{4}(?:[ -]\d{4}){3}(?:[ -]?\d{1,3})?)" + _E,
    "phone": _B + r"(?:(?:\+|00)?86[ -]?)?(?P<value>1[3-9]\d(?:[ -]?\d{4}){2})" + _E,
}

# What a default pattern's match must contain, as a pattern the regex engine finds by its first characters
# (the default patterns start with a lookbehind, so their scan tries every position): a text without it is
# not scanned. Each is 2-40x faster than its pattern on a text it is not in (an ID number is 18 characters,
# the first 17 digits; a card number has four digits, a digit or separator and four digits).
_HINTS: dict[str, str] = {
    "email": "@",
    "id_card": r"[1-9]\d{16}[\dXx]",
    "bank_card": r"\d\d{3}[ \d-]\d{4}",
    "phone": r"1[3-9]\d(?:[ -]?\d{4}){2}",
}

# What each kind keeps: (leading characters, trailing characters, fixed number of stars or None for one
# per hidden character).
_KEEP: dict[str, tuple[int, int, int | None]] = {
    "email": (1, 0, 3),
    "id_card": (6, 4, None),
    "bank_card": (0, 4, None),
    "phone": (3, 4, None),
}

DEFAULT_KEEP_PATTERNS: list[str] = [
    _B + r"400[- ]?\d{3}[- ]?\d{4}" + _E,  # the shop's hotline format
    _B + r"[A-Z]{1,4}\d{8,24}" + _E,  # order and ticket numbers such as XC20250301000123
]
# As _HINTS, for the default keep patterns.
_KEEP_HINTS: dict[str, str] = dict(zip(DEFAULT_KEEP_PATTERNS, ["400", r"[A-Z]\d{8}"], strict=True))

# An order number: the identifier right after the word for it, with at most a few connecting characters
# ("订单号是 3187…", "订单号码为：3187…", "order no. 3187…", "Order #3187…"): at least 6 characters, a
# digit among them. Only the identifier is kept, not the rest of the sentence.
ORDER_CONTEXT = re.compile(
    r"(?P<label>订单(?:编号|号码|号)?|单号|(?<![A-Za-z])order(?:\s*(?:no\.?|number|num\.?|id|#))?)"
    r"[\s:：#＃=是为]{0,4}(?P<value>(?=[0-9A-Za-z-]*\d)[0-9A-Za-z][0-9A-Za-z-]{4,}[0-9A-Za-z])" + _E,
    re.IGNORECASE,
)
# Its labels alone: a scan for them is ~15x faster than one of ORDER_CONTEXT (whose lookbehind and
# case-folded alternation leave the regex engine no prefix to skip to), and no order number can start
# before the first of them.
_ORDER_LABEL = re.compile(r"订单|单号|order", re.IGNORECASE)


def order_numbers(text: str) -> list[re.Match[str]]:
    """ORDER_CONTEXT's matches in `text` (the same as `ORDER_CONTEXT.finditer(text)`)."""
    first = _ORDER_LABEL.search(text)
    # The lookbehind sees the characters before `pos`, so starting there changes no match.
    return [] if first is None else list(ORDER_CONTEXT.finditer(text, first.start()))


def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isalnum())


def luhn_valid(value: str) -> bool:
    """A card number's check digit is right (separators ignored)."""
    number = _digits(value)
    return number.isdigit() and luhn.is_valid(number)


def resident_id_valid(value: str, today: datetime.date | None = None) -> bool:
    """An 18-character resident ID number: the check character is right and the birth date is a real
    day between 1900 and today. The region code is not looked up: stdnum's table of counties lags behind
    re-coded districts, and an unmasked real ID number costs more than a masked unusual one."""
    number = _digits(value).upper()
    if len(number) != 18 or not number[:17].isdigit() or ric.calc_check_digit(number) != number[-1]:
        return False
    try:
        born = ric.get_birth_date(number)
    except ValidationError:
        return False
    return datetime.date(1900, 1, 1) <= born <= (today or datetime.date.today())


# A match of these kinds is only PII when its number checks out.
CHECKS: dict[str, Callable[[str], bool]] = {"bank_card": luhn_valid, "id_card": resident_id_valid}


@dataclass(frozen=True)
class MaskRule:
    kind: str
    pattern: re.Pattern[str]
    keep_first: int
    keep_last: int
    stars: int | None = None
    # Whether the value (the `value` group, or the whole match) really is one of this kind.
    check: Callable[[str], bool] | None = None
    # Found in every text the pattern matches (None: no such shortcut).
    hint: re.Pattern[str] | None = None

    def value_span(self, match: re.Match[str]) -> tuple[int, int]:
        return match.span("value") if "value" in self.pattern.groupindex else match.span()

    def applies(self, match: re.Match[str]) -> bool:
        s, e = self.value_span(match)
        return self.check is None or self.check(match.string[s:e])

    def mask(self, match: re.Match[str]) -> str:
        """The match with its `value` group (or all of it) masked; separators inside the value dropped."""
        span = self.value_span(match)
        text = match.group(0)
        start, end = span[0] - match.start(), span[1] - match.start()
        value = text[start:end]
        if self.kind != "email":
            value = _digits(value)
        hidden = len(value) - self.keep_first - self.keep_last
        if hidden <= 0:
            masked = "*" * (self.stars or len(value))
        else:
            tail = value[len(value) - self.keep_last :] if self.keep_last else ""
            masked = value[: self.keep_first] + "*" * (self.stars or hidden) + tail
        return text[:start] + masked + text[end:]


# Masked strings remembered (a few thousand chunk texts and messages: a few MB at most).
MASK_CACHE = 2048


class Masker:
    """Masks every non-overlapping match; earlier rules win (e-mail, ID, bank card, phone). Spans of the
    keep patterns and order numbers in their context are never masked."""

    def __init__(
        self,
        rules: Iterable[MaskRule] | None = None,
        keep: Iterable[str] | None = None,
        *,
        keep_order_numbers: bool = True,
    ) -> None:
        self.rules = list(rules) if rules is not None else default_rules()
        patterns = DEFAULT_KEEP_PATTERNS if keep is None else keep
        # (pattern, what its every match contains or None)
        self.keep = [(re.compile(p), re.compile(_KEEP_HINTS[p]) if p in _KEEP_HINTS else None) for p in patterns]
        self.keep_order_numbers = keep_order_numbers
        # The same strings come back: within a turn (a message is masked when it is stored and again in
        # the turn's receipt, the rewritten query is often the question) and turn after turn (the texts of
        # the chunks a receipt's sources quote). Thread-safe, as the log filter needs; the rules are fixed
        # once made.
        self._cached_mask = functools.lru_cache(maxsize=MASK_CACHE)(self._mask)

    @classmethod
    def from_settings(cls, settings: PrivacySettings) -> Masker | None:
        """None when masking is disabled."""
        if not settings.enabled:
            return None
        rules = default_rules(settings.patterns, checks=settings.validate_checksums)
        return cls(rules, settings.keep_patterns, keep_order_numbers=settings.keep_order_numbers)

    def kept_spans(self, text: str) -> list[tuple[int, int]]:
        spans = [m.span() for p, hint in self.keep if hint is None or hint.search(text) for m in p.finditer(text)]
        if self.keep_order_numbers:
            spans += [m.span("value") for m in order_numbers(text)]
        return spans

    def _found(self, text: str) -> list[tuple[int, int, MaskRule, re.Match[str]]]:
        taken = self.kept_spans(text)
        found: list[tuple[int, int, MaskRule, re.Match[str]]] = []
        for rule in self.rules:
            if rule.hint is not None and rule.hint.search(text) is None:
                continue
            for m in rule.pattern.finditer(text):
                s, e = m.span()
                if s == e or any(s < te and ts < e for ts, te in taken) or not rule.applies(m):
                    continue
                taken.append((s, e))
                found.append((s, e, rule, m))
        return sorted(found, key=lambda f: f[0])

    def mask(self, text: str) -> str:
        # Every rule's match holds a digit or an "@" (`map` of the C method: a generator per character
        # was most of the cost of a text with neither).
        if not text or ("@" not in text and not any(map(str.isdigit, text))):
            return text
        return self._cached_mask(text)

    def _mask(self, text: str) -> str:
        found = self._found(text)
        if not found:
            return text
        out: list[str] = []
        pos = 0
        for s, e, rule, m in found:
            out += [text[pos:s], rule.mask(m)]
            pos = e
        out.append(text[pos:])
        return "".join(out)

    def kinds(self, text: str) -> list[str]:
        """Which kinds `mask` would mask in `text` (diagnostics and tests), in rule order."""
        seen = {rule.kind for _, _, rule, _ in self._found(text)}
        return [r.kind for r in self.rules if r.kind in seen]


def default_rules(overrides: Mapping[str, str] | None = None, *, checks: bool = True) -> list[MaskRule]:
    patterns = {**DEFAULT_PATTERNS, **(overrides or {})}
    rules: list[MaskRule] = []
    for kind, (first, last, stars) in _KEEP.items():
        pattern = patterns[kind]
        if pattern:
            check = CHECKS.get(kind) if checks else None
            hint = _HINTS.get(kind) if pattern == DEFAULT_PATTERNS[kind] else None
            rules.append(
                MaskRule(kind, re.compile(pattern), first, last, stars, check, re.compile(hint) if hint else None)
            )
    return rules


class MaskingFilter(logging.Filter):
    """Masks a record's message (with its args merged in), exception text and stack info.

    Attach to handlers (`handler.addFilter(...)`): a filter on a logger does not see records that
    propagate from child loggers. `install_log_masking` covers every logger instead.
    """

    def __init__(self, masker: Masker) -> None:
        super().__init__()
        self.masker = masker

    def filter(self, record: logging.LogRecord) -> bool:
        mask_record(record, self.masker)
        return True


def mask_record(record: logging.LogRecord, masker: Masker) -> logging.LogRecord:
    if getattr(record, "_pii_masked", False):
        return record
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: let logging report it as usual
        return record
    masked = masker.mask(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and not record.exc_text:
        record.exc_text = masker.mask(logging.Formatter().formatException(record.exc_info))
    elif record.exc_text:
        record.exc_text = masker.mask(record.exc_text)
    if record.stack_info:
        record.stack_info = masker.mask(record.stack_info)
    setattr(record, "_pii_masked", True)  # noqa: B010
    return record


_installed: dict[str, Callable[..., logging.LogRecord]] = {}


def install_log_masking(masker: Masker) -> None:
    """Masks every log record at creation (all loggers and handlers, uvicorn's included). Idempotent:
    a second call replaces the masker."""
    base = _installed.get("base") or logging.getLogRecordFactory()
    _installed["base"] = base

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return mask_record(base(*args, **kwargs), masker)

    logging.setLogRecordFactory(factory)


def uninstall_log_masking() -> None:
    base = _installed.pop("base", None)
    if base is not None:
        logging.setLogRecordFactory(base)
