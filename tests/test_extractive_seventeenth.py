"""Line choice of the seventeenth session, on invented shops:
- a line that opens with a decimal figure ("2.5kg 装：…") is no numbered list item: its figure is quoted whole;
- a follow-up pointing back at the previous answer ("那它 3 kg 装的呢") is about the section that answer quoted from, when
  the page repeats the same labelled lines under sibling headings;
- a city named before picks the shop's one store there for its hours, address or phone ("青岛那边的门店" then "星期天营业到几点")."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk, conversation

HAY_PAGE = chunk(
    "hay-page",
    "青坡牧草 商品详情",
    "\n".join(
        [
            "青坡 提摩西草",
            "- 1kg 装：45 元",
            "2.5kg 装：99 元",
            "10kg 装：310 元",
        ]
    ),
    section="青坡 提摩西草",
)


def test_a_decimal_pack_size_opening_a_line_is_quoted_whole() -> None:
    out = answer("青坡提摩西草 2.5kg 装多少钱", [HAY_PAGE])
    assert "2.5kg 装：99 元" in out, out
    assert "\n- 5kg" not in out, out


def test_a_numbered_list_item_still_loses_its_number() -> None:
    steps = chunk(
        "hay-care", "青坡牧草 保存方法", "1. 开袋后夹紧袋口，放在阴凉处。\n2. 受潮结块的草请丢掉。", section="保存"
    )
    out = answer("牧草开袋后怎么保存", [steps])
    assert "- 开袋后夹紧袋口" in out, out


FORMULA_PAGE = chunk(
    "rabbit-food",
    "青坡兔粮 商品详情",
    "\n".join(
        [
            "青坡 幼兔粮",
            "适合：6 月龄以下的幼兔",
            "1kg 装：39 元",
            "3kg 装：105 元",
            "青坡 成兔粮",
            "适合：6 月龄以上的成兔",
            "1kg 装：35 元",
            "3kg 装：96 元",
        ]
    ),
)


def test_the_section_the_previous_answer_quoted_from_is_the_one_pointed_back_at() -> None:
    memory = conversation(
        (
            "成兔吃的 1kg 多少钱",
            "[extractive answer, no LLM configured] 根据知识库：\n- 1kg 装：35 元（青坡兔粮 商品详情）",
        )
    )
    out = answer("那它 3 kg 装的呢", [FORMULA_PAGE], query="青坡兔粮 3 kg 装多少钱", memory=memory)
    assert "96 元" in out, out
    assert "105 元" not in out, out


def test_without_a_quoted_line_every_section_still_answers() -> None:
    out = answer("青坡兔粮 3kg 装多少钱", [FORMULA_PAGE])
    assert "96 元" in out and "105 元" in out, out


STORES_PAGE = chunk(
    "tea-stores",
    "松涧茶庄 门店",
    "\n".join(
        [
            "厦门中山路店",
            "营业时间：每天 10:00–21:00",
            "厦门鼓浪屿店",
            "营业时间：每天 10:00–20:00",
            "青岛八大关店",
            "营业时间：周一至周五 11:00–20:00，周六周日 9:00–21:30",
        ]
    ),
)


def test_a_city_with_one_store_picks_that_stores_hours() -> None:
    memory = conversation(
        (
            "青岛那边的门店可以取货吗",
            "[extractive answer, no LLM configured] 根据知识库：\n- 所有门店都可以自提。（松涧茶庄 门店）",
        )
    )
    out = answer("星期天营业到几点", [STORES_PAGE], query="星期天营业到几点", memory=memory)
    assert "9:00–21:30" in out.splitlines()[1], out


def test_a_city_with_two_stores_picks_none() -> None:
    memory = conversation(
        (
            "厦门那边的门店可以取货吗",
            "[extractive answer, no LLM configured] 根据知识库：\n- 所有门店都可以自提。（松涧茶庄 门店）",
        )
    )
    out = answer("星期天营业到几点", [STORES_PAGE], query="星期天营业到几点", memory=memory)
    assert "10:00–21:00" in out and "10:00–20:00" in out, out
