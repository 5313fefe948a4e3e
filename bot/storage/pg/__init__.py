"""PostgresStore: the gateway's store on PostgreSQL (asyncpg), for processes on several hosts."""

from bot.storage.pg.schema import MIGRATIONS, migrate
from bot.storage.pg.store import PostgresStore

__all__ = ["MIGRATIONS", "PostgresStore", "migrate"]
