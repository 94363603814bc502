"""Conversational RAG service."""
