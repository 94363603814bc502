"""Public test utilities: an OpenAI-compatible upstream of the project's own, for tests, benchmarks and
`rag-eval` (which records what an LLM would have been sent)."""
