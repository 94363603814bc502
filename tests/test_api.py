"""The HTTP API on the embedded defaults (extractive generator, local Qdrant, in-process store)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rag_service.pipeline import Delta, Done, Retrieved, Rewritten
from rag_service.testing.fake_llm import FakeLLM, Fault
from tests.conftest import KB, AppClient


def sse_events(body: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    kind = ""
    for line in body.splitlines():
        if line.startswith("event:"):
            kind = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            events.append((kind, json.loads(line.split(":", 1)[1].strip())))
    return events


async def test_healthz(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    resp = await app.http.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


async def test_session_ids_are_unguessable_and_unique(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    ids = {await app.new_session() for _ in range(20)}
    assert len(ids) == 20
    assert all(len(i) >= 22 for i in ids)  # 16 random bytes, url-safe base64


async def test_extractive_answer_with_sources_and_receipt(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    sid = await app.new_session()
    turn = await app.ask(sid, "iPhone 16 Pro 256GB 版本多少钱？")
    assert turn["mode"] == "extractive"
    assert turn["answer"].startswith("[extractive answer")
    assert turn["rewritten_query"] == "iPhone 16 Pro 256GB 版本多少钱？"
    assert turn["sources"], "an answer cites what it was built from"
    assert turn["sources"][0]["source"] == "examples/kb/iphone-16-pro.md"
    assert set(turn["sources"][0]) == {"doc_id", "source", "title", "text", "sentences", "chunks", "score"}
    # Grouped per document: each document once, best score first, with the sentences the answer used.
    docs = [s["doc_id"] for s in turn["sources"]]
    assert len(docs) == len(set(docs))
    assert [s["score"] for s in turn["sources"]] == sorted((s["score"] for s in turn["sources"]), reverse=True)
    assert all(sentence in turn["answer"] for sentence in turn["sources"][0]["sentences"])
    r = turn["receipt"]
    for key in (
        "system_tokens",
        "summary_tokens",
        "history_tokens",
        "query_tokens",
        "context_tokens",
        "chunk_budget",
        "generation_reserve",
        "total_prompt_tokens",
        "context_window",
    ):
        assert isinstance(r[key], int), key
    assert (
        r["total_prompt_tokens"]
        == r["system_tokens"] + r["summary_tokens"] + r["history_tokens"] + r["query_tokens"] + r["context_tokens"]
    )
    assert r["context_tokens"] > 0


async def test_unknown_session_is_404_and_creates_nothing(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    resp = await app.http.post("/v1/sessions/not-a-real-id/chat", json={"question": "hi"})
    assert resp.status_code == 404
    assert "unknown session" in resp.json()["detail"]
    assert (await app.http.get("/v1/sessions/not-a-real-id/messages")).status_code == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"question": ""}, "question"),
        ({"question": "   "}, "empty"),
        ({"question": "x" * 100_000}, "limit"),
        ({"question": 12}, "question"),
        ({}, "question"),
        ({"question": "hi", "unknown": 1}, "unknown"),
    ],
)
async def test_bad_questions_are_422_and_lose_nothing(app_factory: Any, body: dict[str, Any], fragment: str) -> None:
    app: AppClient = await app_factory()
    sid = await app.new_session()
    await app.ask(sid, "退货政策是什么？")
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json=body)
    assert resp.status_code == 422
    assert fragment in json.dumps(resp.json(), ensure_ascii=False)
    messages = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


async def test_streaming_events_in_order_and_stored(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    sid = await app.new_session()
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "运费怎么算？", "stream": True})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = sse_events(resp.text)
    kinds = [k for k, _ in events]
    assert kinds[0] == "rewrite" and kinds[1] == "sources" and kinds[-1] == "done"
    assert set(kinds[2:-1]) == {"delta"}
    text = "".join(d["text"] for k, d in events if k == "delta")
    done = events[-1][1]
    assert done["answer"] == text
    messages = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [m["content"] for m in messages] == ["运费怎么算？", text]


async def test_llm_path_plain_and_streaming(app_factory: Any, fake_llm: FakeLLM) -> None:
    app: AppClient = await app_factory(llm={"base_url": fake_llm.base_url, "model": "fake-model"})
    sid = await app.new_session()
    turn = await app.ask(sid, "MacBook Air M3 有几种颜色？")
    assert turn["mode"] == "llm"
    assert turn["answer"].startswith("[fake:fake-model]")
    sent = fake_llm.requests[-1]["messages"]
    assert sent[0]["role"] == "system"
    assert sent[-1]["role"] == "user" and "MacBook Air M3 有几种颜色？" in sent[-1]["content"]
    assert "<documents>" in sent[-1]["content"]

    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "它的价格呢？", "stream": True})
    events = sse_events(resp.text)
    text = "".join(d["text"] for k, d in events if k == "delta")
    assert len([k for k, _ in events if k == "delta"]) > 1
    assert events[-1][1]["answer"] == text and text.startswith("[fake:fake-model]")
    assert fake_llm.requests[-1]["stream"] is True
    # The second request carries the first round verbatim.
    history = fake_llm.requests[-1]["messages"]
    assert {"role": "user", "content": "MacBook Air M3 有几种颜色？"} in history


async def test_upstream_failure_is_502_after_retries_and_keeps_question(app_factory: Any, fake_llm: FakeLLM) -> None:
    app: AppClient = await app_factory(
        llm={"base_url": fake_llm.base_url, "max_retries": 2, "retry_backoff_s": 0.01, "fallback_extractive": False}
    )
    sid = await app.new_session()
    fake_llm.fail_next(3, Fault(500))
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "分期付款有哪些银行？"})
    assert resp.status_code == 502
    assert "upstream" in resp.json()["detail"]
    assert len(fake_llm.requests) == 3
    messages = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "分期付款有哪些银行？")]

    fake_llm.fail_next(1, Fault(503))  # one transient failure is retried away
    turn = await app.ask(sid, "分期付款有哪些银行？")
    assert turn["mode"] == "llm"


async def test_streaming_upstream_failure_is_502(app_factory: Any, fake_llm: FakeLLM) -> None:
    app: AppClient = await app_factory(
        llm={"base_url": fake_llm.base_url, "max_retries": 0, "fallback_extractive": False}
    )
    sid = await app.new_session()
    fake_llm.fail_next(1, Fault(500))
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？", "stream": True})
    assert resp.status_code == 502
    messages = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [m["role"] for m in messages] == ["user"]


async def test_upstream_failure_falls_back_to_the_extractive_answer(app_factory: Any, fake_llm: FakeLLM) -> None:
    """The default: a customer never sees an error page for a failing LLM; the answer says it is extractive."""
    app: AppClient = await app_factory(llm={"base_url": fake_llm.base_url, "max_retries": 1, "retry_backoff_s": 0.01})
    sid = await app.new_session()
    fake_llm.fail_next(2, Fault(500))
    turn = await app.ask(sid, "iPhone 16 Pro 256GB 多少钱？")
    assert len(fake_llm.requests) == 2  # retried, then fell back
    assert turn["mode"] == "extractive" and turn["receipt"]["fallback"] == "upstream_error"
    assert turn["answer"].startswith("[extractive answer") and "8999" in turn["answer"]
    messages = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "iPhone 16 Pro 256GB 多少钱？"),
        ("assistant", turn["answer"]),
    ]
    assert 'rag_upstream_errors_total{stage="generate"} 1.0' in (await app.http.get("/metrics")).text

    # Streamed: the failure comes before any text, so the stream carries the extractive answer instead.
    fake_llm.fail_next(2, Fault(503))
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？", "stream": True})
    assert resp.status_code == 200
    events = sse_events(resp.text)
    done = events[-1][1]
    assert events[-1][0] == "done" and done["mode"] == "extractive" and done["receipt"]["fallback"] == "upstream_error"
    assert "".join(e[1]["text"] for e in events if e[0] == "delta") == done["answer"]

    # A working upstream answers as usual, without the fallback mark.
    turn = await app.ask(sid, "发票怎么开？")
    assert turn["mode"] == "llm" and "fallback" not in turn["receipt"]


async def test_upload_and_delete_document(app_factory: Any, tmp_path: Any) -> None:
    app: AppClient = await app_factory()
    doc = "# 星辰数码火星仓库\n\n火星仓库的取件码是 MARS-4242。仓库每周二上午九点开门。\n"
    files = {"file": ("mars-warehouse.md", doc.encode(), "text/markdown")}
    resp = await app.http.post("/v1/documents", files=files, data={"source": "tests/mars-warehouse.md"})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["upserted"] == body["chunks"] > 0
    again = await app.http.post("/v1/documents", files=files, data={"source": "tests/mars-warehouse.md"})
    assert again.json()["upserted"] == 0
    try:
        sid = await app.new_session()
        turn = await app.ask(sid, "火星仓库的取件码是多少？")
        assert turn["sources"][0]["source"] == "tests/mars-warehouse.md"
        assert "MARS-4242" in turn["answer"]
    finally:
        resp = await app.http.delete(f"/v1/documents/{body['doc_id']}")
    assert resp.status_code == 200 and resp.json()["deleted"] == body["chunks"]
    assert (await app.http.delete(f"/v1/documents/{body['doc_id']}")).status_code == 404


@pytest.mark.parametrize(
    ("name", "content", "status", "fragment"),
    [
        ("garbage.pdf", bytes(range(256)) * 40, 422, "garbage.pdf"),
        ("notes.odt", b"hello", 422, "unsupported"),
        ("notes.docx", b"hello", 422, "not a valid Word (.docx) file"),
        ("empty.txt", b"", 422, "empty"),
    ],
)
async def test_bad_uploads_are_4xx_and_lose_nothing(
    app_factory: Any, name: str, content: bytes, status: int, fragment: str
) -> None:
    app: AppClient = await app_factory()
    before = (await app.http.get("/v1/documents")).json()["documents"]
    resp = await app.http.post("/v1/documents", files={"file": (name, content)})
    assert resp.status_code == status
    assert fragment in resp.json()["detail"]
    after = (await app.http.get("/v1/documents")).json()["documents"]
    assert after == before
    assert len(after) == len([p for p in KB.iterdir() if p.suffix in {".md", ".txt", ".html", ".pdf"}])


async def test_oversized_upload_is_413(app_factory: Any) -> None:
    app: AppClient = await app_factory(server={"max_upload_mb": 0.01})
    resp = await app.http.post("/v1/documents", files={"file": ("big.txt", b"a" * 20_000)})
    assert resp.status_code == 413
    assert "max_upload_mb" in resp.json()["detail"]


async def test_openapi_schema_documents_every_json_response(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    schema = (await app.http.get("/openapi.json")).json()
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            success = next(code for code in operation["responses"] if code.startswith("2"))
            if success == "204":
                continue  # no body
            body = operation["responses"][success]["content"]["application/json"]["schema"]
            assert "$ref" in body, (method, path, body)
    receipt = schema["components"]["schemas"]["Receipt"]
    assert {"total_prompt_tokens", "completion_tokens", "timings_ms", "fallback"} <= set(receipt["properties"])
    assert "fallback" not in receipt["required"] and "total_prompt_tokens" in receipt["required"]
    chat = schema["paths"]["/v1/sessions/{session_id}/chat"]["post"]["responses"]["200"]["content"]
    assert "text/event-stream" in chat


async def test_a_plain_answer_is_the_streamed_turn_collected(app_factory: Any) -> None:
    app: AppClient = await app_factory()
    pipeline = app.services.pipeline
    question = "iPhone 16 Pro 256GB 多少钱？"
    plain = await pipeline.answer(None, question)
    events = [event async for event in pipeline.stream(None, question)]
    assert [type(e) for e in events[:2]] == [Rewritten, Retrieved] and isinstance(events[-1], Done)
    streamed = events[-1].result
    assert "".join(e.text for e in events if isinstance(e, Delta)) == streamed.answer == plain.answer
    assert "8999" in plain.answer and plain.sources == streamed.sources
    timings = {"timings_ms"}
    assert {k: v for k, v in plain.receipt.items() if k not in timings} == {
        k: v for k, v in streamed.receipt.items() if k not in timings
    }
    metrics = (await app.http.get("/metrics")).text
    assert 'rag_turns_total{mode="extractive",streamed="false"} 1.0' in metrics
    assert 'rag_turns_total{mode="extractive",streamed="true"} 1.0' in metrics
