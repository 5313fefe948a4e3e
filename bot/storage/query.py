"""Each query written once (a SQLAlchemy Core statement), compiled once per dialect, lazily.

A `Query` holds a statement with named parameters; `Query.sql(dialect)` is its text for that
dialect and the order its parameters go in, compiled the first time and kept, so a call pays
only for binding its values: `Compiled.bind(values)`. Constants written into a statement stay
literals in its text. SQLite takes `?` placeholders, asyncpg `$n`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from sqlalchemy import bindparam
from sqlalchemy.dialects.postgresql.base import PGCompiler, PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler, SQLiteDialect
from sqlalchemy.engine.interfaces import Dialect as SaDialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import BindParameter, ColumnElement, Executable

Dialect: TypeAlias = Literal["sqlite", "postgresql"]


def _constants_inline(compiler: type[SQLCompiler]) -> Any:
    """`compiler`, but values written into a statement (`status == "active"`, a LIMIT) stay in
    its text as literals, as hand-written SQL has them: only the caller's `bindparam("name")`s
    are parameters. (A constant is bound under a unique generated name; a parameter is not.)"""

    def visit_bindparam(self: SQLCompiler, bindparam: BindParameter[Any], **kw: Any) -> Any:
        if bindparam.unique:
            kw["literal_binds"] = True
        return compiler.visit_bindparam(self, bindparam, **kw)  # type: ignore[no-untyped-call]

    return type(compiler.__name__, (compiler,), {"visit_bindparam": visit_bindparam})


class _SQLite(SQLiteDialect):
    statement_compiler = _constants_inline(SQLiteCompiler)


class _PostgreSQL(PGDialect):
    statement_compiler = _constants_inline(PGCompiler)


_DIALECTS: dict[Dialect, SaDialect] = {
    "sqlite": _SQLite(paramstyle="qmark"),
    "postgresql": _PostgreSQL(paramstyle="numeric_dollar"),  # type: ignore[no-untyped-call]
}


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's text for one dialect, and the names of its parameters in order."""

    text: str
    names: tuple[str, ...]
    # the parameters in order, from the values by name (a KeyError for one missing)
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]

    def bind(
        self, values: Mapping[str, Any] | None, named: Mapping[str, Any] | None = None
    ) -> tuple[Any, ...]:
        """The positional parameters for `values` and `named` (by name; `named` wins): a
        mapping an op built anyway is used as it is, keywords too."""
        if values is None:
            values = named or {}
        elif named:
            values = {**values, **named}
        try:
            return self.pick(values)
        except KeyError as exc:
            raise TypeError(f"query {self.text!r} needs a value for {exc}") from None


class Query:
    """A statement, compiled for a dialect the first time it is asked for there.

    `new_ids`: an INSERT's key column, whose new values `Tx.insert_ids` gives: PostgreSQL
    RETURNs it; SQLite reads the cursor's last rowid instead (a RETURNING there goes through a
    temporary table, which costs an INSERT of one message about as much again).
    """

    __slots__ = ("name", "new_ids", "postgresql", "sqlite", "statement")

    def __init__(
        self, statement: Executable, name: str = "", *, new_ids: ColumnElement[int] | None = None
    ) -> None:
        self.statement = statement
        self.name = name
        self.new_ids = new_ids
        # each dialect's text once it was asked for (a backend reads its own on every call)
        self.sqlite: Compiled | None = None
        self.postgresql: Compiled | None = None

    def sql(self, dialect: Dialect) -> Compiled:
        compiled: Compiled | None = getattr(self, dialect)
        if compiled is None:  # the first call: compile, once
            statement = self.statement
            if self.new_ids is not None and dialect == "postgresql":
                statement = statement.returning(self.new_ids)  # type: ignore[attr-defined]
            compiled = _compile(statement, dialect)
            setattr(self, dialect, compiled)
        return compiled

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of the columns a SELECT (or a RETURNING) gives, in order."""
        selected = getattr(self.statement, "selected_columns", None)
        if selected is None:
            selected = self.statement.returning_column_descriptions  # type: ignore[attr-defined]
            return tuple(c["name"] for c in selected)
        return tuple(selected.keys())

    def args(self, dialect: Dialect, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for `values` (by name), constants in their places."""
        return self.sql(dialect).bind(values)


def dialect_of(dialect: Dialect) -> SaDialect:
    return _DIALECTS[dialect]


def _compile(statement: Executable, dialect: Dialect) -> Compiled:
    compiled = statement.compile(dialect=_DIALECTS[dialect])  # type: ignore[attr-defined]
    names = tuple(compiled.positiontup or ())
    return Compiled(compiled.string, names, _picker(names))


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    if not names:
        return lambda values: ()
    if len(names) == 1:
        [name] = names
        return lambda values: (values[name],)
    return operator.itemgetter(*names)  # in C: the cheapest way to line the values up


def params(*names: str) -> dict[str, BindParameter[Any]]:
    """`{name: bindparam(name)}`: the values of an INSERT or an UPDATE's SET, by column name."""
    return {name: bindparam(name) for name in names}
