"""The evaluation harness on tiny synthetic data: metrics against hand-computed values, the JSON shape,
the embedding cache (a second run embeds nothing) and rewrite scoring."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from typer.testing import CliRunner

from rag_core.settings import RetrievalSettings, RewriteSettings
from rag_service.evaluation import cli
from rag_service.evaluation.cache import CachingEmbedder, EmbeddingCache
from rag_service.evaluation.data import RewriteItem, load_conversations, load_corpus
from rag_service.evaluation.metrics import exact_match, ndcg_at, recall_at, reciprocal_rank, rouge_l, token_f1
from rag_service.evaluation.retrieval_eval import evaluate_retrieval
from rag_service.evaluation.rewrite_eval import evaluate_rewrites
from rag_service.rewrite import Rewriter, RuleRewriter

VOCAB = ["apple", "banana", "cherry", "date", "elder", "fig"]


class KeywordEmbedder:
    """One dimension per fruit (its count) plus one for every other word (0.1 each); counts its calls."""

    name = "keywords"
    dim = len(VOCAB) + 1
    remote = False

    def __init__(self) -> None:
        self.queries = 0
        self.passages = 0

    def _vec(self, text: str) -> npt.NDArray[np.float32]:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in VOCAB:
                v[VOCAB.index(word)] += 1.0
            else:
                v[-1] += 0.1
        return v / (np.linalg.norm(v) or 1.0)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.queries += 1
        return self._vec(text)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.passages += len(texts)
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)


CORPUS = [
    {"doc_id": "a1", "title": "", "text": "apple apple", "domain": "A"},
    {"doc_id": "a2", "title": "", "text": "banana split", "domain": "A"},
    {"doc_id": "a3", "title": "", "text": "cherry pie is sweet", "domain": "A"},
    # "elder" keeps b1 from tying exactly with b2 for a query naming both date and fig (the order of a
    # tie is the vector store's to choose).
    {"doc_id": "b1", "title": "", "text": "date date elder", "domain": "B"},
    {"doc_id": "b2", "title": "", "text": "fig", "domain": "B"},
    {"doc_id": "b3", "title": "Elder", "text": "tree", "domain": "B"},
]


def turn(q: str, gold: list[str], ref: str | None = None, answer: str = "") -> dict[str, Any]:
    return {"question": q, "answer": answer, "gold_doc_ids": gold, "reference_rewrite": ref, "gold_rewrite": None}


CONVERSATIONS = [
    {
        "conv_id": "c1",
        "domain": "A",
        "turns": [
            turn("tell me about apple", ["a1"], "tell me about apple", "Apples grow on trees."),
            turn("and what about it", ["a1"], "apple"),
        ],
    },
    {
        "conv_id": "c2",
        "domain": "B",
        "turns": [turn("date please", ["b1", "b2"]), turn("thanks", []), turn("fig", ["b2"])],
    },
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    corpus, convs = tmp_path / "corpus.jsonl", tmp_path / "conversations.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    convs.write_text("".join(json.dumps(r) + "\n" for r in CONVERSATIONS))
    return corpus, convs


def run(files: tuple[Path, Path], cache_dir: Path, inner: KeywordEmbedder, modes: Sequence[str]) -> Any:
    corpus, convs = files
    emb = CachingEmbedder(inner, EmbeddingCache(cache_dir, inner.name, inner.dim))
    rewriters: dict[str, Rewriter] = {"rule": RuleRewriter(RewriteSettings(mode="rule"), emb)}
    return evaluate_retrieval(
        load_conversations(convs),
        load_corpus(corpus),
        modes,
        (1, 2),
        emb,
        rewriters,
        RetrievalSettings(mode="dense"),
        lambda _: None,
    )


def test_metric_functions_by_hand() -> None:
    ranked = ["x", "g1", "y", "g2"]
    assert recall_at(ranked, ["g1", "g2"], 2) == 0.5
    assert recall_at(ranked, ["g1", "g2"], 5) == 1.0
    assert reciprocal_rank(ranked, ["g2", "g1"]) == 0.5
    assert reciprocal_rank(ranked, ["z"]) == 0.0
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    assert ndcg_at(ranked, ["g1", "g2"], 10) == pytest.approx(dcg / (1 + 1 / math.log2(3)))
    assert ndcg_at(ranked, ["g1"], 1) == 0.0


def test_retrieval_metrics_match_hand_computed_values(files: tuple[Path, Path], tmp_path: Path) -> None:
    report = run(files, tmp_path / "cache", KeywordEmbedder(), ["none", "concat", "rule", "reference"])
    # Scored turns: c1/0, c1/1, c2/0, c2/2 (c2/1 has no gold passages).
    assert report.counts == {"all": 4, "after_first": 2}
    none = report.results["none"]
    # c1/1 "and what about it" has only filler words: a3 (most filler) > a2 > a1, so the gold a1 is third;
    # c2/0 "date please" ranks b1 > b3 > b2 (gold b1, b2).
    ndcg_c2 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert none["all"] == pytest.approx(
        {
            "recall@1": (1 + 0 + 0.5 + 1) / 4,
            "recall@2": (1 + 0 + 0.5 + 1) / 4,
            "ndcg@10": (1 + 0.5 + ndcg_c2 + 1) / 4,
            "mrr": (1 + 1 / 3 + 1 + 1) / 4,
        }
    )
    assert none["after_first"] == pytest.approx(
        {"recall@1": 0.5, "recall@2": 0.5, "ndcg@10": 0.75, "mrr": (1 / 3 + 1) / 2}
    )
    for mode in ("reference", "rule", "concat"):  # each puts "apple" into c1/1
        assert report.results[mode]["after_first"] == pytest.approx(
            {"recall@1": 1.0, "recall@2": 1.0, "ndcg@10": 1.0, "mrr": 1.0}
        )
    queries = {(t.conv_id, t.position): t.queries for t in report.turns}
    assert queries[("c1", 1)]["rule"] == "and what about apple"
    assert queries[("c1", 1)]["concat"] == "tell me about apple and what about it"
    assert queries[("c2", 2)]["reference"] == "fig"  # no reference rewrite: the question
    assert report.actions["rule"]["rule"] == 1


def test_second_run_embeds_nothing(files: tuple[Path, Path], tmp_path: Path) -> None:
    first = KeywordEmbedder()
    run(files, tmp_path / "cache", first, ["none", "rule", "reference"])
    assert first.passages == len(CORPUS) and first.queries > 0
    second = KeywordEmbedder()
    again = run(files, tmp_path / "cache", second, ["none", "rule", "reference"])
    assert (second.passages, second.queries) == (0, 0)
    assert again.results["none"]["all"]["recall@1"] == pytest.approx(0.625)
    other = KeywordEmbedder()
    other.name = "another-model"  # type: ignore[misc]
    run(files, tmp_path / "cache", other, ["none"])
    assert other.passages == len(CORPUS)  # the key includes the embedder


def test_cli_writes_json_and_markdown(
    files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = KeywordEmbedder()
    monkeypatch.setattr(
        cli,
        "eval_embedder",
        lambda name, cache_dir: CachingEmbedder(inner, EmbeddingCache(cache_dir, inner.name, inner.dim)),
    )
    out = tmp_path / "out.json"
    corpus, convs = files
    args = [
        "retrieval",
        "--conversations",
        str(convs),
        "--corpus",
        str(corpus),
        "--mode",
        "none,concat,rule,llm,reference",
    ]
    args += ["--k", "5,10", "--json", str(out), "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert list(data) == ["none", "concat", "rule", "reference"]  # no LLM endpoint: llm is skipped
    for scores in data.values():
        assert set(scores) == {"all", "after_first"}
        for subset in scores.values():
            assert set(subset) == {"recall@5", "recall@10", "ndcg@10", "mrr"}
    assert "| none |" in result.stdout and "after_first recall@5" in result.stdout


def test_rewrite_scores_by_hand() -> None:
    assert exact_match("What is the X?", "what is X") == 1.0
    assert exact_match("还没吃早饭呢。", "还没吃早饭呢") == 1.0
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert token_f1("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("d c b a", "a b c d") == pytest.approx(0.25)
    assert token_f1("d c b a", "a b c d") == 1.0
    # Chinese: characters are the tokens.
    assert rouge_l("育碧的外号是什么", "育碧的话外号是什么啊") == pytest.approx(2 * 0.8 / 1.8)
    assert token_f1("育碧的外号是什么", "育碧的话外号是什么啊") == pytest.approx(2 * 0.8 / 1.8)
    assert token_f1("", "x") == 0.0


def test_evaluate_rewrites_shape_and_values() -> None:
    items = [
        RewriteItem(("你知道育碧吗", "知道啊我可是粉丝"), "它的外号是什么啊", "育碧的外号是什么啊"),
        RewriteItem(
            ("How much is the ThinkPad X1 Carbon?", "11999 yuan."),
            "What about its warranty?",
            "What about the ThinkPad X1 Carbon's warranty?",
        ),
    ]
    report = evaluate_rewrites(items, ["none", "rule"], {"rule": RuleRewriter(RewriteSettings(mode="rule"))})
    assert set(report.results) == {"none", "rule"}
    assert set(report.results["none"]) == {"exact_match", "rouge_l", "f1"}
    assert report.predictions["rule"] == ["育碧的外号是什么啊", "What about ThinkPad X1 Carbon's warranty?"]
    assert report.results["rule"]["exact_match"] == 1.0
    assert report.results["rule"]["f1"] > report.results["none"]["f1"]
