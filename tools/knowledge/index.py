"""KnowledgeBase: markdown folders in an SQLite FTS5 index (BM25), kept current as files change.

The index is an in-memory database owned by one worker thread: building it reads and parses
every file, which must not stall the event loop, and a rebuild after a restart takes well under
a second for a thousand documents (see bench/knowledge_bench.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import watchfiles

from tools.knowledge.passages import parse_document
from tools.knowledge.terms import terms, unique_terms

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
DEBOUNCE_MS = 200
# head (title + section) weighs more than body text: a passage *about* a term beats a mention
_RANK = "bm25(passages, 3.0, 1.0)"
_SCHEMA = """
CREATE TABLE docs (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER);
CREATE TABLE chunks (id INTEGER PRIMARY KEY, doc TEXT NOT NULL, title TEXT, path TEXT,
                     heading TEXT, body TEXT, category TEXT);
CREATE INDEX chunks_doc ON chunks (doc);
CREATE VIRTUAL TABLE passages USING fts5(head, terms, tokenize='porter unicode61');
"""


@dataclass(frozen=True, slots=True)
class Hit:
    title: str
    path: str  # relative to its knowledge folder
    heading: str
    text: str
    category: str
    score: float  # BM25, higher is better


@dataclass(frozen=True, slots=True)
class Refresh:
    documents: int
    passages: int
    changed: int
    removed: int
    seconds: float


def _is_doc(name: str) -> bool:
    return name.endswith(".md") and not name.startswith(".")


def _watch_filter(_change: watchfiles.Change, path: str) -> bool:
    return _is_doc(os.path.basename(path))


def _match(query_terms: Sequence[str]) -> str:
    return " OR ".join(f'"{t}"' for t in query_terms)  # terms are word characters only


class KnowledgeBase:
    """Full-text search over `dirs`; `open()` builds the index, `watch()` keeps it current."""

    def __init__(
        self, dirs: Sequence[Path], *, passage_chars: int = 1200, max_results: int = 5
    ) -> None:
        self.dirs = tuple(Path(d) for d in dirs)
        self.passage_chars = passage_chars
        self.max_results = max_results
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # used on the worker thread only
        self._df: dict[str, int] = {}  # passages per term, on the worker thread; reset on change
        self.documents = 0
        self.passages = 0
        self.watching = asyncio.Event()  # set once changes are being watched
        self._subscribers: list[Callable[[Refresh], None]] = []

    def subscribe(self, callback: Callable[[Refresh], None]) -> None:
        """Call `callback` after every refresh that changed the index."""
        self._subscribers.append(callback)

    async def open(self) -> Refresh:
        if self._executor is not None:
            raise RuntimeError("the knowledge base is already open")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge")
        await self._run(self._open_db)
        return await self.refresh()

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
            executor.shutdown(wait=True)

    async def refresh(self) -> Refresh:
        """Re-index the files that were added, changed or removed since the last refresh."""
        stats = await self._run(self._refresh_db)
        if stats.changed or stats.removed:
            log.info(
                "knowledge: %d documents, %d passages (%d changed, %d removed) in %.0f ms",
                stats.documents,
                stats.passages,
                stats.changed,
                stats.removed,
                stats.seconds * 1000,
            )
            for callback in tuple(self._subscribers):
                callback(stats)
        return stats

    async def search(
        self, query: str, *, category: str | None = None, limit: int | None = None
    ) -> list[Hit]:
        found = unique_terms(query)
        if not found or self._executor is None:
            return []
        return await self._run(self._search_db, found, category, limit or self.max_results)

    async def coverage(self, query: str) -> tuple[list[str], list[str]]:
        """(query terms found in the knowledge, all query terms)."""
        found = unique_terms(query)
        if not found or self._executor is None:
            return [], found
        return await self._run(self._coverage_db, found), found

    async def watch(self) -> None:
        """Re-index on every change until cancelled; returns at once if no folder exists."""
        existing = [d for d in self.dirs if d.is_dir()]
        if not existing:
            return
        await self.refresh()  # whatever changed between open() and the watcher starting
        # awatch creates its watcher synchronously on the first step, before anyone wakes up
        self.watching.set()
        async for _changes in watchfiles.awatch(
            *existing, watch_filter=_watch_filter, debounce=DEBOUNCE_MS
        ):
            try:
                await self.refresh()
            except (OSError, sqlite3.Error):
                log.exception("knowledge: re-indexing failed; the previous index stays in use")

    def _run(self, fn: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
        if self._executor is None:
            raise RuntimeError("the knowledge base is not open; await open() first")
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # -- on the worker thread ------------------------------------------------------------
    def _open_db(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None)
        self._conn.executescript(_SCHEMA)

    def _close_db(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _files(self) -> dict[str, tuple[Path, int, int]]:
        found: dict[str, tuple[Path, int, int]] = {}
        for root in self.dirs:
            for folder, subdirs, names in os.walk(root):
                subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
                for name in sorted(n for n in names if _is_doc(n)):
                    key = os.path.join(folder, name)
                    try:
                        st = os.stat(key)
                    except OSError:  # removed while we looked
                        continue
                    found[key] = (root, st.st_mtime_ns, st.st_size)
        return found

    def _refresh_db(self) -> Refresh:
        started = time.perf_counter()
        conn = self._conn
        assert conn is not None
        files = self._files()
        known = {row[0]: (row[1], row[2]) for row in conn.execute("SELECT * FROM docs")}
        removed = [key for key in known if key not in files]
        changed = [k for k, (_, m, s) in files.items() if known.get(k) != (m, s)]
        conn.execute("BEGIN")
        try:
            for key in removed + changed:
                conn.execute(
                    "DELETE FROM passages WHERE rowid IN (SELECT id FROM chunks WHERE doc = ?)",
                    (key,),
                )
                conn.execute("DELETE FROM chunks WHERE doc = ?", (key,))
                conn.execute("DELETE FROM docs WHERE path = ?", (key,))
            for key in changed:
                self._index_file(conn, key, *files[key])
            conn.execute("COMMIT")
            if removed or changed:
                self._df.clear()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.documents = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
        self.passages = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        elapsed = time.perf_counter() - started
        return Refresh(self.documents, self.passages, len(changed), len(removed), elapsed)

    def _index_file(
        self, conn: sqlite3.Connection, key: str, root: Path, mtime: int, size: int
    ) -> None:
        path = Path(key)
        rel = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            log.warning("knowledge: cannot read %s: %s; skipping it", path, exc)
            return
        category = rel.parts[0] if len(rel.parts) > 1 else ""
        doc = parse_document(path, text, category=category, limit=self.passage_chars)
        conn.execute("INSERT INTO docs VALUES (?, ?, ?)", (key, mtime, size))
        for passage in doc.passages:
            row = (key, doc.title, rel.as_posix(), passage.heading, passage.text, doc.category)
            cursor = conn.execute(
                "INSERT INTO chunks (doc, title, path, heading, body, category)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
            head = " ".join(terms(f"{doc.title} {passage.heading}"))
            conn.execute(
                "INSERT INTO passages (rowid, head, terms) VALUES (?, ?, ?)",
                (cursor.lastrowid, head, " ".join(terms(passage.text))),
            )

    def _useful(self, found: list[str]) -> list[str]:
        """The terms that can change the ranking: FTS5's BM25 gives a term found in more than
        half the passages an IDF of ~0, yet matching it would rank (nearly) every passage."""
        assert self._conn is not None
        kept = []
        for term in found:
            df = self._df.get(term)
            if df is None:
                sql = "SELECT count(*) FROM passages WHERE passages MATCH ?"
                df = self._df[term] = self._conn.execute(sql, (_match([term]),)).fetchone()[0]
            if 0 < df <= self.passages / 2:
                kept.append(term)
        return kept or found

    def _search_db(self, found: list[str], category: str | None, limit: int) -> list[Hit]:
        assert self._conn is not None
        match = _match(self._useful(found))
        sql = (
            f"SELECT c.title, c.path, c.heading, c.body, c.category, {_RANK} AS rank"
            " FROM passages JOIN chunks c ON c.id = passages.rowid WHERE passages MATCH ?"
        )
        params: list[Any] = [match]
        if category:
            sql += " AND c.category = ? COLLATE NOCASE"
            params.append(category)
        rows = self._conn.execute(f"{sql} ORDER BY rank LIMIT ?", (*params, limit))
        return [Hit(t, p, h, b, c or "", round(-rank, 3)) for t, p, h, b, c, rank in rows]

    def _coverage_db(self, found: list[str]) -> list[str]:
        assert self._conn is not None
        sql = "SELECT 1 FROM passages WHERE passages MATCH ? LIMIT 1"
        return [t for t in found if self._conn.execute(sql, (_match([t]),)).fetchone()]
