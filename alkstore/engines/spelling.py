"""How an engine spells the few things its SQL says differently.

The rules (:mod:`.rules`) are written once; where the two engines' SQL
differs inside a rule, the rule asks the engine's ``Spelling`` instead of
writing either engine's word. Statements render their ``:name`` parameters
through it too (:mod:`.sql`). Each field is a format string (``{}`` stands
for what it applies to), so a test can swap every field for a marker and
see exactly where the engines differ.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spelling:
    # A false boolean, compared with a boolean column.
    false: str
    # A true boolean, stored in one.
    true: str
    # Stored text read as an integer (the meta table's values are text).
    integer_cast: str
    # The larger of two values (a scalar function of two arguments).
    greatest: str
    # An upsert's proposed row, in ``ON CONFLICT ... DO UPDATE``.
    excluded: str
    # What follows an upsert's ``DO UPDATE SET ...`` to skip a write that
    # would change nothing ({} is the condition for writing): worth a
    # ``WHERE`` where every update writes a new row version (a dead tuple for
    # vacuum, changed or not), nothing where the row changes in place.
    upsert_guard: str
    # The n-th bound parameter.
    placeholder: str

    def integer(self, text: str) -> str:
        return self.integer_cast.format(text)

    def larger(self, a: str, b: str) -> str:
        return self.greatest.format(a, b)

    def update_only_if(self, condition: str) -> str:
        return self.upsert_guard.format(condition)

    def param(self, number: int) -> str:
        return self.placeholder.format(number)
