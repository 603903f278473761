"""The SQLite engine: schema, migrations and the SQL of every step."""

from .dialect import SqliteDialect
from .schema import MIGRATIONS, PRAGMAS, SCHEMA_VERSION, migrate, needs_migration, schema_version

__all__ = [
    "MIGRATIONS",
    "PRAGMAS",
    "SCHEMA_VERSION",
    "SqliteDialect",
    "migrate",
    "needs_migration",
    "schema_version",
]
