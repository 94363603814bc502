"""The recording OpenAI-compatible upstream of the framework comparison (bench/compare.py).

It is `rag_service.testing.fake_llm.FakeLLM` (TCP_NODELAY, keep-alive, a fixed per-call delay) with three additions:

- a responder that plays a plausible LLM for the scripted conversations of `bench/conversations.json`,
  identically for every system: a condense/rewrite request gets the turn's scripted standalone query, an
  answer request a fixed-length templated answer to the turn's question, a summary request a generic
  summary (that keeps no identifiers of its own);
- server-side timing of every chat request on the monotonic clock (`time.monotonic()`, the clock the
  runners time their turns with), from the start of request handling to the last byte written;
- `GET /bench/requests` returns (and forgets) what was recorded: `{"records": [{t0, t1, kind, request}]}`.

Run with the project's virtual environment, from the repository root:

    .venv/bin/python bench/upstream.py --port 0 --delay 0.3 --script bench/conversations.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rag_core.text import has_han  # noqa: E402
from rag_service.testing.fake_llm import Exchange, FakeLLM, message_text, serve_until_signalled  # noqa: E402

KIND_SUMMARY, KIND_REWRITE, KIND_ANSWER = "summary", "rewrite", "answer"

# What marks each system's condense / rewrite / summary request (their prompts' fixed wording).
_SUMMARY_MARKERS = ("compress a customer-service conversation",)
_REWRITE_SYSTEM_MARKERS = (
    "Rewrite the user's last question",  # this service (rewrite.REWRITE_PROMPT)
    "formulate a standalone question",  # the LangChain runner's contextualize prompt (LangChain's tutorial)
)
_REWRITE_USER_MARKERS = ("Follow Up Input:",)  # LlamaIndex DEFAULT_CONDENSE_PROMPT_TEMPLATE

ANSWER_ZH = (
    "您好，关于「{q}」：根据知识库中的资料，具体情况取决于商品型号、配置和购买渠道，请以商品详情页和订单页面"
    "显示的信息为准。如果资料里没有提到相关内容，建议您联系人工客服核实，我们会尽快为您处理。参加促销活动的"
    "商品可能另有规则，下单前请仔细阅读活动说明；如需退换货或维修，请保留好发票、包装和全部配件。"
    "还有其他问题欢迎随时咨询。"
)
ANSWER_EN = (
    'Thanks for asking about "{q}". According to our knowledge base, the exact answer depends on the model, '
    "the configuration and where the order was placed, so please treat the product page and your order page "
    "as the final reference. If the documents do not cover your case, our human customer service team can "
    "check it for you and will get back to you as soon as possible. Products bought during a promotion may "
    "follow separate rules, so please read the campaign terms before ordering, and keep the invoice, the "
    "packaging and all accessories in case you need a return, an exchange or a repair. Feel free to ask if "
    "anything else comes up."
)
SUMMARY_ZH = (
    "用户是一位顾客，依次咨询了商品价格、保修、退换货、分期支付、以旧换新、配送、发票、会员积分和门店等问题；"
    "助手根据知识库逐一作答，资料未覆盖的部分建议联系人工客服。"
)
SUMMARY_EN = (
    "The user is a customer asking a series of questions about products, prices, warranty, returns, "
    "installments, shipping and stores; the assistant answered each from the knowledge base and suggested "
    "human customer service where the documents were silent."
)


class Script:
    """The scripted questions and their standalone rewrites."""

    def __init__(self, path: Path | None) -> None:
        self.standalone: dict[str, str] = {}
        self._questions: list[str] = []
        if path is None:
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = list(data.get("warmup", []))
        for conv in data["conversations"]:
            turns.extend(conv["turns"])
        for turn in turns:
            self.standalone[turn["q"]] = turn.get("standalone", turn["q"])
        # Longest first: a question that is a suffix of another never shadows it.
        self._questions = sorted(self.standalone, key=len, reverse=True)

    def last_question(self, text: str) -> str | None:
        """The scripted question that ends last in `text` (the follow-up, not one quoted from history)."""
        best: tuple[int, int] | None = None
        found: str | None = None
        for q in self._questions:
            pos = text.rfind(q)
            if pos < 0:
                continue
            key = (pos + len(q), len(q))
            if best is None or key > best:
                best, found = key, q
        return found


def classify(messages: list[dict[str, Any]]) -> str:
    system = "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "system")
    if any(marker in system for marker in _SUMMARY_MARKERS):
        return KIND_SUMMARY
    if any(marker in system for marker in _REWRITE_SYSTEM_MARKERS):
        return KIND_REWRITE
    last_user = _last_user(messages)
    if any(marker in last_user for marker in _REWRITE_USER_MARKERS):
        return KIND_REWRITE
    return KIND_ANSWER


def _last_user(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return message_text(m.get("content"))
    return ""


class BenchUpstream:
    """The fake LLM with the bench responder, timing every chat request server side."""

    def __init__(self, script: Script, *, delay_s: float = 0.0, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self._log: list[dict[str, Any]] = []
        self._log_lock = threading.Lock()
        # `record=False`: the exchanges are logged here and drained by the orchestrator after each run.
        self.llm = FakeLLM(self._respond, delay_s=delay_s, host=host, port=port, record=False, on_exchange=self._logged)
        self.llm.route("/bench/requests", lambda: {"records": self.drain_log()})
        self.llm.route("/bench/ping", lambda: {"ok": True})

    # -- the responder: runs inside the timed section, like a model would ------------------------

    def _respond(self, request: dict[str, Any]) -> str:
        messages = _messages(request)
        kind = classify(messages)
        text = "\n".join(message_text(m.get("content")) for m in messages)
        chinese = has_han(text)
        if kind == KIND_SUMMARY:
            return SUMMARY_ZH if chinese else SUMMARY_EN
        q = self.script.last_question(_last_user(messages))
        if kind == KIND_REWRITE:
            return self.script.standalone[q] if q else _last_user(messages)[-60:]
        template = ANSWER_ZH if has_han(q or _last_user(messages)[-60:]) else ANSWER_EN
        return template.format(q=q or "")

    # -- recording ---------------------------------------------------------------------------------

    def _logged(self, exchange: Exchange) -> None:
        kind = classify(_messages(exchange.request))
        with self._log_lock:
            self._log.append(
                {"t0": exchange.started, "t1": exchange.finished, "kind": kind, "request": exchange.request}
            )

    def drain_log(self) -> list[dict[str, Any]]:
        with self._log_lock:
            out, self._log = self._log, []
        return out


def _messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    raw = request.get("messages")
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each reply waits (the model's time)")
    parser.add_argument("--script", type=Path, default=ROOT / "bench" / "conversations.json")
    args = parser.parse_args(argv)
    upstream = BenchUpstream(Script(args.script), delay_s=args.delay, host=args.host, port=args.port)
    serve_until_signalled(upstream.llm)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
