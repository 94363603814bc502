"""Sentence splitting and chunk packing: boundaries, the token bound, overlap, streaming."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from rag_core.documents.chunker import MAX_PENDING_CHARS, chunk_text, split_sentences
from rag_core.settings import TokenSettings
from rag_core.tokens import HeuristicCounter, TokenCounter, make_counter

ZH = (
    "星辰数码提供一年保修。保修期从签收之日起计算！需要发票吗？需要；请保留好发票。"
    "他说：“可以退货。”然后离开了。小米 15 Pro 的价格是 4299 元，支持 6.1 寸屏幕。"
)
EN = (
    "The warranty covers one year. It starts on delivery! Do you need a receipt? Yes. "
    "Version 6.1 fixed it, e.g. the battery issue. Mr. Smith paid $3.50 for it. "
    "Returns are free within 7 days."
)


@pytest.fixture(scope="module")
def tiktoken_counter(tmp_path_factory: pytest.TempPathFactory) -> TokenCounter:
    return make_counter(TokenSettings(counter="tiktoken", cache_dir=str(tmp_path_factory.mktemp("tiktoken"))))


@pytest.fixture(params=["tiktoken", "heuristic"])
def counter(request: pytest.FixtureRequest, tiktoken_counter: TokenCounter) -> TokenCounter:
    return tiktoken_counter if request.param == "tiktoken" else HeuristicCounter()


def corpus(repeat: int = 4) -> str:
    numbered = "\n".join(f"第{i}条：这是第{i}个段落里的一句话。It is paragraph number {i}." for i in range(40))
    return ((ZH + "\n\n" + EN + "\n") * repeat) + numbered


def common_affix(a: str, b: str) -> str:
    """The longest suffix of `a` that is also a prefix of `b`."""
    for size in range(min(len(a), len(b)), 0, -1):
        if a.endswith(b[:size]):
            return b[:size]
    return ""


# ---------------------------------------------------------------- sentences


def test_chinese_sentence_ends_split_and_keep_closing_quotes() -> None:
    assert split_sentences(ZH) == [
        "星辰数码提供一年保修。",
        "保修期从签收之日起计算！",
        "需要发票吗？",
        "需要；",
        "请保留好发票。",
        "他说：“可以退货。”",
        "然后离开了。",
        "小米 15 Pro 的价格是 4299 元，支持 6.1 寸屏幕。",
    ]


def test_closing_brackets_and_corner_quotes_stay_with_their_sentence() -> None:
    assert split_sentences("「好的。」（已确认。）下一句。") == ["「好的。」", "（已确认。）", "下一句。"]


def test_english_sentence_ends_without_splitting_decimals_or_abbreviations() -> None:
    assert split_sentences(EN) == [
        "The warranty covers one year.",
        "It starts on delivery!",
        "Do you need a receipt?",
        "Yes.",
        "Version 6.1 fixed it, e.g. the battery issue.",
        "Mr. Smith paid $3.50 for it.",
        "Returns are free within 7 days.",
    ]


def test_dot_without_following_space_is_not_an_end() -> None:
    assert split_sentences("See www.example.com or version 2.0.1 now. Next.") == [
        "See www.example.com or version 2.0.1 now.",
        "Next.",
    ]


def test_newlines_and_paragraphs_are_boundaries_and_whitespace_is_normalised() -> None:
    text = "  标题一\r\n\r\n  第一段  第一句\t话\n\n\n1. Install it\n2. Run   it \u3000\n"
    assert split_sentences(text) == ["标题一", "第一段 第一句 话", "1. Install it", "2. Run it"]


# ---------------------------------------------------------------- the bound


@pytest.mark.parametrize(("chunk_tokens", "overlap_tokens"), [(40, 10), (64, 16), (200, 40)])
def test_every_chunk_is_within_the_bound(counter: TokenCounter, chunk_tokens: int, overlap_tokens: int) -> None:
    text = corpus() + "\n" + "无标点的超长句子" * 625 + "\n" + "x" * 5000 + " tail sentence."
    chunks = list(chunk_text([text], counter, chunk_tokens, overlap_tokens))
    assert len(chunks) > 5
    assert all(0 < counter.count(c) <= chunk_tokens for c in chunks)


def test_a_5000_char_sentence_without_punctuation_is_cut_within_the_bound(counter: TokenCounter) -> None:
    sentence = "".join(chr(0x4E00 + (i * 37) % 20000) for i in range(5000))
    chunks = list(chunk_text([sentence], counter, 50, 10))
    assert len(chunks) > 1
    assert all(counter.count(c) <= 50 for c in chunks)
    # Nothing is lost or repeated: overlap is whole sentences, and a cut sentence has none inside it.
    assert "".join(chunks) == sentence


def test_long_latin_sentence_is_cut_at_spaces(tiktoken_counter: TokenCounter) -> None:
    sentence = " ".join(f"word{i}" for i in range(1500))
    chunks = list(chunk_text([sentence], tiktoken_counter, 60, 0))
    assert all(tiktoken_counter.count(c) <= 60 for c in chunks)
    assert " ".join(chunks) == sentence  # every cut fell on a space, none inside a word


def test_sentences_are_packed_whole(tiktoken_counter: TokenCounter) -> None:
    sentences = split_sentences(corpus(2))
    chunks = list(chunk_text([corpus(2)], tiktoken_counter, 80, 0))
    assert len(chunks) > 3
    for chunk in chunks:
        assert all(part in sentences for part in split_sentences(chunk))
    # Without overlap, the chunks are the sentences, in order, each exactly once.
    assert [s for c in chunks for s in split_sentences(c)] == sentences


# ---------------------------------------------------------------- overlap


def test_consecutive_chunks_overlap_by_whole_sentences_within_the_bound(counter: TokenCounter) -> None:
    chunks = list(chunk_text([corpus()], counter, 80, 20))
    assert len(chunks) > 5
    sentences = set(split_sentences(corpus()))
    with_overlap = 0
    for previous, current in itertools.pairwise(chunks):
        shared = common_affix(previous, current)
        if shared.strip():
            with_overlap += 1
            assert counter.count(shared.strip()) <= 20
            assert all(s in sentences for s in split_sentences(shared))
    assert with_overlap >= len(chunks) - 2


def test_zero_overlap_repeats_nothing(tiktoken_counter: TokenCounter) -> None:
    chunks = list(chunk_text([corpus()], tiktoken_counter, 80, 0))
    assert sum(len(split_sentences(c)) for c in chunks) == len(split_sentences(corpus()))


# ---------------------------------------------------------------- streaming


@pytest.mark.parametrize("block_size", [1, 3, 7, 64, 1000])
def test_blocks_split_anywhere_give_the_same_chunks(tiktoken_counter: TokenCounter, block_size: int) -> None:
    text = corpus(2)
    whole = list(chunk_text([text], tiktoken_counter, 60, 15))
    blocks = [text[i : i + block_size] for i in range(0, len(text), block_size)]
    assert list(chunk_text(blocks, tiktoken_counter, 60, 15)) == whole


def test_sentence_straddling_blocks_stays_whole() -> None:
    blocks = ["第一句话。这一句话跨越了两", "个块，仍然完整。The decimal 6", ".1 stays. E.g", ". this too."]
    assert split_sentences("".join(blocks)) == [
        "第一句话。",
        "这一句话跨越了两个块，仍然完整。",
        "The decimal 6.1 stays.",
        "E.g. this too.",
    ]
    chunks = list(chunk_text(blocks, HeuristicCounter(), 30, 0))
    assert any("这一句话跨越了两个块，仍然完整。" in c for c in chunks)
    assert not any(c.endswith("跨越了两") for c in chunks)


def test_chunking_is_lazy(tiktoken_counter: TokenCounter) -> None:
    consumed: list[int] = []

    def blocks() -> Iterator[str]:
        for i in range(1000):
            consumed.append(i)
            yield f"这是第{i}块里的一句完整的话。"

    chunks = chunk_text(blocks(), tiktoken_counter, 40, 10)
    assert consumed == []
    first = next(chunks)
    assert first.startswith("这是第0块")
    assert len(consumed) < 20


def test_text_without_any_boundary_is_still_streamed(tiktoken_counter: TokenCounter) -> None:
    size = 3 * MAX_PENDING_CHARS
    blocks = ("abc " * 2500 for _ in range(size // 10_000))
    chunks = list(chunk_text(blocks, tiktoken_counter, 200, 40))
    assert all(0 < tiktoken_counter.count(c) <= 200 for c in chunks)
    assert sum(c.count("abc") for c in chunks) >= 2500 * (size // 10_000)


def test_no_empty_chunks(tiktoken_counter: TokenCounter) -> None:
    assert list(chunk_text(["", "   \n\n\t", "\u3000"], tiktoken_counter, 40, 10)) == []
    chunks = list(chunk_text(["\n\n一。\n\n\n二。 \n", "", "  三。"], tiktoken_counter, 40, 10))
    assert chunks == ["一。\n二。\n三。"]


def test_bad_parameters_are_rejected_eagerly(tiktoken_counter: TokenCounter) -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_text(["x"], tiktoken_counter, 40, 40)
    with pytest.raises(ValueError, match="chunk_tokens"):
        chunk_text(["x"], tiktoken_counter, 2, 0)
