"""Knowledge: markdown folders, indexed for full-text search (SQLite FTS5, BM25)."""

from tools.knowledge.index import Hit, KnowledgeBase, Refresh
from tools.knowledge.terms import terms, unique_terms

__all__ = ["Hit", "KnowledgeBase", "Refresh", "terms", "unique_terms"]
