"""The PostgreSQL engine: schema, migrations, the SQL of every step and the
mapping of wake channels to LISTEN/NOTIFY identifiers. Pure: no IO."""

from .dialect import PostgresDialect
from .names import channel_identifier, check_schema, quote_ident
from .schema import (
    DEFAULT_SCHEMA,
    SCHEMA_VERSION,
    migrate,
    migration_lock_key,
    migrations,
    schema_version,
)

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "PostgresDialect",
    "channel_identifier",
    "check_schema",
    "migrate",
    "migration_lock_key",
    "migrations",
    "quote_ident",
    "schema_version",
]
