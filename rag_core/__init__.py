"""What ingest and the chat service share: settings, token counting, embedding, the vector store, the
document pipeline and plain text rules. Imports nothing from either package."""
