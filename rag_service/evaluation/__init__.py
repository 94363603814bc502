"""Offline evaluation of query rewriting, multi-turn retrieval and answers (`rag-eval`).

- `rag-eval retrieval`: Recall@k / nDCG@10 / MRR of conversational retrieval under several query modes.
- `rag-eval rewrite`: exact match / ROUGE-L / token F1 of rewrites against gold rewrites.
- `rag-eval answers`: whole conversations through the HTTP API over a knowledge base: answer_correct,
  doc@3 and context_has_fact per turn kind and language (`answers.py`, `answer_run.py`).

Full-corpus runs are slow on CPU; they are never part of the test suite.
"""
