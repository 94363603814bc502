"""The shared text rules (rag_core.text): character classes, language, headings, sentences, stop words."""

from __future__ import annotations

import random
import re

import pytest

from rag_core.text import (
    EN_GENERIC_WORDS,
    EN_STOP_WORDS,
    HAN,
    HAN_RUN,
    MAX_PENDING_CHARS,
    UNSPACED_CHARS,
    WIDE_CHARS,
    ZH_STOP_WORDS,
    fail_fast,
    has_han,
    is_heading,
    language,
    split_sentences,
    stream_sentences,
)
from rag_core.tokens import HeuristicCounter, TiktokenCounter

# ---------------------------------------------------------------- character classes


@pytest.mark.parametrize(
    "char",
    ["价", "㐀", "\u9fa5", "豈", "\U00020000"],  # unified, extension A, compatibility, extension B
)
def test_han_covers_every_block_of_ideographs(char: str) -> None:
    assert HAN.fullmatch(char)
    assert has_han(f"iPhone {char}")


@pytest.mark.parametrize("char", ["a", "7", "。", "，", "あ", "ア", "한", "\u4dc0"])
def test_han_is_ideographs_only(char: str) -> None:
    assert HAN.fullmatch(char) is None


def test_han_run_is_a_whole_chinese_word_between_latin() -> None:
    assert HAN_RUN.findall("iPhone 16 多少钱 in 上海") == ["多少钱", "上海"]


def test_unspaced_scripts_are_chinese_and_its_punctuation_not_korean_or_latin() -> None:
    unspaced = re.compile(f"[{UNSPACED_CHARS}]")
    assert all(unspaced.fullmatch(c) for c in "价。，（）Ａ\u3000")
    assert not any(unspaced.fullmatch(c) for c in "a한.,")


def test_wide_characters_add_kana_and_hangul_to_the_unspaced_ones() -> None:
    wide = re.compile(f"[{WIDE_CHARS}]")
    assert all(wide.fullmatch(c) for c in "价。，あア한")
    assert not any(wide.fullmatch(c) for c in "a7.,é")
    # The heuristic counter prices a wide character at 1.5 tokens and anything else at a quarter.
    assert HeuristicCounter().count("保修한あ") == 6
    assert HeuristicCounter().count("abcd efgh") == 2


# ---------------------------------------------------------------- exact token counts

_PARTS = [
    ">",
    "\n",
    "\r",
    "/",
    " ",
    "<",
    "Ab",
    "doc",
    "保修",
    "。",
    "12345",
    "'s",
    "\t",
    "</document>",
    "＞",
    "é",
    ">\n/",
]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_tiktoken_counts_are_the_encoders_own_whatever_follows_a_block(
    encoding: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    counter = TiktokenCounter(encoding, str(tmp_path_factory.getbasetemp() / "tiktoken"))
    block = '<document index="1" title="Kettle K2" source="kb/k2.md">\n保修两年。Warranty: 2 years.\n</document>'
    # A line break after a ">" joins the next piece when that piece starts with another line break, a
    # carriage return or (o200k_base) a slash; any other character starts a piece of its own.
    texts = [
        f"资料：\n<documents>\n{block}\n{block}\n</documents>\n\n用户的问题：保修多久？",
        f"{block}\n\n\n {block}",
        f"{block}\n/{block}\r\n{block}\n\r{block}>\n\n",
        "a>\n\tb>\n'sc>\n12",
    ]
    rnd = random.Random(7)
    texts += ["".join(rnd.choice(_PARTS) for _ in range(rnd.randint(1, 40))) for _ in range(3000)]
    for text in texts + texts:  # the second time from remembered parts
        assert counter.count(text) == len(counter.encode(text)), repr(text)


# ---------------------------------------------------------------- language and headings


@pytest.mark.parametrize(
    ("text", "lang"),
    [("iPhone 16 Pro 256GB 多少钱", "zh"), ("How much is the 多少钱 option today please", "en"), ("", "en")],
)
def test_language_is_the_script_that_carries_the_text(text: str, lang: str) -> None:
    assert language(text) == lang


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("价格与存储容量", True),
        ("一、7 天无理由退货", True),
        ("Shipping fees and delivery times", True),
        ("- 7 天无理由退货", False),
        ("保修期为一年。", False),
        ("价格：5999 元", False),
        ("", False),
    ],
)
def test_is_heading(line: str, heading: bool) -> None:
    assert is_heading(line) is heading


# ---------------------------------------------------------------- sentences


def test_sentences_cut_at_chinese_and_english_ends_and_line_breaks() -> None:
    text = "保修一年。需要发票吗？需要；请保留。\nWarranty is one year. Is it free? Yes!"
    assert split_sentences(text) == [
        "保修一年。",
        "需要发票吗？",
        "需要；",
        "请保留。",
        "Warranty is one year.",
        "Is it free?",
        "Yes!",
    ]


def test_sentences_keep_decimals_abbreviations_and_list_numbers_whole() -> None:
    text = "My budget is 3.5k, e.g. the Pro. Mr. Smith paid $3.50 today. 1. Install it"
    assert split_sentences(text) == ["My budget is 3.5k, e.g. the Pro.", "Mr. Smith paid $3.50 today.", "1. Install it"]


def test_sentences_are_whitespace_normalised_and_never_empty() -> None:
    assert split_sentences("  第一段  第一句\t话\u200b \n\n\n \u3000 ") == ["第一段 第一句 话"]
    assert split_sentences("") == []


def test_stream_gives_the_same_sentences_wherever_the_blocks_are_cut() -> None:
    text = "他说：“可以退货。”然后离开了。See e.g. the FAQ. Next one!\nLast"
    whole = split_sentences(text)
    for cut in range(1, len(text)):
        assert [s for s, _ in stream_sentences([text[:cut], text[cut:]])] == whole


def test_stream_separators_say_how_sentences_were_joined() -> None:
    assert list(stream_sentences(["一句。二句\nThree. Four"])) == [
        ("一句。", ""),
        ("二句", "\n"),
        ("Three.", " "),
        ("Four", ""),
    ]


def test_a_line_without_sentence_ends_is_cut_at_the_pending_bound() -> None:
    words = " ".join(["word"] * (MAX_PENDING_CHARS // 2))
    pieces = [s for s, _ in stream_sentences([words[i : i + 1000] for i in range(0, len(words), 1000)])]
    assert len(pieces) > 1
    assert all(len(p) <= MAX_PENDING_CHARS for p in pieces)
    assert " ".join(pieces) == words


# ---------------------------------------------------------------- stop words


def test_stop_words_are_function_words_in_both_languages() -> None:
    assert {"的", "了", "什么"} <= ZH_STOP_WORDS
    assert {"the", "of", "what", "your"} <= EN_STOP_WORDS
    assert not ({"保修", "价格"} & ZH_STOP_WORDS or {"warranty", "iphone"} & EN_STOP_WORDS)


def test_generic_words_extend_the_stop_words_with_words_that_name_no_subject() -> None:
    assert EN_STOP_WORDS < EN_GENERIC_WORDS
    assert {"please", "tell", "customer", "thing"} <= EN_GENERIC_WORDS - EN_STOP_WORDS
    assert not {"warranty", "battery", "refund"} & EN_GENERIC_WORDS


# ---------------------------------------------------------------- fast failing alternations

# Names as a shop's place or category list writes them: look-behinds, word boundaries, a case-sensitive
# abbreviation inside a case-insensitive pattern, optional letters, a class and a repeat that consume.
_NAMES = re.compile(
    r"北川|(?<!new )\bharbor\s?town\b|(?-i:\bNT\b)|lake[sz]ide|\bwest\s+(?:end|gate)\b|[东西]港|(?:river)+bank|ko\.?ln",
    re.IGNORECASE,
)


def test_fail_fast_finds_what_the_pattern_finds_where_it_finds_it() -> None:
    fast = fail_fast(_NAMES)
    assert fast is not _NAMES and fast.flags == _NAMES.flags
    pieces = ["北川", "北", "harbor town", "HarborTown", "new harbor town", "NT", "nt", "Lakeside", "LAKEZIDE",
              "west  end", "West gate", "东港", "港", "riverriverbank", "Köln", "kOLN", "ko.ln", "\u212aoln",
              "la\u017feside", "\u0130", " ", ", ", "x", "9"]  # fmt: skip
    rng = random.Random(5)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert [m.span() for m in fast.finditer(text)] == [m.span() for m in _NAMES.finditer(text)], text
        assert fast.sub("#", text) == _NAMES.sub("#", text)


@pytest.mark.parametrize(
    "pattern",
    [
        re.compile(r"\w+ly|abc"),  # a category: any word character
        re.compile(r"x?y|z"),  # an optional first character
        re.compile(r"(?:)|a"),  # an empty alternative
        re.compile(r"[^a]b|c"),  # a negated class
        re.compile(r"(?i:ab)|cd"),  # case folded inside a case-sensitive pattern
        re.compile(r"\b"),  # nothing consumed
    ],
)
def test_fail_fast_leaves_a_pattern_whose_first_characters_are_unknown(pattern: re.Pattern[str]) -> None:
    assert fail_fast(pattern) is pattern


def test_a_whole_texts_sentences_are_those_the_stream_reads() -> None:
    rng = random.Random(11)
    pieces = ["Price", "e.g.", "Mr.", " ", "\n", "。", "！", ".", "?", "”", ")", "1.", "a", "五", "\u2028", "etc."]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert split_sentences(text) == [s for s, _ in stream_sentences([text])], text
