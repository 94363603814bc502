"""Follow-ups whose product the rewritten query got wrong: the earlier answer's subject ("它" after an answer
about one model) and a sibling picked by its variant word alone ("and the Turbo one?"), on an invented
kitchen shop's pages."""

from __future__ import annotations

from rag_service.extractive import answer_subject, cited_pages
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

OVENS = chunk(
    "ovens",
    "焙立烤箱 商品详情（KX-30 台式 / KX-45 嵌入式）",
    "\n".join(
        [
            "焙立 KX-30 台式",
            "售价 899 元。",
            "能效等级：三级能效，待机功率 0.5 W。",
            "焙立 KX-45 嵌入式",
            "售价 2399 元。",
            "能效等级：一级能效，待机功率 0.3 W。",
        ]
    ),
)

HOBS = chunk(
    "hobs",
    "Flamo 电磁炉 商品详情",
    "\n".join(
        [
            "Flamo 电磁炉 商品详情",
            "| 型号 | 火力 | 售价 |",
            "| --- | --- | --- |",
            "| Flamo H2 | 2100 W | 299 元 |",
            "| Flamo H2 Turbo | 3000 W | 459 元 |",
        ]
    ),
)

KETTLES = chunk(
    "kettles",
    "Quickboil 水壶 商品详情",
    "\n".join(
        [
            "Quickboil 水壶 商品详情",
            "| 型号 | 容量 | 售价 |",
            "| --- | --- | --- |",
            "| Quickboil K1 Turbo | 1.7 L | 199 元 |",
        ]
    ),
)


def test_it_after_an_answer_about_one_model_is_that_model_not_the_one_the_query_carried() -> None:
    # The rewriter kept the conversation's first model ("焙立 30"); the last answer was about the KX-45.
    earlier = "根据知识库：\n- 焙立 KX-45 嵌入式：售价 2399 元。（焙立烤箱 商品详情（KX-30 台式 / KX-45 嵌入式））"
    memory = _memory(("焙立 30 烤箱多少钱", "…"), ("嵌入式那款呢", earlier))
    text = answer("它的能效是几级", [OVENS], query="焙立 30 的能效是几级", memory=memory)
    assert "一级能效" in text and "三级能效" not in text


def test_a_question_that_picks_a_sibling_itself_keeps_its_own_words() -> None:
    earlier = "根据知识库：\n- 焙立 KX-30 台式：售价 899 元。（焙立烤箱 商品详情（KX-30 台式 / KX-45 嵌入式））"
    memory = _memory(("焙立 30 烤箱多少钱", earlier))
    text = answer("嵌入式那款几级能效", [OVENS], query="焙立 30 嵌入式那款几级能效", memory=memory)
    # Not steered to the model the last answer was about: the embedded model leads.
    assert "一级能效" in text
    assert "三级能效" not in text or text.index("一级能效") < text.index("三级能效")


def test_the_subject_is_the_quoted_heading_or_first_cell_not_the_parts_listed_or_the_title() -> None:
    named, _, _ = answer_subject(
        "- 焙立 KX-45 嵌入式：售价 2399 元。（焙立烤箱 商品详情（KX-30 台式 / KX-45 嵌入式））"
    )
    assert [p.text for p in named] == ["KX-45"]
    named, _, _ = answer_subject("- 豪华版，配 Turbo X9 风扇、双层玻璃，售价 999 元。（某烤箱）")
    assert named == ()  # a part it lists is no subject
    assert cited_pages("- 焙立 KX-45 嵌入式：售价 2399 元。（焙立烤箱 商品详情（KX-30 台式））") == {
        "焙立烤箱 商品详情（KX-30 台式）"
    }


def test_an_answer_that_only_named_a_plan_in_passing_does_not_steer_an_unrelated_follow_up() -> None:
    earlier = "根据知识库：\n- Shield Plus cover: for kettles only, 49 yuan. (Care Plans)"
    plans = chunk(
        "plans",
        "Care Plans",
        "Care Plans\nA plan must be bought within 20 days of delivery.\nShield Plus cover: for kettles only, 49 yuan.",
    )
    text = answer(
        "收货后几天内得申请", [plans], query="保障 收货后几天内得申请", memory=_memory(("保障怎么买", earlier))
    )
    assert "20 days" in text


def test_a_variant_word_alone_picks_the_sibling_on_the_page_we_were_on() -> None:
    earlier = "From the knowledge base:\n- 型号 Flamo H2，火力 2100 W，售价 299 元。 (Flamo 电磁炉 商品详情)"
    memory = _memory(("How much is the Flamo H2 hob?", earlier))
    # The rewriter glued the variant word onto the model already discussed.
    text = answer("and the Turbo one?", [HOBS, KETTLES], query="How much is Flamo H2's Turbo?", memory=memory)
    assert "459" in text
    assert "299" not in text and "199" not in text


def test_an_english_word_that_is_also_a_variant_word_picks_nothing() -> None:
    fryers = chunk("fryers", "Crispo 商品详情", "Crispo 商品详情\nCrispo 5 售价 399 元。\nCrispo 5 Air 售价 499 元。")
    text = answer("how much is the air fryer?", [fryers], query="how much is the Crispo 5 air fryer?")
    assert "399" in text


ROBOT = chunk(
    "robot",
    "Tidy 擦窗机器人 商品详情",
    "\n".join(
        [
            "Tidy 擦窗机器人 商品详情",
            "价格与配置",
            "Tidy W3：吸附力 3000 Pa，续航 40 分钟，配两块擦布和安全绳，售价 1299 元。",
            "安全绳",
            "Tidy W3 的安全绳长 4 m，承重 20 kg。",
        ]
    ),
    section="",
)
PARTS = chunk(
    "parts",
    "配件价格",
    "\n".join(["配件价格", "擦布（4 块装，Tidy W3 通用）：建议每 3 个月更换，59 元。", "清洁液：每瓶 29 元。"]),
)


def test_a_part_the_question_names_is_answered_by_the_line_about_that_part() -> None:
    # The machine's own spec line names the part in passing and ranks first; the parts list is about it.
    text = answer("擦布多少钱", [ROBOT, PARTS], query="Tidy W3 擦布多少钱")
    assert "59 元" in text
    assert "1299" not in text


def test_a_part_under_its_own_heading_beats_a_line_under_another_part() -> None:
    text = answer("擦布隔多长时间要换", [ROBOT, PARTS], query="Tidy W3 擦布隔多长时间要换")
    assert "3 个月" in text


VISITORS = chunk(
    "visitors",
    "Help for Overseas Guests",
    "\n".join(
        [
            "Help for Overseas Guests",
            "Do you have staff who speak English?",
            "Yes. English-speaking staff answer the hotline from 10:00 to 16:00 on weekdays.",
            "Are the manuals in English?",
            "Each product page has an English user manual to download as a PDF.",
        ]
    ),
)
HELPLINE = chunk(
    "helpline",
    "联系我们",
    "\n".join(["联系我们", "客服热线", "全国客服热线：400-100-2000，每天 7:00–23:00。"]),
)


def test_a_chinese_question_about_english_service_finds_the_english_page_sentence() -> None:
    text = answer("讲英语的客服什么时间在线", [HELPLINE, VISITORS])
    assert "10:00" in text and "16:00" in text


def test_a_chinese_question_about_a_manual_finds_the_english_manual_sentence() -> None:
    text = answer("说明书有英文版的吗", [HELPLINE, VISITORS])
    assert "PDF" in text


def test_a_service_number_question_wants_a_phone_number() -> None:
    from rag_service.facts import Ask, question_asks

    assert Ask.CONTACT in question_asks("What's your support number?")
    assert Ask.CONTACT not in question_asks("What's my order number?")
    assert Ask.CONTACT not in question_asks("What is the number of instalments?")


def test_a_rule_written_per_appliance_size_quotes_the_size_asked_about() -> None:
    lines = [
        "退货规则",
        "开封退货",
        "包装完好的不收费。",
        "小家电开封未用、配件齐全的，可以退，收取售价 8% 的整理费，最低 20 元；",
        "大家电开封未用的，可以退，收取售价 3% 的整理费，最低 80 元。",
    ]
    rules = chunk("rules", "退货规则", "\n".join(lines))
    text = answer("A large appliance I unpacked but never used: do you charge to take it back?", [rules])
    assert "3%" in text and "8%" not in text
