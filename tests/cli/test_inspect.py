"""The inspection and steering commands, run as the real ``alkstore`` command
in a subprocess against a real SQLite file and the real Postgres server."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import trio

from alkstore import Rate, Store
from tests.backends import PG_DSN

from .support import ENGINES, Db, by_name, cli, documented, drop, make, new_db

pytestmark = pytest.mark.slow


async def fill_everything(store: Store) -> None:
    """Every kind of thing the commands show, in known states."""
    emails = store.queue("emails")
    for i in range(5):
        await emails.enqueue({"to": f"user{i}@example.com"})
    await emails.enqueue({"later": True}, delay=3600)
    claimed = await emails.claim_one("worker-1")
    assert claimed is not None
    doomed = await emails.claim_one("worker-1")
    assert doomed is not None
    await doomed.fail("SMTP 550: no such user")
    reports = store.queue("reports")
    await reports.enqueue({"r": 1})
    await reports.pause()
    orders = store.stream("orders")
    for i in range(3):
        await orders.publish({"n": i})
    await orders.save_offset("billing", 1)
    assert await store.try_lock("nightly", "host-a", 600) is not None
    await store.schedule("cleanup", "reports", "@every 1h", {"kind": "cleanup"})
    await store.schedule("digest", "reports", "0 8 * * 1", tz="Europe/Paris", catch_up="all",
                         catch_up_max=3)  # fmt: skip
    await store.schedule("ping", "reports", "@every 1m", catch_up="skip", catch_up_grace=90)
    await store.outbox("webhooks").enqueue({"url": "https://example.com/hook"})
    accounts = store.queue("accounts")  # flow control: a limit, a policy, keyed jobs
    await accounts.set_limits(concurrency_per_key=2, rate=Rate(10, per=1.5))
    await accounts.set_unique_policy(processing_blocks=False)
    await accounts.enqueue_unique({"account": 7}, "sync:7", concurrency_key="account:7")
    await accounts.enqueue({"account": 8}, concurrency_key="account:8")


@pytest.fixture(scope="module", params=ENGINES)
def filled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Db]:
    """One database per engine, filled once, that the read-only tests share."""
    db = make(new_db(request.param, tmp_path_factory.mktemp("cli")), fill_everything)
    yield db
    drop(db)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def fresh(engine: str, tmp_path: Path) -> Iterator[Db]:
    """A filled database of this test's own (for commands that change it)."""
    db = make(new_db(engine, tmp_path), fill_everything)
    yield db
    drop(db)


# -- reading ------------------------------------------------------------------


def test_queues_lists_every_queue_with_its_counts(filled: Db) -> None:
    queues = by_name(cli("queues", *filled.args, "--json").doc["queues"])
    emails = queues["emails"]
    assert (emails["ready"], emails["scheduled"], emails["processing"], emails["dead"]) == (
        3, 1, 1, 1,
    )  # fmt: skip
    assert emails["waiting"] == 0
    assert emails["kind"] == "queue" and emails["paused"] is False
    assert emails["oldest_ready_age_s"] is not None and emails["oldest_ready_age_s"] >= 0
    assert queues["reports"]["paused"] is True
    outbox = [q for q in queues.values() if q["kind"] == "outbox"]
    assert [q["display_name"] for q in outbox] == ["webhooks"]


def test_queues_shows_limits_and_unique_policy(filled: Db) -> None:
    queues = by_name(cli("queues", *filled.args, "--json").doc["queues"])
    accounts, emails = queues["accounts"], queues["emails"]
    assert accounts["limits"] == {
        "concurrency_per_key": 2, "rate": {"limit": 10, "per_seconds": 1.5}, "rate_per_key": None,
    }  # fmt: skip
    assert accounts["unique_policy"] == {"processing_blocks": False}
    assert emails["limits"] == {  # never set
        "concurrency_per_key": None, "rate": None, "rate_per_key": None,
    }  # fmt: skip
    assert emails["unique_policy"] == {"processing_blocks": True}  # the default
    table = cli("queues", *filled.args)
    assert table.code == 0, table.err
    rows = {line.split()[0]: line for line in table.out.splitlines() if line.strip()}
    assert "2 per key, 10/1.5s" in rows["accounts"] and rows["accounts"].split()[-1] == "yields"
    assert "per key" not in rows["emails"] and rows["emails"].split()[-1] == "blocks"
    assert rows["reports"].split()[-2:] == ["blocks", "paused"]


def test_job_and_jobs_show_the_flow_control_keys(filled: Db) -> None:
    jobs = cli("jobs", "accounts", *filled.args, "--json").doc["jobs"]
    keys = [(j["unique_key"], j["concurrency_key"]) for j in jobs]
    assert keys == [("sync:7", "account:7"), (None, "account:8")]
    job = cli("job", str(jobs[0]["id"]), *filled.args, "--json").doc["job"]
    assert (job["unique_key"], job["concurrency_key"]) == ("sync:7", "account:7")
    table = cli("job", str(jobs[0]["id"]), *filled.args)
    assert table.code == 0, table.err
    lines = [line.split() for line in table.out.splitlines()]
    assert ["unique", "key", "sync:7"] in lines and ["concurrency", "key", "account:7"] in lines
    listing = cli("jobs", "accounts", *filled.args)
    assert listing.code == 0 and "sync:7" in listing.out and "account:8" in listing.out
    dead = cli("jobs", "emails", *filled.args, "--state", "dead", "--json").doc["jobs"][0]
    assert (dead["unique_key"], dead["concurrency_key"]) == (None, None)


def test_the_documented_json_shapes_are_what_the_commands_print(filled: Db) -> None:
    queues_doc = documented("`alkstore queues`")
    printed = by_name(cli("queues", *filled.args, "--json").doc["queues"])["accounts"]
    assert queues_doc["queues"][0].keys() == printed.keys()
    assert queues_doc["queues"][0]["limits"].keys() == printed["limits"].keys()
    assert queues_doc["queues"][0]["unique_policy"].keys() == printed["unique_policy"].keys()
    job_doc = documented(
        "`alkstore jobs QUEUE [--state STATE] [--limit N] [--after ID] [--match TEXT]`"
    )
    printed = cli("jobs", "accounts", *filled.args, "--json").doc["jobs"][0]
    assert job_doc.keys() == printed.keys()


def test_jobs_pages_by_id_and_filters_by_state(filled: Db) -> None:
    first = cli("jobs", "emails", *filled.args, "--limit", "2", "--json").doc
    assert len(first["jobs"]) == 2 and first["next_after"] == first["jobs"][-1]["id"]
    rest = cli("jobs", "emails", *filled.args, "--after", str(first["next_after"]), "--json").doc
    ids = [j["id"] for j in first["jobs"] + rest["jobs"]]
    assert ids == sorted(ids) and len(ids) == 6 and rest["next_after"] is None
    states = {
        state: [j["id"] for j in cli("jobs", "emails", *filled.args, "--state", state,
                                     "--json").doc["jobs"]]
        for state in ("ready", "scheduled", "processing", "dead")
    }  # fmt: skip
    assert [len(states[s]) for s in ("ready", "scheduled", "processing", "dead")] == [3, 1, 1, 1]


def test_the_database_and_json_options_may_come_before_the_command(filled: Db) -> None:
    def names(doc: Any) -> list[str]:
        return [q["name"] for q in doc["queues"]]  # (ages move between calls)

    after = names(cli("queues", *filled.args, "--json").doc)
    assert names(cli("--json", "queues", *filled.args).doc) == after
    assert names(cli(*filled.args, "--json", "queues").doc) == after
    assert cli("--json", *filled.args, "jobs", "emails").doc["queue"] == "emails"


def test_the_jobs_table_says_scheduled_and_where_the_next_page_starts(filled: Db) -> None:
    """A pending job not due yet reads ``scheduled`` (as ``--state scheduled``
    selects it; JSON keeps the contract's ``pending``); a full page says how
    to get the next one, on stderr in a pipe so the rows stay rows."""
    table = cli("jobs", "emails", *filled.args, "--state", "scheduled")
    rows = [line.split() for line in table.out.splitlines()[1:] if line.strip()]
    assert [row[1] for row in rows] == ["scheduled"], table.out
    doc = cli("jobs", "emails", *filled.args, "--state", "scheduled", "--json").doc
    assert [j["state"] for j in doc["jobs"]] == ["pending"]
    page = cli("jobs", "emails", *filled.args, "--limit", "2")
    last = page.out.splitlines()[-1].split()[0]
    assert f"more: alkstore jobs emails --after {last}" in page.err
    assert "more:" not in page.out


def test_job_shows_payload_attempts_claim_holder_and_error(filled: Db) -> None:
    processing = cli("jobs", "emails", *filled.args, "--state", "processing", "--json").doc
    job_id = processing["jobs"][0]["id"]
    job = cli("job", str(job_id), *filled.args, "--json").doc["job"]
    assert job["state"] == "processing" and job["claimed_by"] == "worker-1"
    assert job["attempts"] == 1 and job["claim_expires_at"] is not None
    assert job["payload"] == {"to": "user0@example.com"}
    dead = cli("jobs", "emails", *filled.args, "--state", "dead", "--json").doc["jobs"][0]
    shown = cli("job", str(dead["id"]), *filled.args, "--json").doc["job"]
    assert shown["last_error"] == "SMTP 550: no such user" and shown["dead_reason"] == "failed"
    table = cli("job", str(dead["id"]), *filled.args)
    assert table.code == 0 and "SMTP 550" in table.out and "failed" in table.out
    (death,) = shown["attempt_history"]
    assert death["outcome"] == "failed" and death["worker"] == "worker-1"
    assert death["error"] == "SMTP 550: no such user" and death["trace"] is None
    documented_attempt = documented("`alkstore job ID [--traces]`")["job"]["attempt_history"][0]
    assert death.keys() == documented_attempt.keys()
    # The table lists it below the payload (no trace: the error was a message).
    line = next(x for x in table.out.splitlines() if x.lstrip().startswith("1 "))
    assert "failed" in line and "worker-1" in line and "SMTP 550" in line
    assert "trace of attempt" not in table.out


def _charge() -> None:
    raise ConnectionError("card service timed out")


async def fail_twice(store: Store) -> None:
    q = store.queue("payments", max_attempts=2)
    await q.enqueue({"card": "4242"})
    for _ in range(2):
        job = await q.claim_one("worker-7")
        assert job is not None
        try:
            _charge()
        except ConnectionError as exc:
            assert await job.retry(delay=0, error=exc)


def test_job_prints_the_newest_trace_or_every_one(engine: str, tmp_path: Path) -> None:
    db = make(new_db(engine, tmp_path), fail_twice)
    try:
        table = cli("job", "1", *db.args)
        assert table.code == 0
        assert table.out.count("trace of attempt") == 1 and "trace of attempt 2" in table.out
        assert "in _charge" in table.out and "ConnectionError: card service timed out" in table.out
        every = cli("job", "1", *db.args, "--traces")
        assert every.out.count("trace of attempt") == 2 and "trace of attempt 1" in every.out
        doc = cli("job", "1", *db.args, "--json").doc["job"]
        assert [a["outcome"] for a in doc["attempt_history"]] == ["retried", "max_attempts"]
        assert all("in _charge" in a["trace"] for a in doc["attempt_history"])
        assert all(a["duration_s"] >= 0 for a in doc["attempt_history"])
    finally:
        drop(db)


def test_streams_schedules_and_locks(filled: Db) -> None:
    streams = by_name(cli("streams", *filled.args, "--json").doc["streams"])
    orders = streams["orders"]
    assert orders["head_offset"] == 3 and orders["events"] == 3
    assert orders["consumers"] == [{"name": "billing", "offset": 1, "lag": 2, "protected": False}]
    schedules = by_name(cli("schedules", *filled.args, "--json").doc["schedules"])
    cleanup = schedules["cleanup"]
    assert cleanup["queue"] == "reports" and cleanup["expression"] == "@every 1h"
    assert cleanup["paused"] is False and cleanup["next_fire_at"] is not None
    assert (cleanup["tz"], cleanup["catch_up"], cleanup["catch_up_max"]) == ("UTC", "latest", None)
    digest, ping = schedules["digest"], schedules["ping"]
    assert (digest["tz"], digest["catch_up"], digest["catch_up_max"]) == ("Europe/Paris", "all", 3)
    assert (ping["catch_up"], ping["catch_up_grace_s"], ping["catch_up_max"]) == ("skip", 90, None)
    table = cli("schedules", *filled.args).out
    assert "Europe/Paris" in table and "all (max 3)" in table and "skip (grace 1m 30s)" in table
    locks = by_name(cli("locks", *filled.args, "--json").doc["locks"])
    nightly = locks["nightly"]
    assert nightly["owner"] == "host-a" and nightly["held"] is True and nightly["token"] >= 1
    assert 0 < nightly["ttl_left_s"] <= 600


def test_tables_in_a_pipe_are_plain_lines(filled: Db) -> None:
    out = cli("queues", *filled.args)
    assert out.code == 0, out.err
    lines = [line.split() for line in out.out.splitlines() if line.strip()]
    assert lines[0][:6] == ["queue", "ready", "scheduled", "waiting", "processing", "dead"]
    assert ["emails", "3", "1", "0", "1", "1"] in [row[:6] for row in lines]
    assert not any(ch in out.out for ch in "│─┃━"), "no box drawing outside a terminal"


def test_watch_prints_one_document_per_refresh(filled: Db) -> None:
    out = cli("watch", *filled.args, "--json", "--count", "2", "--interval", "0.1")
    assert out.code == 0, out.err
    docs = [orjson.loads(line) for line in out.out.splitlines()]
    assert len(docs) == 2
    assert {"at", "queues", "streams", "schedules", "locks"} <= docs[0].keys()


def test_names_that_do_not_exist_say_so(filled: Db) -> None:
    for args in (
        ("jobs", "emials"),
        ("dead", "emials"),
        ("streams", "ordres"),
        ("job", "999999"),
        ("pause", "emials"),
    ):
        out = cli(*args, *filled.args, "--json")
        assert out.code == 1, (args, out)
        assert out.out == "" and "no " in out.err, (args, out)


def test_bad_usage_exits_2(filled: Db, tmp_path: Path) -> None:
    unset = {"ALKSTORE_DSN": "", "ALKSTORE_DB": ""}
    assert cli("queues", env=unset).code == 2  # no database, none in the environment
    both = cli("queues", "--db", str(tmp_path / "x.db"), "--dsn", PG_DSN)
    assert both.code == 2 and "not both" in both.err
    assert cli("jobs", "emails", *filled.args, "--state", "lost").code == 2
    assert cli("jobs", "__alkstore_x", *filled.args).code == 2


def test_dsn_defaults_to_the_environment(tmp_path: Path) -> None:
    db = make(new_db("postgres", tmp_path), fill_everything)
    try:
        out = cli("queues", "--schema", db.location, "--json", env={"ALKSTORE_DSN": PG_DSN})
        assert "emails" in by_name(out.doc["queues"])
        schema = {"ALKSTORE_DSN": PG_DSN, "ALKSTORE_SCHEMA": db.location}
        assert "emails" in by_name(cli("queues", "--json", env=schema).doc["queues"])
        old = cli("queues", "--schema", db.location, "--json",
                  env={"ALKSTORE_DSN": "", "ALKSTORE_PG_DSN": PG_DSN})  # fmt: skip
        assert "emails" in by_name(old.doc["queues"])
        assert "$ALKSTORE_PG_DSN is deprecated: set $ALKSTORE_DSN instead" in old.err
    finally:
        drop(db)


def test_the_sqlite_file_defaults_to_the_environment(tmp_path: Path) -> None:
    db = make(new_db("sqlite", tmp_path), fill_everything)
    env = {"ALKSTORE_DSN": "", "ALKSTORE_DB": db.location, "ALKSTORE_SCHEMA": "ignored"}
    assert "emails" in by_name(cli("queues", "--json", env=env).doc["queues"])


# -- inspection never writes ------------------------------------------------------


def snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_inspection_leaves_a_sqlite_file_byte_for_byte(tmp_path: Path) -> None:
    db = make(Db("sqlite", str(tmp_path / "app.db")), fill_everything)
    before = snapshot(tmp_path)
    for args in (
        ("queues",), ("jobs", "emails"), ("job", "1"), ("dead", "emails"), ("streams",),
        ("schedules",), ("locks",), ("watch", "--count", "1"), ("migrate", "--check"),
    ):  # fmt: skip
        out = cli(*args, *db.args, "--json")
        assert out.code == 0, (args, out.err)
    after = snapshot(tmp_path)
    assert after["app.db"] == before["app.db"]
    # Reading a WAL database needs its -shm index: a reader may create it and
    # an empty -wal beside the file (SQLite's, not alkstore's), nothing else.
    assert set(after) - set(before) <= {"app.db-wal", "app.db-shm"}
    wal = tmp_path / "app.db-wal"
    assert not wal.exists() or "app.db-wal" in before or wal.stat().st_size == 0


def test_a_plain_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        conn.execute("INSERT INTO orders (total) VALUES (42)")
    conn.close()
    before = snapshot(tmp_path)
    for args in (("queues",), ("jobs", "emails"), ("streams",), ("locks",)):
        out = cli(*args, "--db", str(path))
        assert out.code == 2, (args, out)
        assert "no alkstore schema" in out.err, out.err
    assert snapshot(tmp_path) == before
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["orders"]


def test_a_missing_file_is_refused_not_created(tmp_path: Path) -> None:
    """Read-only commands and commands that change something alike: only
    ``migrate`` (and ``worker --create``) make a database."""
    purge = ("dead", "purge", "emails", "--all", "--yes")
    for args in (("queues",), ("pause", "emails"), ("prune",), purge):
        out = cli(*args, "--db", str(tmp_path / "nope.db"))
        assert out.code == 2 and "no such database file" in out.err, (args, out)
        assert list(tmp_path.iterdir()) == [], args


def test_a_newer_schema_is_refused(engine: str, tmp_path: Path) -> None:
    db = make(new_db(engine, tmp_path), fill_everything)
    try:
        set_version(db, 99)
        out = cli("queues", *db.args)
        assert out.code == 2 and "newer" in out.err, out
        assert cli("migrate", "--check", *db.args).code == 2
    finally:
        drop(db)


def set_version(db: Db, version: int) -> None:
    if db.engine == "sqlite":
        with sqlite3.connect(db.location) as conn:
            conn.execute(
                "UPDATE __alkstore_meta SET value = ? WHERE key = 'schema_version'", (str(version),)
            )
        conn.close()
    else:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(
                f"UPDATE \"{db.location}\".meta SET value = %s WHERE key = 'schema_version'",
                (str(version),),
            )


# -- steering ---------------------------------------------------------------------


async def _read(db: Db, fn: Any) -> Any:
    async with db.open() as store:
        return await fn(store)


def read(db: Db, fn: Any) -> Any:
    return trio.run(_read, db, fn)


def test_pause_and_resume(fresh: Db) -> None:
    assert cli("pause", "emails", *fresh.args, "--json").doc == {"queue": "emails", "paused": True}
    assert read(fresh, lambda s: s.queue("emails").is_paused()) is True
    assert cli("resume", "emails", *fresh.args).code == 0
    assert read(fresh, lambda s: s.queue("emails").is_paused()) is False
    assert cli("pause", "not-yet", *fresh.args).code == 1
    assert cli("pause", "not-yet", *fresh.args, "--force").code == 0
    assert read(fresh, lambda s: s.queue("not-yet").is_paused()) is True


def test_a_typo_names_the_near_queue_and_a_schedules_queue_exists(fresh: Db) -> None:
    """One rule with the dashboard (readouts.find_queue): a queue exists
    once listed or fed by a schedule; a near miss says what was meant."""
    typo = cli("pause", "emials", *fresh.args)
    assert typo.code == 1 and "no queue named 'emials' (did you mean 'emails'?)" in typo.err
    assert cli("jobs", "emials", *fresh.args).code == 1
    far = cli("jobs", "zzzzzz", *fresh.args)
    assert far.code == 1 and "did you mean" not in far.err
    read(fresh, lambda s: s.schedule("nightly-report", "reports-only", "@every 1h", None))
    assert cli("jobs", "reports-only", *fresh.args, "--json").doc["jobs"] == []
    assert cli("pause", "reports-only", *fresh.args).code == 0


def test_cancel_a_pending_job(fresh: Db) -> None:
    ready = cli("jobs", "emails", *fresh.args, "--state", "ready", "--json").doc["jobs"]
    job_id = ready[0]["id"]
    assert cli("cancel", str(job_id), *fresh.args, "--json").doc["cancelled"] is True
    assert read(fresh, lambda s: s.queue("emails").get_job(job_id)) is None
    again = cli("cancel", str(job_id), *fresh.args)
    assert again.code == 1 and "no job" in again.err
    dead = cli("jobs", "emails", *fresh.args, "--state", "dead", "--json").doc["jobs"][0]
    refused = cli("cancel", str(dead["id"]), *fresh.args)
    assert refused.code == 1 and "dead" in refused.err


def test_dead_requeue_and_purge(fresh: Db) -> None:
    dead = cli("dead", "emails", *fresh.args, "--json").doc["dead"]
    assert [d["dead_reason"] for d in dead] == ["failed"]
    job_id = dead[0]["id"]
    moved = cli("dead", "requeue", "emails", "--id", str(job_id), *fresh.args, "--json").doc
    assert moved == {"queue": "emails", "requeued": [job_id], "missing": []}
    info = read(fresh, lambda s: s.queue("emails").get_job(job_id))
    assert info.state == "pending" and info.attempts == 0
    missing = cli("dead", "requeue", "emails", "--id", str(job_id), *fresh.args)
    assert missing.code == 1

    # Kill it again, then purge: --yes is required.
    async def kill(store: Store) -> None:
        queue = store.queue("emails")
        while (job := await queue.claim_one("w")) is not None:
            if job.id == job_id:
                await job.fail("again")
                return
            await job.release()

    read(fresh, kill)
    refused = cli("dead", "purge", "emails", "--all", *fresh.args)
    assert refused.code == 2 and "--yes" in refused.err
    assert cli("dead", "purge", "emails", "--before", "1h", "--yes", *fresh.args,
               "--json").doc["purged"] == 0  # fmt: skip
    assert cli("dead", "purge", "emails", "--all", "--yes", *fresh.args,
               "--json").doc["purged"] == 1  # fmt: skip
    assert cli("dead", "emails", *fresh.args, "--json").doc["dead"] == []
    assert cli("dead", "requeue", "emails", *fresh.args).code == 2  # no selection


def test_dead_requeue_restores_concurrency_keys(fresh: Db) -> None:
    async def kill_keyed(store: Store) -> list[int]:
        q = store.queue("keyed", max_attempts=1)
        await q.set_limits(concurrency_per_key=1)
        ids = [await q.enqueue({"i": i}, concurrency_key="acct:1") for i in range(2)]
        for _ in ids:
            job = await q.claim_one("w")
            assert job is not None and await job.fail("no")
        return ids

    ids = read(fresh, kill_keyed)
    dead = cli("dead", "keyed", *fresh.args, "--json").doc["dead"]
    assert [(d["id"], d["concurrency_key"]) for d in dead] == [(i, "acct:1") for i in ids]
    moved = cli("dead", "requeue", "keyed", "--all", *fresh.args, "--json").doc
    assert moved == {"queue": "keyed", "requeued": ids, "missing": []}
    jobs = cli("jobs", "keyed", *fresh.args, "--json").doc["jobs"]
    assert [(j["id"], j["concurrency_key"]) for j in jobs] == [(i, "acct:1") for i in ids]

    async def claim_all(store: Store) -> list[int]:
        return [j.id for j in await store.queue("keyed").claim_batch("w", 10)]

    assert read(fresh, claim_all) == ids[:1]  # the limit still holds them: one at a time


def test_migrate_creates_then_checks(engine: str, tmp_path: Path) -> None:
    db = new_db(engine, tmp_path)
    try:
        assert cli("migrate", "--check", *db.args).code == 1
        if engine == "sqlite":
            assert not Path(db.location).exists()  # --check never creates the file
        done = cli("migrate", *db.args, "--json").doc
        assert done["from_version"] == 0 and done["migrated"] is True
        check = cli("migrate", "--check", *db.args, "--json").doc
        assert check["current"] is True and check["version"] == done["to_version"]
        assert cli("migrate", *db.args, "--json").doc["migrated"] is False
    finally:
        drop(db)


def test_prune_reports_what_it_removed(fresh: Db) -> None:
    doc = cli("prune", *fresh.args, "--json").doc
    assert set(doc) == {"history", "dead", "events", "notifications", "locks", "vacuumed"}
    assert all(isinstance(v, int) and v >= 0 for v in doc.values())
