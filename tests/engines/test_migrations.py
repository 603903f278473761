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
        3: (
            "9745a2c8279a84a0", "937d6c3f0f2127f9", "b863c457360abd61", "1ff3ac7593dd6986",
            "4e354d24e1c1db6a", "5d0ef4df6ad135f2", "5a6291c5064c5f68", "bdea5b50a900e125",
            "22b6ff1705751b11", "f9fe2b5a98762087", "8ce55befe582cd26", "4813cacab8077871",
            "03b8808182eefa67", "8d5b8ee5fe94b1e4", "9f5223d541f3fbcf", "2f7f351ee1b1779f",
            "c68c8258449e4e3d", "95bb64b7fe8c26eb",
        ),
        4: (
            "e667c2e2c0bd7e4a", "f67e1632d2d634d2", "1b357c74ab4c0481", "0677080a6bc8b6ac",
            "a406bee2b88f0b83", "84aa60ff7ed42c1d", "cf768f0996d9aaa2", "0a13265de9f9d649",
            "fc149d78af4a01ec", "45a654f3b5a34287", "de15b3f512c3152a", "04aaadc02df2f30f",
            "6108613b0a2b8713", "11bbe0b50e5ac853", "282500961b34d5de", "8489142b1f959582",
            "fc1bf725743d1e22", "a11b85980d5e9216", "76cf95ff7f15e8d4", "5d2bf6dbb8aed055",
            "8cbc98067b75d3f6", "2d41927df9dc2104",
        ),
        5: (
            "3e8cb26229e5e4b1",
        ),
        6: (
            "0d3ee643f752a3b8", "44ac1a7c732068a8", "62c4a2ba1e715aeb", "2f9bce34036c0ed2",
            "17eeb7db8ae0721e", "907ef39e4a5da306", "e73522d4573d1788", "c716e44e0f750a1c",
            "d6756fd1f343753d", "e59497d6614f4f28", "99abf4e123e2bbea",
        ),
        7: (
            "81470804e9f80bb2", "2dc624ca05fbae63", "125896e2c8af4f14", "f643f494deea134a",
            "00c78440f7407669",
        ),
        8: ("b008504d9ab2fde2", "01e49cdd5f67c8f7", "fac39872dd2ad363", "7ad074054d3f2520"),
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
        3: (
            "d4c6ef1be65098da", "0b4aa9d43d037657", "19880159507ac35d", "1108adacd2c0d23b",
            "0d6f37d65f095dca", "fe3ff7e39ec86900", "72b1f3f2689efc63", "6c7bf0b95a93e52a",
            "f1098fe7ddf2a60e", "8cdcbfd4f9f893cc", "0b1ae7748c611d27", "d7e9c50e099ba366",
            "8fd87733488038fb", "760ea64d0f6f46e2", "e5fd646064041fcb", "1a1b5e16e929e2ec",
            "c854a37483f84ab3", "d57c52145ebaa4de",
        ),
        4: (
            "6108e01ff30111eb", "4a4770691951ca24", "f4e2cfcbc256bd85", "785c646b4ebd4a0b",
            "e653a0176f3236c5", "57b5d560dc6a9a5d", "1af04141777bd2d0", "21e5153354aa5aeb",
            "4361e50945936289", "9cad9b1ff177ad0b", "22d9285fc10a13c2", "c322d6548e262701",
            "b4445b80f464c743", "3c95082e6bae4fb4", "b1fa44d4b4b411c3", "9dc2f203c4aa0e5e",
            "69435a93dcb13959", "798a1b832d7b9378", "04893ec4c71935f2", "373032f07f73c20a",
            "ba9a3df81e0d60d9", "6625c3aa807803b6",
        ),
        5: (
            "64b3875d5aa3151a", "5dc0d13951dbc9d0", "6313153542efee73", "eee06c7349c8853b",
            "c84403b7412ff3cb",
        ),
        6: (
            "2508747dc7590ec4", "7c81312d14ae9231", "49a839ab9d02a612", "e7319aa61316637e",
            "8617a48461a710fd", "e9429c0fc1ed3489", "d8cca51060f5961c", "4125b0e2ac2ee9f5",
            "1647ff7c872dcdd2", "5ae30ecc038305d7", "9ccbb576fc194adc", "baf0aa81a5ae314f",
            "66b9b54bee730f06",
        ),
        7: (
            "889abe045c7bb060", "4da419199da531c1", "153622d509deb9ce", "b2930c40e52a0a8e",
            "966045e9c5f2139e",
        ),
        8: (
            "43e5d1f7de0c4d5c", "108e306988f7f7ba", "91c2540ac9262f27", "57d35b423d8eb299",
            "b5568e9f00cb0b54",
        ),
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
