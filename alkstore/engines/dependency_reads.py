"""The reads of dependencies, results and workflows, written once.

Where a job stands, what its dependencies recorded and how a workflow's
steps stand are the same SQL on both engines but for the tables' names (and
Postgres's row locks on what housekeeping is about to forget): each function
here is one statement's text over an engine's :class:`Tables`, which that
engine's ``dependencies`` section binds (``engines/<engine>/dependencies.py``).
A live job's state is read as text (``CAST``, both engines' word) so that
its column can share a ``COALESCE`` with history's outcome and the dead
letters' reason.
"""

from __future__ import annotations

from typing import Protocol


class Tables(Protocol):
    """The table names an engine's statements use (``engines/<engine>/tables.py``)."""

    JOBS: str
    WAITING: str
    HISTORY: str
    DEAD: str
    DEPS: str
    WORKFLOWS: str
    WORKFLOW_STEPS: str


def job_outcome(t: Tables) -> str:
    """Where job ``:job_id`` is: ``(where, state or outcome or reason,
    result, last error, queue)``, no row when it is nowhere."""
    return (
        f"SELECT 'live', CAST(state AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), queue "
        f"FROM {t.JOBS} WHERE id = :job_id "
        f"UNION ALL SELECT 'waiting', NULL, NULL, NULL, queue FROM {t.WAITING} WHERE id = :job_id "
        f"UNION ALL SELECT 'history', outcome, result, last_error, queue FROM {t.HISTORY} "
        "WHERE id = :job_id "
        f"UNION ALL SELECT 'dead', reason, NULL, last_error, queue FROM {t.DEAD} "
        "WHERE id = :job_id"
    )


def dependency_results(t: Tables) -> str:
    """Each dependency of ``:job_id`` with what its finish recorded (NULLs:
    not in history)."""
    return (
        f"SELECT d.dep_id, h.outcome, h.result, h.headers FROM {t.DEPS} AS d "
        f"LEFT JOIN {t.HISTORY} AS h ON h.id = d.dep_id WHERE d.job_id = :job_id "
        "ORDER BY d.dep_id"
    )


def dependencies(t: Tables) -> str:
    """The edges from ``:job_id`` to what it waits for: ``(dep_id, done)``."""
    return f"SELECT dep_id, done FROM {t.DEPS} WHERE job_id = :job_id ORDER BY dep_id"


def dependents(t: Tables) -> str:
    """The edges to ``:job_id`` from what waits for it: ``(job_id, done)``."""
    return f"SELECT job_id, done FROM {t.DEPS} WHERE dep_id = :job_id ORDER BY job_id"


def workflow(t: Tables) -> str:
    return f"SELECT id, name, created_at FROM {t.WORKFLOWS} WHERE id = :workflow"


def workflow_steps(t: Tables) -> str:
    """Each step of ``:workflow`` in definition order, with where its job is
    (the columns of :func:`job_outcome`'s row after the step's name and job id)."""
    return (
        "SELECT s.step, s.job_id, "
        "CASE WHEN j.id IS NOT NULL THEN 'live' WHEN w.id IS NOT NULL THEN 'waiting' "
        "WHEN h.id IS NOT NULL THEN 'history' WHEN d.id IS NOT NULL THEN 'dead' END, "
        "COALESCE(CAST(j.state AS TEXT), h.outcome, d.reason), h.result, "
        "COALESCE(h.last_error, d.last_error), COALESCE(j.queue, w.queue, h.queue, d.queue) "
        f"FROM {t.WORKFLOW_STEPS} AS s "
        f"LEFT JOIN {t.JOBS} AS j ON j.id = s.job_id "
        f"LEFT JOIN {t.WAITING} AS w ON w.id = s.job_id "
        f"LEFT JOIN {t.HISTORY} AS h ON h.id = s.job_id "
        f"LEFT JOIN {t.DEAD} AS d ON d.id = s.job_id "
        "WHERE s.workflow_id = :workflow ORDER BY s.position"
    )


def workflow_edges(t: Tables) -> str:
    """The dependency edges among ``:workflow``'s steps: ``(dep_id, job_id)``."""
    return (
        f"SELECT d.dep_id, d.job_id FROM {t.WORKFLOW_STEPS} AS s "
        f"JOIN {t.DEPS} AS d ON d.job_id = s.job_id WHERE s.workflow_id = :workflow "
        "ORDER BY d.job_id, d.dep_id"
    )


def _exists_in(table: str) -> str:
    return f"EXISTS (SELECT 1 FROM {table} WHERE id = s.job_id)"


def workflow_open_steps(t: Tables) -> str:
    """The job ids of ``:workflow``'s steps still live or waiting."""
    return (
        f"SELECT s.job_id FROM {t.WORKFLOW_STEPS} AS s WHERE s.workflow_id = :workflow AND "
        f"({_exists_in(t.JOBS)} OR {_exists_in(t.WAITING)}) ORDER BY s.job_id"
    )


def workflow_of(t: Tables) -> str:
    """The workflow ``:job_id`` is a step of: ``(id, step, name)``."""
    return (
        f"SELECT s.workflow_id, s.step, w.name FROM {t.WORKFLOW_STEPS} AS s "
        f"JOIN {t.WORKFLOWS} AS w ON w.id = s.workflow_id WHERE s.job_id = :job_id"
    )


def workflow_page(t: Tables) -> str:
    """Workflows below ``:before``, newest first, with their step counts."""
    return (
        f"SELECT w.id, w.name, w.created_at, (SELECT COUNT(*) FROM {t.WORKFLOW_STEPS} AS s "
        "WHERE s.workflow_id = w.id) "
        f"FROM {t.WORKFLOWS} AS w WHERE w.id < :before ORDER BY w.id DESC LIMIT :limit"
    )


def stale_workflows(t: Tables, lock: str = "") -> str:
    """Workflows made before ``:cutoff`` none of whose steps is recorded
    anywhere any more (live, waiting, in history or dead), oldest first;
    ``lock`` follows (Postgres: the rows it is about to forget)."""
    recorded = " OR ".join(_exists_in(table) for table in (t.JOBS, t.WAITING, t.HISTORY, t.DEAD))
    return (
        f"SELECT w.id FROM {t.WORKFLOWS} AS w WHERE w.created_at < :cutoff "
        f"AND NOT EXISTS (SELECT 1 FROM {t.WORKFLOW_STEPS} AS s WHERE s.workflow_id = w.id AND "
        f"({recorded})) ORDER BY w.created_at LIMIT :limit{lock}"
    )
