"""Which statements a connection has prepared on the server, and when to
prepare the next one.

A statement the server has prepared skips parsing, analysis and, once its
generic plan is chosen, planning: about 100 us of server time for a single
enqueue here (a round trip of 180 us against 280 us), which is most of what
a hot statement (enqueue, claim, ack, heartbeat) costs the server. The
scheme is psycopg's own: a statement is prepared once it has been sent
``threshold`` times on the connection, under a name of the connection's
own, and executed by name from then on; a statement is the SQL text with
the parameter types psycopg dumped for it (an ``int`` is sent as int2,
int4 or int8 by its value, and a prepared statement's types are fixed).
At most ``capacity`` are kept: the least recently used one is closed when
another is prepared (where libpq can close one, 17 and later; before that,
no more are prepared once the connection holds ``capacity``).

Only alkstore's own statements go through here, a fixed set, never a
caller's SQL. Pure bookkeeping: the connection sends what it is told.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

Key = tuple[str, object]

# psycopg's defaults (``prepare_threshold``, ``prepared_max``).
THRESHOLD = 5
CAPACITY = 100


@dataclass(frozen=True, slots=True)
class Use:
    """How to send one statement: first close ``close`` (a statement evicted
    to make room) and prepare ``prepare``, then execute ``name``; ``name``
    None: send the statement unprepared."""

    name: bytes | None = None
    prepare: bytes | None = None
    close: bytes | None = None


_UNPREPARED = Use()


class Prepared:
    def __init__(self, threshold: int, capacity: int = CAPACITY, *, can_close: bool) -> None:
        self._threshold = max(1, threshold)
        self._capacity = max(1, capacity)
        self._can_close = can_close
        self._seen: dict[Key, int] = {}
        self._names: OrderedDict[Key, bytes] = OrderedDict()
        self._serial = 0

    def use(self, key: Key) -> Use:
        """How to send the statement ``key`` now."""
        name = self._names.get(key)
        if name is not None:
            self._names.move_to_end(key)
            return Use(name)
        seen = self._seen.get(key, 0) + 1
        if seen < self._threshold:
            if len(self._seen) >= 10 * self._capacity:
                self._seen.clear()  # (a bound, should the statements ever vary)
            self._seen[key] = seen
            return _UNPREPARED
        close = None
        if len(self._names) >= self._capacity:
            if not self._can_close:
                return _UNPREPARED
            _, close = self._names.popitem(last=False)
        self._seen.pop(key, None)
        self._serial += 1
        name = f"alk_{self._serial}".encode()
        self._names[key] = name
        return Use(name, name, close)

    def lost(self, name: bytes) -> None:
        """The prepare of ``name`` failed or was skipped: it does not exist."""
        for key, known in self._names.items():
            if known == name:
                del self._names[key]
                return

    def __len__(self) -> int:
        return len(self._names)
