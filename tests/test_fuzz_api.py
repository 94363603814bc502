"""Schemathesis against the service's own OpenAPI schema: a bounded number of generated requests per
operation, and no input may produce a 500."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

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


@pytest.mark.parametrize("memory", ["hybrid"])
async def test_no_input_gives_a_500(app_factory: Any, memory: str) -> None:
    app: AppClient = await app_factory(memory={"strategy": memory}, auth={"rate_per_s": 0})
    schema_dict = (await app.http.get("/openapi.json")).json()
    cases = generated_cases(schema_dict)
    operations = {(c.operation.method, c.operation.path) for c in cases}
    assert {("post", "/v1/sessions/{session_id}/chat"), ("post", "/v1/chat/completions")} <= operations
    # Half the chat cases aim at a real session, so generated bodies reach the pipeline, not just a 404.
    sid = await app.new_session()
    failures: list[str] = []
    for i, case in enumerate(cases):
        if "session_id" in (case.path_parameters or {}) and i % 2 == 0:
            case.path_parameters["session_id"] = sid
        kwargs = to_httpx(case.as_transport_kwargs(base_url="http://test"))
        resp = await app.http.request(**kwargs)
        if resp.status_code >= 500:
            failures.append(f"{kwargs['method']} {kwargs['url']} -> {resp.status_code}: {resp.text[:200]}")
        elif resp.status_code >= 400:
            assert resp.headers.get("content-type", "").startswith("application/json"), kwargs["url"]
    assert not failures, "\n".join(failures[:10])
    assert len(cases) >= CASES_PER_OPERATION * 5
