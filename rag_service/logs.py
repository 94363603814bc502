"""Structured JSON logs carrying the request and session ids, with PII masked before they are written."""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar

from rag_service.privacy import Masker, MaskingFilter

request_id: ContextVar[str] = ContextVar("request_id", default="")
session_id: ContextVar[str] = ContextVar("session_id", default="")

HANDLER_NAME = "rag-json"


class JsonFormatter(logging.Formatter):
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
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(json_logs: bool, level: str, masker: Masker | None) -> logging.Handler:
    """One handler on the `rag_service` logger (idempotent: replaces an earlier one of ours)."""
    logger = logging.getLogger("rag_service")
    for old in [h for h in logger.handlers if h.get_name() == HANDLER_NAME]:
        logger.removeHandler(old)
    handler = logging.StreamHandler()
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if json_logs else logging.Formatter("%(levelname)s %(name)s %(message)s"))
    if masker is not None:
        handler.addFilter(MaskingFilter(masker))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = True
    return handler


def elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
