"""`rag-ingest`: the command line over the document pipeline in `rag_core.documents`.

The pipeline (load, chunk, embed, index) lives in the core because the running service ingests uploads
through it too; this package is only the command, so neither `ingest` nor `rag_service` imports the other.
"""
