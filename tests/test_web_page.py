"""The web page in real headless Chromium (Debian's chromium, driven by Playwright). The chat tab: two
turns, the second a follow-up; the page shows the rewritten query, the sources and the budget receipt; the
task and its slots with intents. The admin tab: a thumbs-down turn with its receipt, corrected into an FAQ
entry that answers at once."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from rag_service.api import create_app
from rag_service.auth import hash_key
from tests.conftest import AppClient

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (scripts/install.sh installs it)"
)

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def _serve(app: AppClient) -> AsyncIterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(services=app.services), port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    await task


@pytest.fixture
async def served(app_factory: Any) -> AsyncIterator[str]:
    async for url in _serve(await app_factory(rewrite={"mode": "rule"})):
        yield url


@pytest.fixture
async def served_with_intents(app_factory: Any) -> AsyncIterator[str]:
    files = [str(Path(__file__).resolve().parent.parent / "configs" / "intents" / "ecommerce.yaml")]
    async for url in _serve(await app_factory(rewrite={"mode": "rule"}, intents={"files": files})):
        yield url


ADMIN_KEY = "page-admin-key"


@pytest.fixture
async def served_with_keys(app_factory: Any) -> AsyncIterator[str]:
    # A tenant of its own: the tests share one Qdrant index, and the FAQ entry written here outlives the test.
    tenant = f"page{secrets.token_hex(3)}"
    auth = {"admins": {tenant: [hash_key(ADMIN_KEY)]}, "rate_limit": {"per_key": "", "per_session": ""}}
    app: AppClient = await app_factory(rewrite={"mode": "rule"}, auth=auth)
    async for url in _serve(app):
        yield url


async def test_two_turns_show_rewrite_sources_and_receipt(served: str, tmp_path: Any) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(served)
            await page.wait_for_function("document.getElementById('session').textContent.length > 1")

            await page.fill("#question", "iPhone 16 Pro 256GB 多少钱？")
            await page.click("#send")
            await page.wait_for_selector(".turn[data-done='1']", timeout=60_000)

            await page.fill("#question", "那它的电池更换多少钱？")
            await page.click("#send")
            await page.wait_for_function(
                "document.querySelectorAll(\".turn[data-done='1']\").length === 2", timeout=60_000
            )

            turns = page.locator(".turn")
            second = turns.nth(1)
            rewrite = await second.locator(".rewrite").inner_text()
            assert "iPhone 16 Pro" in rewrite, rewrite
            sources = await second.locator(".source").all_inner_texts()
            assert any("iphone-16-pro.md" in s for s in sources), sources
            receipt = await second.locator(".receipt").text_content() or ""
            assert "total_prompt_tokens" in receipt and "history_tokens" in receipt
            assert (await second.locator(".a").inner_text()).strip()
            await page.screenshot(path=str(tmp_path / "chat.png"))
        finally:
            await browser.close()


async def test_the_page_shows_the_task_and_its_slots(served_with_intents: str) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(served_with_intents)
            await page.wait_for_function("document.getElementById('session').textContent.length > 1")
            assert await page.locator("#task").is_hidden()
            await page.fill("#question", "我想退掉这台 iPhone 16 Pro")
            await page.click("#send")
            await page.wait_for_selector(".turn[data-done='1']", timeout=60_000)
            task = await page.locator("#task").inner_text()
            assert "return_request" in task and "product = iPhone 16 Pro" in task, task
            assert "order_no ?" in task and "reason ?" in task, task
        finally:
            await browser.close()


async def test_admin_tab_turns_a_thumbs_down_into_an_faq_answer(served_with_keys: str, tmp_path: Any) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{served_with_keys}?key={ADMIN_KEY}")
            await page.wait_for_function("document.getElementById('session').textContent.length > 1")
            await page.fill("#question", "你们的仓库在哪个城市？")
            await page.click("#send")
            await page.wait_for_selector(".turn[data-done='1'] .rate-down", timeout=60_000)
            await page.click(".turn .rate-down")
            await page.wait_for_selector(".turn[data-rated='down']")
            assert await page.get_attribute(".turn .rate-down", "aria-pressed") == "true"

            await page.click("#tab-admin")
            worst = page.locator("#worst .worst")
            await worst.first.wait_for(timeout=30_000)
            assert "你们的仓库在哪个城市？" in await worst.first.locator(".q").inner_text()
            assert "total_prompt_tokens" in (await worst.first.locator(".receipt").text_content() or "")
            assert "1 ratings" in await page.inner_text("#report-summary")
            await page.screenshot(path=str(tmp_path / "admin.png"), full_page=True)

            await worst.first.locator(".correct").click()
            assert await page.input_value("#ann-question") == "你们的仓库在哪个城市？"
            await page.fill("#ann-answer", "我们的仓库在苏州工业园区。")
            await page.click("#ann-save")
            await page.wait_for_function(
                "[...document.querySelectorAll('#faq .faq-entry .a')].some(e => e.textContent.includes('苏州'))",
                timeout=30_000,
            )

            await page.click("#tab-chat")
            await page.fill("#question", "仓库在哪个城市")
            await page.click("#send")
            await page.wait_for_function(
                "document.querySelectorAll(\".turn[data-done='1']\").length === 2", timeout=60_000
            )
            second = page.locator(".turn").nth(1)
            assert await second.get_attribute("data-mode") == "faq"
            assert (await second.locator(".a").inner_text()).strip() == "我们的仓库在苏州工业园区。"
            await page.screenshot(path=str(tmp_path / "chat-faq.png"), full_page=True)

            await page.click("#tab-admin")
            await page.locator("#faq .faq-entry .delete").first.wait_for()
            await page.locator("#faq .faq-entry .delete").first.click()
            await page.wait_for_selector("#faq .faq-entry", state="detached", timeout=30_000)
        finally:
            await browser.close()
