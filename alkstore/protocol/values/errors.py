"""The error taxonomy of contract v1.

One base class; a subclass exists only where a caller can act differently on
it. Everything the database or driver raises that a caller cannot act on is a
``DatabaseError`` with the original exception chained as ``__cause__``.
"""

from __future__ import annotations

import reprlib

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def brief(value: object) -> str:
    """A repr for error messages: bounded in length and nesting depth, and
    safe for an int past the interpreter's int-to-str limit (4300 digits),
    whose plain repr raises ``ValueError``."""
    try:
        return _REPR.repr(value)
    except ValueError:
        return f"<{type(value).__name__} too large to show>"


class AlkstoreError(Exception):
    """Base of every error alkstore raises."""


class PayloadTooLarge(AlkstoreError):
    """A NOTIFY payload exceeds the engine's limit (Postgres: 8000 bytes)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        self.limit = limit
        self.size = size
        detail = f" ({size} bytes)" if size is not None else ""
        super().__init__(f"payload exceeds the {limit}-byte limit{detail}")


class ReservedName(AlkstoreError):
    """A consumer-supplied name starts with the reserved prefix ``__alkstore_``."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"name {brief(name)} uses the reserved prefix '__alkstore_'")


class InvalidName(AlkstoreError):
    """A name is empty, not a string, or cannot be represented faithfully."""

    def __init__(self, name: object, reason: str = "names must be non-empty strings") -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"invalid name {brief(name)}: {reason}")


class Closed(AlkstoreError):
    """The receiver, transaction or store is closed."""


class CodecError(AlkstoreError):
    """A payload could not be encoded to JSON or decoded into the requested type."""


class DatabaseError(AlkstoreError):
    """Anything else the engine reports; the driver's exception is ``__cause__``."""


class SchemaMismatch(DatabaseError):
    """The database's alkstore schema is not the version this alkstore
    uses, and it cannot (or may not) be migrated here: there is none
    (``found`` 0), an older one that a read-only store may not migrate, or a
    newer one that only a newer alkstore understands. ``found`` and
    ``expected`` are the two versions."""

    def __init__(self, found: int, expected: int, where: str) -> None:
        self.found = found
        self.expected = expected
        if found == 0:
            message = f"no alkstore schema in {where}"
        elif found < expected:
            message = (
                f"{where} holds alkstore schema version {found}, this alkstore reads "
                f"{expected}: run `alkstore migrate`"
            )
        else:
            message = (
                f"{where} is at alkstore schema version {found}, newer than this alkstore "
                f"({expected}): upgrade alkstore"
            )
        super().__init__(message)


class ClaimRulesChanged(SchemaMismatch):
    """The store's claim rules are newer than this alkstore's: a newer
    release opened it, and claims it made under rules this code does not
    know (a limit, a dependency) would break them. Claims are refused, by
    the claim statement itself; enqueues and everything else go on.
    ``found`` is the store's claim generation, ``expected`` this code's. A
    worker that meets it stops claiming, lets its running handlers finish,
    and raises it (docs/upgrading.md)."""

    def __init__(self, found: int, expected: int) -> None:
        self.found = found
        self.expected = expected
        DatabaseError.__init__(
            self,
            f"the store's claim rules are generation {found}, newer than this alkstore's "
            f"({expected}): a newer alkstore opened it, so this one may enqueue but not claim; "
            "upgrade alkstore",
        )


class CommitUnknown(DatabaseError):
    """A COMMIT was sent but its outcome cannot be known: the connection was
    lost before the answer came, or no answer came within the engine's
    bound. The work may or may not have committed; look before you redo it.
    Raised instead of a cancellation or a plain ``DatabaseError``."""

    def __init__(self, message: str, wakes: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        # Channels the transaction notified: woken locally all the same
        # (a spurious wake costs a look; a missed one costs a poll interval).
        self.wakes = wakes


class TransactionConflict(DatabaseError):
    """The database refused the transaction because of concurrent ones: a
    deadlock, a serialization failure, a lock that could not be had in time
    (on SQLite: the write lock stayed taken past ``busy_timeout``). It was
    rolled back and nothing of it committed, so running the whole
    transaction again is safe and may succeed."""


class UsageError(AlkstoreError, RuntimeError):
    """A call that cannot work where it was made, such as a store's auto-commit
    method inside that store's own transaction on SQLite (it would wait for
    the transaction it is part of). Raised instead of hanging."""


class InvalidArgument(AlkstoreError, ValueError):
    """An option is out of range (a negative delay, ``max_attempts`` below 1, ...).

    Also a ``ValueError`` so that generic argument-checking code catches it.
    """


class LockLost(AlkstoreError):
    """``hold_lock`` lost its lock (a renewal refused, or the TTL lapsed
    before one succeeded); the body was cancelled."""

    def __init__(self, name: str, token: int) -> None:
        self.name = name
        self.token = token
        super().__init__(f"lost lock {name!r} (token {token})")


class LockTimeout(AlkstoreError, TimeoutError):
    """``hold_lock(..., timeout=...)`` did not acquire the lock in time.

    Also a ``TimeoutError``, so ``except TimeoutError`` catches it.
    """

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        super().__init__(f"lock {name!r} not acquired within {timeout} s")


class JobFailed(AlkstoreError):
    """The job awaited (``Queue.result``, ``WorkflowRun.result``) died: it
    is a dead letter (``reason``: ``failed``, ``max_attempts``,
    ``expired``, ``claim_expired``; ``error``: its last error)."""

    def __init__(self, job_id: int, reason: str, error: str | None) -> None:
        self.job_id = job_id
        self.reason = reason
        self.error = error
        detail = f": {error}" if error else ""
        super().__init__(f"job {job_id} died ({reason}){detail}")


class JobCancelled(AlkstoreError):
    """The job awaited was cancelled (``Queue.cancel``, or a dependency of
    it died or was cancelled: ``reason`` says which)."""

    def __init__(self, job_id: int, reason: str | None) -> None:
        self.job_id = job_id
        self.reason = reason
        detail = f" ({reason})" if reason else ""
        super().__init__(f"job {job_id} was cancelled{detail}")


class ResultTimeout(AlkstoreError, TimeoutError):
    """``Queue.result(..., timeout=...)`` (or a workflow's ``wait``): the
    job had not finished in time. Also a ``TimeoutError``."""

    def __init__(self, what: str, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"{what} not finished within {timeout} s")
