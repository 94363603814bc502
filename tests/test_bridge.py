"""The cross-language word bridge from CC-CEDICT (`rag_service.bridge`), on a made-up kite shop: which definitions
make links, that links are cut to the collection's own words, and what the retriever does with them (the real
embedded index, Qdrant Edge and local mode, with four-dimensional vectors and a fixed query embedding)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_core.settings import RetrievalSettings
from rag_core.vectorstore import ChunkPoint, VectorIndex
from rag_service.bridge import MAX_SHARE, Bridges, _gloss_words, build, glosses, stem
from rag_service.retrieval import Retriever
from tests.test_retrieval_across import FixedEmbedder, counted_matching, opened, point

# English pages close to any question (the embedder prefers the question's language); the Chinese repair-parts
# row below every other chunk in the dense ranking, and a Chinese kite page above it.
PATCH_ROW = point("配件价格表", "品类: 修补 | 商品: 补丁 三片装 | 售价: 25 元", "zh", 0.70)
KITE_PAGE = point("燕尾风筝 商品详情", "燕尾风筝翼展 1.8 米，尼龙面料，适合三级风。", "zh", 0.80)
SHOP = [
    point("Flying Guide", "Launch the kite with the wind at your back.", "en", 0.95),
    point("Visitor FAQ", "We send kites to Hong Kong and Macao.", "en", 0.93),
    KITE_PAGE,
    point("门店与营业时间", "西湖店每天 9:00–18:00 营业。", "zh", 0.76),
    PATCH_ROW,
]


def texts(points: Sequence[ChunkPoint]) -> list[tuple[str, str, str]]:
    return [(p.id, p.payload["lang"], f"{p.payload['title']}\n{p.payload['text']}") for p in points]


def test_a_link_comes_from_a_short_definition_that_translates() -> None:
    assert _gloss_words("to mend") == (("mend",), 1.0, "mend")
    # Two words: a Chinese question's link to either weighs half; an English question must say both in a row.
    assert _gloss_words("adhesive tape") == (("adhesive", "tape"), 0.5, "adhesive tape")
    # Not a translation: a classifier list, a surname, a variant, a description of many words.
    for definition in ("CL:个[ge4]", "surname Feng", "variant of 风筝[feng1 zheng1]", "old variant of 补"):
        assert _gloss_words(definition) is None
    assert _gloss_words("to make (wine, vinegar etc) by a slow process") is None
    # A question word's sense or a general word's makes the whole word general (no words).
    assert _gloss_words("how many?") == ((), 0.0, "how many")
    assert _gloss_words("time") == ((), 0.0, "time")
    known = glosses()
    assert (("kite",), 1.0, "kite") in known["风筝"]
    assert "多少" not in known and "时候" not in known
    assert stem("patches") == stem("patch") == "patch"
    assert stem("kite") == "kite"


def test_links_are_cut_to_the_collections_own_words() -> None:
    bridge = build(texts(SHOP))
    # English question -> the Chinese words of the shop's Chinese chunks.
    assert bridge.groups("Is there a patch for a torn sail?", "zh") == ({"补丁": 1.0},)
    assert bridge.groups("Are the sails nylon?", "zh") == ({"尼龙": 1.0},)
    # CC-CEDICT has "glide" (滑翔), the shop does not: no link.
    assert bridge.groups("Can it glide?", "zh") == ()
    # Words the glossary knows (a price, a repair) have their wording there; general words none.
    assert bridge.groups("What is the price of a repair?", "zh") == ()
    # Chinese question -> the English words of the shop's English chunks.
    assert bridge.groups("风筝怎么放", "en") == ({"kite": 1.0, "kites": 1.0},)
    # A Chinese word on most of that language's chunks says nothing about which of them answers.
    many = [
        point(f"页面 {i}", f"风筝款式 {i}，补丁另售。" if i == 0 else f"风筝款式 {i}", "zh", 0.5) for i in range(12)
    ]
    many += [point("Guide", "Patch a torn kite at home.", "en", 0.5)]
    crowded = build(texts(many))
    assert 1 / 12 <= MAX_SHARE < 1
    assert crowded.groups("Is the kite big?", "zh") == ()
    assert crowded.groups("Is there a patch?", "zh") == ({"补丁": 1.0},)


def test_a_definition_of_two_words_is_met_as_a_phrase() -> None:
    bridge = build(texts([point("维修包", "维修包含胶带一卷，补丁三片。", "zh", 0.5), *SHOP]))
    assert bridge.groups("Is adhesive tape included?", "zh") == ({"胶带": 1.0},)
    assert bridge.groups("Is tape included?", "zh") == ()
    # From Chinese, either word of the definition is a link of half weight.
    english = build(texts([point("Repair kit", "Strong adhesive tape for torn sails.", "en", 0.5), *SHOP]))
    assert english.groups("有胶带吗", "en") == ({"adhesive": 0.5, "tape": 0.5},)


BEACH = [
    point(
        "Beach Guide",
        "Children on the beach wear a life jacket. Each kite comes with 30 m of line on a reel.",
        "en",
        0.5,
    ),
    point("其他项目", "风筝冲浪和蹦极不在本店经营范围。", "zh", 0.5),
    *SHOP,
]


def test_a_single_character_of_few_senses_is_a_word() -> None:
    roped = [point("Flying Lines", "Each kite comes with 30 m of rope.", "en", 0.5), PATCH_ROW, KITE_PAGE]
    assert build(texts(roped)).groups("风筝的绳有多长", "en") == ({"kite": 1.0}, {"rope": 1.0})
    # A character of more senses is a unit, a particle or a part of words as often ("天": day, sky, heaven).
    assert "绳" in glosses() and "天" not in glosses() and "内" not in glosses()


def test_a_rare_word_of_a_two_word_definition_links_alone() -> None:
    bridge = build(texts(BEACH))
    # "bungee jump": "bungee" is in two of the dictionary's definitions, "jump" in many.
    assert bridge.groups("Do you do bungee?", "zh") == ({"蹦极": 1.0},)
    assert bridge.groups("Can I jump?", "zh") == ()


def test_a_word_with_no_link_takes_the_links_of_its_longer_words() -> None:
    # "风向" (wind direction) is not on the English page; "风向标" (windsock) begins with it.
    socks = [point("Windsocks", "A rainbow windsock for the beach.", "en", 0.5), PATCH_ROW, KITE_PAGE]
    bridge = build(texts(socks))
    assert bridge.groups("风向怎么看", "en") == ({"windsock": 1.0, "windsocks": 1.0},)
    # A word the dictionary translates by one word is that word: no longer words ("救生": life-saving).
    assert build(texts(BEACH)).groups("有救生的装备吗", "en") == ()


def test_a_chunks_share_of_the_questions_translated_words() -> None:
    bridge = build(texts(SHOP))
    groups = bridge.groups("Is there a nylon patch?", "zh")
    assert len(groups) == 2
    assert bridge.share(PATCH_ROW.id, groups) == pytest.approx(0.5)
    assert bridge.share(KITE_PAGE.id, groups) == pytest.approx(0.5)
    assert bridge.share(SHOP[0].id, groups) == 0.0
    assert bridge.share("not-read", groups) == 0.0
    vector = bridge.vector(groups)
    assert len(vector.indices) == 2 and sum(vector.values) == pytest.approx(2.0)


@pytest.fixture(params=["edge", "local"])
async def shop_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    async with opened(request.param, tmp_path, SHOP) as index:
        yield index


def retriever(index: VectorIndex, **settings: Any) -> Retriever:
    # Two candidates and one of the other language; the glossary's concept matches off: the bridge alone.
    defaults: dict[str, Any] = {"candidates": 2, "other_language_chunks": 1, "concept_chunks": 0}
    return Retriever(index, FixedEmbedder(), RetrievalSettings(**{**defaults, **settings}))  # type: ignore[arg-type]


async def test_an_english_question_takes_in_the_chinese_chunk_that_has_its_translated_word(
    shop_index: VectorIndex,
) -> None:
    # The patch row is not among the candidates (the kite page is the other language's best): it has to join
    # them to be lifted into the first two.
    question = "Is there a patch for a torn sail?"
    found = await retriever(shop_index, bridge_lift=0.3).search(question)
    assert PATCH_ROW.id in [c.id for c in found]
    without = await retriever(shop_index, bridge_chunks=0, bridge_lift=0.3).search(question)
    assert PATCH_ROW.id not in [c.id for c in without]


async def test_the_other_languages_chunk_with_the_translated_word_is_lifted(shop_index: VectorIndex) -> None:
    # Both Chinese chunks among the candidates; the patch row below the kite page by dense score until lifted.
    question = "Is there a patch for a torn sail?"
    settings = {"candidates": 5, "bridge_chunks": 0}
    lifted = [c.id for c in await retriever(shop_index, bridge_lift=0.2, **settings).search(question)]
    assert lifted.index(PATCH_ROW.id) < lifted.index(KITE_PAGE.id)
    plain = [c.id for c in await retriever(shop_index, bridge_lift=0.0, **settings).search(question)]
    assert plain.index(PATCH_ROW.id) > plain.index(KITE_PAGE.id)


async def test_no_search_when_enough_candidates_in_the_other_language_have_the_translated_words(
    shop_index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counted_matching(shop_index)
    # "nylon" is on the kite page, the other language's best candidate: one candidate may name a word in passing
    # (`retrieval.BRIDGE_HAVING`), and the word index is asked.
    await retriever(shop_index).search("Are the sails nylon?")
    assert len(calls) == 1
    monkeypatch.setattr("rag_service.retrieval.BRIDGE_HAVING", 1)
    await retriever(shop_index).search("Are the sails nylon?")
    assert len(calls) == 1
    await retriever(shop_index).search("Is there a patch for a torn sail?")
    assert len(calls) == 2


async def test_the_bridge_is_built_once_and_again_after_a_write(shop_index: VectorIndex) -> None:
    bridges = Bridges()
    first = await bridges.get(shop_index, None)
    assert await bridges.get(shop_index, None) is first
    assert first.groups("Can it glide?", "zh") == ()
    await shop_index.upsert([point("滑翔风筝", "这款风筝适合滑翔。", "zh", 0.6)])
    again = await bridges.get(shop_index, None)
    assert again is not first
    assert again.groups("Can it glide?", "zh") == ({"滑翔": 1.0},)
    # Another tenant's collection has its own bridge.
    await shop_index.upsert([point("Guide", "Glide over the dunes.", "en", 0.6)], "other")
    assert (await bridges.get(shop_index, "other")).groups("Can it glide?", "zh") == ()


async def test_questions_arriving_together_read_the_collection_once(shop_index: VectorIndex) -> None:
    reads: list[str | None] = []
    original = shop_index.export

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[0] if args else None)
        return original(*args, **kwargs)

    shop_index.export = counted  # type: ignore[method-assign]
    bridges = Bridges()
    got = await asyncio.gather(*(bridges.get(shop_index, None) for _ in range(5)))
    assert len(reads) == 1
    assert all(b is got[0] for b in got)


async def test_a_question_during_a_rebuild_takes_the_bridge_before_it(shop_index: VectorIndex) -> None:
    bridges = Bridges()
    first = await bridges.get(shop_index, None)
    await shop_index.upsert([point("滑翔风筝", "这款风筝适合滑翔。", "zh", 0.6)])
    release = asyncio.Event()
    started = asyncio.Event()
    original = shop_index.export

    async def held(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        started.set()
        await release.wait()
        async for points in original(*args, **kwargs):
            yield points

    shop_index.export = held  # type: ignore[method-assign]
    rebuilding = asyncio.create_task(bridges.get(shop_index, None))
    await started.wait()
    # The rebuild is held inside its read: another question does not wait for it.
    assert await bridges.get(shop_index, None) is first
    release.set()
    rebuilt = await rebuilding
    assert rebuilt is not first and rebuilt.groups("Can it glide?", "zh") == ({"滑翔": 1.0},)


async def test_a_collection_larger_than_the_cap_gets_no_bridge(shop_index: VectorIndex) -> None:
    question = "Is there a patch for a torn sail?"
    assert (await Bridges().get(shop_index, None)).groups(question, "zh")
    assert (await Bridges(max_chunks=len(SHOP) - 1).get(shop_index, None)).groups(question, "zh") == ()


async def test_the_retriever_says_the_questions_translated_words(shop_index: VectorIndex) -> None:
    question = "Is there a patch for a torn sail?"
    translated = await retriever(shop_index).translated(question)
    assert ("patch", frozenset({"补丁"})) in translated
    assert await retriever(shop_index, bridge_chunks=0, bridge_lift=0.0).translated(question) == ()


def test_a_question_is_read_once_per_bridge() -> None:
    # Retrieval reads the question's translations and the answerer reads them again in the same turn.
    bridge = build(texts(SHOP))
    question = "Is there a patch for a torn sail?"
    first = bridge.translations(question, "zh")
    assert bridge.translations(question, "zh") is first
    assert bridge.groups(question, "zh") == tuple(g for _, g in first)


async def test_the_least_recently_asked_bridge_is_dropped_past_the_kept_chunks(shop_index: VectorIndex) -> None:
    # Three tenants of the kite shop's size; room for two of them.
    for tenant in ("east", "west"):
        await shop_index.upsert(SHOP, tenant)
    reads: list[str | None] = []
    original = shop_index.export

    def counted(tenant: str | None = None, *args: Any, **kwargs: Any) -> Any:
        reads.append(tenant)
        return original(tenant, *args, **kwargs)

    shop_index.export = counted  # type: ignore[method-assign]
    bridges = Bridges(kept_chunks=2 * len(SHOP))
    first = await bridges.get(shop_index, None)
    await bridges.get(shop_index, "east")
    # Asking the first again makes "east" the least recent one, which the third tenant's bridge pushes out.
    assert await bridges.get(shop_index, None) is first
    await bridges.get(shop_index, "west")
    assert reads == [None, "east", "west"]
    assert await bridges.get(shop_index, None) is first
    again = await bridges.get(shop_index, "east")
    assert reads == [None, "east", "west", "east"]
    assert again.groups("Is there a patch for a torn sail?", "zh") == ({"补丁": 1.0},)


async def test_a_collection_larger_than_the_kept_chunks_is_still_kept_alone(shop_index: VectorIndex) -> None:
    bridges = Bridges(kept_chunks=1)
    first = await bridges.get(shop_index, None)
    assert await bridges.get(shop_index, None) is first
