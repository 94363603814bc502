"""Recognising text that gives the assistant instructions (prompt injection), in Chinese and English.

Used where user text would otherwise become durable and reach later sessions: a long-term "fact" that
is an instruction ("忽略之前的指令…", "ignore previous instructions", role-play, requests for the system
prompt) is never stored or injected. It is a filter of known shapes, not a proof: what it misses is
still only data in a quoted, delimited block (rag_service.prompt) and still meets the output guard.
Base64 runs are decoded and checked too, as instructions are often smuggled that way.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "override",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip|drop)\b.{0,40}?"
            r"\b(?:instructions?|rules?|prompts?|directions?|guidelines?|guardrails?|constraints?|restrictions?)\b"
        ),
    ),
    (
        "override",
        re.compile(
            r"(?:忽略|无视|忽视|忘记|忘掉|忘了|不要理会|别管|抛开|跳过|绕过|覆盖)(?:.{0,12}?)(?:指令|指示|规则|提示|设定|要求|限制|约束|命令)"
        ),
    ),
    (
        "new-rules",
        re.compile(
            r"\b(?:new|updated|real|actual)\s+(?:instructions?|rules|system prompt)\b|新的?(?:指令|规则|设定)[:：是]"
        ),
    ),
    (
        "system-prompt",
        re.compile(
            r"\b(?:your|the)\s+(?:system|initial|hidden|original|secret|developer)\s+(?:prompt|instructions?|message|rules)\b"
            r"|\bsystem\s*prompt\b"
        ),
    ),
    (
        "system-prompt",
        re.compile(r"系统(?:提示|指令|消息|设定|规则|prompt)|(?:你的|初始|原始|隐藏的?)(?:提示词|指令|设定)"),
    ),
    (
        "reveal",
        re.compile(
            r"\b(?:reveal|print|show|output|repeat|display|leak|recite|dump|tell\s+me|give\s+me|write\s+out)\b.{0,40}?"
            r"\b(?:prompt|instructions|rules|guidelines|configuration)\b"
        ),
    ),
    (
        "reveal",
        re.compile(
            r"(?:输出|打印|告诉我|重复|泄露|显示|展示|透露|复述|说出|给我看|发给我|念出|写出)(?:.{0,10}?)(?:规则|指令|提示|设定|配置)"
        ),
    ),
    (
        "role-play",
        re.compile(
            r"\byou\s+are\s+(?:now|no\s+longer)\b|\bfrom\s+now\s+on\b.{0,20}?\byou\b|\byou\s+will\s+now\s+be\b"
            r"|\b(?:you|please)\s+(?:should\s+|must\s+|will\s+|now\s+)?act\s+as\b|^act\s+as\b"
            r"|\bpretend\s+(?:you|that\s+you|to\s+be)\b|\brole-?play\s+as\b|\blet'?s\s+role-?play\b|\bjailbreak"
            r"|\bdo\s+anything\s+now\b"
            r"|\b(?:enter|enable|switch\s+to|activate)\s+(?:developer|jailbreak|dan|god)\s+mode\b"
        ),
    ),
    (
        "role-play",
        re.compile(
            r"你(?:现在)?(?:就)?是(?:一个|一名)?(?:不受|没有).{0,6}(?:限制|约束)|你现在是|从现在(?:开始|起).{0,6}你|假装(?:你|自己)"
            r"|你.{0,4}扮演|请.{0,2}扮演|扮演(?:一个|一名|成)|你的新身份|(?:进入|开启|切换到|启用).{0,4}(?:开发者|越狱|DAN|上帝)模式"
        ),
    ),
    # A line posing as another speaker of the conversation.
    ("fake-role", re.compile(r"(?m)^\s*(?:system|assistant|developer|系统|助手|客服)\s*[:：]")),
    ("fake-role", re.compile(r"<\|?\s*(?:im_start|im_end|system|endoftext)|\[/?inst\]|<<\s*/?sys\s*>>")),
]

_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _decoded_runs(text: str) -> list[str]:
    out: list[str] = []
    for m in _BASE64.finditer(text):
        run = m.group().translate(str.maketrans("-_", "+/"))
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4))
        except (binascii.Error, ValueError):
            continue
        decoded = raw.decode("utf-8", errors="ignore")
        # Random letters decode to bytes that are mostly not UTF-8; real text survives nearly whole.
        if len(decoded) * 3 >= len(raw):
            out.append(decoded)
    return out


def instruction_reason(text: str) -> str | None:
    """Which kind of instruction `text` gives the assistant, or None when it reads as plain data."""
    folded = _fold(text)
    for name, pattern in _RULES:
        if pattern.search(folded) or (name == "fake-role" and pattern.search(text.casefold())):
            return name
    for decoded in _decoded_runs(text):
        reason = instruction_reason(decoded) if decoded != text else None
        if reason:
            return f"base64 {reason}"
    return None
