"""Job headers: metadata alkstore keeps beside a job's payload.

A job's ``headers`` column holds a small JSON object of strings (the
enqueuing code's trace context, say), or NULL when there is none. The user's
payload never carries them and handlers never see them mixed in. They travel
with the job: claimed with it, kept on retry and release, moved to the dead
letters and back by ``requeue_dead``.

Headers are written by alkstore itself (``alkstore.otel``), never by users,
so reading is forgiving: text that is not such an object reads as no
headers, since a trace context that cannot be read must not fail a job.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from .errors import InvalidArgument, brief


def encode_headers(headers: Mapping[str, str]) -> str | None:
    """``headers`` as the column's text: ``None`` when empty, so a job
    without metadata stores NULL."""
    if not headers:
        return None
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"job headers map text to text, got {brief(key)}: {brief(value)}")
    return orjson.dumps(dict(headers)).decode()


def decode_headers(text: str | None) -> dict[str, str]:
    """The headers stored as ``text`` (empty for NULL, or for anything that
    is not a JSON object of strings)."""
    if text is None:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, str)}
