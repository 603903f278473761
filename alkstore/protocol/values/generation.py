"""The claim generation: which rules a claim obeys, as a number.

Code of a release knows the rules a claim must keep (limits, rates, and
those later releases add); a claim made by code that does not know a rule
breaks it silently. So a store records the newest claim generation of the
code that opened it for writing (the ``claim_generation`` row of its meta
table, raised by opening, in the migration's transaction), and every claim
carries its code's generation: the claim statement itself takes nothing
from a store whose generation is newer, and a claim that comes back empty
reads the store's generation to say why (``ClaimRulesChanged``). Workers of
the previous release, still running through a rolling deploy, stop
claiming the moment the new release opens the store; their producers go
on, since what they write is still valid.

A release that adds a rule every claim must obey raises
``CLAIM_GENERATION`` (with the schema migration that brings the rule). The
value is read where it is used, at each call, so a test can play an older
or newer release by setting it.
"""

from __future__ import annotations

from ..plan import Row
from .errors import ClaimRulesChanged, DatabaseError, brief

# The claim rules this code knows. 1: priority order, visibility, deadlines,
# pausing, unique keys, per-key concurrency limits, rates (release 0.1).
# 2: dependencies (release 0.2): a job that finishes settles the jobs that
# wait for it (released in its ack's transaction, or cancelled), and an ack
# takes a kept job only into history; code before it would delete a kept
# job and strand what waits for it. 3: SQLite's claim path reads the next
# due time from the claim index (schema 7 dropped the due index, which
# code of generation 2 names in that read and would fail on).
CLAIM_GENERATION: int = 3
# The meta row a store keeps it in.
META_KEY = "claim_generation"


def stored(row: Row | None) -> int:
    """The generation a store's meta row holds (0: none recorded, as in a
    store no release since 0.1 has opened for writing)."""
    if row is None or row[0] is None:
        return 0
    text = row[0]
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 9:
        raise DatabaseError(
            f"the store's claim generation is {brief(text)}, not a number: "
            "the alkstore tables were changed by something else"
        )
    return int(text)


def check(found: int) -> None:
    """``ClaimRulesChanged`` when the store's generation is newer than this code's."""
    if found > CLAIM_GENERATION:
        raise ClaimRulesChanged(found, CLAIM_GENERATION)
