"""A PDF's text, for a model that takes no documents: pypdf, page by page, up to a cap.

A scanned PDF has no text layer: it reads as its page count and a line saying so. An encrypted
or broken one raises `ValueError` and is described instead. CPU-bound: callers run it in a
thread.
"""

from __future__ import annotations

import io

NO_TEXT = "(no text layer: a scan or pictures only)"


def pdf_text(data: bytes, max_chars: int) -> tuple[int, str]:
    """(page count, the text of the pages, cut at `max_chars`); ValueError if unreadable."""
    # here, not at the top: a model provider imports this module, and pypdf costs every start
    # ~0.1 s that only a PDF needs
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("the PDF is encrypted")
        pages: list[str] = []
        used = 0
        for number, page in enumerate(reader.pages, 1):
            text = (page.extract_text() or "").strip()
            if text:
                pages.append(f"[page {number}]\n{text}")
                used += len(pages[-1])
            if used >= max_chars:
                break
        count = len(reader.pages)
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"the PDF cannot be read ({type(exc).__name__}: {exc})") from None
    text = "\n\n".join(pages) or NO_TEXT
    if len(text) > max_chars:
        text = text[:max_chars] + "\n…[cut]"
    return count, text
