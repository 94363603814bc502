"""A page the best chunk refers to by title ("价格见《…》") is taken in second (`Retriever._referred`,
`Bridge.referred`; invented stationery shop)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_core.settings import RetrievalSettings
from rag_core.vectorstore import VectorIndex
from rag_service.bridge import Bridge, Bridges
from rag_service.domain import Chunk
from rag_service.retrieval import Retriever

TITLES = {
    "文具配件价格表": ("parts",),
    "inkwellquillcareplan": ("plan",),
    "inkwell钢笔商品详情": ("pens",),
    "inkwell墨水商品详情": ("inks",),
}
BRIDGE = Bridge({}, {}, {}, titles=TITLES)


def test_a_text_refers_to_a_page_by_its_title_in_book_title_marks() -> None:
    text = "笔尖磨损可以单独换。替换墨囊的价格见《文具配件价格表》。"
    assert BRIDGE.referred(text) == (("parts", "替换墨囊的价格见"),)
    # A name the title contains, spaces and case aside: the one page whose title has it.
    assert [d for d, _ in BRIDGE.referred("退保按《Quill Care Plan》条款办理")] == ["plan"]
    # A name several titles contain, a name no title has, a short name that is not a whole title: none.
    assert BRIDGE.referred("详见《商品详情》") == ()
    assert BRIDGE.referred("详见《会员手册》") == ()
    assert BRIDGE.referred("详见《价格》") == ()


class _Payloads:
    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = {c.id: c for c in chunks}

    async def payloads(self, ids: Sequence[str], tenant: str | None = None) -> dict[str, dict[str, Any]]:
        return {
            i: {"doc_id": c.doc_id, "source": c.source, "title": c.title, "text": c.text, "lang": c.lang}
            for i in ids
            if (c := self.chunks.get(i)) is not None
        }


class _Kept(Bridges):
    async def get(self, index: VectorIndex, tenant: str | None) -> Bridge:
        return BRIDGE


def _chunk(cid: str, doc: str, text: str, score: float) -> Chunk:
    return Chunk(cid, doc, f"{doc}.md", doc, text, score, 10, lang="zh")


async def test_the_referred_page_chunk_that_shares_the_referring_sentence_comes_second() -> None:
    refers = _chunk("pens-1", "pens", "墨囊和吸墨器都能用。替换墨囊的价格见《文具配件价格表》。", 0.92)
    result = [
        refers,
        _chunk("pens-2", "pens", "笔身是树脂。", 0.90),
        _chunk("inks-1", "inks", "瓶装墨水 50 ml。", 0.88),
    ]
    caps = _chunk("parts-1", "parts", "品类: 笔帽 | 售价: 20 元", 0.80)
    cartridges = _chunk("parts-2", "parts", "品类: 替换墨囊 6 支装 | 售价: 12 元", 0.70)
    pool = [(c.id, c.score, "zh") for c in [*result, caps, cartridges]]
    docs = {c.id: c.doc_id for c in [*result, caps, cartridges]}
    retriever = Retriever(_Payloads([caps, cartridges]), None, RetrievalSettings(), bridges=_Kept())  # type: ignore[arg-type]
    got = await retriever._referred("墨囊能单买吗", list(result), pool, docs, None)
    assert [c.id for c in got] == ["pens-1", "parts-2", "pens-2"]
    # A page already among the first three is left where it is.
    near = [refers, caps, result[1]]
    assert await retriever._referred("墨囊能单买吗", list(near), pool, docs, None) == near
    # A question the referring sentence says nothing of takes no page in.
    assert await retriever._referred("能分期付款吗", list(result), pool, docs, None) == result
