"""What the rewriter must never take for the conversation's subject, announced new subjects, relatives, and
variants of a model written with its Chinese brand (invented shops and wording)."""

from __future__ import annotations

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import RuleRewriter, announces_new_subject
from rag_service.rewrite_rules import entities, identifies_it, product_names, sibling_family, with_family


def view(*questions: str) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", "", 1, 0.0)) for q in questions)
    return MemoryView("", 0, rounds)


def rewrite(question: str, *history: str) -> tuple[str, bool]:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*history))
    return result.query, result.topic_switch


def keys(text: str) -> set[str]:
    return {e.key for e in entities(text)}


def test_question_words_adverbs_and_body_parts_are_no_subjects() -> None:
    assert not keys("这个水壶保修多长时间") & {"多长时间"}
    assert keys("Should I come back afterwards?") == set()
    assert not keys("Both my ears hurt, is the small size enough?") & {"ears", "both my ears", "my ears"}
    assert "whilst" not in " ".join(keys("Whilst Z9's charging, can I use the cable?"))
    assert "z9" in keys("Whilst Z9's charging, can I use the cable?")
    assert keys("Is there a Cantonese-speaking guide?") == {"guide"}


def test_a_question_word_never_rides_along_into_later_questions() -> None:
    query, _ = rewrite("那款多重", "Lumo 7 台灯多少钱", "这款保修多长时间")
    assert "多长时间" not in query.replace("保修多长时间", "")


def test_an_announced_new_subject_gets_no_subject_glued_on() -> None:
    for question in ("对了，单独买滤芯多少钱", "Unrelated, but how much is the travel pillow?", "另外，发票怎么开？"):
        query, switch = rewrite(question, "Lumo 7 台灯多少钱")
        assert "Lumo" not in query and switch
    # A reference after the announcement still refers back.
    assert announces_new_subject("对了，它能开发票吗") is False
    query, switch = rewrite("By the way, can I pick it up on Sunday?", "How much is the Lumo 7 lamp?")
    assert "Lumo 7" in query and not switch


def test_he_or_she_after_a_relative_is_not_a_place_or_product() -> None:
    history = ("Is the Tarn 2 stroller sold at the Riverside shop? It is for my daughter.",)
    query, _ = rewrite("Can she use it from six months?", *history)
    assert "Riverside" not in query
    # Without a relative, a name is still what he/she stands for.
    assert rewrite("Where was he born?", "What did Ada Quill write in 1901?")[0] == "Where was Ada Quill born?"


def test_it_named_in_the_question_itself_is_no_reference_and_no_switch() -> None:
    assert identifies_it("It's a Kestrel K2, bought last May. Still covered?")
    assert not identifies_it("Is it a good idea to wash it?")
    query, switch = rewrite("It's a Kestrel K2, bought last May. Still covered?", "My order 2231 has a cracked hinge.")
    assert query.startswith("It's a Kestrel K2") and not switch


def test_a_chinese_brand_is_part_of_the_model() -> None:
    assert product_names("青鸾 T7 多少钱") == ["青鸾 T7"]
    assert product_names("编号 T7 多少钱") == ["T7"]


def test_a_variant_word_added_to_a_model_that_has_none() -> None:
    assert sibling_family("青鸾 T7", "Pro 版多少钱") == "青鸾 T7"
    assert with_family("Pro 版多少钱", "青鸾 T7") == "青鸾 T7 Pro 版多少钱"
    assert sibling_family("青鸾 T7", "双电池版保修多久") == "青鸾 T7"
    query, _ = rewrite("Pro 版卖多少", "青鸾 T7 多少钱")
    assert query == "青鸾 T7 Pro 版卖多少"


def test_the_base_model_after_its_variant_is_the_base_model() -> None:
    assert with_family("T7 呢，多少", "青鸾 T7 Plus") == "青鸾 T7 呢，多少"
    query, _ = rewrite("T7 呢，多少", "青鸾 T7 Plus 什么价")
    assert "Plus" not in query and "青鸾 T7" in query
