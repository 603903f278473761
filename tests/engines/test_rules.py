"""Each semantic rule has one home, and means what the model says.

The rules (claimable, owned, exhausted, deadlines, lock held or free, ...)
are SQL fragments of ``alkstore/engines/rules.py``, each engine's through
its spelling (``engines/<engine>/spelling.py``). These tests check that:

- no other engine module writes a rule's comparison itself (so a rule edited
  in its module is edited everywhere it applies, partial indexes included);
- each engine renders every fragment, and the engines' fragments differ only
  where their spellings do; both dialects are made of the same sections,
  which define the protocol's methods in the protocol's order (the layout
  that lets the two engines be read side by side);
- the statements that must use a partial index carry its predicate;
- evaluated by each engine on every combination of column values a live row
  can hold, each fragment selects exactly the rows the reference model's
  predicate selects (``tests/model.py``), and the sweep's two probes
  plus the core's ``sweep_decision`` bury exactly what the model buries.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import pq

from alkstore.engines import postgres, sqlite
from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.postgres import spelling as pg_spelling
from alkstore.engines.rules import Rules
from alkstore.engines.spelling import Spelling
from alkstore.engines.sqlite import SqliteDialect
from alkstore.engines.sqlite import spelling as lite_spelling
from alkstore.protocol.dialect import STATE_PENDING, STATE_PROCESSING, Dialect
from alkstore.protocol.plan import Fetch, Statement
from alkstore.protocol.plans.claim import SweepCandidate, sweep_decision
from alkstore.runner.postgres.wire import Wire
from tests.model import (
    DeadJob,
    LiveJob,
    LockModel,
    LockState,
    QueueModel,
    ScheduleState,
    StreamModel,
)

from ..backends import BACKENDS, PG_DSN, selected_backends

ENGINES_DIR = Path(__file__).resolve().parents[2] / "alkstore" / "engines"
ENGINES = sorted({BACKENDS[b].engine for b in selected_backends()})
RULES: dict[str, Rules] = {"sqlite": lite_spelling.RULES, "postgres": pg_spelling.RULES}
SPELLINGS: dict[str, Spelling] = {
    "sqlite": lite_spelling.SPELLING, "postgres": pg_spelling.SPELLING,
}  # fmt: skip

# -- one home ------------------------------------------------------------------

# Comparisons only a rule makes. (Assignments such as ``SET visible_at = :until``
# or ``claims = claims + 1`` are not rules and do not match.)
PARAM = r"(\?|\$\d|:[a-z])"
RULE_SHAPED = [
    re.compile(r"\b(attempts|visible_at|expires_at|next_fire_at)\s*(<=|>=|<|>)"),
    re.compile(r"\b(expires_at|owner)\s+IS\s+(NOT\s+)?NULL"),
    re.compile(rf"\bclaims\s*=\s*{PARAM}"),
    re.compile(rf"\btoken\s*=\s*{PARAM}"),
    re.compile(rf"(?<!SET )\bnext_fire_at\s*=\s*{PARAM}"),
    re.compile(r'\b(GREATEST|MAX)\((\w+\.)?"offset"'),
    re.compile(r"\bpriority DESC\b"),
    re.compile(r"\bAND paused\b"),
    re.compile(r"\bprune_at\s*(<=|>=|<|>)"),
    re.compile(r"(?<!SET )\b(keep|done)\s*=\s*(0|1|false|true)\b"),
    re.compile(r"\bremaining\s*(<=|>=|<|>)"),
]


def string_constants(path: Path) -> Iterator[tuple[int, str]]:
    """Every string literal of a module (f-string parts included), docstrings excepted."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_text and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_rule_is_written_outside_its_rules_module() -> None:
    checked = 0
    offenders = []
    for path in sorted(ENGINES_DIR.rglob("*.py")):
        if path == ENGINES_DIR / "rules.py":
            continue
        checked += 1
        for lineno, text in string_constants(path):
            for pattern in RULE_SHAPED:
                if pattern.search(text):
                    offenders.append(f"{path.relative_to(ENGINES_DIR)}:{lineno}: {text!r}")
    assert checked >= 20
    assert not offenders, "write these with the fragments of rules.py:\n" + "\n".join(offenders)


def public_rules() -> list[str]:
    """The fragments of ``Rules``: its constants and its methods, in order."""
    return [
        name
        for name, value in vars(Rules).items()
        if not name.startswith("_") and (name.isupper() or inspect.isfunction(value))
    ]


def rendered_rules(rules: Rules) -> dict[str, str]:
    """Every fragment of ``rules``, each input a parameter of its own name;
    the fragments with a ``row`` rendered for a row alias too."""
    out = {}
    for name in public_rules():
        value = getattr(rules, name)
        if not callable(value):
            out[name] = value
            continue
        params = inspect.signature(value).parameters
        args = [
            "r" if p.name == "row" else f":{p.name}"
            for p in params.values()
            if p.default is p.empty
        ]
        out[name] = value(*args)
        if "row" in params and params["row"].default == "":
            out[f"{name}(row)"] = value(*args, row="r")
    return out


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_rule_shapes_are_the_rules(engine: str) -> None:
    """The patterns above are live: each matches a fragment of the rules module."""
    fragments = rendered_rules(RULES[engine]).values()
    for pattern in RULE_SHAPED:
        assert any(pattern.search(f) for f in fragments), pattern.pattern


def marker(field: str) -> str:
    """A marker naming a field of the spelling, with as many slots for its
    arguments (between bars) as either engine's value of the field takes."""
    slots = max(getattr(s, field).count("{}") for s in SPELLINGS.values())
    return f"⟨{field}" + "".join(" | {}" if i else " {}" for i in range(slots)) + "⟩"


MARKED = Spelling(**{f.name: marker(f.name) for f in dataclasses.fields(Spelling)})
INNERMOST_MARK = re.compile(r"⟨(\w+)((?: [^⟨⟩]*)?)⟩")


def spelled(text: str, spelling: Spelling) -> str:
    """``text``, rendered with ``MARKED``, as ``spelling`` spells it."""
    while (mark := INNERMOST_MARK.search(text)) is not None:
        args = mark[2][1:].split(" | ") if mark[2] else []
        word = getattr(spelling, mark[1]).format(*args)
        text = text[: mark.start()] + word + text[mark.end() :]
    return text


def test_each_engine_renders_every_fragment_and_differs_only_in_its_spelling() -> None:
    """One rules module serves both engines: each renders every fragment, and
    a fragment's text on an engine is its text with every spelling marked,
    spelled the engine's way (a fragment that branched on its engine
    otherwise than through the spelling would differ here). Every field of
    the spelling is an engine difference, and every one but the placeholder
    (the statements' own) is a fragment's."""
    marked = rendered_rules(Rules(MARKED))
    assert len(marked) >= 40
    for engine, rules in RULES.items():
        assert rendered_rules(rules) == {
            name: spelled(text, SPELLINGS[engine]) for name, text in marked.items()
        }, engine
    fields = [f.name for f in dataclasses.fields(Spelling)]
    lite, pg = SPELLINGS["sqlite"], SPELLINGS["postgres"]
    assert all(getattr(lite, f) != getattr(pg, f) for f in fields)
    used = {m for text in marked.values() for m in re.findall(r"⟨(\w+)", text)}
    assert used == set(fields) - {"placeholder"}


def protocol_methods() -> list[str]:
    return [n for n, v in vars(Dialect).items() if inspect.isfunction(v) and not n.startswith("_")]


SECTIONS = [
    "wakes", "enqueue", "claims", "settling", "queues", "inspection", "streams", "schedules",
    "locks", "dependencies", "attempts",
]  # fmt: skip


# Sections that hold an engine-only protocol instead of a part of ``Dialect``.
ENGINE_ONLY = {"SqliteDialect": set(), "PostgresDialect": {"vacuum"}}


def sections(cls: type) -> dict[str, list[str]]:
    """Each section module of a dialect, with the protocol methods it defines
    (the engine-only sections left out)."""
    methods = set(protocol_methods())
    return {
        base.__module__.rsplit(".", 1)[1]: [n for n in vars(base) if n in methods]
        for base in cls.__bases__
        if base.__module__.rsplit(".", 1)[1] not in ENGINE_ONLY[cls.__name__]
    }


@pytest.mark.parametrize("cls", [SqliteDialect, PostgresDialect])
def test_an_engine_only_section_defines_no_dialect_method(cls: type) -> None:
    methods = set(protocol_methods())
    for base in cls.__bases__:
        if base.__module__.rsplit(".", 1)[1] in ENGINE_ONLY[cls.__name__]:
            assert methods.isdisjoint(vars(base)), base


@pytest.mark.parametrize("cls", [SqliteDialect, PostgresDialect])
def test_the_dialects_define_the_protocol_methods_in_its_order(cls: type) -> None:
    assert vars(cls).keys().isdisjoint(protocol_methods())
    ours = [name for names in sections(cls).values() for name in names]
    assert ours == protocol_methods()


def test_both_dialects_have_the_same_sections_in_the_same_order() -> None:
    """Each engine's dialect is one module per section of the protocol, the
    same modules on both engines, defining the same methods: what one engine
    does for a method is found where the other's is."""
    lite, pg = sections(SqliteDialect), sections(PostgresDialect)
    assert list(lite) == list(pg) == SECTIONS
    assert lite == pg
    for engine in ("sqlite", "postgres"):
        for section in SECTIONS:
            assert (ENGINES_DIR / engine / f"{section}.py").is_file()


# -- partial indexes -----------------------------------------------------------

INDEX = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+)\s+ON [^(]+\(([^)]*)\)(?:\s+WHERE (.+))?$")


def indexes(statements: tuple[str, ...]) -> dict[str, tuple[str, str | None]]:
    out = {}
    for sql in statements:
        m = INDEX.match(" ".join(sql.split()))
        if m:
            out[m[1].removeprefix("__alkstore_")] = (m[2], m[3])
    return out


def flat(statement: Statement) -> str:
    return " ".join(statement.sql.split())


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_statements_carry_the_predicates_of_their_partial_indexes(engine: str) -> None:
    """A partial index serves a statement only if the statement's WHERE
    implies the index's (SQLite: contains its terms): the same fragment on
    both sides. SQLite refuses an INDEXED BY it cannot honour; Postgres
    would silently scan the table instead."""
    r = RULES[engine]
    d: Any = SqliteDialect() if engine == "sqlite" else PostgresDialect()
    v1 = dict(sqlite.MIGRATIONS if engine == "sqlite" else postgres.migrations())[1]
    idx = indexes(v1)
    assert idx["jobs_claim"] == (f"queue, {r.CLAIM_ORDER}", r.ATTEMPTS_LEFT)
    assert idx["jobs_due"] == ("queue, visible_at", r.ATTEMPTS_LEFT)
    assert idx["jobs_expiry"] == ("expires_at", r.HAS_DEADLINE)
    assert idx["jobs_exhausted"] == ("visible_at", r.EXHAUSTED)
    claim = flat(d.claim("q", "w", 1, 0, 1, 1))
    assert r.ATTEMPTS_LEFT in claim and f"ORDER BY {r.CLAIM_ORDER}" in claim
    assert r.ATTEMPTS_LEFT in flat(d.next_due("q"))
    for queue in (None, "q"):
        sweep = flat(d.sweep_candidates(queue, 0, 10))
        assert r.HAS_DEADLINE in sweep and r.EXHAUSTED in sweep


def unnumbered(sql: str) -> str:
    """``sql`` with every parameter, named or numbered, as ``?``."""
    return re.sub(r"\?\d+|\$\d+|:[a-z]\w*", "?", " ".join(sql.split()))


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_read_models_and_the_scheduler_use_the_rules(engine: str) -> None:
    """What inspection reports is decided by the rules the operations go
    by: ready and scheduled are the stats' columns, held is the complement
    of free, and neither a tick nor the scheduler's sleep looks at a paused
    schedule (its passed fire time would otherwise wake it at once, forever)."""
    r = RULES[engine]
    d: Any = SqliteDialect() if engine == "sqlite" else PostgresDialect()

    def uses(statement: Statement, fragment: str) -> bool:
        return unnumbered(fragment) in unnumbered(statement.sql)

    summary = d.queue_summary("q", 0)
    assert uses(summary, r.claimable(":now")) and uses(summary, r.hidden(":now"))
    assert uses(d.job_page("q", "ready", 0, 10, 0), r.claimable(":now"))
    assert uses(d.job_page("q", "scheduled", 0, 10, 0), r.hidden(":now"))
    assert uses(d.list_locks(0), f"NOT {r.lock_free(':now')}")
    assert uses(d.due_schedules(0, 10), r.schedule_due(":now"))
    assert uses(d.next_schedule_time(), r.SCHEDULE_RUNNING)
    assert uses(d.resume_schedule("n", 0, 1), r.fire_time_unchanged(":fire_at"))


# -- the rules mean what the model says ---------------------------------------

NOW = 1_000
W, C = "w", 2  # the worker and claim number asked about


class Db:
    """Runs statements on one engine: an in-memory SQLite database, or a
    Postgres session (temporary tables only), the way the drivers bind."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        if engine == "sqlite":
            self.lite = sqlite3.connect(":memory:")
        else:
            self.pg = pq.PGconn.connect(PG_DSN.encode())
            assert self.pg.status == pq.ConnStatus.OK, self.pg.error_message
            self.wire = Wire(self.pg)

    def ph(self, n: int) -> str:
        """The engine's n-th placeholder (SQLite's are all ``?``)."""
        return "?" if self.engine == "sqlite" else f"${n}"

    def run(self, sql: str, *params: Any, fetch: Fetch = Fetch.ALL) -> Any:
        if self.engine == "sqlite":
            cur = self.lite.execute(sql, params)
            return cur.fetchall() if fetch is Fetch.ALL else None
        statement = Statement(sql, params, fetch)
        self.wire.send(statement)
        results = []
        while (res := self.pg.get_result()) is not None:
            results.append(res)
        return self.wire.result(results[0], fetch)

    def ids(self, where: str, *params: Any, table: str = "t") -> set[int]:
        return {int(r[0]) for r in self.run(f"SELECT id FROM {table} WHERE {where}", *params)}

    def close(self) -> None:
        if self.engine == "sqlite":
            self.lite.close()
        else:
            self.pg.finish()


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest) -> Iterator[Db]:
    conn = Db(request.param)
    yield conn
    conn.close()


def literal(value: object) -> str:
    return "NULL" if value is None else f"'{value}'" if isinstance(value, str) else str(value)


def reachable_jobs() -> list[LiveJob]:
    """Every combination of the columns the job rules read, as a live row can
    hold them: a pending row has no claimer; a processing row has one, a
    claim number and at least one attempt; attempts never exceed
    max_attempts; and a pending row with no attempts left is visible (only a
    release without refund makes one, and it makes it due at once)."""
    jobs = []
    combos = itertools.product(
        ("pending", "processing"),
        (None, "w", "x"),
        (0, 1, 2, 3),  # claims
        ((0, 1), (1, 1), (0, 3), (2, 3), (3, 3)),  # (attempts, max_attempts)
        (NOW - 1, NOW, NOW + 1),  # visible_at
        (None, NOW - 1, NOW, NOW + 1),  # expires_at
    )
    for state, worker, claims, (attempts, max_attempts), visible, expires in combos:
        if state == "pending" and worker is not None:
            continue
        if state == "processing" and (worker is None or claims == 0 or attempts == 0):
            continue
        if state == "pending" and attempts >= max_attempts and visible > NOW:
            continue
        jobs.append(
            LiveJob(
                id=len(jobs) + 1, queue="q", payload=None, priority=0, attempts=attempts,
                max_attempts=max_attempts, run_at_us=0, created_at_us=0,
                expires_at_us=expires, claimed_by=worker, visible_at_us=visible, state=state,
                last_error=None, claims=claims,
            )
        )  # fmt: skip
    return jobs


def load_jobs(db: Db, jobs: list[LiveJob]) -> None:
    text = 'text COLLATE "C"' if db.engine == "postgres" else "TEXT"
    db.run(
        f"CREATE TEMP TABLE t (id bigint, state smallint, claimed_by {text}, claims bigint, "
        "attempts bigint, max_attempts bigint, visible_at bigint, expires_at bigint)",
        fetch=Fetch.NONE,
    )
    values = ", ".join(
        "(" + ", ".join(literal(v) for v in (
            j.id, STATE_PENDING if j.state == "pending" else STATE_PROCESSING, j.claimed_by,
            j.claims, j.attempts, j.max_attempts, j.visible_at_us, j.expires_at_us,
        )) + ")"
        for j in jobs
    )  # fmt: skip
    db.run(f"INSERT INTO t VALUES {values}", fetch=Fetch.NONE)


def test_job_rules_select_what_the_model_selects(db: Db) -> None:
    r = RULES[db.engine]
    jobs = reachable_jobs()
    assert len(jobs) > 200
    load_jobs(db, jobs)

    def model(pred: Any) -> set[int]:
        return {j.id for j in jobs if pred(j)}

    p1, p2, p3 = db.ph(1), db.ph(2), db.ph(3)
    now2 = (NOW, NOW) if db.engine == "sqlite" else (NOW,)
    assert db.ids(r.ATTEMPTS_LEFT) == model(lambda j: j.attempts < j.max_attempts)
    assert db.ids(r.EXHAUSTED) == model(lambda j: j.attempts >= j.max_attempts)
    assert db.ids(r.HAS_DEADLINE) == model(lambda j: j.expires_at_us is not None)
    assert db.ids(r.visible(p1), NOW) == model(lambda j: j.visible_at_us <= NOW)
    assert db.ids(r.hidden(p1), NOW) == model(lambda j: j.visible_at_us > NOW)
    assert db.ids(r.deadline_passed(p1), NOW) == model(lambda j: j.deadline_passed(NOW))
    assert db.ids(r.before_deadline(p1), NOW) == model(lambda j: not j.deadline_passed(NOW))
    assert db.ids(r.claimable(p1), *now2) == model(lambda j: j.claimable(NOW))
    assert db.ids(r.no_live_claim(p1), NOW) == model(lambda j: not j.claim_live(NOW))
    assert db.ids(r.owned(p1, p2, p3), W, C, NOW) == model(lambda j: j.owned_by(W, C, NOW))
    # Without the claim number (the batch forms): the worker's live claim.
    assert db.ids(r.owned(p1, None, p2), W, NOW) == model(
        lambda j: j.claim_live(NOW) and j.claimed_by == W
    )
    # The queue_counts columns, as QueueModel.stats counts them.
    stats = QueueModel()
    stats.jobs = {j.id: j for j in jobs}
    counted = stats.stats("q", NOW)
    pending = f"state = {STATE_PENDING}"
    assert len(db.ids(f"{pending} AND {r.claimable(p1)}", *now2)) == counted.ready
    assert len(db.ids(f"{pending} AND {r.hidden(p1)}", NOW)) == counted.scheduled


def test_the_sweep_probes_and_decision_bury_what_the_model_buries(db: Db) -> None:
    r = RULES[db.engine]
    jobs = reachable_jobs()
    load_jobs(db, jobs)
    by_id = {j.id: j for j in jobs}
    now2 = (NOW, NOW) if db.engine == "sqlite" else (NOW,)
    candidates = db.ids(r.sweep_expired(db.ph(1)), *now2) | db.ids(
        r.sweep_exhausted(db.ph(1)), NOW
    )
    model = QueueModel()
    buried = {}
    for job_id in candidates:
        j = by_id[job_id]
        state = STATE_PENDING if j.state == "pending" else STATE_PROCESSING
        c = SweepCandidate(
            j.id, state, j.visible_at_us, j.expires_at_us, j.attempts, j.max_attempts
        )
        if (reason := sweep_decision(c, NOW)) is not None:
            buried[job_id] = reason
    expected = {
        j.id: reason for j in jobs if (reason := model.sweep_reason(j, NOW)) is not None
    }
    assert buried == expected
    assert len(expected) > 20
    # The first probe leaves live claims out (they are never buried, and a
    # page of them would hide what is behind it).
    assert not any(by_id[i].claim_live(NOW) for i in db.ids(r.sweep_expired(db.ph(1)), *now2))


def test_schedule_rules_select_what_the_model_selects(db: Db) -> None:
    r = RULES[db.engine]
    flag = "boolean" if db.engine == "postgres" else "INTEGER"
    db.run(
        f"CREATE TEMP TABLE s (id bigint, next_fire_at bigint, paused {flag})", fetch=Fetch.NONE
    )
    schedules = {
        i: ScheduleState(at, paused)
        for i, (at, paused) in enumerate(
            itertools.product((NOW - 1, NOW, NOW + 1), (False, True)), start=1
        )
    }
    paused = (lambda p: str(p).lower()) if db.engine == "postgres" else int
    values = ", ".join(
        f"({i}, {s.next_fire_at_us}, {paused(s.paused)})" for i, s in schedules.items()
    )
    db.run(f"INSERT INTO s VALUES {values}", fetch=Fetch.NONE)

    def model(pred: Any) -> set[int]:
        return {i for i, s in schedules.items() if pred(s)}

    assert db.ids(r.SCHEDULE_RUNNING, table="s") == model(ScheduleState.running)
    assert db.ids(r.schedule_due(db.ph(1)), NOW, table="s") == model(lambda s: s.due(NOW))
    assert db.ids(r.fire_time_unchanged(db.ph(1)), NOW, table="s") == model(
        lambda s: s.next_fire_at_us == NOW
    )
    assert len(model(lambda s: s.due(NOW))) == 2  # not vacuous


def test_lock_rules_select_what_the_model_selects(db: Db) -> None:
    r = RULES[db.engine]
    text = 'text COLLATE "C"' if db.engine == "postgres" else "TEXT"
    db.run(
        f"CREATE TEMP TABLE l (id bigint, owner {text}, token bigint, expires_at bigint)",
        fetch=Fetch.NONE,
    )
    locks = {
        i: LockState(owner, token, expires)
        for i, (owner, token, expires) in enumerate(
            itertools.product((None, "a", "b"), (1, 2), (0, NOW - 1, NOW, NOW + 1)), start=1
        )
    }
    values = ", ".join(
        f"({i}, {literal(s.owner)}, {s.token}, {s.expires_at_us})" for i, s in locks.items()
    )
    db.run(f"INSERT INTO l VALUES {values}", fetch=Fetch.NONE)
    p1, p2, p3 = db.ph(1), db.ph(2), db.ph(3)

    def model(pred: Any) -> set[int]:
        return {i for i, s in locks.items() if pred(s)}

    assert db.ids(r.lock_free(p1), NOW, table="l") == model(lambda s: not s.held(NOW))
    for owner, token in itertools.product(("a", "b"), (1, 2)):
        assert db.ids(r.lock_held(p1, p2, p3), owner, token, NOW, table="l") == model(
            lambda s, o=owner, t=token: s.held(NOW) and s.owner == o and s.token == t
        )
        # The token an acquisition by ``owner`` leaves: LockModel.try_lock's.
        rows = db.run(f"SELECT id, {r.fencing_token(p1, p2)} FROM l", owner, NOW)
        assert {int(i): int(t) for i, t in rows} == {
            i: s.token if s.held(NOW) and s.owner == owner else s.token + 1
            for i, s in locks.items()
        }


# -- retention ---------------------------------------------------------------


def test_retention_rules_select_what_the_model_selects(db: Db) -> None:
    """Per-queue settings (history_retention, dead_prune_at) and what the
    prune deletes (prune_due) agree with ``QueueModel``'s retention."""
    r = RULES[db.engine]
    p1, p2 = db.ph(1), db.ph(2)
    text = 'text COLLATE "C"' if db.engine == "postgres" else "TEXT"
    db.run(f"CREATE TEMP TABLE queues (name {text}, history_us bigint, dead_us bigint)",
           fetch=Fetch.NONE)  # fmt: skip
    model = QueueModel()
    settings = {"kept": (5, None), "dying": (None, 7), "both": (3, 4), "off": (None, None)}
    for name, (history_us, dead_us) in settings.items():
        db.run(f"INSERT INTO queues VALUES ({literal(name)}, {literal(history_us)}, "
               f"{literal(dead_us)})", fetch=Fetch.NONE)  # fmt: skip
        model.set_retention(name, history_us, dead_us)
    for name in [*settings, "never"]:
        ((kept,),) = db.run(f"SELECT {r.history_retention('queues', p1)}", name)
        assert kept == model.retention.get(name, (None, None))[0], name
        ((prune_at,),) = db.run(f"SELECT {r.dead_prune_at(p1, 'queues', p2)}", NOW, name)
        dead_us = model.retention.get(name, (None, None))[1]
        assert prune_at == (None if dead_us is None else NOW + dead_us), name
    # prune_due: history rows always have a prune time; dead letters may not.
    db.run("CREATE TEMP TABLE p (id bigint, prune_at bigint)", fetch=Fetch.NONE)
    times = {1: None, 2: NOW - 1, 3: NOW, 4: NOW + 1}
    db.run("INSERT INTO p VALUES " + ", ".join(f"({i}, {literal(t)})" for i, t in times.items()),
           fetch=Fetch.NONE)  # fmt: skip
    for job_id, prune_at in times.items():
        model.dead[job_id] = DeadJob(
            id=job_id, queue="q", payload=None, priority=0, attempts=1, max_attempts=1,
            run_at_us=0, created_at_us=0, expires_at_us=None, claimed_by=None, last_error=None,
            reason="failed", died_at_us=0, prune_at_us=prune_at,
        )  # fmt: skip
    before = set(model.dead)
    model.prune(NOW)
    assert db.ids(r.prune_due(p1), NOW, table="p") == before - set(model.dead) == {2, 3}


def test_lock_pruning_rules_select_what_the_model_selects(db: Db) -> None:
    """lock_free_since picks the rows ``LockModel.prune`` drops, and a new
    row's token (new_lock_token) is one above the floor it raised."""
    r = RULES[db.engine]
    text = 'text COLLATE "C"' if db.engine == "postgres" else "TEXT"
    db.run(f"CREATE TEMP TABLE l (id bigint, owner {text}, token bigint, expires_at bigint)",
           fetch=Fetch.NONE)  # fmt: skip
    locks = {
        i: LockState(owner, token, expires)
        for i, (owner, token, expires) in enumerate(
            itertools.product((None, "a"), (1, 4), (0, NOW - 1, NOW, NOW + 1)), start=1
        )
    }
    values = ", ".join(
        f"({i}, {literal(s.owner)}, {s.token}, {s.expires_at_us})" for i, s in locks.items()
    )
    db.run(f"INSERT INTO l VALUES {values}", fetch=Fetch.NONE)
    model = LockModel()
    model.locks = {str(i): s for i, s in locks.items()}
    cutoff = NOW - 1
    stale = db.ids(r.lock_free_since(db.ph(1)), cutoff, table="l")
    assert stale == {i for i, s in locks.items() if s.free_since(cutoff)}
    assert not any(locks[i].held(cutoff) for i in stale)  # a held lock never qualifies
    db.run(f"CREATE TEMP TABLE meta (key {text} PRIMARY KEY, value text NOT NULL)",
           fetch=Fetch.NONE)  # fmt: skip
    ((first,),) = db.run(f"SELECT {r.new_lock_token('meta')}")
    assert first == LockModel().try_lock("x", "a", NOW, 1) == 1
    assert model.prune(cutoff) == len(stale)
    db.run(f"INSERT INTO meta VALUES ('{r.TOKEN_FLOOR_KEY}', '{model.floor}')", fetch=Fetch.NONE)
    ((after,),) = db.run(f"SELECT {r.new_lock_token('meta')}")
    assert after == model.try_lock("fresh", "a", NOW, 1) == 5


def test_stream_retention_rules_select_what_the_model_selects(db: Db) -> None:
    """within_age keeps what ``StreamModel.prunable`` calls young, and
    protected_floor is the lowest saved offset of a protected consumer."""
    r = RULES[db.engine]
    text = 'text COLLATE "C"' if db.engine == "postgres" else "TEXT"
    keep = "boolean" if db.engine == "postgres" else "INTEGER"
    db.run(f'CREATE TEMP TABLE o (stream {text}, consumer {text}, "offset" bigint, keep {keep})',
           fetch=Fetch.NONE)  # fmt: skip
    model = StreamModel()
    rows = [("s", "a", 5, True), ("s", "b", 2, True), ("s", "c", 1, False), ("t", "a", 0, True)]
    for stream, consumer, offset, protected in rows:
        flag = ("true" if protected else "false") if db.engine == "postgres" else int(protected)
        db.run(f"INSERT INTO o VALUES ('{stream}', '{consumer}', {offset}, {flag})",
               fetch=Fetch.NONE)  # fmt: skip
        model.save_offset(stream, consumer, offset)
        if protected:
            model.protect(stream, consumer)
    for stream in ("s", "t", "u"):
        ((floor,),) = db.run(f"SELECT {r.protected_floor('o', db.ph(1))}", stream)
        held = [model.get_offset(s, c) for s, c in model.protected if s == stream]
        assert floor == (min(held) if held else None), stream
    db.run("CREATE TEMP TABLE t (id bigint, created_at bigint)", fetch=Fetch.NONE)
    db.run("INSERT INTO t VALUES (1, 0), (2, 99), (3, 100), (4, 101)", fetch=Fetch.NONE)
    model.set_retention("e", 10, None)
    for created in (0, 99, 100, 101):
        model.publish("e", None, now_us=created)
    # now 110, max age 10: cutoff 100; the events before the first young one go.
    assert db.ids(r.within_age(db.ph(1)), 100) == {3, 4}
    assert model.prunable("e", 110) == [1, 2]
