"""The PostgreSQL engine's statements (13+; tested on 15), as one ``Dialect``
for one schema.

Each section of the ``Dialect`` protocol is a module of its own, holding
each statement's SQL right above the method that binds it (``Sql``, with
``:name`` parameters: :mod:`alkstore.engines.sql`): wakes, enqueue, claims,
settling, queues, inspection, streams, schedules, locks, dependencies,
attempts, in the protocol's order; the SQLite engine has the same modules. The semantic rules
(claimable, owned, lock held or free, ...) are not written there: each is a
fragment of :mod:`alkstore.engines.rules`, in Postgres's spelling.

Statements are rendered for the dialect's schema when it is made, into
``$1, $2, ...`` placeholders, and are sent one at a time with the extended
protocol (``PQsendQueryParams``): never two statements in one string.
Parameters are dumped by psycopg, which types a Python ``int`` as
``int2``/``int4``/``int8`` by its value and a ``str`` or ``None`` as
``unknown`` (the server infers the type from the context). That is fine for
columns and comparisons; where the context does not fix a type
(``COALESCE``, a select list, an array) the SQL casts explicitly.

Names (queues, streams, locks, schedules, consumers, workers, owners) are
always bound ``text`` parameters compared byte for byte (``COLLATE "C"``
columns), never identifiers: distinct names can never alias. Wake channels
are identifiers, mapped by :mod:`.names`. Table names are schema-qualified
and quoted; the schema is validated once, at construction. Row shapes and
``Fetch`` kinds are those of ``protocol.dialect`` and match the SQLite
engine statement for statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sql import render_statements
from .attempts import Attempts
from .claims import Claims
from .dependencies import Dependencies
from .enqueue import Enqueue
from .inspection import Inspection
from .locks import Locks
from .names import check_schema, quote_ident
from .queues import Queues
from .schedules import Schedules
from .schema import DEFAULT_SCHEMA, lock_guard_key, qualified
from .settling import Settling
from .spelling import SPELLING
from .streams import Streams
from .vacuum import Vacuum
from .wakes import Wakes

if TYPE_CHECKING:
    from ...protocol.dialect import Dialect, Vacuuming


class PostgresDialect(
    Wakes, Enqueue, Claims, Settling, Queues, Inspection, Streams, Schedules, Locks,
    Dependencies, Attempts, Vacuum,
):
    """Statement builders for one Postgres schema. Pure: every method only
    builds a ``Statement``."""

    name = "postgres"
    # The server's NOTIFY payload limit (NOTIFY_PAYLOAD_MAX_LENGTH with the
    # default 8 kB block size). alkstore never sends a payload (wakes are
    # opaque), but the contract's PayloadTooLarge check is made client-side
    # against this number, so both engines' users see the same rule.
    notify_payload_limit: int | None = 8000

    def __init__(self, schema: str = DEFAULT_SCHEMA) -> None:
        self.schema = check_schema(schema)
        # The tables, for whoever writes SQL of their own against this store.
        self.jobs = qualified(self.schema, "jobs")
        self.dead = qualified(self.schema, "dead")
        self.streams = qualified(self.schema, "streams")
        self.events = qualified(self.schema, "events")
        self.offsets = qualified(self.schema, "offsets")
        self.locks = qualified(self.schema, "locks")
        self.schedules = qualified(self.schema, "schedules")
        self.queues = qualified(self.schema, "queues")
        self.history = qualified(self.schema, "history")
        self.claim_log = qualified(self.schema, "claim_log")
        self.meta = qualified(self.schema, "meta")
        self._channel_scope = "" if self.schema == DEFAULT_SCHEMA else self.schema
        self._lock_key = lock_guard_key(self.schema)
        self.__dict__.update(render_statements(type(self), SPELLING, quote_ident(self.schema)))


if TYPE_CHECKING:
    # mypy proves the class satisfies the protocol, signatures included.
    _conforms: Dialect = PostgresDialect()
    _vacuums: Vacuuming = PostgresDialect()
