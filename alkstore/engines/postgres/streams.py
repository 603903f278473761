"""Streams on PostgreSQL: offsets handed out by the stream's locked counter
row (so in commit order), events, consumers' saved offsets, retention and
the read models."""

from __future__ import annotations

from ...protocol.plan import Fetch, Statement
from ..shapes import EVENT_COLS, distinct_names
from ..sql import Sql
from .spelling import RULES
from .tables import EVENTS, OFFSETS, STREAMS


class Streams:
    # The counter row of the stream is created or bumped, and stays locked
    # until this transaction ends: a second publisher to the same stream
    # waits here until the first commits (or rolls back, and then reuses its
    # offset). So offsets are handed out in commit order, and a reader that
    # has seen offset N can never later find a newly committed event below N
    # (a sequence would hand out numbers at insert time, and two transactions
    # could commit out of order). Publishers of different streams do not
    # contend.
    _next_offset = Sql(
        f"INSERT INTO {STREAMS} AS s (name, last_offset) VALUES (:stream, 1) "
        "ON CONFLICT (name) DO UPDATE SET last_offset = s.last_offset + 1 "
        "RETURNING last_offset",
        Fetch.ONE,
    )

    def next_offset(self, stream: str) -> Statement:
        return self._next_offset.bind(stream=stream)

    _head_offset = Sql(f"SELECT last_offset FROM {STREAMS} WHERE name = :stream", Fetch.ONE)

    def head_offset(self, stream: str) -> Statement:
        return self._head_offset.bind(stream=stream)

    _insert_event = Sql(
        f'INSERT INTO {EVENTS} (stream, "offset", key, payload, created_at) '
        "VALUES (:stream, :offset, :key, :payload, :now)"
    )

    def insert_event(
        self, stream: str, offset: int, key: str | None, payload_json: str, now_us: int
    ) -> Statement:
        return self._insert_event.bind(
            stream=stream, offset=offset, key=key, payload=payload_json, now=now_us
        )

    _read_since = Sql(
        f"SELECT {EVENT_COLS} FROM {EVENTS} "
        'WHERE stream = :stream AND "offset" > :offset ORDER BY "offset" LIMIT :limit',
        Fetch.ALL,
    )

    def read_since(self, stream: str, offset: int, limit: int) -> Statement:
        return self._read_since.bind(stream=stream, offset=offset, limit=limit)

    # A page of events, newest first: the primary key walked backwards.
    _events_before = Sql(
        f"SELECT {EVENT_COLS} FROM {EVENTS} "
        'WHERE stream = :stream AND "offset" < :offset ORDER BY "offset" DESC LIMIT :limit',
        Fetch.ALL,
    )

    def events_before(self, stream: str, offset: int, limit: int) -> Statement:
        return self._events_before.bind(stream=stream, offset=offset, limit=limit)

    # Monotonic: a lower offset than the stored one changes nothing.
    _save_offset = Sql(
        f'INSERT INTO {OFFSETS} AS o (stream, consumer, "offset") '
        "VALUES (:stream, :consumer, :offset) "
        f"ON CONFLICT (stream, consumer) DO UPDATE SET {RULES.keep_higher_offset(row='o')}"
    )

    def save_offset(self, stream: str, consumer: str, offset: int) -> Statement:
        return self._save_offset.bind(stream=stream, consumer=consumer, offset=offset)

    _get_offset = Sql(
        f'SELECT "offset" FROM {OFFSETS} WHERE stream = :stream AND consumer = :consumer',
        Fetch.ONE,
    )

    def get_offset(self, stream: str, consumer: str) -> Statement:
        return self._get_offset.bind(stream=stream, consumer=consumer)

    _trim = Sql(
        f'DELETE FROM {EVENTS} WHERE stream = :stream AND "offset" < :offset', Fetch.ROWCOUNT
    )

    def trim(self, stream: str, offset: int) -> Statement:
        return self._trim.bind(stream=stream, offset=offset)

    _stream_names = Sql(
        f"WITH RECURSIVE {distinct_names('logged', EVENTS, 'stream')}, "
        f"{distinct_names('consumed', OFFSETS, 'stream')} "
        f"SELECT name FROM {STREAMS} "
        "UNION SELECT name FROM logged WHERE name IS NOT NULL "
        "UNION SELECT name FROM consumed WHERE name IS NOT NULL ORDER BY name",
        Fetch.ALL,
    )

    def stream_names(self) -> Statement:
        return self._stream_names.bind()

    _stream_summary = Sql(
        "SELECT s.last_offset, s.max_age_us, s.max_events, "
        f"(SELECT COUNT(*) FROM {EVENTS} WHERE stream = :stream), "
        'o."offset", o.created_at '
        f"FROM (SELECT 1) AS one LEFT JOIN {STREAMS} AS s ON s.name = :stream "
        f'LEFT JOIN LATERAL (SELECT "offset", created_at FROM {EVENTS} '
        'WHERE stream = :stream ORDER BY "offset" LIMIT 1) AS o ON true',
        Fetch.ONE,
    )

    def stream_summary(self, stream: str) -> Statement:
        return self._stream_summary.bind(stream=stream)

    _stream_consumers = Sql(
        f'SELECT consumer, "offset", keep FROM {OFFSETS} WHERE stream = :stream ORDER BY consumer',
        Fetch.ALL,
    )

    def stream_consumers(self, stream: str) -> Statement:
        return self._stream_consumers.bind(stream=stream)

    # A stream's retention lives in its counter row, created at offset 0 (no
    # event yet) if need be; publishing later continues from it.
    _set_stream_retention = Sql(
        f"INSERT INTO {STREAMS} (name, last_offset, max_age_us, max_events) "
        "VALUES (:stream, 0, :max_age, :max_events) ON CONFLICT (name) DO UPDATE SET "
        "max_age_us = EXCLUDED.max_age_us, max_events = EXCLUDED.max_events"
    )

    def set_stream_retention(
        self, stream: str, max_age_us: int | None, max_events: int | None
    ) -> Statement:
        return self._set_stream_retention.bind(
            stream=stream, max_age=max_age_us, max_events=max_events
        )

    _protect_consumer = Sql(
        f'INSERT INTO {OFFSETS} AS o (stream, consumer, "offset", keep) '
        "VALUES (:stream, :consumer, 0, true) ON CONFLICT (stream, consumer) "
        "DO UPDATE SET keep = true WHERE NOT o.keep"
    )

    def protect_consumer(self, stream: str, consumer: str) -> Statement:
        return self._protect_consumer.bind(stream=stream, consumer=consumer)

    _unprotect_consumer = Sql(
        f"UPDATE {OFFSETS} SET keep = false "
        "WHERE stream = :stream AND consumer = :consumer AND keep",
        Fetch.ROWCOUNT,
    )

    def unprotect_consumer(self, stream: str, consumer: str) -> Statement:
        return self._unprotect_consumer.bind(stream=stream, consumer=consumer)

    # A plain read: the counter rows stay free for publishers.
    _retained_streams = Sql(
        f"SELECT name, last_offset, max_age_us, max_events FROM {STREAMS} "
        "WHERE (max_age_us IS NOT NULL OR max_events IS NOT NULL) AND name > :after "
        "ORDER BY name LIMIT :limit",
        Fetch.ALL,
    )

    def retained_streams(self, after: str, limit: int) -> Statement:
        return self._retained_streams.bind(after=after, limit=limit)

    # Walks the primary key from the stream's oldest event: it passes only the
    # events old enough to go.
    _first_young_event = Sql(
        f'SELECT "offset" FROM {EVENTS} '
        f'WHERE stream = :stream AND {RULES.within_age(":cutoff")} ORDER BY "offset" LIMIT 1',
        Fetch.ONE,
    )

    def first_young_event(self, stream: str, cutoff_us: int) -> Statement:
        return self._first_young_event.bind(stream=stream, cutoff=cutoff_us)

    # Never past a protected consumer: its saved offset is read in the delete
    # itself, so a protect() that committed before it is obeyed.
    _prune_events = Sql(
        f'DELETE FROM {EVENTS} WHERE stream = :stream AND "offset" IN '
        f'(SELECT "offset" FROM {EVENTS} WHERE stream = :stream AND "offset" <= :upto AND '
        f'"offset" <= COALESCE({RULES.protected_floor(OFFSETS, ":stream")}, "offset") '
        'ORDER BY "offset" LIMIT :limit FOR UPDATE SKIP LOCKED)',
        Fetch.ROWCOUNT,
    )

    def prune_events(self, stream: str, upto: int, limit: int) -> Statement:
        return self._prune_events.bind(stream=stream, upto=upto, limit=limit)
