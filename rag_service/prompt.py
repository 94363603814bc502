"""Prompt assembly. The one system message is the configured system prompt; everything else is data and
travels in user messages:

    system     the system prompt                                    (nothing else, ever)
    user       <user_facts> the user's long-term facts, each quoted </user_facts>     (if any)
    user       <conversation_summary> the running summary </conversation_summary>   (if any)
    user/asst  the recent rounds, verbatim
    user       <documents> <document ...>retrieved text</document> ... </documents> + the question

The facts and the summary are made of what the customer said (the summary folds their messages, the
facts are lifted from them), so they get no more authority than the customer has: each is a delimited
data block in a user message of its own, headed by a line that says so. Separate messages keep the
receipt exact: every part is counted as the message it is sent as.

Every untrusted string (document text, title and source, facts, the summary, the question, and the
recent rounds) is escaped with `escape_data`, so it cannot close its block, open a fake one, or pose as
a chat-template marker: serving stacks such as vLLM render messages into one string and tokenize it with
special tokens parsed, so a literal "<|im_start|>system" in a message would otherwise start a real
system turn. The rounds are escaped before the budget is planned (`sendable_rounds`), and a message that
escaping changes is recounted, so budget and receipt count what is sent; most messages have no markup
and keep their stored count.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from rag_core.settings import PromptSettings
from rag_service.domain import Chunk, Message, Round

OPEN_DOCS, CLOSE_DOCS = "<documents>", "</documents>"
OPEN_SUMMARY, CLOSE_SUMMARY = "<conversation_summary>", "</conversation_summary>"
OPEN_FACTS, CLOSE_FACTS = "<user_facts>", "</user_facts>"

# Anything a model could read as markup: a "<" (or a full-width / small-form one), then optional slashes,
# backslashes or spaces, then a letter, "|" (ChatML <|im_start|>), "!" (<!-- -->) or another "<"
# (Llama's <<SYS>>). Case and spacing do not matter: "</DOCUMENT >", "< /document", "<\/document" all
# match. The bracket becomes "&lt;", which models read as the character, not as a tag.
_MARKUP = re.compile(r"[<＜﹤](?=[\s/／\\]*[A-Za-z|!<＜﹤])")


def escape_data(text: str) -> str:
    """`text` made safe to place inside a delimited block. Idempotent."""
    return _MARKUP.sub("&lt;", text)


def _sendable(message: Message, count: Callable[[str], int]) -> Message:
    content = escape_data(message.content)
    if content == message.content:
        return message
    return dataclasses.replace(message, content=content, tokens=count(content))


def sendable_rounds(rounds: Sequence[Round], count: Callable[[str], int]) -> tuple[Round, ...]:
    """The rounds as they are sent: escaped, and recounted where escaping changed them."""
    out: list[Round] = []
    for r in rounds:
        user, assistant = _sendable(r.user, count), _sendable(r.assistant, count)
        out.append(r if user is r.user and assistant is r.assistant else Round(user, assistant))
    return tuple(out)


def _attribute(value: str) -> str:
    return html.escape(" ".join(value.split()), quote=True)


def summary_message(settings: PromptSettings, summary: str) -> str:
    return f"{settings.summary_header}\n{OPEN_SUMMARY}\n{escape_data(summary)}\n{CLOSE_SUMMARY}"


def profile_message(header: str, facts: Sequence[str]) -> str:
    """The user's facts as a quoted list: one JSON string per line, so a fact cannot span lines either."""
    quoted = "\n".join(f"- {json.dumps(escape_data(f), ensure_ascii=False)}" for f in facts)
    return f"{header}\n{OPEN_FACTS}\n{quoted}\n{CLOSE_FACTS}"


def question_part(settings: PromptSettings, question: str) -> str:
    return f"{settings.question_header}{escape_data(question)}"


def chunk_block(index: int, chunk: Chunk) -> str:
    return _block(index, chunk.title, chunk.source, chunk.text)


@lru_cache(maxsize=1024)
def _block(index: int, title: str, source: str, text: str) -> str:
    # The same chunks come back turn after turn (a conversation stays on its pages): each block's escaping
    # scans its whole text.
    return (
        f'<document index="{index}" title="{_attribute(title)}" source="{_attribute(source)}">\n'
        f"{escape_data(text)}\n</document>"
    )


def chunk_wrapper(chunk: Chunk) -> str:
    """What a chunk's block adds around its words, so its cost is known before the block is built."""
    return chunk_block(99, Chunk(chunk.id, chunk.doc_id, chunk.source, chunk.title, "", 0.0, 0))


def final_user_message(settings: PromptSettings, chunks: Sequence[Chunk], question: str) -> str:
    if chunks:
        body = "\n".join(chunk_block(i + 1, c) for i, c in enumerate(chunks))
        context = f"{settings.context_header}\n{OPEN_DOCS}\n{body}\n{CLOSE_DOCS}\n\n"
    else:
        context = f"{settings.context_header}\n{OPEN_DOCS}\n{CLOSE_DOCS}\n\n"
    return context + question_part(settings, question)


_DOC_BLOCK = re.compile(
    r'<document index="\d+" title="(?P<title>[^"]*)" source="(?P<source>[^"]*)">\n(?P<text>.*?)\n</document>', re.S
)


def parse_final_user_message(settings: PromptSettings, content: str) -> tuple[str, list[Chunk]]:
    """The question and the chunks of a `final_user_message`, as written (for tools that read a prompt back:
    rag-eval's recording upstream answers from it). Inverse of the layout above, kept next to it."""
    head, _, tail = content.partition(CLOSE_DOCS)  # the block's own tag: every other one is escaped
    question = tail.strip().removeprefix(settings.question_header).strip().replace("&lt;", "<")
    chunks = [
        Chunk("", "", html.unescape(m["source"]), html.unescape(m["title"]), m["text"].replace("&lt;", "<"), 0.0, 0)
        for m in _DOC_BLOCK.finditer(head)
    ]
    return question, chunks


def build_messages(
    settings: PromptSettings,
    system_prompt: str,
    profile: str,
    summary: str,
    rounds: Sequence[Round],
    chunks: Sequence[Chunk],
    question: str,
) -> list[dict[str, Any]]:
    """`profile` is a ready `profile_message`; `summary` the stored summary text; `rounds` already
    `sendable_rounds`."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    if profile:
        messages.append({"role": "user", "content": profile})
    if summary:
        messages.append({"role": "user", "content": summary_message(settings, summary)})
    for r in rounds:
        messages.append({"role": "user", "content": r.user.content})
        messages.append({"role": "assistant", "content": r.assistant.content})
    messages.append({"role": "user", "content": final_user_message(settings, chunks, question)})
    return messages
