"""Job headers as the ``headers`` column stores them (``protocol/headers.py``)."""

from __future__ import annotations

import pytest

from alkstore.protocol.values.errors import InvalidArgument
from alkstore.protocol.values.headers import decode_headers, encode_headers


def test_headers_round_trip_and_empty_is_null() -> None:
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
               "tracestate": "k=v", "é": "ü"}  # fmt: skip
    text = encode_headers(headers)
    assert text is not None and decode_headers(text) == headers
    assert encode_headers({}) is None
    assert decode_headers(None) == {}


@pytest.mark.parametrize("bad", [{"k": 1}, {1: "v"}, {"k": None}])
def test_only_text_to_text_encodes(bad: dict[object, object]) -> None:
    with pytest.raises(InvalidArgument):
        encode_headers(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "read"),
    [("not json", {}), ("[1, 2]", {}), ('"s"', {}), ('{"a": "b", "n": 1, "o": {}}', {"a": "b"})],
)
def test_unreadable_headers_read_as_none_rather_than_failing_the_job(
    text: str, read: dict[str, str]
) -> None:
    assert decode_headers(text) == read
