"""Integer arguments at the API edge.

Every integer alkstore stores or binds is a signed 64-bit value on both
engines, so every integer argument is checked against that range (or a
narrower one) before any round trip: the same ``InvalidArgument`` on SQLite
and on Postgres, never the driver's overflow error or a silently wrapped
value.
"""

from __future__ import annotations

from .errors import InvalidArgument, brief

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def check_int(value: object, what: str, *, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """``value`` as a plain ``int`` within ``[lo, hi]``; ``bool`` is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an int, got {brief(value)}")
    if not lo <= value <= hi:
        if hi == INT64_MAX:
            raise InvalidArgument(f"{what} must be an int >= {lo} that fits in 64 bits, got "
                                  f"{brief(value)}")  # fmt: skip
        raise InvalidArgument(f"{what} must be an int within [{lo}, {hi}], got {brief(value)}")
    return int(value)  # an int subclass (an IntEnum, say) is stored as what it is


def check_bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be True or False, got {brief(value)}")
    return value
