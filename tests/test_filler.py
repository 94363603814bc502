"""The embedded query leaves the customer's conversational filler out (`rag_service.filler`); retrieval, the
FAQ matcher and the rewrite gate embed the same text, so a turn pays for one embedding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from rag_core.embedding import CachedQueryEmbedder, Embedder
from rag_core.settings import RetrievalSettings, RewriteSettings
from rag_core.vectorstore import VectorIndex
from rag_service.filler import search_text
from rag_service.retrieval import Retriever
from rag_service.rewrite import RuleRewriter
from tests.test_rewrite import view


@pytest.mark.parametrize(
    ("query", "embedded"),
    [
        # Greetings, thanks and requests to be told, in either language.
        ("您好，请问蓝鲸 K3 净水器的滤芯几个月更换？谢谢！", "蓝鲸 K3 净水器的滤芯几个月更换？"),
        ("哈喽~ 麻烦问一下，露营灯能带上飞机吗", "露营灯能带上飞机吗"),
        ("在吗？帮我查一下会员积分的有效期", "会员积分的有效期"),
        ("能不能告诉我一下周日几点开门", "周日几点开门"),
        (
            "Hello there! Could you please tell me how heavy the Ridgeway 2 tent is? Thanks so much.",
            "how heavy the Ridgeway 2 tent is?",
        ),
        ("Hi I was wondering whether the Nimbus kettle has a keep-warm mode", "the Nimbus kettle has a keep-warm mode"),
        # Announcements that a question follows, discourse markers, reactions to the last answer.
        ("我有几个问题想咨询一下，儿童座椅能装在后排中间吗", "儿童座椅能装在后排中间吗"),
        ("我还想顺便问一下，Z8 投影仪支持 4K 吗", "Z8 投影仪支持 4K 吗"),
        ("对了，寄到海南要几天", "寄到海南要几天"),
        ("好的谢谢，那以旧换新怎么算", "那以旧换新怎么算"),
        ("Quick question: do the Orbit earbuds pair with two phones?", "do the Orbit earbuds pair with two phones?"),
        ("Ok great. By the way, is gift wrapping free?", "is gift wrapping free?"),
        ("Is the Orbit case waterproof, by the way?", "Is the Orbit case waterproof?"),
        # A product the rewriter put in front keeps its place.
        ("Orbit Pro 请问续航多久", "Orbit Pro 续航多久"),
    ],
)
def test_filler_is_left_out_of_the_embedded_query(query: str, embedded: str) -> None:
    assert search_text(query) == embedded


@pytest.mark.parametrize(
    "query",
    [
        # Words that open clauses as filler elsewhere but say something here.
        "还有货吗？",
        "另外一个颜色多少钱",
        "客服电话多少",
        "亲子款有大码吗",
        "老板椅能调高度吗",
        "那个呢？",
        "和我的旧订单一起寄可以吗",
        "So many colours, which one hides dirt best?",
        "Can you ship to Norway?",
        # Nothing but filler: kept whole (retrieval then searches what was said).
        "你好",
        "谢谢！",
        "Thanks a lot!",
        "ok",
    ],
)
def test_content_and_pure_filler_stay_as_they_are(query: str) -> None:
    assert search_text(query) == query


class Recording:
    """An embedder that remembers the texts it was asked to embed (behind the service's query cache)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.texts = inner, list[str]()
        self.name, self.dim, self.remote = inner.name, inner.dim, inner.remote

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.texts.append(text)
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed_passages(texts)


async def test_retrieval_embeds_the_query_without_filler(kb_index: VectorIndex, embedder: Embedder) -> None:
    recording = Recording(embedder)
    retriever = Retriever(kb_index, recording, RetrievalSettings())
    question = "你好，麻烦问一下，小米 15 Pro 有哪些颜色？谢谢"
    leaned = await retriever.search(question)
    assert recording.texts == ["小米 15 Pro 有哪些颜色？"]
    # Only the embedding leaves the filler out: the candidates are the plain question's.
    plain = await Retriever(kb_index, embedder, RetrievalSettings()).search("小米 15 Pro 有哪些颜色？")
    assert [c.id for c in leaned] == [c.id for c in plain]


async def test_the_gate_and_retrieval_share_one_embedding(kb_index: VectorIndex, embedder: Embedder) -> None:
    """A question the gate compares with the earlier ones and retrieval then searches as asked costs one
    embedding, and the earlier question the gate compares with is the text its own retrieval embedded."""
    recording = Recording(embedder)
    asked = Recording(CachedQueryEmbedder(recording, 64))  # every text asked for, cached or not
    rewriter = RuleRewriter(RewriteSettings(mode="rule"), asked)
    retriever = Retriever(kb_index, asked, RetrievalSettings())
    first = "您好，请问门店周末几点关门？"
    await retriever.search((await rewriter.rewrite(first, view())).query)
    recording.texts.clear()
    asked.texts.clear()
    # A subject of its own with no word shared with the conversation: the gate reads its similarity.
    second = "麻烦问一下，会员生日有优惠吗？"
    result = await rewriter.rewrite(second, view((first, "周末 10:00-22:00。")))
    assert result.action == "skipped"
    await retriever.search(result.query)
    lean = "会员生日有优惠吗？"
    assert asked.texts == [lean, "门店周末几点关门？", lean]  # the gate's two, then retrieval's
    assert recording.texts == [lean]
