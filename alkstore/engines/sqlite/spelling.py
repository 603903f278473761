"""How SQLite spells what the rules share, and the rules in that spelling."""

from __future__ import annotations

from ..rules import Rules
from ..spelling import Spelling

SPELLING = Spelling(
    true="1",
    false="0",
    integer_cast="CAST({} AS INTEGER)",
    greatest="MAX({}, {})",
    excluded="excluded",
    # The single writer updates a row in place: a write that changes
    # nothing costs no more than the test that would skip it.
    upsert_guard="",
    # Numbered (?NNN), so a value a statement compares twice is bound once.
    placeholder="?{}",
)
RULES = Rules(SPELLING)
