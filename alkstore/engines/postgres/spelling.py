"""How PostgreSQL spells what the rules share, and the rules in that spelling."""

from __future__ import annotations

from ..rules import Rules
from ..spelling import Spelling

SPELLING = Spelling(
    true="true",
    false="false",
    integer_cast="{}::bigint",
    greatest="GREATEST({}, {})",
    excluded="EXCLUDED",
    # Every UPDATE writes a new row version, changed or not: an upsert that
    # would change nothing skips the write (and the dead tuple it leaves).
    upsert_guard=" WHERE {}",
    placeholder="${}",
)
RULES = Rules(SPELLING)
