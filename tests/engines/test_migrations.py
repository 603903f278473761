"""Released migrations never change, on either engine.

A database migrated by an earlier release has run these statements; code that
now builds different text for the same version would leave such a database
different from a new one, silently. Part of the DDL is built from the
engines' rule fragments (the partial-index predicates, see ``rules.py``), so
this pins the text of every released statement: editing a fragment that a
released migration uses fails here, and the fix is to freeze the old text in
that migration (and add a new migration), not to update the pin.

When a new migration is released, add its statements' digests below.
"""

from __future__ import annotations

import hashlib

import pytest

from alkstore.engines import postgres, sqlite

# version -> sha256 (first 16 hex digits) of each statement, in order.
RELEASED = {
    "sqlite": {
        1: (
            "4a7b6f67e71a6df8", "250a50a0d3b9e2e5", "26a6079f633c9607", "247ee81d2bed9cf8",
            "da97c050217f14b3", "73a75f07235f75cb", "a34ec3f1af66e7b2", "353e86fef8b5b9dd",
            "b3de916b5b06e985", "b5590c5384b7aee2", "55fa2bcd5163e283", "6f62e55e81d89ce3",
            "1dd0b0a0a8a0b596", "68e67c1a8c6897d8", "b6d473858729b9da",
        ),
        2: ("7faff9c7573d178d",),
    },
    # For the default schema; other schemas differ only by the schema name.
    "postgres": {
        1: (
            "f523b403ad7d5d0f", "f8315d2bef19c8ba", "19dc63aeaf088e91", "554604fe541daada",
            "8936b43e4196c319", "39c097b29169c63e", "d199e913dcf1d805", "5e0f567b5c6f7f0e",
            "1c30db78d3477146", "fa09026a754b80e8", "0cf28fb71be64487", "694075b05c814491",
            "dc0764be2dfc4d6a",
        ),
        2: ("70d726b721ab6c33",),
    },
}  # fmt: skip

CURRENT = {
    "sqlite": dict(sqlite.MIGRATIONS),
    "postgres": dict(postgres.migrations()),
}


def digest(sql: str) -> str:
    return hashlib.sha256(sql.encode()).hexdigest()[:16]


@pytest.mark.parametrize("engine", sorted(RELEASED))
def test_released_migrations_keep_their_text(engine: str) -> None:
    current = CURRENT[engine]
    for version, pinned in RELEASED[engine].items():
        assert version in current, f"{engine}: released migration {version} is gone"
        statements = current[version]
        assert len(statements) == len(pinned), f"{engine} v{version}: statements added/removed"
        for i, (sql, want) in enumerate(zip(statements, pinned, strict=True)):
            assert digest(sql) == want, (
                f"{engine} v{version}, statement {i} changed (released DDL is append-only; "
                f"freeze the old text instead):\n{sql}"
            )


@pytest.mark.parametrize("engine", sorted(RELEASED))
def test_migrations_are_numbered_from_one_and_only_appended(engine: str) -> None:
    versions = list(CURRENT[engine])
    assert versions == list(range(1, len(versions) + 1))
    assert set(RELEASED[engine]) <= set(versions)


def test_postgres_migrations_differ_between_schemas_only_by_the_schema_name() -> None:
    default = postgres.migrations()
    other = postgres.migrations("app_jobs")
    assert [v for v, _ in other] == [v for v, _ in default]
    for (_, mine), (_, theirs) in zip(default, other, strict=True):
        assert [s.replace('"alkstore".', '"app_jobs".') for s in mine] == list(theirs)
