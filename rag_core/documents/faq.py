"""FAQ entries: one point per question in a collection of their own, beside the knowledge base's chunks.

An FAQ file's pairs are stored twice, for two readers:
- in the knowledge-base collection, one chunk per answer (its questions, then the answer), so that below
  the short path's threshold an FAQ answer is ordinary context, ranked and budgeted like any chunk;
- in the FAQ collection (`{collection}__faq`, per tenant like the chunks), one point per question,
  embedded as a query, so the service compares a user's question with FAQ questions like with like
  (query to query: a paraphrase scores near 1, where a query against a passage rarely passes 0.9).

A separate collection rather than a `kind` filter on the chunks: Qdrant's local mode evaluates payload
filters point by point in Python (docs/tenancy.md), and the short path searches on every turn.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from rag_core.documents.chunker import chunk_text
from rag_core.documents.office import FaqPair
from rag_core.embedding import Embedder
from rag_core.lexical import document_vector
from rag_core.settings import Settings
from rag_core.text import language
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import ChunkPoint

FAQ_SUFFIX = "__faq"
FAQ_KIND = "faq"
# Part of every FAQ point's id: a payload that changes re-writes the entries once.
FAQ_PAYLOAD_VERSION = 1


def faq_collection(collection: str) -> str:
    """The FAQ collection beside the knowledge base's `collection` (tenants get theirs from it)."""
    return f"{collection}{FAQ_SUFFIX}"


def faq_chunk_texts(pairs: Sequence[FaqPair], counter: TokenCounter, settings: Settings) -> Iterator[str]:
    """The knowledge-base chunks of FAQ pairs: the questions, then the answer; an answer too long for one
    chunk is cut like any text, each piece under its first question."""
    limit = settings.chunking.chunk_tokens
    for pair in pairs:
        questions = list(pair.questions)
        head = "\n".join(questions)
        while len(questions) > 1 and counter.count(head) > limit // 2:
            questions.pop()
            head = "\n".join(questions)
        whole = f"{head}\n{pair.answer}"
        if counter.count(whole) <= limit:
            yield whole
            continue
        room = max(limit - counter.count(questions[0]) - 1, 8)
        overlap = min(settings.chunking.overlap_tokens, room // 2)
        for piece in chunk_text([pair.answer], counter, room, overlap):
            yield f"{questions[0]}\n{piece}"


def faq_point_id(doc_id: str, question: str, answer: str, embedder_name: str) -> str:
    from rag_core.documents.pipeline import ID_NAMESPACE

    name = json.dumps([doc_id, FAQ_KIND, question, answer, embedder_name, FAQ_PAYLOAD_VERSION], ensure_ascii=False)
    return str(uuid.uuid5(ID_NAMESPACE, name))


def faq_points(
    pairs: Sequence[FaqPair],
    *,
    doc_id: str,
    source: str,
    title: str,
    tenant: str,
    embedder: Embedder,
    settings: Settings,
    skip: set[str],
) -> tuple[list[str], list[ChunkPoint]]:
    """(ids of all the entries, points of those not in `skip`): one entry per question of every pair."""
    retrieval = settings.retrieval
    ids: list[str] = []
    points: list[ChunkPoint] = []
    for group, pair in enumerate(pairs):
        for question in pair.questions:
            pid = faq_point_id(doc_id, question, pair.answer, embedder.name)
            if pid in ids:
                continue
            ids.append(pid)
            if pid in skip:
                continue
            payload: dict[str, Any] = {
                "kind": FAQ_KIND,
                "tenant": tenant,
                "doc_id": doc_id,
                "source": source,
                "title": title,
                "question": question,
                "answer": pair.answer,
                "group": group,
                "text": question,
                "content_hash": hashlib.sha256(f"{question}\n{pair.answer}".encode()).hexdigest(),
                "lang": language(question),
            }
            points.append(
                ChunkPoint(
                    id=pid,
                    dense=embedder.embed_query(question),
                    sparse=document_vector(question, retrieval.bm25_avg_tokens, retrieval.bm25_k1, retrieval.bm25_b),
                    payload=payload,
                )
            )
    return ids, points
