"""The chat page (`/`): one static file that speaks the API."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def web_page() -> HTMLResponse:
    page = resources.files("rag_service").joinpath("static", "index.html").read_text(encoding="utf-8")
    return HTMLResponse(page)
