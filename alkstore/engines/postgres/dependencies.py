"""Job dependencies, results and workflows on PostgreSQL: the waiting table
and its edges, the kept jobs' moves into history, the reads of a job's
outcome and of a workflow.

Concurrent finishes are ordered by row locks on the waiting job: its
release (a DELETE of the rows already complete) and the decrement of its
count (an UPDATE) each lock its row, so two dependencies acked at once in
two processes take turns on it and the second sees the first's count
(READ COMMITTED re-reads the row it waited for): the job is released
exactly once. A dependent enqueued while its dependency is being acked
marks the dependency kept first (``keep_jobs``), and the ack's plain
delete, which takes only unkept jobs, re-checks the row after the mark's
commit and leaves it to the kept path; a waiting dependency is held with
KEY SHARE (``hold_waiting``), so its release or cancel waits for the new
edge and counts it. Statements match ids with ``= ANY(array)`` on an
indexed column (a probe per id; the server hashes an array filter only in
a plan made for its values, see ``settling.claimed_as``) rather than
joining an unnested array: a join the planner may run as a nested loop
over every row of the table it scans."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PENDING
from ...protocol.plan import Fetch, Statement
from ...protocol.values.types import NewJob
from .. import dependency_reads as reads
from ..shapes import HISTORY_INSERT_COLS, WAITING_COLS
from ..sql import SCHEMA, Sql, Variants
from . import tables
from .settling import claim_numbers, claimed_as
from .spelling import RULES
from .tables import DEAD, DEPS, HISTORY, JOBS, QUEUES, WAITING, WORKFLOW_STEPS, WORKFLOWS

_IDS = "ANY(:ids::bigint[])"
_GONE = (
    "id, queue, payload, priority, attempts, max_attempts, run_at, created_at, claimed_by, "
    "last_error, headers, unique_key, concurrency_key"
)


def _to_history(
    outcome: str,
    gone: str,
    result: str,
    error: str = "last_error",
    headers: str = "headers",
    source: str | None = None,
) -> str:
    """Insert the rows of CTE ``gone`` (read from ``source``, when given: a
    join on it) into history as ``outcome``, pruned per their queue's
    results retention (rules.kept_prune_at); rows (id, queue)."""
    return (
        f"INSERT INTO {HISTORY} ({HISTORY_INSERT_COLS}, result) "
        f"SELECT id, queue, '{outcome}', payload, priority, attempts, max_attempts, run_at, "
        f"created_at, :now::bigint, claimed_by, {error}, {headers}, "
        f"{RULES.kept_prune_at(':now::bigint', QUEUES, f'{gone}.queue')}, unique_key, "
        f"concurrency_key, {result} FROM {source or gone} RETURNING id, queue"
    )


def _ack_kept(claims: bool) -> Sql:
    # Owned under the claim number each item names (settling.claimed_as), or,
    # without claim numbers, under the worker's live claim.
    match = f"AND {claimed_as()} " if claims else ""
    return Sql(
        f"WITH gone AS (DELETE FROM {JOBS} WHERE id = {_IDS} {match}"
        "AND (:queue::text IS NULL OR queue = :queue) "
        f"AND {RULES.owned(':worker', None, ':now')} RETURNING {_GONE}) "
        # Results and headers come as arrays beside the ids, joined once: a
        # JSON object read per row would be parsed again for every row.
        + _to_history(
            "acked", "gone", "i.item_result", headers="COALESCE(i.item_headers, gone.headers)",
            source="gone JOIN unnest(:ids::bigint[], :results::text[], :headers::text[]) "
            "AS i(item_id, item_result, item_headers) ON i.item_id = gone.id",
        ),
        Fetch.ALL,
    )


class Dependencies:
    # Ids from the jobs' own identity: never handed out again.
    _allocate_job_ids = Sql(
        f"SELECT nextval('{SCHEMA}.\"jobs_id_seq\"'::regclass) FROM generate_series(1, :n)",
        Fetch.ALL,
    )

    def allocate_job_ids(self, n: int) -> tuple[Statement, ...]:
        return (self._allocate_job_ids.bind(n=n),)

    _enqueue_waiting = Sql(
        f"INSERT INTO {WAITING} ({WAITING_COLS}) "
        "SELECT (e->>0)::bigint, e->>1, e->>2, (e->>3)::int, (e->>4)::bigint, (e->>5)::bigint, "
        ":now::bigint, (e->>6)::bigint, e->>7, e->>8, :remaining::bigint, :on_failure::smallint "
        "FROM json_array_elements(:jobs::text::json) AS e"
    )

    def enqueue_waiting(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[int],
        remaining: int,
        on_failure: int,
        now_us: int,
    ) -> Statement:
        rows = [
            (job_id, j.queue, j.payload_json, j.priority, j.max_attempts, j.run_at_us,
             j.expires_at_us, j.headers, j.concurrency_key)
            for j, job_id in zip(jobs, ids, strict=True)
        ]  # fmt: skip
        return self._enqueue_waiting.bind(
            jobs=orjson.dumps(rows).decode(), remaining=remaining, on_failure=on_failure,
            now=now_us,
        )  # fmt: skip

    # The mark's row lock orders it against a concurrent ack (see above).
    _keep_jobs = Sql(f"UPDATE {JOBS} SET {RULES.KEEP} WHERE id = {_IDS} RETURNING id", Fetch.ALL)

    def keep_jobs(self, job_ids: Sequence[int]) -> Statement:
        return self._keep_jobs.bind(ids=list(job_ids))

    # KEY SHARE: a release or cancel (a DELETE) waits for the new edge to
    # commit and then counts it; a decrement of the count (an UPDATE of a
    # column no key holds) does not wait.
    _hold_waiting = Sql(
        f"SELECT id FROM {WAITING} WHERE id = {_IDS} FOR KEY SHARE", Fetch.ALL
    )

    def hold_waiting(self, job_ids: Sequence[int]) -> Statement:
        return self._hold_waiting.bind(ids=list(job_ids))

    _dependency_states = Sql(
        f"SELECT id, 'waiting', NULL::text FROM {WAITING} WHERE id = {_IDS} "
        f"UNION ALL SELECT id, outcome, last_error FROM {HISTORY} WHERE id = {_IDS} "
        f"UNION ALL SELECT id, 'dead', reason FROM {DEAD} WHERE id = {_IDS}",
        Fetch.ALL,
    )

    def dependency_states(self, job_ids: Sequence[int]) -> Statement:
        return self._dependency_states.bind(ids=list(job_ids))

    _add_dependencies = Sql(
        f"INSERT INTO {DEPS} (dep_id, job_id, done) "
        "SELECT * FROM unnest(:deps::bigint[], :jobs::bigint[], :done::boolean[])"
    )

    def add_dependencies(self, edges: Sequence[tuple[int, int, bool]]) -> Statement:
        return self._add_dependencies.bind(
            deps=[d for d, _, _ in edges], jobs=[j for _, j, _ in edges],
            done=[bool(done) for _, _, done in edges],
        )  # fmt: skip

    _count_finished = Sql(
        f"UPDATE {DEPS} SET {RULES.EDGE_COUNTED} WHERE dep_id = {_IDS} AND {RULES.EDGE_OPEN} "
        "RETURNING job_id, dep_id",
        Fetch.ALL,
    )

    def count_finished(self, dep_ids: Sequence[int]) -> Statement:
        return self._count_finished.bind(ids=list(dep_ids))

    _uncounted_dependents = Sql(
        f"SELECT job_id, dep_id FROM {DEPS} WHERE dep_id = {_IDS} AND {RULES.EDGE_OPEN}",
        Fetch.ALL,
    )

    def uncounted_dependents(self, dep_ids: Sequence[int]) -> Statement:
        return self._uncounted_dependents.bind(ids=list(dep_ids))

    _waiting_policies = Sql(f"SELECT id, on_failure FROM {WAITING} WHERE id = {_IDS}", Fetch.ALL)

    def waiting_policies(self, job_ids: Sequence[int]) -> Statement:
        return self._waiting_policies.bind(ids=list(job_ids))

    _decrement_waiting = Sql(
        f"UPDATE {WAITING} SET remaining = remaining - :n WHERE id = {_IDS} "
        "RETURNING id, remaining",
        Fetch.ALL,
    )

    def decrement_waiting(self, job_ids: Sequence[int], n: int) -> Statement:
        return self._decrement_waiting.bind(ids=list(job_ids), n=n)

    # Into jobs under its own id, due when its run_at comes, kept (its
    # finish is recorded and settles its dependents).
    _release_waiting = Sql(
        f"WITH r AS (DELETE FROM {WAITING} WHERE id = {_IDS} "
        f"AND {RULES.dependencies_done(':counting::bigint')} "
        f"RETURNING {WAITING_COLS}) "
        f"INSERT INTO {JOBS} (id, queue, payload, priority, max_attempts, run_at, created_at, "
        "expires_at, visible_at, state, headers, concurrency_key, keep) OVERRIDING SYSTEM VALUE "
        f"SELECT id, queue, payload, priority, max_attempts, "
        f"{RULES.spelling.larger('run_at', ':now::bigint')}, created_at, expires_at, "
        f"{RULES.spelling.larger('run_at', ':now::bigint')}, {STATE_PENDING}, headers, "
        f"concurrency_key, {RULES.spelling.true} FROM r RETURNING id, queue",
        Fetch.ALL,
    )

    def release_waiting(
        self, job_ids: Sequence[int], now_us: int, counting: int = 0
    ) -> tuple[Statement, ...]:
        return (self._release_waiting.bind(ids=list(job_ids), now=now_us, counting=counting),)

    _cancel_waiting = Sql(
        f"WITH c AS (DELETE FROM {WAITING} WHERE id = {_IDS} RETURNING id, queue, payload, "
        "priority, 0::bigint AS attempts, max_attempts, run_at, created_at, "
        "NULL::text AS claimed_by, :reason::text AS last_error, headers, "
        "NULL::text AS unique_key, concurrency_key) "
        + _to_history("cancelled", "c", "NULL"),
        Fetch.ALL,
    )

    def cancel_waiting(
        self, job_ids: Sequence[int], reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (self._cancel_waiting.bind(ids=list(job_ids), reason=reason, now=now_us),)

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

    # Keyed by whether the items carry claim numbers.
    _ack_kept = Variants({True: _ack_kept(True), False: _ack_kept(False)})

    def ack_kept(
        self,
        worker: str,
        items: Sequence[tuple[int, int | None, str | None, str | None]],
        now_us: int,
        queue: str | None = None,
    ) -> tuple[Statement, ...]:
        claims = items[0][1] is not None if items else False
        numbers = None
        if claims:
            # An item without a claim number matches nothing (as before).
            pairs = [(job_id, claim) for job_id, claim, _, _ in items if claim is not None]
            numbers = claim_numbers(pairs)[1]
        return (
            self._ack_kept[claims].bind(
                ids=[i[0] for i in items], claims=numbers, worker=worker, now=now_us,
                results=[i[2] for i in items], queue=queue, headers=[i[3] for i in items],
            ),
        )  # fmt: skip

    _cancel_kept = Sql(
        f"WITH gone AS (DELETE FROM {JOBS} WHERE id = :job_id AND queue = :queue "
        f"RETURNING {_GONE}) "
        + _to_history("cancelled", "gone", "NULL", "COALESCE(:reason::text, last_error)"),
        Fetch.ALL,
    )

    def cancel_kept(
        self, queue: str, job_id: int, reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (self._cancel_kept.bind(job_id=job_id, queue=queue, reason=reason, now=now_us),)

    _job_outcome = Sql(reads.job_outcome(tables), Fetch.ONE)

    def job_outcome(self, job_id: int) -> Statement:
        return self._job_outcome.bind(job_id=job_id)

    _job_id_high = Sql(
        f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {SCHEMA}.\"jobs_id_seq\"",
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

    _forget_dependencies = Sql(f"DELETE FROM {DEPS} WHERE job_id = {_IDS}")

    def forget_dependencies(self, job_ids: Sequence[int]) -> Statement:
        return self._forget_dependencies.bind(ids=list(job_ids))

    # -- workflows ------------------------------------------------------------
    _create_workflow = Sql(
        f"INSERT INTO {WORKFLOWS} (name, created_at) VALUES (:name, :now) RETURNING id",
        Fetch.INSERTED_ID,
    )

    def create_workflow(self, name: str, now_us: int) -> Statement:
        return self._create_workflow.bind(name=name, now=now_us)

    _add_workflow_steps = Sql(
        f"INSERT INTO {WORKFLOW_STEPS} (workflow_id, step, job_id, position) "
        "SELECT :workflow, * FROM unnest(:steps::text[], :jobs::bigint[], :positions::int[])"
    )

    def add_workflow_steps(
        self, workflow_id: int, steps: Sequence[tuple[str, int, int]]
    ) -> Statement:
        return self._add_workflow_steps.bind(
            workflow=workflow_id, steps=[s[0] for s in steps], jobs=[s[1] for s in steps],
            positions=[s[2] for s in steps],
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

    _stale_workflows = Sql(reads.stale_workflows(tables, " FOR UPDATE SKIP LOCKED"), Fetch.ALL)

    def stale_workflows(self, cutoff_us: int, limit: int) -> Statement:
        return self._stale_workflows.bind(cutoff=cutoff_us, limit=limit)

    _forget_workflow_steps = Sql(f"DELETE FROM {WORKFLOW_STEPS} WHERE workflow_id = {_IDS}")
    _forget_workflows = Sql(f"DELETE FROM {WORKFLOWS} WHERE id = {_IDS}", Fetch.ROWCOUNT)

    def forget_workflows(self, workflow_ids: Sequence[int]) -> tuple[Statement, ...]:
        ids = list(workflow_ids)
        return self._forget_workflow_steps.bind(ids=ids), self._forget_workflows.bind(ids=ids)
