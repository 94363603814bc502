"""One router per resource; `rag_service.api.app` includes them all."""
