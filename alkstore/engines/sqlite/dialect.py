"""The SQLite engine's statements (3.35+ for RETURNING), as one ``Dialect``.

Each section of the ``Dialect`` protocol is a module of its own, holding
each statement's SQL right above the method that binds it (``Sql``, with
``:name`` parameters: :mod:`alkstore.engines.sql`): wakes, enqueue, claims,
settling, queues, inspection, streams, schedules, locks, dependencies,
attempts, in the protocol's order; the Postgres engine has the same modules. The semantic rules
(claimable, owned, lock held or free, ...) are not written there: each is a
fragment of :mod:`alkstore.engines.rules`, in SQLite's spelling.

Names are always bound parameters, never spliced into SQL, so any string is
a distinct name and nothing needs quoting. Every statement is rendered once,
at import, into SQLite's numbered ``?NNN`` placeholders.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ..sql import render_statements
from .attempts import Attempts
from .claims import Claims
from .dependencies import Dependencies
from .enqueue import Enqueue
from .inspection import Inspection
from .locks import Locks
from .queues import Queues
from .schedules import Schedules
from .settling import Settling
from .spelling import SPELLING
from .streams import Streams
from .wakes import Wakes

if TYPE_CHECKING:
    from ...protocol.dialect import Dialect, NotificationLog


class SqliteDialect(
    Wakes, Enqueue, Claims, Settling, Queues, Inspection, Streams, Schedules, Locks,
    Dependencies, Attempts,
):
    """Statement builders for SQLite. Pure: every method only builds a
    ``Statement``."""

    name = "sqlite"
    # Wakes carry no payload and SQLite has no NOTIFY: no limit to check.
    notify_payload_limit: int | None = None

    def __init__(self) -> None:
        cls: type = type(self)
        self.__dict__.update(_rendered(cls))


@functools.cache
def _rendered(cls: type) -> dict[str, object]:
    """``cls``'s statements, rendered once per class (a subclass may edit some)."""
    return render_statements(cls, SPELLING)


_rendered(SqliteDialect)

if TYPE_CHECKING:
    # mypy proves the class satisfies the protocols, signatures included.
    _conforms: Dialect = SqliteDialect()
    _logs: NotificationLog = SqliteDialect()
