"""The SQLite engine: schema, migrations and the SQL of every step."""

from .dialect import SqliteDialect
from .schema import MIGRATIONS, PRAGMAS, SCHEMA_VERSION, migrate

__all__ = ["MIGRATIONS", "PRAGMAS", "SCHEMA_VERSION", "SqliteDialect", "migrate"]
