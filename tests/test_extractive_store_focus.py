"""Which store's line answers a follow-up that names no store, on an invented tea shop with three stores: the
store the customer named last, not the same line of the shop's other stores."""

from __future__ import annotations

from rag_service.facts import store_name
from tests.extractive_kit import answer, chunk, conversation

TITLE = "茗香茶舍 门店与联系方式"
STORES = [
    (
        "苏州观前店",
        ["地址：苏州市姑苏区观前街 12 号", "电话：0512-6611 2001", "停车：观前地下停车场，凭小票免费 1 小时。"],
    ),
    (
        "苏州金鸡湖店",
        ["地址：苏州市工业园区星海街 8 号", "电话：0512-6611 2002", "停车：门店没有停车位，请坐地铁前往。"],
    ),
    ("无锡南长店", ["地址：无锡市梁溪区南长街 30 号", "电话：0510-8822 3003", "停车：南长街停车场，收费 5 元每小时。"]),
]
CHUNKS = [
    chunk("stores", TITLE, "\n".join([name, *(f"- {line}" for line in lines)]), section=name, index=i)
    for i, (name, lines) in enumerate(STORES)
]


def test_store_name_is_the_heading_without_its_city_and_kind() -> None:
    assert store_name("苏州金鸡湖店") == "金鸡湖"
    assert store_name("上海南京西路旗舰店（体验中心）") == "南京西路"
    assert store_name("Suzhou Lakeside store") == "lakeside"
    assert store_name("苏州店") == ""  # a city alone tells no store from another of the same city
    assert store_name("门店与联系方式") == ""


def test_a_follow_up_is_about_the_store_named_before() -> None:
    memory = conversation(("那金鸡湖店在哪", "- 地址：苏州市工业园区星海街 8 号（茗香茶舍 门店与联系方式）"))
    out = answer("能停车吗", CHUNKS, memory=memory)
    assert "门店没有停车位" in out and "观前地下" not in out and "南长街停车场" not in out
    out = answer("门店电话是几号", CHUNKS, memory=memory)
    assert "0512-6611 2002" in out and "0512-6611 2001" not in out


def test_the_store_the_rewriter_carried_counts_too() -> None:
    out = answer("能停车吗", CHUNKS, query="金鸡湖 能停车吗")
    assert "门店没有停车位" in out and "观前地下" not in out


def test_a_city_named_now_overrules_the_store_named_before() -> None:
    memory = conversation(("那金鸡湖店在哪", "- 地址：苏州市工业园区星海街 8 号（茗香茶舍 门店与联系方式）"))
    out = answer("无锡的店能停车吗", CHUNKS, memory=memory)
    assert "南长街停车场" in out and "门店没有停车位" not in out
