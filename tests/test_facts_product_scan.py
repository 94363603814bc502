"""`facts.products` reads a text faster than its patterns' plain use: the brand-and-digits pattern is tried only
a few characters before each run of digits, and a run of plain words is turned away before it is taken apart.
Both must find exactly what the plain reading finds."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service import facts

# The pieces of the patterns' hard cases: every brand (a three-character one is the longest reach back), other
# Chinese words, spaces of several kinds, digits \d takes (ASCII, full-width, Arabic-Indic), variant and
# edition words, model letters.
_BRANDS = facts._BRANDS_ZH.split()
_PIECES = st.sampled_from(
    [
        *_BRANDS, "澜舟", "霁", "川", "版", "标准", "的", "，", " ", "  ", "\u3000", "\t", "\n",
        "0", "7", "15", "2031", "３", "٣", "Pro", " Max", " Ultra", " Neo", "X", "s", "GB", "-", "+",
    ]
)  # fmt: skip


def _plain_products(text: str) -> tuple[facts.Product, ...]:
    """`products` as written before the fast paths: both patterns' full scans, every run taken apart."""
    out: list[facts.Product] = []
    taken: list[tuple[int, int]] = []
    for m in facts._BRAND_DIGITS.finditer(text):
        facts._add_name(out, text, m.start(), m.end(), m.group())
        taken.append(m.span())
    for m in facts._NAME_RUN.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            facts._add_name(out, text, m.start(), m.end(), m.group())
    return tuple(out)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECES, max_size=30))
def test_brand_scan_finds_what_the_full_scan_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = [(m.start(), m.end(), m.group()) for m in facts._BRAND_DIGITS.finditer(text)]
    assert [(m.start(), m.end(), m.group()) for m in facts._brand_digit_runs(text)] == expected


def test_brand_scan_reaches_back_over_a_three_character_brand_and_a_space() -> None:
    brand = max(_BRANDS, key=len)
    text = f"买了{brand}\u30007 Pro，又看了澜舟 12 Ultra 和 霁川3 标准版"
    expected = [m.group() for m in facts._BRAND_DIGITS.finditer(text)]
    assert len(expected) == 3 and expected[0].startswith(brand)
    assert [m.group() for m in facts._brand_digit_runs(text)] == expected


def test_brand_scan_starts_after_the_last_match() -> None:
    # "准版3 Pro" would match inside the edition name's match: `finditer` goes on from that match's end.
    text = "澜舟 7 标准版3 Pro"
    expected = [m.group() for m in facts._BRAND_DIGITS.finditer(text)]
    assert expected == ["澜舟 7 标准版"]
    assert [m.group() for m in facts._brand_digit_runs(text)] == expected


# Runs of Latin words: plain ones, ones with a digit, an inner capital, a variant word (any case), a
# non-ASCII letter or digit (the C test only turns away ASCII runs).
_WORDS = st.sampled_from(
    [
        "Return", "policy", "the", "and", "air", "Air", "PRO", "pro", "Max", "mini", "lite", "gen", "Gen", "GB",
        "x1", "A7", "12", "iVista", "ZQue", "ABCdef", "Ok", "İo", "x²", "Fé", "pro+", "-", "--", "",
    ]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(_WORDS, max_size=6), st.sampled_from([" ", "-", " -", "  "]), st.sampled_from(["", " fryer", "第 3 代"])
)
def test_plain_words_are_never_a_name(words: list[str], joint: str, after: str) -> None:
    raw = joint.join(words)
    text = f"买 {raw}{after}"
    fast: list[facts.Product] = []
    plain: list[facts.Product] = []
    facts._add_product(fast, text, 2, 2 + len(raw), raw)
    facts._add_name(plain, text, 2, 2 + len(raw), raw)
    assert fast == plain


@settings(max_examples=800, deadline=None)
@given(st.lists(st.one_of(_PIECES, _WORDS), max_size=30))
def test_products_reads_what_the_plain_reading_reads(pieces: list[str]) -> None:
    text = " ".join(pieces)
    assert facts.products.__wrapped__(text) == _plain_products(text)


def test_an_ascii_run_is_turned_away_only_without_digit_inner_capital_or_variant_word() -> None:
    assert facts._plain_words("Return policy")
    for raw in ("Return policy 2", "Return PolicyMax", "return Pro policy", "iVista", "Fé 2"):
        assert not facts._plain_words(raw), raw
    # A variant word counts only as a whole word ("prong" is none), as in the name test.
    assert facts._plain_words("prong")
    assert re.fullmatch(r"[\x00-\x7f]*", "Return policy")
