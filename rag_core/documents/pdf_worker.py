"""PDF text extraction in a process of its own, with limits.

A PDF is a program: a few kilobytes can expand to gigabytes of content (a compressed stream of repeated
text, one content stream shared by thousands of pages, nested forms), and pypdf interprets it in pure
Python. Extraction therefore runs in a child process that the caller kills when the time limit passes or
the request that wanted it goes away; a Python thread could not be stopped, and cooperative checks cannot
interrupt pypdf while it decompresses or parses. Inside the child the limits are checked as early as they
can be: the page count the file declares before the page tree is flattened, each page's decoded content
before it is interpreted, the extracted characters while they are produced. The child also caps its own
memory and CPU time, so one that outlives its parent still ends.

Protocol: `python -m rag_core.documents.pdf_worker PATH LIMITS_JSON` writes one JSON object to stdout:
`{"title": str | null, "pages": [str, ...]}`, or `{"error": str, "kind": k}` with k one of "limit",
"encrypted", "page" (a page's text cannot be extracted) or "invalid" (not a PDF pypdf can read).
Only pypdf and the standard library are imported, so the child starts in a fraction of a second.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_BYTES_PER_MB = 1024 * 1024


@dataclass(frozen=True)
class PdfLimits:
    max_pages: int
    max_chars: int
    max_content_mb: float
    max_memory_mb: float
    cpu_s: float

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class PdfLimitExceeded(Exception):
    pass


class PdfEncrypted(Exception):
    pass


class PdfPageError(Exception):
    pass


def extract(path: Path, limits: PdfLimits) -> dict[str, Any]:
    from pypdf import PdfReader, apply_configuration, get_configuration
    from pypdf.errors import LimitReachedError

    max_content = int(limits.max_content_mb * _BYTES_PER_MB)
    # pypdf's own per-stream bounds, tightened to ours: no single stream may decode to more than the
    # whole document is allowed.
    stream_limits = {
        name: max_content
        for name in (
            "maximum_declared_stream_length",
            "zlib_maximum_output_length",
            "lzw_maximum_output_length",
            "run_length_maximum_output_length",
            "array_based_stream_maximum_output_length",
            "brotli_maximum_output_length",
        )
    }
    with apply_configuration(get_configuration().with_overwrites(**stream_limits)):
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfEncrypted("the PDF is password-protected")
        declared = _declared_pages(reader)
        if declared > limits.max_pages:
            raise PdfLimitExceeded(f"the PDF declares {declared} pages; ingest.pdf_max_pages is {limits.max_pages}")
        count = len(reader.pages)
        if count > limits.max_pages:
            raise PdfLimitExceeded(f"the PDF has {count} pages; ingest.pdf_max_pages is {limits.max_pages}")
        content = chars = 0
        pages: list[str] = []

        def count_chars(text: str, *_: Any) -> None:
            nonlocal chars
            chars += len(text)
            if chars > limits.max_chars:
                raise PdfLimitExceeded(f"the PDF's text exceeds ingest.pdf_max_chars = {limits.max_chars} characters")

        for index, page in enumerate(reader.pages):
            try:
                stream = page.get_contents()
                content += len(stream.get_data()) if stream is not None else 0
                if content > max_content:
                    raise PdfLimitExceeded(
                        f"the PDF's page content expands beyond ingest.pdf_max_content_mb = "
                        f"{limits.max_content_mb:g} MB (by page {index + 1})"
                    )
                pages.append(page.extract_text(visitor_text=count_chars) or "")
            except PdfLimitExceeded:
                raise
            except LimitReachedError as exc:
                raise PdfLimitExceeded(
                    f"page {index + 1} exceeds the parser's limits (a stream may expand to "
                    f"ingest.pdf_max_content_mb = {limits.max_content_mb:g} MB; {exc})"
                ) from exc
            except Exception as exc:
                raise PdfPageError(f"cannot extract the text of page {index + 1} ({exc})") from exc
        return {"title": _metadata_title(reader), "pages": pages}


def _declared_pages(reader: Any) -> int:
    try:
        return int(reader.trailer["/Root"]["/Pages"].get("/Count", 0))
    except Exception:
        return 0  # no usable count: the flattened page tree is checked instead


def _metadata_title(reader: Any) -> str | None:
    try:
        metadata = reader.metadata
        raw = metadata.title if metadata is not None else None
    except Exception:
        return None
    return raw if isinstance(raw, str) else None


def _limit_resources(limits: PdfLimits) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's time limit still applies
        return
    memory = int(limits.max_memory_mb * _BYTES_PER_MB)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = max(1, int(limits.cpu_s) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def main(argv: list[str]) -> int:
    path, limits = Path(argv[0]), PdfLimits(**json.loads(argv[1]))
    _limit_resources(limits)
    try:
        result: dict[str, Any] = extract(path, limits)
    except PdfLimitExceeded as exc:
        result = {"error": str(exc), "kind": "limit"}
    except PdfEncrypted as exc:
        result = {"error": str(exc), "kind": "encrypted"}
    except PdfPageError as exc:
        result = {"error": str(exc), "kind": "page"}
    except MemoryError:
        result = {
            "error": f"the PDF needs more than ingest.pdf_max_memory_mb = {limits.max_memory_mb:g} MB",
            "kind": "limit",
        }
    except Exception as exc:  # pypdf reports malformed input through many exception types
        result = {"error": str(exc) or type(exc).__name__, "kind": "invalid"}
    sys.stdout.write(json.dumps(result, ensure_ascii=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
