"""``alkstore.readouts.find_jobs``, which ``alkstore jobs --match`` and the
dashboard's job list share: a search reads the queue a page at a time and
never more than its bound, and its answer says where to go on from."""

from __future__ import annotations

from pathlib import Path

import trio

from alkstore.io_trio import open_sqlite
from alkstore.readouts import find_jobs

from .support import cli


def test_a_search_reads_at_most_its_bound_and_says_where_to_go_on(tmp_path: Path) -> None:
    """Invariant: the jobs found match, in id order; ``next_after`` resumes
    exactly where the search stopped; together the pages find every match."""

    async def main() -> None:
        async with open_sqlite(str(tmp_path / "app.db")) as store:
            q = store.queue("q")
            ids = await q.enqueue_batch([{"n": i, "tag": "hit" if i % 7 == 0 else "x"}
                                         for i in range(1_200)])  # fmt: skip
            hits = [job_id for i, job_id in enumerate(ids) if i % 7 == 0]
            first = await find_jobs(q, "HIT", state=None, after=None, limit=1_000, scan=600)
            assert first.scanned == 600 and first.next_after == ids[599]
            assert [j.id for j in first.jobs] == [h for h in hits if h <= ids[599]]
            rest = await find_jobs(q, "hit", state=None, after=first.next_after, limit=1_000)
            assert rest.next_after is None and rest.scanned == 600  # read to the end
            assert [j.id for j in first.jobs + rest.jobs] == hits
            few = await find_jobs(q, "hit", state=None, after=None, limit=3)
            assert [j.id for j in few.jobs] == hits[:3] and few.next_after == hits[2]

    trio.run(main)


def test_jobs_match_on_the_command_line(tmp_path: Path) -> None:
    db = str(tmp_path / "app.db")

    async def fill() -> None:
        async with open_sqlite(db) as store:
            await store.queue("emails").enqueue_batch([{"to": "ada@example.com"},
                                                       {"to": "bob@example.com"}])  # fmt: skip

    trio.run(fill)
    doc = cli("jobs", "emails", "--db", db, "--match", "BOB", "--json").doc
    assert [j["payload"] for j in doc["jobs"]] == [{"to": "bob@example.com"}]
    assert doc["match"] == "BOB" and doc["scanned"] == 2 and doc["next_after"] is None
    table = cli("jobs", "emails", "--db", db, "--match", "ada")
    assert "ada@example.com" in table.out and "bob@" not in table.out
