"""`rag-eval answers`: the string scorer, the conversation file's validation, the integrity of the data
sets in eval/answers, the recording upstream, and one end-to-end run of the command on a tiny KB."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rag_core.documents.loaders import load_document
from rag_core.documents.pipeline import iter_files
from rag_core.settings import MemorySettings, Settings
from rag_core.tokens import TokenCounter
from rag_service.domain import Chunk, GenerationInput, Message, Round
from rag_service.evaluation import cli
from rag_service.evaluation.answer_run import (
    LLMRecorder,
    Upstream,
    classify_request,
    parse_answer_memory,
    parse_answer_request,
    parse_summary_request,
    read_as_passages,
)
from rag_service.evaluation.answers import (
    ConversationFileError,
    ConversationSpec,
    check_facts,
    check_grounding,
    contains,
    load_conversations,
    normalize,
    parse_conversations,
    score_answer,
)
from rag_service.extractive import ExtractiveGenerator
from rag_service.prompt import build_messages
from rag_service.rewrite import rewrite_messages
from rag_service.summary import LLMSummarizer
from rag_service.testing.fake_llm import FakeLLM, Fault, scripted

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "examples" / "kb"
DEV = ROOT / "eval" / "answers" / "kb.dev.jsonl"
CHECK = ROOT / "eval" / "answers" / "kb.check.jsonl"
# A second, independent set over another business's documents, for checking that a change generalises.
HOMESHOP_KB = ROOT / "eval" / "answers" / "homeshop" / "kb"
HOMESHOP = ROOT / "eval" / "answers" / "homeshop.jsonl"
# A third, written blind over an outdoor-gear shop: a stand-in for the held-out sets.
OUTDOORSHOP_KB = ROOT / "eval" / "answers" / "outdoorshop" / "kb"
OUTDOORSHOP = ROOT / "eval" / "answers" / "outdoorshop.jsonl"
# A fourth, written blind over an optician chain by someone who had not seen how the service answers.
OPTICALSHOP_KB = ROOT / "eval" / "answers" / "opticalshop" / "kb"
OPTICALSHOP = ROOT / "eval" / "answers" / "opticalshop.jsonl"
# A fifth, written blind over a bicycle and e-bike shop, likewise without seeing how the service answers.
BIKESHOP_KB = ROOT / "eval" / "answers" / "bikeshop" / "kb"
BIKESHOP = ROOT / "eval" / "answers" / "bikeshop.jsonl"
# A sixth, written blind over a pet-supplies shop (food, litter, carriers, grooming, boarding, insurance).
PETSHOP_KB = ROOT / "eval" / "answers" / "petshop" / "kb"
PETSHOP = ROOT / "eval" / "answers" / "petshop.jsonl"
# A seventh, written blind over a coffee equipment and beans shop, by someone who read neither the service's code
# nor the other sets' questions.
BREWSHOP_KB = ROOT / "eval" / "answers" / "brewshop" / "kb"
BREWSHOP = ROOT / "eval" / "answers" / "brewshop.jsonl"
# An eighth, written blind over a musical-instrument shop (pianos, guitars, violins, ukuleles, tuning, rental,
# lessons), by someone who read neither the service's code nor the other sets' questions.
MUSICSHOP_KB = ROOT / "eval" / "answers" / "musicshop" / "kb"
MUSICSHOP = ROOT / "eval" / "answers" / "musicshop.jsonl"
# A ninth, written blind over a skincare and cosmetics shop, most of its questions asked in the other language than
# the page that answers them.
SKINSHOP_KB = ROOT / "eval" / "answers" / "skinshop" / "kb"
SKINSHOP = ROOT / "eval" / "answers" / "skinshop.jsonl"
# A tenth, written blind over a baby and children's goods shop (strollers, car seats, bottles, toys), by someone who
# read neither the service's code nor the other sets' questions; most questions in the other language than the page.
KIDSSHOP_KB = ROOT / "eval" / "answers" / "kidsshop" / "kb"
KIDSSHOP = ROOT / "eval" / "answers" / "kidsshop.jsonl"
# Each answer set with the knowledge base it is written over.
DATA_SETS = {
    "dev": (KB, DEV),
    "check": (KB, CHECK),
    "homeshop": (HOMESHOP_KB, HOMESHOP),
    "outdoorshop": (OUTDOORSHOP_KB, OUTDOORSHOP),
    "opticalshop": (OPTICALSHOP_KB, OPTICALSHOP),
    "bikeshop": (BIKESHOP_KB, BIKESHOP),
    "petshop": (PETSHOP_KB, PETSHOP),
    "brewshop": (BREWSHOP_KB, BREWSHOP),
    "musicshop": (MUSICSHOP_KB, MUSICSHOP),
    "skinshop": (SKINSHOP_KB, SKINSHOP),
    "kidsshop": (KIDSSHOP_KB, KIDSSHOP),
}
# The sets over other businesses' documents, which must cover what the dev set covers over their own shop.
OTHER_SHOPS = {
    shop: DATA_SETS[shop]
    for shop in (
        "homeshop",
        "outdoorshop",
        "opticalshop",
        "bikeshop",
        "petshop",
        "brewshop",
        "musicshop",
        "skinshop",
        "kidsshop",
    )
}
PRODUCT_PAGES = {
    "iphone-16-pro.md",
    "iphone-16.html",
    "galaxy-s25-ultra.html",
    "xiaomi-15-pro.md",
    "macbook-air-m3.md",
    "thinkpad-x1-carbon-gen12.html",
    "huawei-matebook-x-pro.md",
}


def turn(q: str, expect: list[list[str]], doc: str | None = None, kind: str = "standalone", **extra: Any) -> Any:
    return {"q": q, "expect_any": expect, "doc": doc, "kind": kind, **extra}


def jsonl(*rows: Any) -> list[str]:
    return [json.dumps(r, ensure_ascii=False) if not isinstance(r, str) else r for r in rows]


# --- matching and scoring ----------------------------------------------------------------------------


def test_normalize_is_nfkc_casefolded_and_without_whitespace() -> None:
    assert normalize("ＩＰｈｏｎｅ　１６ Pro\n") == "iphone16pro"
    assert normalize("￥ 7,999\u00a0元") == "¥7,999元"


@pytest.mark.parametrize(
    ("haystack", "needle"),
    [
        ("售价 ７９９９ 元", "7999"),  # full-width digits
        ("IPHONE 16 PRO", "iPhone 16 Pro"),  # case
        ("售价7999元", "7999 元"),  # whitespace in the needle
        ("订单 XC 2025 0305", "XC20250305"),  # whitespace in the answer
        ("line one\n799\u00a0元", "799 元"),
        ("电池更换价格为 799 元。", "799"),
        ("A18 Pro 芯片", "A18"),
        ("fee: 2.3%", "2.3%"),
        ("(1,799)", "1,799"),
    ],
)
def test_contains_finds(haystack: str, needle: str) -> None:
    assert contains(haystack, needle)


@pytest.mark.parametrize(
    ("haystack", "needle"),
    [
        ("售价 7999 元", "799"),  # a longer number is another number
        ("¥1,799", "799"),
        ("17999", "7999"),
        ("12.3%", "2.3%"),
        ("2.35", "2.3"),
        ("A180", "A18"),
        ("iPhone 16 Pro", "iPhone 15"),
        ("anything", "   "),
    ],
)
def test_contains_rejects(haystack: str, needle: str) -> None:
    assert not contains(haystack, needle)


def test_score_needs_every_string_of_one_alternative_and_no_rejected_string() -> None:
    expect = [["7999", "128GB"], ["七千九百九十九"]]
    assert score_answer("128GB 版本售价 7999 元", expect).correct
    assert score_answer("七千九百九十九元", expect).correct
    half = score_answer("售价 7999 元", expect)
    # Both alternatives lack one string: the first is reported.
    assert not half.correct and half.missing == ("128GB",) and half.rejected == ()
    wrong = score_answer("128GB 7999 元，iPhone 16 是 5999 元", expect, ["5999", "6999"])
    assert not wrong.correct and wrong.missing == () and wrong.rejected == ("5999",)
    assert "rejected string found: '5999'" in wrong.why()
    # A reject string only counts as the same number: 599 is not in 5999.
    assert score_answer("128GB 7999 元，旧款 5999", expect, ["599"]).correct


def test_check_facts_reports_the_closest_alternative() -> None:
    facts = check_facts("1.24 kg", [["1.24", "1.51"], ["a", "b", "c"]])
    assert not facts.found and facts.missing == ("1.51",)
    assert check_facts("between 1.51 and 1.24", [["1.24", "1.51"]]).found


# --- the conversation file ---------------------------------------------------------------------------


def problems(*rows: Any) -> str:
    with pytest.raises(ConversationFileError) as info:
        parse_conversations(jsonl(*rows), "f.jsonl")
    return str(info.value)


def test_valid_file_and_language() -> None:
    convs = parse_conversations(
        jsonl(
            {"id": "a", "turns": [turn("iPhone 16 多少钱", [["5999"]], "iphone-16.html", reject_any=["7999"])]},
            "",
            {"id": "b", "turns": [turn("How much?", [["5999"]]), turn("再说一次", [["5999"]], lang="en")]},
        )
    )
    assert [c.id for c in convs] == ["a", "b"]
    assert convs[0].turns[0].language == "zh"
    assert convs[1].turns[0].language == "en" and convs[1].turns[0].reject_any == []
    assert convs[1].turns[1].language == "en"  # explicit lang wins


def test_bad_json_is_reported_with_its_line() -> None:
    message = problems({"id": "a", "turns": [turn("q", [["x"]])]}, "{not json")
    assert "f.jsonl line 2: not JSON" in message


@pytest.mark.parametrize(
    ("bad_turn", "fragment"),
    [
        ({"q": "q", "expect_any": [["x"]], "doc": None}, "turns.0.kind: Field required"),
        (turn("q", [["x"]], kind="chitchat"), "turns.0.kind: Input should be"),
        (turn("q", [["x"]], docs="a.md"), "turns.0.docs: Extra inputs are not permitted"),
        (turn("q", []), "turns.0.expect_any: List should have at least 1 item"),
        (turn("q", [["x"], []]), "turns.0.expect_any: Value error, alternative 1 is an empty list"),
        (turn("q", [["x", "  "]]), "alternative 0 holds an empty string"),
        (turn("q", [["x"]], reject_any=[""]), "turns.0.reject_any: Value error, reject_any holds an empty string"),
        (turn("   ", [["x"]]), "turns.0.q: Value error, the question is blank"),
        (turn("q", [["x"]], doc=" "), "turns.0.doc: Value error, doc is blank"),
        (turn("q", [["x"]], lang="Chinese"), "turns.0.lang: String should match pattern"),
        (
            turn("Pro 多少钱", [["iPhone 16 Pro", "7999"]], reject_any=["iPhone 16"]),
            "turns.0: Value error, every expect_any alternative contains a reject_any string",
        ),
    ],
)
def test_bad_turns_name_line_and_field(bad_turn: dict[str, Any], fragment: str) -> None:
    message = problems({"id": "ok", "turns": [turn("q", [["x"]])]}, {"id": "bad", "turns": [bad_turn]})
    assert message.startswith("f.jsonl line 2: ")
    assert fragment in message


def test_every_problem_is_reported_at_once() -> None:
    message = problems(
        {"id": "a", "turns": []},
        {"id": "b", "turns": [turn("q", [["x"]])]},
        {"id": "b", "turns": [turn("q", [["x"]])]},
        {"turns": [turn("q", [["x"]])]},
    )
    lines = message.splitlines()
    assert lines[0] == "f.jsonl line 1: turns: List should have at least 1 item after validation, not 0"
    assert lines[1] == "f.jsonl line 3: id 'b' is already used on line 2"
    assert lines[2] == "f.jsonl line 4: id: Field required"


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConversationFileError, match="no conversations"):
        parse_conversations(["", "  "], "empty.jsonl")
    with pytest.raises(ConversationFileError, match="cannot read"):
        load_conversations(tmp_path / "missing.jsonl")


def test_command_rejects_a_bad_file_before_any_work(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "turns": [turn("q", [["x"]], kind="nope")]}) + "\n", encoding="utf-8")
    args = ["answers", "--kb", str(tmp_path), "--conversations", str(bad), "--json", str(tmp_path / "o.json")]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2
    assert "line 1: turns.0.kind" in result.output
    assert not (tmp_path / "o.json").exists()


def test_overrides_are_typed_and_checked_against_the_settings() -> None:
    parsed = cli.parse_overrides(
        ["retrieval.mode=hybrid", "rewrite.topic_similarity=0.5", "llm.base_url=null", "observability.prices.m.a=1"]
    )
    assert parsed == {
        "retrieval": {"mode": "hybrid"},
        "rewrite": {"topic_similarity": 0.5},
        "llm": {"base_url": None},
        "observability": {"prices": {"m": {"a": 1}}},
    }
    assert cli.parse_overrides(["memory.summary_llm.model=small"]) == {"memory": {"summary_llm": {"model": "small"}}}
    for item, fragment in [
        ("retrieval.mdoe=hybrid", "unknown setting retrieval.mdoe"),
        ("retrieval.mode.x=1", "retrieval.mode has no sub-settings"),
        ("retrieval", "expected a dotted setting and a value"),
        ("retrieval..mode=1", "expected a dotted setting and a value"),
    ]:
        with pytest.raises(typer.BadParameter, match=fragment):
            cli.parse_overrides([item])


# --- the data sets -----------------------------------------------------------------------------------


_LOADED: dict[Path, dict[str, str]] = {}


def loaded_texts(kb: Path) -> dict[str, str]:
    """Each document's loaded text (title and blocks, as ingest sees it) by file name; loaded once per folder."""
    if kb not in _LOADED:
        settings = Settings()
        texts: dict[str, str] = {}
        for path in iter_files([kb], settings.ingest.extensions):
            doc = load_document(path, settings.ingest, name=path.name)
            texts[path.name] = doc.title + "\n" + "\n".join(doc.blocks)
        _LOADED[kb] = texts
    return _LOADED[kb]


@pytest.fixture(scope="module")
def kb_texts() -> dict[str, str]:
    texts = loaded_texts(KB)
    assert len(texts) == 20
    return texts


def test_every_knowledge_base_file_is_loaded() -> None:
    # A file the loaders skip or cannot read would leave its turns grounded in nothing.
    settings = Settings()
    for kb in {kb for kb, _ in DATA_SETS.values()}:
        files = {p.name for p in kb.iterdir() if p.suffix in settings.ingest.extensions}
        texts = loaded_texts(kb)
        assert set(texts) == files, kb
        assert all(len(text) > 200 for text in texts.values()), kb


@pytest.mark.parametrize(("kb", "path"), list(DATA_SETS.values()), ids=list(DATA_SETS))
def test_data_set_is_grounded_in_the_documents(kb: Path, path: Path) -> None:
    assert check_grounding(load_conversations(path), loaded_texts(kb)) == []


def test_grounding_check_catches_what_it_promises(kb_texts: dict[str, str]) -> None:
    conv = ConversationSpec.model_validate(
        {
            "id": "c",
            "turns": [
                turn("q1", [["7999"]], "iphone-16-pro.md"),
                turn("q2", [["7999"]], "no-such-file.md"),
                turn("q3", [["123456789"], ["7999"]], "iphone-16-pro.md"),
                turn("q4", [["7999"]], None, "recall"),
                turn("q5", [["XC99"]], None, "recall"),
                turn("q6", [["8999"]], "iphone-16-pro.md", reject_any=["31415926"]),
            ],
        }
    )
    found = check_grounding([conv], kb_texts)
    assert found == [
        "c turn 1 ('q2'): no document named 'no-such-file.md'",
        "c turn 2 ('q3'): ['123456789'] not in iphone-16-pro.md",
        "c turn 4 ('q5'): ['XC99'] never said earlier in the conversation",
        "c turn 5 ('q6'): reject string '31415926' is in no document",
    ]


def test_dev_set_covers_what_the_issue_asks() -> None:
    convs = load_conversations(DEV)
    turns = [t for c in convs for t in c.turns]
    assert len(convs) >= 14 and len(turns) >= 80
    assert {t.kind for t in turns} == {"standalone", "followup", "topic_switch", "recall"}
    assert {t.language for t in turns} == {"zh", "en"}
    # A price question (a four- or five-digit yuan amount) for every product page.
    priced = {t.doc for t in turns if any(re.fullmatch(r"\d{4,5}", s) for s in t.expect_any[0])}
    assert priced >= PRODUCT_PAGES
    # Cross-language both ways: English questions on Chinese pages and Chinese questions on English pages.
    english_pages = {"international-shipping.md", "student-discount.html", "laptop-buying-guide.md"}
    assert any(t.language == "en" and t.doc in {"iphone-16.html", "xiaomi-15-pro.md"} for t in turns)
    assert any(t.language == "zh" and t.doc in english_pages for t in turns)
    assert sum(bool(t.reject_any) for t in turns) >= 20
    # A fact stated in the first turn is asked back at least five turns later.
    assert any(
        c.turns[0].q.find(s) >= 0 and i >= 5
        for c in convs
        for i, t in enumerate(c.turns)
        if t.kind == "recall"
        for s in t.expect_any[0]
    )


def test_check_set_is_separate_from_the_dev_set() -> None:
    dev, check = load_conversations(DEV), load_conversations(CHECK)
    assert len(check) >= 4 and sum(len(c.turns) for c in check) >= 25
    assert not {c.id for c in dev} & {c.id for c in check}
    assert not {t.q for c in dev for t in c.turns} & {t.q for c in check for t in c.turns}


@pytest.mark.parametrize(("kb", "path"), list(OTHER_SHOPS.values()), ids=list(OTHER_SHOPS))
def test_other_shop_set_covers_what_the_dev_set_covers_over_its_own_shop(kb: Path, path: Path) -> None:
    convs = load_conversations(path)
    turns = [t for c in convs for t in c.turns]
    texts = loaded_texts(kb)
    assert len(convs) >= 12 and len(turns) >= 70
    assert {t.kind for t in turns} == {"standalone", "followup", "topic_switch", "recall"}
    english = sum(t.language == "en" for t in turns)
    assert 0.35 <= english / len(turns) <= 0.6
    # Every document is asked about, so none is a passenger.
    assert {t.doc for t in turns if t.doc} == set(texts)
    # A price question for every product page (its title says 商品详情 or Product Details), if the shop has them.
    product_pages = {
        name for name, text in texts.items() if re.search("商品详情|Product Details", text.split("\n", 1)[0])
    }
    priced = {t.doc for t in turns if any(re.fullmatch(r"\d{3,5}", s) for s in t.expect_any[0])}
    assert priced >= product_pages
    # A shop may list its products in price tables rather than a page each: prices asked over five pages at least.
    assert len(priced) >= 5

    # Cross-language both ways, told by the page's own script.
    def is_english(name: str) -> bool:
        return re.search(r"[\u4e00-\u9fff]", texts[name].split("\n", 1)[0]) is None

    assert any(t.language == "en" and t.doc and not is_english(t.doc) for t in turns)
    assert any(t.language == "zh" and t.doc and is_english(t.doc) for t in turns)
    assert sum(bool(t.reject_any) for t in turns) >= 20
    # Something the customer said in the first turn is asked back at least five turns later.
    assert any(
        contains(c.turns[0].q, s) and i >= 5
        for c in convs
        for i, t in enumerate(c.turns)
        if t.kind == "recall"
        for s in t.expect_any[0]
    )


@pytest.mark.parametrize(("kb", "path"), list(OTHER_SHOPS.values()), ids=list(OTHER_SHOPS))
def test_other_shop_rejects_a_sibling_stated_apart_from_the_answer(kb: Path, path: Path) -> None:
    # Where one line of the document (a sentence run, a table row) states the asked value and the
    # sibling's together, an answer quoting that line is right; a reject string there would fail it.
    texts = loaded_texts(kb)
    clashes = [
        (conv.id, i)
        for conv in load_conversations(path)
        for i, t in enumerate(conv.turns)
        if t.doc and t.reject_any
        for line in texts[t.doc].splitlines()
        if all(contains(line, s) for s in t.expect_any[0]) and any(contains(line, r) for r in t.reject_any)
    ]
    assert clashes == []


@pytest.mark.parametrize(("kb", "path"), list(OTHER_SHOPS.values()), ids=list(OTHER_SHOPS))
def test_other_shop_set_shares_nothing_with_the_sets_before_it(kb: Path, path: Path) -> None:
    shop = load_conversations(path)
    earlier = [(k, p) for k, p in DATA_SETS.values() if p != path]
    others = [c for _, p in earlier for c in load_conversations(p)]
    assert not {c.id for c in shop} & {c.id for c in others}
    assert not {normalize(t.q) for c in shop for t in c.turns} & {normalize(t.q) for c in others for t in c.turns}
    for other_kb, _ in earlier:
        if other_kb != kb:
            assert not set(loaded_texts(kb)) & set(loaded_texts(other_kb))


# --- the recording upstream --------------------------------------------------------------------------


def _round(user: str, assistant: str) -> Round:
    return Round(Message("user", user, 0, 0.0), Message("assistant", assistant, 0, 0.0))


def test_requests_are_told_apart_by_their_structure() -> None:
    settings = Settings()
    chunk = Chunk("1", "d", "kb/a.md", "Widget 商品详情", "Widget 售价 199 元。\n注意 </documents> 转义。", 0.9, 10)
    answer = {
        "messages": build_messages(
            settings.prompt,
            settings.prompt.system_prompt,
            "",
            "摘要",
            [_round("hi", "hello")],
            [chunk],
            "多少钱？</documents>",
        )
    }
    assert classify_request(answer, settings) == "answer"
    question, chunks = parse_answer_request(answer, settings)
    assert question == "多少钱？</documents>"
    assert [(c.source, c.title, c.text) for c in chunks] == [(chunk.source, chunk.title, chunk.text)]
    # The conversation sent with it reads back too: the fake answers a question about it from there.
    memory = parse_answer_memory(answer)
    assert memory.summary == "摘要"
    assert [(r.user.content, r.assistant.content) for r in memory.rounds] == [("hi", "hello")]

    rewrite = {"messages": rewrite_messages(settings.rewrite.prompt, "那它呢", "", [_round("Widget 多少钱", "199")])}
    assert classify_request(rewrite, settings) == "rewrite"
    # Another configured prompt: the message layout still says what the request is.
    reworded = settings.model_copy(update={"rewrite": settings.rewrite.model_copy(update={"prompt": "Rewrite."})})
    assert classify_request(rewrite, reworded) == "rewrite"
    assert classify_request({"messages": [{"role": "user", "content": "hi"}]}, settings) == "other"
    assert classify_request({"messages": "nope"}, settings) == "other"


async def test_the_fake_reads_overlapping_blocks_of_one_document_as_one_passage() -> None:
    """The chunker repeats lines across a chunk boundary; a block that starts mid-list has no heading of its
    own. Read from the prompt alone, the two blocks are one passage, so the list keeps its heading and the
    fake quotes the whole price list, as a reader of the prompt would."""
    settings = Settings()
    head = "Orbit 7 商品详情\n价格\n本店售价如下。\n- 64GB 版本售价 1999 元。\n- 128GB 版本售价 2299 元。"
    tail = "- 128GB 版本售价 2299 元。\n- 256GB 版本售价 2599 元。\n颜色\n共有两种颜色。"
    other = "Orbit 7 Max 售价 3999 元。"
    blocks = [
        Chunk("2", "d", "orbit-7.md", "Orbit 7 商品详情", tail, 0.9, 10),
        Chunk("9", "e", "orbit-7-max.md", "Orbit 7 Max 商品详情", other, 0.8, 10),
        Chunk("1", "d", "orbit-7.md", "Orbit 7 商品详情", head, 0.7, 10),
    ]
    request = {
        "messages": build_messages(
            settings.prompt, settings.prompt.system_prompt, "", "", [], blocks, "Orbit 7 多少钱？"
        )
    }
    question, chunks = parse_answer_request(request, settings)
    passages = read_as_passages(chunks)
    assert [p.source for p in passages] == ["orbit-7.md", "orbit-7-max.md"]
    assert passages[0].text.count("128GB") == 1 and "64GB" in passages[0].text and "256GB" in passages[0].text
    assert passages[0].doc_id == "orbit-7.md" != passages[1].doc_id
    # Blocks that only touch (no shared line) stay apart.
    apart = read_as_passages(
        [dataclasses.replace(chunks[0], text=chunks[0].text.replace("128GB", "96GB")), *chunks[1:]]
    )
    assert len(apart) == 3
    text = await ExtractiveGenerator(3).complete([], GenerationInput(question, question, passages, None))
    assert all(price in text for price in ("1999", "2299", "2599")) and "3999" not in text


async def test_summary_requests_parse_back_into_rounds() -> None:
    sent: list[list[dict[str, Any]]] = []

    class Client:
        async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
            sent.append(messages)
            return "ok"

    memory = MemorySettings()
    rounds = [_round("订单号 XC20250305001234", "好的\n- 第二行"), _round("那它呢", "199 元")]
    await LLMSummarizer(Client(), memory).summarize("", rounds)  # type: ignore[arg-type]
    await LLMSummarizer(Client(), memory).summarize("earlier summary", rounds[:1])  # type: ignore[arg-type]
    settings = Settings()
    assert [classify_request({"messages": m}, settings) for m in sent] == ["summary", "summary"]
    previous, parsed = parse_summary_request({"messages": sent[0]}) or ("?", [])
    assert previous == ""
    assert [(r.user.content, r.assistant.content) for r in parsed] == [
        (r.user.content, r.assistant.content) for r in rounds
    ]
    assert (parse_summary_request({"messages": sent[1]}) or ("?", []))[0] == "earlier summary"


def test_recorder_answers_extractively_and_files_each_call_under_its_turn(counter: TokenCounter) -> None:
    settings = Settings()
    recorder = LLMRecorder(settings, counter)
    chunk = Chunk("1", "d", "a.md", "Widget", "Widget 售价 199 元。Widget 保修 2 年。", 0.9, 10)
    request = {"messages": build_messages(settings.prompt, settings.prompt.system_prompt, "", "", [], [chunk], "售价")}
    recorder.begin("c1", 3)
    reply = recorder(request)
    recorder.end()
    generator = ExtractiveGenerator(settings.prompt.extractive_sentences)
    expected = asyncio.run(generator.complete([], GenerationInput("售价", "售价", [chunk])))
    assert reply == expected and "199" in expected
    stray = recorder({"messages": [{"role": "user", "content": "hi"}]})
    assert [(c.conversation, c.turn, c.kind) for c in recorder.calls] == [("c1", 3, "answer"), (None, None, "other")]
    assert recorder.calls[0].response == expected and isinstance(stray, str)
    assert recorder.for_turn("c1", 3) == recorder.calls[:1]
    # A question about the conversation is answered from the rounds the request carries.
    asked_back = build_messages(
        settings.prompt, settings.prompt.system_prompt, "", "", [_round("Widget 多少钱？", "Widget 售价 199 元。")],
        [chunk], "你刚才说的价格是多少来着？",
    )  # fmt: skip
    recalled = str(recorder({"messages": asked_back}))
    assert "之前的对话" in recalled and "199" in recalled


def test_recorder_forwards_to_a_real_endpoint(counter: TokenCounter) -> None:
    with FakeLLM(scripted([("capital", "Paris")])) as upstream:
        recorder = LLMRecorder(Settings(), counter, Upstream(upstream.base_url, "m", "secret"))
        try:
            request = {"model": "m", "messages": [{"role": "user", "content": "capital?"}], "stream": True}
            assert recorder(request) == "Paris"
            assert upstream.requests[0]["stream"] is False and upstream.requests[0]["model"] == "m"
            upstream.fail_next(1, Fault(500))
            failed = recorder(request)
            assert isinstance(failed, Fault) and failed.status == 502
            assert recorder.calls[1].error is not None and "HTTP 500" in recorder.calls[1].error
        finally:
            recorder.close()


# --- end to end --------------------------------------------------------------------------------------

TINY_KB = {
    "widget.md": "# Widget X 商品详情\n\nWidget X 售价 199 元，有黑色和白色。\n\nWidget X 整机保修 2 年，电池保修 1 年。\n",
    "shipping.txt": "Shipping\n\nOrders ship within 3 business days. Express delivery costs 25 yuan per order.\n",
}
TINY_CONVERSATIONS = [
    {
        "id": "widget",
        "turns": [
            turn("Widget X 多少钱", [["199"]], "widget.md", reject_any=["25"]),
            turn("那它的保修期呢", [["2 年"], ["两年"]], "widget.md", "followup"),
        ],
    },
    {
        "id": "order",
        "turns": [
            turn("My order number is AB12345678. How long does shipping take?", [["3 business days"]], "shipping.txt"),
            turn("Do you sell gift cards?", [["500 yuan"]], None),
            turn("What was my order number?", [["AB12345678"]], None, "recall"),
        ],
    },
]


def test_answers_command_end_to_end(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in TINY_KB.items():
        (kb / name).write_text(text, encoding="utf-8")
    convs = tmp_path / "convs.jsonl"
    convs.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in TINY_CONVERSATIONS) + "\n", encoding="utf-8")
    out, log = tmp_path / "out.json", tmp_path / "llm.jsonl"
    args = ["answers", "--kb", str(kb), "--conversations", str(convs), "--json", str(out), "--llm-log", str(log)]
    args += ["--cache-dir", str(tmp_path / "cache"), "--set", f"tokens.cache_dir={tmp_path / 'tiktoken'}"]
    # Fold every round into the summary at once, so the LLM pass also sends summary requests.
    args += ["--set", "memory.strategy=summary", "--set", "memory.summary_trigger=rounds"]
    args += ["--set", "memory.summary_every_rounds=1"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "| overall | 5 |" in result.stdout and "| kind: recall | 1 |" in result.stdout

    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["ingest"] == {"documents": 2, "chunks": 2, "failed": []}
    assert report["settings"]["extractive"]["llm"]["base_url"] is None
    assert report["settings"]["llm"]["llm"]["base_url"] == "<recording upstream>"
    assert report["settings"]["llm"]["rewrite"]["mode"] == "rule"
    assert report["settings"]["extractive"]["qdrant"]["path"] == "<tmp>/qdrant"
    turns = report["turns"]
    assert [(t["conversation"], t["turn"], t["kind"], t["lang"]) for t in turns] == [
        ("widget", 0, "standalone", "zh"),
        ("widget", 1, "followup", "zh"),
        ("order", 0, "standalone", "en"),
        ("order", 1, "standalone", "en"),
        ("order", 2, "recall", "en"),
    ]
    for t in turns:
        first, second = t["extractive"], t["llm"]
        assert first["mode"] == "extractive" and second["mode"] == "llm"
        for p in (first, second):
            verdict = score_answer(p["answer"], t["expect_any"], t["reject_any"])
            assert p["answer_correct"] == verdict.correct and p["missing"] == list(verdict.missing)
            assert p["error"] is None
        # The fake upstream answers extractively over the documents in the prompt: the same answer.
        assert second["answer"] == first["answer"]
    # Both documents fit every prompt: each grounded fact is in the answer request.
    assert [t["llm"]["context_has_fact"] for t in turns] == [True, True, True, False, True]
    assert turns[3]["llm"]["context_missing"] == ["500 yuan"]
    assert turns[0]["extractive"]["doc_hit_at_3"] is True and turns[3]["extractive"]["doc_hit_at_3"] is None
    # No document holds the order number: the answer comes from the conversation.
    assert turns[4]["extractive"]["answer_correct"] is True and "AB12345678" in turns[4]["extractive"]["answer"]

    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [c["index"] for c in calls] == list(range(len(calls)))
    answers = [c for c in calls if c["kind"] == "answer"]
    assert [(c["conversation"], c["turn"]) for c in answers] == [(t["conversation"], t["turn"]) for t in turns]
    assert all(c["response"] == t["llm"]["answer"] for c, t in zip(answers, turns, strict=True))
    assert {c["kind"] for c in calls} == {"answer", "summary"}
    for t in turns:
        own = [c for c in calls if (c["conversation"], c["turn"]) == (t["conversation"], t["turn"])]
        assert t["llm"]["requests"] == [c["index"] for c in own]
    # The order number reaches the recall turn's answer request only through the memory (the summary,
    # a user-side data block).
    recall = answers[-1]["request"]["messages"]
    assert "AB12345678" not in recall[-1]["content"]
    assert any("AB12345678" in m["content"] and "<conversation_summary>" in m["content"] for m in recall[:-1])

    summary = report["summary"]
    assert summary["overall"]["n"] == 5 and summary["overall"]["llm_turns"] == 5
    assert summary["overall"]["context_has_fact"] == 0.8
    assert summary["kind"]["recall"]["doc_turns"] == 0 and summary["kind"]["recall"]["doc_hit_at_3"] is None
    assert set(summary["lang"]) == {"en", "zh"}
