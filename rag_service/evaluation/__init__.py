"""Offline evaluation of query rewriting and multi-turn retrieval (`rag-eval`).

- `rag-eval retrieval`: Recall@k / nDCG@10 / MRR of conversational retrieval under several query modes.
- `rag-eval rewrite`: exact match / ROUGE-L / token F1 of rewrites against gold rewrites.

Full-corpus runs are slow on CPU; they are never part of the test suite.
"""
