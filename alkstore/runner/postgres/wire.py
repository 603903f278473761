"""Statements to libpq and results back, through psycopg's public ``pq`` layer.

Shared by the async Postgres connection and by tests: parameters are dumped
and rows loaded with psycopg's ``Transformer``, so every type is adapted the
way psycopg adapts it (with the session's time zone), and errors become the
taxonomy's ``DatabaseError`` with psycopg's exception chained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from ...engines.postgres import control
from ...protocol.plan import Fetch, Statement, shape
from ...protocol.values.errors import DatabaseError, TransactionConflict

OK_STATUSES = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)


class Wire:
    """Per-connection adaptation state (psycopg's adapters and time zone)."""

    def __init__(self, pgconn: pq.abc.PGconn) -> None:
        self._tx = Transformer()
        self._pgconn = pgconn
        self._encoding = "utf-8"

    def encode_sql(self, sql: str) -> bytes:
        return sql.encode(self._encoding)

    def dump(self, params: Sequence[Any]) -> tuple[Any, Any, Any]:
        if not params:
            return None, None, None
        values = self._tx.dump_sequence(params, [PyFormat.AUTO] * len(params))
        return values, self._tx.types, self._tx.formats

    def send(self, statement: Statement | tuple[str, Sequence[Any]]) -> None:
        sql, params = (
            (statement.sql, statement.params) if isinstance(statement, Statement) else statement
        )
        self.send_dumped(sql, *self.dump(params))

    def send_dumped(self, sql: str, values: Any, types: Any, formats: Any) -> None:
        """``send`` with the parameters ``dump`` made."""
        self._pgconn.send_query_params(
            self.encode_sql(sql), values, param_types=types, param_formats=formats
        )

    def result(self, res: pq.abc.PGresult, fetch: Fetch) -> Any:
        check(res)
        if fetch is Fetch.NONE:
            return None
        rows: list[tuple[Any, ...]] = []
        if fetch.reads_rows:
            self._tx.set_pgresult(res)
            rows = self._tx.load_rows(0, res.ntuples, tuple)
        return shape(fetch, rows, _rowcount(res))


    def rows(self, res: pq.abc.PGresult) -> list[tuple[Any, ...]]:
        check(res)
        if res.status != pq.ExecStatus.TUPLES_OK:
            return []
        self._tx.set_pgresult(res)
        return self._tx.load_rows(0, res.ntuples, tuple)


def _rowcount(res: pq.abc.PGresult) -> int:
    """Rows changed, from the command tag ("UPDATE 3", "INSERT 0 1")."""
    status = res.command_status or b""
    tail = status.split()[-1:] if status else []
    return int(tail[0]) if tail and tail[0].isdigit() else 0


def check(res: pq.abc.PGresult) -> None:
    if res.status in OK_STATUSES:
        return
    raise error_from_result(res)


def error_from_result(res: pq.abc.PGresult) -> DatabaseError:
    state = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"XX000").decode()
    cause = psycopg.errors.lookup(state)(res.error_message.decode("utf-8", "replace").strip())
    return wrap_error(cause, state)


def wrap_error(cause: BaseException, state: str | None) -> DatabaseError:
    """The taxonomy's error for a server error with SQLSTATE ``state``."""
    kind = TransactionConflict if state in control.CONFLICT_SQLSTATES else DatabaseError
    error = kind(f"PostgreSQL: {cause}")
    error.__cause__ = cause
    return error


def sqlstate(error: BaseException) -> str | None:
    cause = error.__cause__
    return getattr(cause, "sqlstate", None) if cause is not None else None
