"""Schemathesis against the service's own OpenAPI schema: a bounded number of generated requests per
operation, and no input may produce a 500."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from rag_service.auth import hash_key
from tests.conftest import AppClient

CASES_PER_OPERATION = 25


def generated_cases(schema_dict: dict[str, Any]) -> list[Any]:
    schema = schemathesis.openapi.from_dict(schema_dict)
    cases: list[Any] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=CASES_PER_OPERATION,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def collect(case: Any) -> None:
            cases.append(case)

        collect()
    return cases


def to_httpx(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in kwargs.items() if k in {"method", "url", "headers", "params", "json", "files"}}
    data = kwargs.get("data")
    if isinstance(data, bytes | str):
        out["content"] = data
    elif data is not None:
        out["data"] = data
    return out


KEYS = {"admin": "fuzz-admin-key", "client": "fuzz-client-key"}


@pytest.mark.parametrize("memory", ["hybrid"])
@pytest.mark.parametrize("auth", ["open", "keys"])
async def test_no_input_gives_a_500(app_factory: Any, memory: str, auth: str) -> None:
    limits_off = {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}}
    keyed = {
        # A tenant of its own: uploaded fuzz documents stay out of the shared knowledge base.
        "admins": {"fuzz": [hash_key(KEYS["admin"])]},
        "tenants": {"fuzz": [hash_key(KEYS["client"])]},
    }
    app: AppClient = await app_factory(
        memory={"strategy": memory}, auth={**limits_off, **(keyed if auth == "keys" else {})}
    )
    schema_dict = (await app.http.get("/openapi.json")).json()
    cases = generated_cases(schema_dict)
    operations = {(c.operation.method, c.operation.path) for c in cases}
    assert {("post", "/v1/sessions/{session_id}/chat"), ("post", "/v1/chat/completions")} <= operations
    assert operations == {(m, p) for p, item in schema_dict["paths"].items() for m in item}, "every route"
    # Half the chat cases aim at a real session, so generated bodies reach the pipeline, not just a 404.
    # With keys, cases take turns at the admin key, the client key and whatever was generated, so that
    # generated input gets past authentication and the role checks as well as into them.
    headers = {"Authorization": f"Bearer {KEYS['admin']}"} if auth == "keys" else {}
    sid = (await app.http.post("/v1/sessions", headers=headers)).json()["session_id"]
    failures: list[str] = []
    statuses: set[int] = set()
    for i, case in enumerate(cases):
        if "session_id" in (case.path_parameters or {}) and i % 2 == 0:
            case.path_parameters["session_id"] = sid
        kwargs = to_httpx(case.as_transport_kwargs(base_url="http://test"))
        if auth == "keys" and i % 3 < 2:
            kwargs["headers"] = {
                **kwargs.get("headers", {}),
                "authorization": f"Bearer {KEYS[('admin', 'client')[i % 3]]}",
            }
        resp = await app.http.request(**kwargs)
        statuses.add(resp.status_code)
        if resp.status_code >= 500:
            failures.append(f"{kwargs['method']} {kwargs['url']} -> {resp.status_code}: {resp.text[:200]}")
        elif resp.status_code >= 400:
            assert resp.headers.get("content-type", "").startswith("application/json"), kwargs["url"]
            assert resp.json()["detail"], kwargs["url"]
    assert not failures, "\n".join(failures[:10])
    assert len(cases) >= CASES_PER_OPERATION * 5
    # The cases got through to the routes: successes and input errors, not only refusals.
    assert {200, 422} <= statuses
    if auth == "keys":
        assert {401, 403} <= statuses
