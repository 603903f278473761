"""Job dependencies, results and workflows on SQLite: the waiting table and
its edges, the kept jobs' moves into history, the reads of a job's outcome
and of a workflow. The single writer orders every finish against every
enqueue, so counting a dependency's finish needs no lock."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PENDING
from ...protocol.plan import Fetch, Statement
from ...protocol.values.types import NewJob
from .. import dependency_reads as reads
from ..shapes import HISTORY_INSERT_COLS, WAITING_COLS
from ..sql import Sql, Variants
from . import tables
from .spelling import RULES
from .tables import DEAD, DEPS, HISTORY, JOBS, QUEUES, WAITING, WORKFLOW_STEPS, WORKFLOWS

_IDS = "(SELECT value FROM json_each(:ids))"
_SEQUENCE = "(SELECT seq FROM sqlite_sequence WHERE name = '__alkstore_jobs')"


def _kept_to_history(
    outcome: str, source: str, where: str, result: str, error: str, headers: str = "j.headers"
) -> str:
    """Copy the rows of jobs ``where`` selects into history as ``outcome``,
    pruned per their queue's results retention (rules.kept_prune_at)."""
    return (
        f"INSERT INTO {HISTORY} ({HISTORY_INSERT_COLS}, result) "
        f"SELECT j.id, j.queue, '{outcome}', j.payload, j.priority, j.attempts, "
        "j.max_attempts, j.run_at, j.created_at, :now, j.claimed_by, "
        f"{error}, {headers}, {RULES.kept_prune_at(':now', QUEUES, 'j.queue')}, "
        f"j.unique_key, j.concurrency_key, {result} "
        f"FROM {source} WHERE {where} RETURNING id, queue"
    )


class Dependencies:
    # An id from the AUTOINCREMENT sequence is never handed out again: the
    # sequence row is created as SQLite would (from the largest id) if no
    # job was ever inserted, then moved on by n.
    _ensure_sequence = Sql(
        "INSERT INTO sqlite_sequence (name, seq) "
        f"SELECT '__alkstore_jobs', COALESCE((SELECT MAX(id) FROM {JOBS}), 0) "
        "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '__alkstore_jobs')"
    )
    _take_ids = Sql(
        "UPDATE sqlite_sequence SET seq = seq + :n WHERE name = '__alkstore_jobs'"
    )
    _taken_ids = Sql(
        f"WITH RECURSIVE ids(id) AS (SELECT {_SEQUENCE} - :n + 1 "
        f"UNION ALL SELECT id + 1 FROM ids WHERE id < {_SEQUENCE}) SELECT id FROM ids",
        Fetch.ALL,
    )

    def allocate_job_ids(self, n: int) -> tuple[Statement, ...]:
        return (
            self._ensure_sequence.bind(),
            self._take_ids.bind(n=n),
            self._taken_ids.bind(n=n),
        )

    def enqueue_waiting(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[int],
        remaining: int,
        on_failure: int,
        now_us: int,
    ) -> Statement:
        params: list[object] = []
        for job, job_id in zip(jobs, ids, strict=True):
            params += (
                job_id, job.queue, job.payload_json, job.priority, job.max_attempts,
                job.run_at_us, now_us, job.expires_at_us, job.headers, job.concurrency_key,
                remaining, on_failure,
            )  # fmt: skip
        rows = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(jobs))
        return Statement(f"INSERT INTO {WAITING} ({WAITING_COLS}) VALUES {rows}", tuple(params))

    _keep_jobs = Sql(
        f"UPDATE {JOBS} SET {RULES.KEEP} WHERE id IN {_IDS} RETURNING id", Fetch.ALL
    )

    def keep_jobs(self, job_ids: Sequence[int]) -> Statement:
        return self._keep_jobs.bind(ids=orjson.dumps(list(job_ids)).decode())

    # The single writer: nothing can release or cancel it before this
    # transaction commits, so reading it holds it.
    _hold_waiting = Sql(f"SELECT id FROM {WAITING} WHERE id IN {_IDS}", Fetch.ALL)

    def hold_waiting(self, job_ids: Sequence[int]) -> Statement:
        return self._hold_waiting.bind(ids=orjson.dumps(list(job_ids)).decode())

    _dependency_states = Sql(
        f"SELECT id, 'waiting', NULL FROM {WAITING} WHERE id IN {_IDS} "
        f"UNION ALL SELECT id, outcome, last_error FROM {HISTORY} WHERE id IN {_IDS} "
        f"UNION ALL SELECT id, 'dead', reason FROM {DEAD} WHERE id IN {_IDS}",
        Fetch.ALL,
    )

    def dependency_states(self, job_ids: Sequence[int]) -> Statement:
        return self._dependency_states.bind(ids=orjson.dumps(list(job_ids)).decode())

    _add_dependencies = Sql(
        f"INSERT INTO {DEPS} (dep_id, job_id, done) "
        "SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:edges)"
    )

    def add_dependencies(self, edges: Sequence[tuple[int, int, bool]]) -> Statement:
        rows = [(dep, job, int(done)) for dep, job, done in edges]
        return self._add_dependencies.bind(edges=orjson.dumps(rows).decode())

    _count_finished = Sql(
        f"UPDATE {DEPS} SET {RULES.EDGE_COUNTED} "
        f"WHERE dep_id IN {_IDS} AND {RULES.EDGE_OPEN} RETURNING job_id, dep_id",
        Fetch.ALL,
    )

    def count_finished(self, dep_ids: Sequence[int]) -> Statement:
        return self._count_finished.bind(ids=orjson.dumps(list(dep_ids)).decode())

    _uncounted_dependents = Sql(
        f"SELECT job_id, dep_id FROM {DEPS} WHERE dep_id IN {_IDS} AND {RULES.EDGE_OPEN}",
        Fetch.ALL,
    )

    def uncounted_dependents(self, dep_ids: Sequence[int]) -> Statement:
        return self._uncounted_dependents.bind(ids=orjson.dumps(list(dep_ids)).decode())

    _waiting_policies = Sql(
        f"SELECT id, on_failure FROM {WAITING} WHERE id IN {_IDS}", Fetch.ALL
    )

    def waiting_policies(self, job_ids: Sequence[int]) -> Statement:
        return self._waiting_policies.bind(ids=orjson.dumps(list(job_ids)).decode())

    _decrement_waiting = Sql(
        f"UPDATE {WAITING} SET remaining = remaining - :n WHERE id IN {_IDS} "
        "RETURNING id, remaining",
        Fetch.ALL,
    )

    def decrement_waiting(self, job_ids: Sequence[int], n: int) -> Statement:
        return self._decrement_waiting.bind(ids=orjson.dumps(list(job_ids)).decode(), n=n)

    # Into jobs under its own id (an old one: the watchers of other
    # processes learn of it from the wake the plan writes), due when its
    # run_at comes, kept (its finish is recorded and settles its dependents).
    _release_copy = Sql(
        f"INSERT INTO {JOBS} (id, queue, payload, priority, max_attempts, run_at, created_at, "
        "expires_at, visible_at, state, headers, concurrency_key, keep) "
        "SELECT id, queue, payload, priority, max_attempts, "
        f"{RULES.spelling.larger('run_at', ':now')}, created_at, expires_at, "
        f"{RULES.spelling.larger('run_at', ':now')}, {STATE_PENDING}, headers, "
        f"concurrency_key, {RULES.spelling.true} "
        f"FROM {WAITING} WHERE id IN {_IDS} AND {RULES.dependencies_done(':counting')} "
        "RETURNING id, queue",
        Fetch.ALL,
    )
    _release_delete = Sql(
        f"DELETE FROM {WAITING} WHERE id IN {_IDS} AND {RULES.dependencies_done(':counting')}"
    )

    def release_waiting(
        self, job_ids: Sequence[int], now_us: int, counting: int = 0
    ) -> tuple[Statement, ...]:
        ids = orjson.dumps(list(job_ids)).decode()
        return (
            self._release_copy.bind(ids=ids, now=now_us, counting=counting),
            self._release_delete.bind(ids=ids, counting=counting),
        )

    _cancel_waiting_copy = Sql(
        f"INSERT INTO {HISTORY} ({HISTORY_INSERT_COLS}, result) "
        "SELECT id, queue, 'cancelled', payload, priority, 0, max_attempts, run_at, "
        "created_at, :now, NULL, :reason, headers, "
        f"{RULES.kept_prune_at(':now', QUEUES, f'{WAITING}.queue')}, NULL, concurrency_key, NULL "
        f"FROM {WAITING} WHERE id IN {_IDS} RETURNING id, queue",
        Fetch.ALL,
    )
    _cancel_waiting_delete = Sql(f"DELETE FROM {WAITING} WHERE id IN {_IDS}")

    def cancel_waiting(
        self, job_ids: Sequence[int], reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        ids = orjson.dumps(list(job_ids)).decode()
        return (
            self._cancel_waiting_copy.bind(ids=ids, reason=reason, now=now_us),
            self._cancel_waiting_delete.bind(ids=ids),
        )

    _get_waiting = Variants({
        False: Sql(f"SELECT {WAITING_COLS} FROM {WAITING} WHERE id = :job_id", Fetch.ONE),
        True: Sql(
            f"SELECT {WAITING_COLS} FROM {WAITING} WHERE id = :job_id AND queue = :queue",
            Fetch.ONE,
        ),
    })  # fmt: skip

    def get_waiting(self, queue: str | None, job_id: int) -> Statement:
        return self._get_waiting[queue is not None].bind(job_id=job_id, queue=queue)

    _waiting_count = Sql(f"SELECT COUNT(*) FROM {WAITING} WHERE queue = :queue", Fetch.ONE)

    def waiting_count(self, queue: str) -> Statement:
        return self._waiting_count.bind(queue=queue)

    _waiting_page = Sql(
        f"SELECT {WAITING_COLS} FROM {WAITING} WHERE queue = :queue AND id > :after "
        "ORDER BY id LIMIT :limit",
        Fetch.ALL,
    )

    def waiting_page(self, queue: str, after: int, limit: int) -> Statement:
        return self._waiting_page.bind(queue=queue, after=after, limit=limit)

    # (id, claim number or NULL, result JSON or NULL, headers or NULL)
    # items: a NULL claim number is the worker's live claim, whichever it is
    # (ack_batch's rule).
    _ack_kept_copy = Sql(
        _kept_to_history(
            "acked",
            f"{JOBS} AS j JOIN json_each(:items) AS i ON j.id = i.value ->> 0",
            "(i.value ->> 1 IS NULL OR j.claims = i.value ->> 1) AND "
            "(:queue IS NULL OR j.queue = :queue) AND "
            f"{RULES.owned(':worker', None, ':now', row='j')}",
            "i.value ->> 2",
            "j.last_error",
            "COALESCE(i.value ->> 3, j.headers)",
        ),
        Fetch.ALL,
    )
    # What the copy took: a job's id is in history only once it finished.
    _ack_kept_delete = Sql(
        f"DELETE FROM {JOBS} WHERE id IN (SELECT id FROM {HISTORY} WHERE id IN "
        "(SELECT value ->> 0 FROM json_each(:items)))"
    )

    def ack_kept(
        self,
        worker: str,
        items: Sequence[tuple[int, int | None, str | None, str | None]],
        now_us: int,
        queue: str | None = None,
    ) -> tuple[Statement, ...]:
        data = orjson.dumps(list(items)).decode()
        return (
            self._ack_kept_copy.bind(items=data, worker=worker, now=now_us, queue=queue),
            self._ack_kept_delete.bind(items=data),
        )

    _cancel_kept_copy = Sql(
        _kept_to_history(
            "cancelled", f"{JOBS} AS j", "j.id = :job_id AND j.queue = :queue", "NULL",
            "COALESCE(:reason, j.last_error)",
        ),
        Fetch.ALL,
    )
    _cancel_kept_delete = Sql(f"DELETE FROM {JOBS} WHERE id = :job_id AND queue = :queue")

    def cancel_kept(
        self, queue: str, job_id: int, reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._cancel_kept_copy.bind(job_id=job_id, queue=queue, reason=reason, now=now_us),
            self._cancel_kept_delete.bind(job_id=job_id, queue=queue),
        )

    _job_outcome = Sql(reads.job_outcome(tables), Fetch.ONE)

    def job_outcome(self, job_id: int) -> Statement:
        return self._job_outcome.bind(job_id=job_id)

    _job_id_high = Sql(
        f"SELECT MAX(COALESCE({_SEQUENCE}, 0), COALESCE((SELECT MAX(id) FROM {JOBS}), 0))",
        Fetch.ONE,
    )

    def job_id_high(self) -> Statement:
        return self._job_id_high.bind()

    _dependency_results = Sql(reads.dependency_results(tables), Fetch.ALL)

    def dependency_results(self, job_id: int) -> Statement:
        return self._dependency_results.bind(job_id=job_id)

    _dependencies = Sql(reads.dependencies(tables), Fetch.ALL)

    def dependencies(self, job_id: int) -> Statement:
        return self._dependencies.bind(job_id=job_id)

    _dependents = Sql(reads.dependents(tables), Fetch.ALL)

    def dependents(self, job_id: int) -> Statement:
        return self._dependents.bind(job_id=job_id)

    _forget_dependencies = Sql(f"DELETE FROM {DEPS} WHERE job_id IN {_IDS}")

    def forget_dependencies(self, job_ids: Sequence[int]) -> Statement:
        return self._forget_dependencies.bind(ids=orjson.dumps(list(job_ids)).decode())

    # -- workflows ------------------------------------------------------------
    _create_workflow = Sql(
        f"INSERT INTO {WORKFLOWS} (name, created_at) VALUES (:name, :now)", Fetch.INSERTED_ID
    )

    def create_workflow(self, name: str, now_us: int) -> Statement:
        return self._create_workflow.bind(name=name, now=now_us)

    _add_workflow_steps = Sql(
        f"INSERT INTO {WORKFLOW_STEPS} (workflow_id, step, job_id, position) "
        "SELECT :workflow, value ->> 0, value ->> 1, value ->> 2 FROM json_each(:steps)"
    )

    def add_workflow_steps(
        self, workflow_id: int, steps: Sequence[tuple[str, int, int]]
    ) -> Statement:
        return self._add_workflow_steps.bind(
            workflow=workflow_id, steps=orjson.dumps(list(steps)).decode()
        )

    _workflow = Sql(reads.workflow(tables), Fetch.ONE)

    def workflow(self, workflow_id: int) -> Statement:
        return self._workflow.bind(workflow=workflow_id)

    _workflow_steps = Sql(reads.workflow_steps(tables), Fetch.ALL)

    def workflow_steps(self, workflow_id: int) -> Statement:
        return self._workflow_steps.bind(workflow=workflow_id)

    _workflow_edges = Sql(reads.workflow_edges(tables), Fetch.ALL)

    def workflow_edges(self, workflow_id: int) -> Statement:
        return self._workflow_edges.bind(workflow=workflow_id)

    _workflow_open_steps = Sql(reads.workflow_open_steps(tables), Fetch.ALL)

    def workflow_open_steps(self, workflow_id: int) -> Statement:
        return self._workflow_open_steps.bind(workflow=workflow_id)

    _workflow_of = Sql(reads.workflow_of(tables), Fetch.ONE)

    def workflow_of(self, job_id: int) -> Statement:
        return self._workflow_of.bind(job_id=job_id)

    _workflow_page = Sql(reads.workflow_page(tables), Fetch.ALL)

    def workflow_page(self, before: int, limit: int) -> Statement:
        return self._workflow_page.bind(before=before, limit=limit)

    _stale_workflows = Sql(reads.stale_workflows(tables), Fetch.ALL)

    def stale_workflows(self, cutoff_us: int, limit: int) -> Statement:
        return self._stale_workflows.bind(cutoff=cutoff_us, limit=limit)

    _forget_workflow_steps = Sql(f"DELETE FROM {WORKFLOW_STEPS} WHERE workflow_id IN {_IDS}")
    _forget_workflows = Sql(f"DELETE FROM {WORKFLOWS} WHERE id IN {_IDS}", Fetch.ROWCOUNT)

    def forget_workflows(self, workflow_ids: Sequence[int]) -> tuple[Statement, ...]:
        ids = orjson.dumps(list(workflow_ids)).decode()
        return self._forget_workflow_steps.bind(ids=ids), self._forget_workflows.bind(ids=ids)
