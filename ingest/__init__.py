"""Knowledge-base ingestion: load files, cut them into chunks, index them in Qdrant.

`loaders` turns a file into a title and a stream of text blocks, `chunker` packs sentences into
token-bounded overlapping chunks, `pipeline` embeds and stores them idempotently, and `cli` is the
`rag-ingest` command. Submodules are imported on demand so that importing the package stays cheap.
"""
