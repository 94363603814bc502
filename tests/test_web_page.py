"""The chat page in real headless Chromium (Debian's chromium, driven by Playwright): two turns, the
second a follow-up; the page shows the rewritten query, the sources and the budget receipt."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from rag_service.api import create_app
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
