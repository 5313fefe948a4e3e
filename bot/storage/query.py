"""Each query written once (a SQLAlchemy Core statement), compiled once per dialect, lazily.

A `Query` holds a statement with named parameters; `Query.sql(dialect)` is its text for that
dialect and the order its parameters go in, compiled the first time and kept, so a call pays
only for binding its values: `Query.args(dialect, values)` (constants written into the
statement keep their value). SQLite takes `?` placeholders, asyncpg `$n`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from sqlalchemy import bindparam
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine.interfaces import Dialect as SaDialect
from sqlalchemy.sql.expression import BindParameter, Executable

Dialect: TypeAlias = Literal["sqlite", "postgresql"]
_DIALECTS: dict[Dialect, SaDialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": PGDialect(paramstyle="numeric_dollar"),  # type: ignore[no-untyped-call]
}


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's text for one dialect; `names` its parameters in order, the caller's and
    the constants written into the statement (`consts`, by their generated names)."""

    text: str
    names: tuple[str, ...]
    consts: Mapping[str, Any]
    # the parameters in order, from the values by name (a KeyError for one missing)
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for `values` (by name), constants in their places."""
        try:
            return self.pick({**self.consts, **values} if self.consts else values)
        except KeyError as exc:
            raise TypeError(f"query {self.text!r} needs a value for {exc}") from None


class Query:
    """A statement, compiled for a dialect the first time it is asked for there."""

    __slots__ = ("_compiled", "name", "statement")

    def __init__(self, statement: Executable, name: str = "") -> None:
        self.statement = statement
        self.name = name
        self._compiled: dict[Dialect, Compiled] = {}

    def sql(self, dialect: Dialect) -> Compiled:
        compiled = self._compiled.get(dialect)
        if compiled is None:  # the first call: compile, once
            compiled = self._compiled[dialect] = _compile(self.statement, dialect)
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
    binds = compiled.binds
    # a value written into the statement (`status == "active"`, a LIMIT) is bound under a
    # unique generated name; a parameter the caller gives is a `bindparam("name")`
    consts = {name: binds[name].value for name in names if binds[name].unique}
    return Compiled(compiled.string, names, consts, _picker(names))


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
