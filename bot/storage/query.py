"""Each query written once (a SQLAlchemy Core statement), compiled once per dialect, lazily.

A `Query` holds a statement with named parameters; `Query.sql(dialect)` is its text for that
dialect and the order its parameters go in, compiled the first time and kept, so a call pays
only for binding its values: `Query.args(dialect, values)` (constants written into the
statement keep their value). SQLite takes `?` placeholders, asyncpg `$n`.
"""

from __future__ import annotations

from collections.abc import Mapping
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
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's text for one dialect; `slots` its parameters in order, each a name (from
    the caller's values) or a constant's value (`consts`: which of the slots are constants)."""

    text: str
    names: tuple[str, ...]
    consts: tuple[tuple[int, Any], ...]


class Query:
    """A statement, compiled for a dialect the first time it is asked for there."""

    __slots__ = ("_compiled", "name", "statement")

    def __init__(self, statement: Executable, name: str = "") -> None:
        self.statement = statement
        self.name = name
        self._compiled: dict[Dialect, Compiled] = {}

    def sql(self, dialect: Dialect) -> Compiled:
        compiled = self._compiled.get(dialect)
        if compiled is None:
            compiled = self._compiled[dialect] = _compile(self.statement, dialect)
        return compiled

    def args(self, dialect: Dialect, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for `values` (by name), constants in their places."""
        compiled = self.sql(dialect)
        args = [values.get(name, _MISSING) for name in compiled.names]
        for slot, value in compiled.consts:
            args[slot] = value
        if _MISSING in args:
            missing = [n for n, a in zip(compiled.names, args, strict=True) if a is _MISSING]
            raise TypeError(f"query {self.name or compiled.text!r} needs values for {missing}")
        return tuple(args)


def dialect_of(dialect: Dialect) -> SaDialect:
    return _DIALECTS[dialect]


def _compile(statement: Executable, dialect: Dialect) -> Compiled:
    compiled = statement.compile(dialect=_DIALECTS[dialect])  # type: ignore[attr-defined]
    names = tuple(compiled.positiontup or ())
    binds = compiled.binds
    # a value written into the statement (`status == "active"`, a LIMIT) is bound under a
    # unique generated name; a parameter the caller gives is a `bindparam("name")`
    consts = tuple(
        (slot, binds[name].value) for slot, name in enumerate(names) if binds[name].unique
    )
    return Compiled(compiled.string, names, consts)


def params(*names: str) -> dict[str, BindParameter[Any]]:
    """`{name: bindparam(name)}`: the values of an INSERT or an UPDATE's SET, by column name."""
    return {name: bindparam(name) for name in names}
