"""Tenants and roles: what each kind of caller may do, and that no tenant ever sees another's data.

Two tenants, each with an admin key and a client key, on one service; open mode (no keys) on another.
Tenant names get a random suffix: the tests share one Qdrant index, and a tenant's collection outlives
its test.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from qdrant_client import QdrantClient

from rag_core.documents.pipeline import ID_NAMESPACE, doc_id_for, ingest_file
from rag_core.embedding import Embedder
from rag_core.settings import DEFAULT_TENANT, AuthSettings, RetrievalSettings, Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import TENANT_INFIX, copy_index, open_index
from rag_core.vectorstore.edge import EdgeIndex
from rag_core.vectorstore.qdrant import QdrantIndex
from rag_service.api import create_app
from rag_service.auth import ApiKeys, Principal, Role, hash_key
from rag_service.retrieval import Retriever
from tests.conftest import AppClient

SHARED_SOURCE = "policies/points.md"
ACME_DOC = "# 积分规则\n\n积分兑换：100 积分抵 1 元，积分有效期两年。内部编号 ACME-ONLY-7731。\n"
GLOBEX_DOC = "# 积分规则\n\n积分兑换：50 积分抵 1 元，积分永久有效。内部编号 GLOBEX-ONLY-4410。\n"
POINTS_QUESTION = "积分怎么兑换？"


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Tenants:
    """Two tenants on one app; `h("acme-admin")`, `h("globex-client")` ... are the headers of their keys."""

    def __init__(self, app: AppClient, acme: str, globex: str) -> None:
        self.app, self.acme, self.globex = app, acme, globex

    def h(self, who: str) -> dict[str, str]:
        return _bearer(f"{who}-secret")


async def _two_tenants(app_factory: Callable[..., Awaitable[AppClient]], **extra: Any) -> Tenants:
    suffix = secrets.token_hex(3)
    acme, globex = f"acme{suffix}", f"globex{suffix}"
    auth = {
        "tenants": {acme: [hash_key("acme-client-secret")], globex: [hash_key("globex-client-secret")]},
        "admins": {acme: [hash_key("acme-admin-secret")], globex: [hash_key("globex-admin-secret")]},
        "rate_limit": {"per_key": "", "per_session": ""},
    }
    app = await app_factory(auth=auth, **extra)
    return Tenants(app, acme, globex)


async def _upload(app: AppClient, headers: dict[str, str], text: str, source: str = SHARED_SOURCE) -> Any:
    return await app.http.post(
        "/v1/documents", headers=headers, files={"file": ("points.md", text.encode())}, data={"source": source}
    )


async def _session(app: AppClient, headers: dict[str, str], user: str = "") -> str:
    resp = await app.http.post("/v1/sessions", headers=headers, json={"user": user})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["session_id"])


async def _chat_sources(app: AppClient, headers: dict[str, str], question: str) -> list[dict[str, Any]]:
    sid = await _session(app, headers)
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", headers=headers, json={"question": question})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["sources"])


# ---------------------------------------------------------------- the isolation matrix


async def test_documents_belong_to_the_callers_tenant(app_factory: Any) -> None:
    t = await _two_tenants(app_factory)
    app = t.app

    # upload: admin keys only
    acme_up = await _upload(app, t.h("acme-admin"), ACME_DOC)
    assert acme_up.status_code == 201, acme_up.text
    assert acme_up.json()["tenant"] == t.acme
    client_up = await _upload(app, t.h("acme-client"), ACME_DOC)
    assert client_up.status_code == 403 and "admin key" in client_up.json()["detail"]
    assert (await _upload(app, {}, ACME_DOC)).status_code == 401

    # replace via `source`: the same source in another tenant is another document; acme's is untouched
    globex_up = await _upload(app, t.h("globex-admin"), GLOBEX_DOC)
    assert globex_up.status_code == 201
    assert globex_up.json()["unchanged"] is False and globex_up.json()["deleted"] == 0
    acme_id, globex_id = acme_up.json()["doc_id"], globex_up.json()["doc_id"]
    assert acme_id != globex_id
    assert acme_id == doc_id_for(SHARED_SOURCE, t.acme) and globex_id == doc_id_for(SHARED_SOURCE, t.globex)

    # list: each admin sees its own tenant's documents and nothing else (not the default tenant's KB either)
    acme_docs = (await app.http.get("/v1/documents", headers=t.h("acme-admin"))).json()
    assert acme_docs["tenant"] == t.acme
    assert [(d["doc_id"], d["source"], d["chunks"]) for d in acme_docs["documents"]] == [
        (acme_id, SHARED_SOURCE, acme_up.json()["chunks"])
    ]
    globex_docs = (await app.http.get("/v1/documents", headers=t.h("globex-admin"))).json()["documents"]
    assert [d["doc_id"] for d in globex_docs] == [globex_id]
    assert (await app.http.get("/v1/documents", headers=t.h("acme-client"))).status_code == 403

    # chat retrieval: a tenant's chunks only, for its client and admin keys, on both chat routes
    for who, mine, theirs in (
        ("acme-client", "ACME-ONLY", "GLOBEX-ONLY"),
        ("acme-admin", "ACME-ONLY", "GLOBEX-ONLY"),
        ("globex-client", "GLOBEX-ONLY", "ACME-ONLY"),
    ):
        sources = await _chat_sources(app, t.h(who), POINTS_QUESTION)
        assert sources and any(mine in s["text"] for s in sources), who
        assert not any(theirs in s["text"] for s in sources), who
        assert not any(s["source"].startswith("examples/kb/") for s in sources), who
        resp = await app.http.post(
            "/v1/chat/completions", headers=t.h(who), json={"messages": [{"role": "user", "content": POINTS_QUESTION}]}
        )
        assert resp.status_code == 200, resp.text
        texts = [s["text"] for s in resp.json()["rag"]["sources"]]
        assert texts and any(mine in x for x in texts) and not any(theirs in x for x in texts), who

    # delete: another tenant's document id is unknown (404) and stays; a client key may not delete
    assert (await app.http.delete(f"/v1/documents/{acme_id}", headers=t.h("globex-admin"))).status_code == 404
    assert (await app.http.delete(f"/v1/documents/{acme_id}", headers=t.h("acme-client"))).status_code == 403
    still = (await app.http.get("/v1/documents", headers=t.h("acme-admin"))).json()["documents"]
    assert [d["doc_id"] for d in still] == [acme_id]
    removed = await app.http.delete(f"/v1/documents/{acme_id}", headers=t.h("acme-admin"))
    assert removed.status_code == 200 and removed.json()["deleted"] == acme_up.json()["chunks"]
    assert (await app.http.get("/v1/documents", headers=t.h("acme-admin"))).json()["documents"] == []
    # ... and globex's copy of the same source is still there and still answers
    assert [d["doc_id"] for d in (await app.http.get("/v1/documents", headers=t.h("globex-admin"))).json()["documents"]]
    assert any("GLOBEX-ONLY" in s["text"] for s in await _chat_sources(app, t.h("globex-client"), POINTS_QUESTION))
    # a tenant with no documents retrieves nothing at all (never the default tenant's knowledge base)
    assert await _chat_sources(app, t.h("acme-client"), POINTS_QUESTION) == []
    await app.http.delete(f"/v1/documents/{globex_id}", headers=t.h("globex-admin"))


async def test_sessions_and_user_memories_stay_in_their_tenant(app_factory: Any) -> None:
    t = await _two_tenants(app_factory, user_memory={"every_turns": 1})
    app = t.app
    sid = await _session(app, t.h("acme-client"), user="u-77")
    turn = await app.http.post(
        f"/v1/sessions/{sid}/chat",
        headers=t.h("acme-client"),
        json={"question": "我住在杭州，我更喜欢顺丰快递。运费多少？"},
    )
    assert turn.status_code == 200
    await app.services.pipeline.drain()

    # session access: any key of the owning tenant; another tenant's keys see no such session
    for who, expected in (("acme-client", 200), ("acme-admin", 200), ("globex-client", 404), ("globex-admin", 404)):
        resp = await app.http.get(f"/v1/sessions/{sid}/messages", headers=t.h(who))
        assert resp.status_code == expected, who
        assert len(resp.json()["messages"]) == 2 if expected == 200 else resp.json()["detail"] == "unknown session id"
    assert (await app.http.get(f"/v1/sessions/{sid}/messages")).status_code == 401
    for who in ("globex-client", "globex-admin"):
        again = await app.http.post(f"/v1/sessions/{sid}/chat", headers=t.h(who), json={"question": "hi"})
        assert again.status_code == 404
        assert (await app.http.delete(f"/v1/sessions/{sid}", headers=t.h(who))).status_code == 404

    # user memories: admin keys of the tenant only; the other tenant's admin knows nothing of this user
    mine = await app.http.get("/v1/users/u-77/memories", headers=t.h("acme-admin"))
    assert mine.status_code == 200 and any("杭州" in f["fact"] for f in mine.json()["memories"])
    assert (await app.http.get("/v1/users/u-77/memories", headers=t.h("globex-admin"))).json()["memories"] == []
    for who in ("acme-client", "globex-client"):
        denied = await app.http.get("/v1/users/u-77/memories", headers=t.h(who))
        assert denied.status_code == 403 and "admin key" in denied.json()["detail"], who
        assert (await app.http.delete("/v1/users/u-77/memories", headers=t.h(who))).status_code == 403
    assert (await app.http.delete("/v1/users/u-77/memories", headers=t.h("globex-admin"))).json()["deleted"] == 0
    assert (await app.http.get("/v1/users/u-77/memories", headers=t.h("acme-admin"))).json()["memories"]
    assert len((await app.http.get(f"/v1/sessions/{sid}/messages", headers=t.h("acme-client"))).json()["messages"]) == 2


# ---------------------------------------------------------------- route x role


ROUTES = [
    "create session",
    "chat",
    "messages",
    "delete session",
    "openai chat",
    "upload",
    "list documents",
    "delete document",
    "get memories",
    "delete memories",
    "list sessions",
]
CHAT_ROUTES = {"create session", "chat", "messages", "delete session", "openai chat"}
DOC_ROUTES = {"upload", "list documents", "delete document"}
SUCCESS = {"create session": 201, "upload": 201, "delete session": 204}


async def _attempt(app: AppClient, route: str, caller: dict[str, str], owner: dict[str, str]) -> Any:
    """Call `route` as `caller`, on resources made by `owner` (a key that may make them)."""
    http = app.http
    if route == "create session":
        return await http.post("/v1/sessions", headers=caller)
    if route in {"chat", "messages", "delete session"}:
        sid = await _session(app, owner)
        if route == "chat":
            return await http.post(f"/v1/sessions/{sid}/chat", headers=caller, json={"question": "退货政策？"})
        if route == "messages":
            return await http.get(f"/v1/sessions/{sid}/messages", headers=caller)
        return await http.delete(f"/v1/sessions/{sid}", headers=caller)
    if route == "openai chat":
        return await http.post(
            "/v1/chat/completions", headers=caller, json={"messages": [{"role": "user", "content": "退货政策？"}]}
        )
    if route == "upload":
        return await _upload(app, caller, ACME_DOC, source=f"tests/route-{secrets.token_hex(4)}.md")
    if route == "list documents":
        return await http.get("/v1/documents", headers=caller)
    if route == "delete document":
        made = await _upload(app, owner, ACME_DOC, source=f"tests/route-{secrets.token_hex(4)}.md")
        assert made.status_code == 201, made.text
        return await http.delete(f"/v1/documents/{made.json()['doc_id']}", headers=caller)
    if route == "get memories":
        return await http.get("/v1/users/u-1/memories", headers=caller)
    if route == "list sessions":
        return await http.get("/v1/sessions", headers=caller)
    return await http.delete("/v1/users/u-1/memories", headers=caller)


@pytest.mark.parametrize("route", ROUTES)
async def test_route_by_role(app_factory: Any, route: str) -> None:
    t = await _two_tenants(app_factory)
    admin, client = t.h("acme-admin"), t.h("acme-client")
    expected = {
        "admin": SUCCESS.get(route, 200),
        "client": SUCCESS.get(route, 200) if route in CHAT_ROUTES else 403,
        "no key": 401,
        "unknown key": 401,
    }
    callers = {"admin": admin, "client": client, "no key": {}, "unknown key": _bearer("not-a-key")}
    for who, headers in callers.items():
        resp = await _attempt(t.app, route, headers, admin)
        assert resp.status_code == expected[who], (route, who, resp.text)
        if resp.status_code >= 400:
            assert resp.headers["content-type"].startswith("application/json") and resp.json()["detail"]
        if resp.status_code == 401:
            assert resp.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("route", ROUTES)
async def test_route_in_open_mode(app_factory: Any, route: str) -> None:
    app: AppClient = await app_factory(auth={"rate_limit": {"per_key": "", "per_session": ""}})
    resp = await _attempt(app, route, {}, {})
    if route in CHAT_ROUTES or route in DOC_ROUTES:
        assert resp.status_code == SUCCESS.get(route, 200), resp.text
    else:
        # What the service learnt about its users is never open: that needs an admin key.
        assert resp.status_code == 403 and "auth.admins" in resp.json()["detail"]
    if route == "upload":
        # Open mode's documents are the default tenant's (the KB every open-mode session answers from).
        body = resp.json()
        assert body["tenant"] == DEFAULT_TENANT and body["doc_id"] == doc_id_for(body["source"])
        assert (await app.http.delete(f"/v1/documents/{body['doc_id']}")).status_code == 200


async def test_admins_list_their_tenants_sessions_only(app_factory: Any) -> None:
    t = await _two_tenants(app_factory)
    mine = {await _session(t.app, t.h("acme-client")) for _ in range(3)}
    theirs = await _session(t.app, t.h("globex-client"))
    resp = await t.app.http.get("/v1/sessions", headers=t.h("acme-admin"), params={"limit": 2})
    assert resp.status_code == 200, resp.text
    first = resp.json()
    assert first["limit"] == 2 and len(first["sessions"]) == 2
    rest = (await t.app.http.get("/v1/sessions", headers=t.h("acme-admin"), params={"offset": 2})).json()
    listed = {s["session_id"] for s in first["sessions"] + rest["sessions"]}
    assert listed == mine and theirs not in listed
    for params in ({"limit": 0}, {"offset": -1}, {"offset": 2**63}):
        bad = await t.app.http.get("/v1/sessions", headers=t.h("acme-admin"), params=params)
        assert bad.status_code == 422 and bad.json()["detail"], params


async def test_open_mode_serves_loopback_clients_only(app_factory: Any) -> None:
    """However the app is served: without keys, a request from beyond loopback is refused unless allow_open."""
    for auth, expected in (({}, 403), ({"allow_open": True}, 201)):
        services = (await app_factory(auth=auth)).services
        remote = create_app(services=services)
        async with remote.router.lifespan_context(remote):
            transport = httpx.ASGITransport(app=remote, client=("203.0.113.9", 5000))
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                resp = await http.post("/v1/sessions")
                assert resp.status_code == expected, resp.text
                if expected == 403:
                    assert "loopback" in resp.json()["detail"]
                assert (await http.get("/healthz")).status_code == 200


# ---------------------------------------------------------------- keys and settings


def test_keys_and_roles_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_AUTH__TENANTS", f'{{"shop": ["{hash_key("c1")}", "{hash_key("c2")}"]}}')
    monkeypatch.setenv("RAG_AUTH__ADMINS", f'{{"shop": ["{hash_key("a1")}"], "other": ["{hash_key("a2")}"]}}')
    keys = ApiKeys(Settings().auth)
    assert not keys.open
    assert keys.authenticate("Bearer c2") == Principal("shop", hash_key("c2")[7:19], Role.CLIENT)
    assert keys.authenticate("bearer a1").role is Role.ADMIN
    assert keys.authenticate("Bearer a2").tenant == "other"


@pytest.mark.parametrize(
    "auth, problem",
    [
        ({"tenants": {"a:b": [hash_key("k")]}}, "tenant name"),
        ({"admins": {"": [hash_key("k")]}}, "tenant name"),
        ({"tenants": {"a": ["not-a-digest"]}}, "sha256"),
        ({"tenants": {"a": [hash_key("k")]}, "admins": {"a": [hash_key("k")]}}, "both"),
        ({"rate_limit": {"per_key": "lots"}}, "not a rate limit"),
        ({"rate_per_s": 5}, "Extra inputs"),
    ],
)
def test_bad_auth_settings_are_refused(auth: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        AuthSettings(**auth)


# ---------------------------------------------------------------- the index


async def test_chunks_from_before_tenants_are_the_default_tenants(
    tmp_path: Path, embedder: Embedder, counter: TokenCounter, settings_factory: Callable[..., Settings]
) -> None:
    """An index built before tenants (no `tenant` in the payload), in the local-mode folder of that time,
    keeps serving open mode, unchanged, read by local mode or after `rag-ingest --push edge`."""
    settings = settings_factory(qdrant={"path": str(tmp_path / "q"), "engine": "local"})
    doc = tmp_path / "warranty.md"
    doc.write_text("# 保修\n\n整机保修一年，电池保修一年。\n", encoding="utf-8")
    old = QdrantIndex.open(settings.qdrant, embedder.dim, embedder.name)
    report = await ingest_file(
        doc, index=old, embedder=embedder, counter=counter, settings=settings, source="warranty.md"
    )
    # Make it what the old code wrote: no tenant field anywhere.
    ids: list[Any] = list(await old.doc_point_ids(report.doc_id))
    await old.client.delete_payload(old.collection, keys=["tenant"], points=ids)
    records, _ = await old.client.scroll(old.collection, with_payload=True, limit=100)
    assert records and all("tenant" not in (r.payload or {}) for r in records)
    # Into Edge shards beside it (what `rag-ingest --push edge` does).
    edge_settings = settings.qdrant.model_copy(update={"engine": "edge"})
    pushed = EdgeIndex(edge_settings, embedder.dim, embedder.name, beside_local_mode=True)
    assert await copy_index(old, pushed) == {DEFAULT_TENANT: report.chunks}
    await pushed.close()
    await old.close()

    for qdrant in (settings.qdrant, edge_settings):
        index = open_index(qdrant, embedder.dim, embedder.name)
        try:
            # Document ids of the default tenant are the ones of before (uuid5 of the source alone) ...
            assert report.doc_id == doc_id_for("warranty.md") == str(uuid.uuid5(ID_NAMESPACE, "warranty.md"))
            retriever = Retriever(index, embedder, RetrievalSettings())
            for tenant in (None, DEFAULT_TENANT):
                hits = await retriever.search("电池保修多久？", tenant=tenant)
                assert [h.doc_id for h in hits] == [report.doc_id] * len(hits) and hits
            assert await retriever.search("电池保修多久？", tenant="acme") == []
            listed = {report.doc_id: {"source": "warranty.md", "title": report.title, "chunks": report.chunks}}
            assert await index.documents() == await index.documents(DEFAULT_TENANT) == listed
            assert await index.documents("acme") == {}
            # ... so re-ingesting the unchanged file into the default tenant finds every chunk already there.
            again = await ingest_file(
                doc, index=index, embedder=embedder, counter=counter, settings=settings, source="warranty.md"
            )
            assert again.unchanged and again.doc_id == report.doc_id
            # Another tenant's copy of the same source is a new document in that tenant's own collection.
            other = await ingest_file(
                doc, index=index, embedder=embedder, counter=counter, settings=settings, source="warranty.md",
                tenant="acme",
            )  # fmt: skip
            assert other.doc_id != report.doc_id and other.upserted == other.chunks
            assert await index.stats() == await index.stats("acme") == {"documents": 1, "chunks": report.chunks}
            assert await index.delete_doc(other.doc_id) == 0  # not the default tenant's
            assert await index.delete_doc(report.doc_id, "acme") == 0  # not acme's
            assert (await index.stats("acme"))["chunks"] == report.chunks
            assert await index.tenants() == [DEFAULT_TENANT, "acme"]
        finally:
            await index.close()
    client = QdrantClient(path=str(tmp_path / "q"))
    try:
        names = {c.name for c in client.get_collections().collections}
        assert names == {settings.qdrant.collection, settings.qdrant.collection + TENANT_INFIX + "acme"}
    finally:
        client.close()
