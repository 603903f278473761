"""Name rules shared by every engine: the reserved prefix and non-empty names."""

from __future__ import annotations

from .errors import InvalidName, ReservedName

RESERVED_PREFIX = "__alkstore_"
LISTENER_RECONNECTED = "__alkstore_listener_reconnected__"

# Longest name accepted anywhere. Engines map names to storage themselves (a
# name is always data, never an identifier), so this bound exists only to keep
# a runaway string from becoming an index key.
MAX_NAME_LENGTH = 1024


def check_name(name: object, kind: str = "name") -> str:
    """Validate a consumer-supplied channel/stream/queue/lock/outbox name."""
    name = check_identifier(name, kind)
    if name.startswith(RESERVED_PREFIX):
        raise ReservedName(name)
    return name


def check_identifier(name: object, kind: str = "name") -> str:
    """Validate a consumer-local identifier (worker id, lock owner, stream consumer).

    These are not shared namespaces, so the reserved prefix is allowed.
    """
    if not isinstance(name, str):
        raise InvalidName(name, f"{kind} must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidName(name, f"{kind} must be non-empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(name, f"{kind} is longer than {MAX_NAME_LENGTH} characters")
    if "\x00" in name:
        raise InvalidName(name, f"{kind} contains a NUL character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidName(name, f"{kind} is not valid Unicode text") from exc
    return name


def check_key(key: object) -> str:
    """A stream key is metadata: when present it must be a non-empty string."""
    return check_identifier(key, "stream key")


_OUTBOX_QUEUE = f"{RESERVED_PREFIX}outbox:"


def outbox_queue_name(outbox: str) -> str:
    """The engine-derived queue behind an outbox; reserved, so no consumer collides."""
    return f"{_OUTBOX_QUEUE}{outbox}"


def outbox_of(queue: str) -> str | None:
    """The outbox whose queue ``queue`` is, or None for an ordinary queue."""
    return queue[len(_OUTBOX_QUEUE) :] if queue.startswith(_OUTBOX_QUEUE) else None


_QUEUE_CHANNEL = f"{RESERVED_PREFIX}q:"


def queue_channel(queue: str) -> str:
    """Internal wake channel that enqueues into ``queue`` notify."""
    return f"{_QUEUE_CHANNEL}{queue}"


def queue_of_channel(channel: str) -> str | None:
    """The queue whose wake channel ``channel`` is, or None for another channel."""
    return channel[len(_QUEUE_CHANNEL) :] if channel.startswith(_QUEUE_CHANNEL) else None


def cancel_channel(queue: str) -> str:
    """Internal wake channel that a cancel of one of ``queue``'s jobs
    notifies: the queue's workers then look whether a job they hold was
    cancelled (enqueues do not wake it, so the look costs nothing on the
    hot path)."""
    return f"{RESERVED_PREFIX}c:{queue}"


def stream_channel(stream: str) -> str:
    """Internal wake channel that publishes to ``stream`` notify."""
    return f"{RESERVED_PREFIX}s:{stream}"


def done_channel(queue: str) -> str:
    """Internal wake channel that the finish of a kept job of ``queue``
    notifies (an ack recording a result, a death, a cancel): callers
    awaiting a result (``Queue.result``) look again."""
    return f"{RESERVED_PREFIX}d:{queue}"
