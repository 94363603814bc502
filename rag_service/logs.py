"""Structured JSON logs carrying the request and session ids, with PII masked before they are written."""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar

from rag_service.privacy import Masker, install_log_masking

request_id: ContextVar[str] = ContextVar("request_id", default="")
session_id: ContextVar[str] = ContextVar("session_id", default="")

HANDLER_NAME = "rag-json"


class JsonFormatter(logging.Formatter):
    def __init__(self, masker: Masker | None = None) -> None:
        super().__init__()
        self.masker = masker

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": getattr(record, "request_id", "") or request_id.get(),
            "session_id": getattr(record, "session_id", "") or session_id.get(),
        }
        for key in ("status", "path", "method", "duration_ms", "mode", "cost"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exc"] = record.exc_text or self.formatException(record.exc_info)
        line = json.dumps(entry, ensure_ascii=False)
        # Masked last, on the whole line: tracebacks and extra fields are covered too.
        return self.masker.mask(line) if self.masker else line


def configure_logging(json_logs: bool, level: str, masker: Masker | None) -> logging.Handler:
    """One handler on the `rag_service` logger (idempotent: replaces an earlier one of ours)."""
    logger = logging.getLogger("rag_service")
    for old in [h for h in logger.handlers if h.get_name() == HANDLER_NAME]:
        logger.removeHandler(old)
    handler = logging.StreamHandler()
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(
        JsonFormatter(masker) if json_logs else logging.Formatter("%(levelname)s %(name)s %(message)s")
    )
    if masker is not None:
        # Every logger's records (uvicorn's included) are masked as they are made.
        install_log_masking(masker)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = True
    return handler


def elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
