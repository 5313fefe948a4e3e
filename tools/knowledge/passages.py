"""Markdown documents cut into passages: by heading, then by paragraph, each under a size limit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True, slots=True)
class Passage:
    heading: str  # the section it sits in, e.g. "Eligibility > Age"; "" before any heading
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    title: str
    category: str
    passages: tuple[Passage, ...]


def _front_matter(text: str) -> tuple[dict[str, object], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    try:
        data = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}, text  # not front matter after all: index it as text
    body = text[end + 4 :].split("\n", 1)[1] if "\n" in text[end + 4 :] else ""
    return (data, body) if isinstance(data, dict) else ({}, text)


def _pack(paragraphs: list[str], limit: int) -> list[str]:
    """Join paragraphs into chunks of at most `limit` characters; split a longer one by lines."""
    chunks: list[str] = []
    current = ""
    for paragraph in paragraphs:
        pieces = [paragraph] if len(paragraph) <= limit else _split_long(paragraph, limit)
        for piece in pieces:
            if current and len(current) + 2 + len(piece) > limit:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def _split_long(text: str, limit: int) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            out.append(line[:cut])
            line = line[cut:].lstrip()
        if line:
            out.append(line)
    return _pack(out, limit) if len(out) > 1 else out


def parse_document(path: Path, text: str, *, category: str = "", limit: int = 1200) -> Document:
    """Title, category and passages of one markdown file."""
    meta, body = _front_matter(text.removeprefix("\ufeff"))
    title = str(meta.get("title") or "")
    trail: list[str] = []  # headings above the current line, by level
    sections: list[tuple[str, list[str]]] = [("", [])]
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            sections[-1][1].append("\n".join(paragraph).strip())
            paragraph.clear()

    for line in body.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        heading = None if in_code else _HEADING.match(line)
        if heading:
            flush()
            level, name = len(heading.group(1)), heading.group(2).strip()
            if level == 1 and not title:
                title = name
            trail[level - 1 :] = [name]
            sections.append((" > ".join(trail[1:] if trail[0] == title else trail), []))
        elif not line.strip() and not in_code:
            flush()
        else:
            paragraph.append(line)
    flush()
    passages = tuple(
        Passage(heading, chunk)
        for heading, paragraphs in sections
        for chunk in _pack([p for p in paragraphs if p], limit)
    )
    title = title or path.stem.replace("-", " ").replace("_", " ").strip().capitalize()
    return Document(title, str(meta.get("category") or category), passages)
