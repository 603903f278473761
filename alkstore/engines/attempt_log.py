"""The statements of a job's attempt history, written once.

Recording an attempt, trimming a job's rows to the newest
``ATTEMPTS_KEPT``, reading them back and counting deaths per time bucket
are the same SQL on both engines but for the tables' names (each engine's
``attempts`` section binds them: ``engines/<engine>/attempts.py``); only
the list of ids a deletion takes is spelled per engine. Parameters are
``CAST``, both engines' word, where Postgres could not infer their type
(a select list, arithmetic).

``buried`` places a row, nothing more: TRUE while its job is a dead letter.
The job index leads with it, so a dead letter's rows, which stay until the
letter is purged, sit apart from the rows that come and go with retried
jobs. Mixed in, one lasting row in each index page kept every page alive
on PostgreSQL (a B-tree frees only pages that empty completely): a soak of
2,000,000 jobs with one death in 20,000 grew the job index fourfold while
the table stayed flat. Every read and delete takes both values, so a row
in either place is found (rows of a job buried or requeued by schema-7
code included).
"""

from __future__ import annotations

from typing import Protocol

from ..protocol.dialect import ATTEMPT_COLUMNS, column_list


class Tables(Protocol):
    """The table names an engine's statements use (``engines/<engine>/tables.py``)."""

    JOBS: str
    ATTEMPTS: str


def record(t: Tables) -> str:
    """Insert how live job ``:job_id``'s current attempt ended: its number,
    queue and worker from its row (so it runs before the row changes)."""
    return (
        f"INSERT INTO {t.ATTEMPTS} "
        "(job_id, queue, attempt, worker, started_at, finished_at, outcome, error, trace) "
        "SELECT id, queue, attempts, claimed_by, CAST(:started AS BIGINT), CAST(:now AS BIGINT), "
        "CAST(:outcome AS TEXT), CAST(:error AS TEXT), CAST(:trace AS TEXT) "
        f"FROM {t.JOBS} WHERE id = :job_id"
    )


# Either place (the job index's first column): see the module's docstring.
_JOB = "buried IN (FALSE, TRUE) AND job_id"


def trim(t: Tables) -> str:
    """Delete job ``:job_id``'s rows older than its newest ``:keep`` (none
    when it has no more: the bound is then NULL)."""
    return (
        f"DELETE FROM {t.ATTEMPTS} WHERE {_JOB} = :job_id AND id <= ("
        f"SELECT id FROM {t.ATTEMPTS} WHERE {_JOB} = :job_id ORDER BY id DESC "
        "LIMIT 1 OFFSET :keep)"
    )


def read(t: Tables) -> str:
    """Job ``:job_id``'s rows, oldest first."""
    return (
        f"SELECT {column_list(ATTEMPT_COLUMNS)} FROM {t.ATTEMPTS} "
        f"WHERE {_JOB} = :job_id ORDER BY id"
    )


def forget(t: Tables, ids: str) -> str:
    """Delete the rows of the jobs ``ids`` selects (the engine's spelling of
    a list parameter, after ``job_id``)."""
    return f"DELETE FROM {t.ATTEMPTS} WHERE {_JOB} {ids}"


def place(t: Tables, buried: bool) -> str:
    """Move job ``:job_id``'s rows to the dead letters' place (``buried``:
    its burial) or back (its requeue)."""
    to, was = ("TRUE", "FALSE") if buried else ("FALSE", "TRUE")
    return f"UPDATE {t.ATTEMPTS} SET buried = {to} WHERE buried = {was} AND job_id = :job_id"


def deaths_per_bucket(t: Tables) -> str:
    """Rows ``(bucket, deaths)`` of ``:queue``'s deaths in ``[:since,
    :until)``, by ``:bucket``-long bucket: a requeued letter's death
    counts too (its row stays while the job has a record)."""
    return (
        "SELECT (finished_at - CAST(:since AS BIGINT)) / CAST(:bucket AS BIGINT), COUNT(*) "
        f"FROM {t.ATTEMPTS} WHERE queue = :queue AND outcome <> 'retried' "
        "AND finished_at >= :since AND finished_at < :until GROUP BY 1"
    )
