"""An amount asked of a shop-wide service (an instalment plan's minimum, the total that ships free, a discount's
size) is not the conversation's product's price (invented shop and wording)."""

from __future__ import annotations

from rag_service.rewrite_rules import asks_about_product, asks_shop_amount
from tests.test_rewrite_switches import rewrite

KETTLE = ("青岚 K5 电水壶多少钱", "青岚 K5 电水壶 259 元。")
BIKE = ("How much is the Vireo 7 e-bike?", "The Vireo 7 costs 6,490 yuan.")


def test_a_shop_service_amount_takes_no_product() -> None:
    for question in ("订单要满多少钱才包邮？", "用分期付款最少得买多少钱的？", "积分攒到多少能当钱用？"):
        query, switched = rewrite(question, KETTLE)
        assert "青岚" not in query and not switched, query
    query, _ = rewrite("How big is the student discount on e-bikes?", BIKE)
    assert "Vireo" not in query


def test_a_product_amount_still_takes_the_product() -> None:
    # The product's own price, its repair or its warranty: the product is what the question lacks.
    assert "青岚 K5" in rewrite("换个底座多少钱？", KETTLE)[0]
    assert "Vireo 7" in rewrite("How much is a new battery?", BIKE)[0]
    # A pronoun still points at the product, service words or not.
    assert "青岚 K5" in rewrite("它分期的话每期多少钱？", KETTLE)[0]
    assert "Vireo 7" in rewrite("How much would that frost-free one set me back?", BIKE)[0]
    # A color edition is no member tier.
    assert "Vireo 7" in rewrite("Does the silver edition cost extra?", BIKE)[0]


def test_an_amount_is_read_with_what_it_is_of() -> None:
    assert asks_shop_amount("满多少钱包邮？") and asks_shop_amount("How big is the member discount?")
    assert not asks_shop_amount("屏幕换新的价格是？") and not asks_shop_amount("What does the thing weigh?")
    # A price asked together with another aspect of the product is the product's.
    assert not asks_shop_amount("分期买的话保修多久？")
    assert asks_about_product("屏幕换新的价格是？")


def test_free_of_something_else_is_no_shipping_question() -> None:
    store = ("杭州的门店在哪", "杭州门店：文三路 18 号。")
    assert rewrite("停车是免费的吗", store)[0] == "杭州 停车是免费的吗"


def test_a_fee_alone_may_still_be_the_products() -> None:
    assert "青岚 K5" in rewrite("运费是怎么收的", KETTLE)[0]
