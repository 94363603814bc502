"""HTTP API: the app factory (`create_app`, in `app`), middleware and error handlers, the routes' shared
dependencies (`deps`) and bodies (`models`), and one router per resource under `routes/`. Routes only
translate HTTP to service calls and back; nothing outside this package imports FastAPI."""

from rag_service.api.app import create_app

__all__ = ["create_app"]
