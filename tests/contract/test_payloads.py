"""Payloads: JSON values round-trip exactly; anything else is a CodecError with nothing
written; payload_as decodes into user types."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo

import msgspec
import pytest

from alkstore import CodecError, QueueStats, Store

UNENCODABLE: list[Any] = [
    {1, 2},
    object(),
    float("nan"),
    float("inf"),
    -float("inf"),
    datetime(2024, 1, 1, tzinfo=UTC),
    {1: "non-str key"},
    {"nested": [{"deep": {1, 2}}]},
    {"nested": [1.0, float("nan")]},
    b"bytes",
    Decimal("1.5"),
    2**64,
]


@dataclass
class Point:
    x: int
    y: int


@dataclass
class Order:
    id: int
    note: str
    tags: list[str]
    at: Point
    total: float | None = None


ORDER = {"id": 7, "note": "hi", "tags": ["a", "b"], "at": {"x": 1, "y": 2}, "total": 9.5}


# Every entry point that accepts a payload; each returns nothing of interest.
ENTRY: dict[str, Callable[[Store, Any], Awaitable[Any]]] = {
    "queue.enqueue": lambda s, p: s.queue("q").enqueue(p),
    "queue.enqueue_batch": lambda s, p: s.queue("q").enqueue_batch(["fine", p]),
    "stream.publish": lambda s, p: s.stream("s").publish(p),
    "stream.publish_with_key": lambda s, p: s.stream("s").publish_with_key("k", p),
    "notify": lambda s, p: s.notify("ch", p),
    "outbox.enqueue": lambda s, p: s.outbox("o").enqueue(p),
}


async def tx_call(store: Store, method: str, payload: Any) -> None:
    """Call a tx method with a bad payload, then commit something valid."""
    async with store.transaction() as tx:
        calls = {
            "tx.enqueue": lambda: tx.enqueue("q", payload),
            "tx.publish": lambda: tx.publish("s", payload),
            "tx.publish_with_key": lambda: tx.publish_with_key("s", "k", payload),
            "tx.notify": lambda: tx.notify("ch", payload),
            "tx.outbox_enqueue": lambda: tx.outbox_enqueue("o", payload),
        }
        with pytest.raises(CodecError):
            await calls[method]()
        await tx.enqueue("probe", "the tx is still usable")


async def assert_nothing_written(store: Store) -> None:
    assert await store.queue("q").stats() == QueueStats(0, 0, 0, 0)
    assert await store.stream("s").read_since(0) == []
    assert await store.outbox("o").stats() == QueueStats(0, 0, 0, 0)


@pytest.mark.producer
@pytest.mark.parametrize("entry", list(ENTRY))
async def test_unencodable_payloads_raise_codec_error_and_write_nothing(
    store: Store, entry: str
) -> None:
    async with store.listen("ch") as wakes:
        for payload in UNENCODABLE:
            with pytest.raises(CodecError):
                await ENTRY[entry](store, payload)
        assert wakes.try_recv() is None
    await assert_nothing_written(store)


@pytest.mark.parametrize(
    "method", ["tx.enqueue", "tx.publish", "tx.publish_with_key", "tx.notify", "tx.outbox_enqueue"]
)
@pytest.mark.producer
async def test_unencodable_payloads_in_a_tx_raise_before_any_round_trip(
    store: Store, method: str
) -> None:
    for payload in UNENCODABLE[:8]:
        await tx_call(store, method, payload)
    await assert_nothing_written(store)
    assert (await store.queue("probe").stats()).ready == 8


@pytest.mark.producer
async def test_json_values_round_trip_exactly(store: Store) -> None:
    payloads: list[Any] = [
        None,
        True,
        False,
        0,
        -17,
        2**63 - 1,
        1.0,
        -0.25,
        1e300,
        "",
        'unicode ✓ 名前 and "quotes" and \\ and \n',
        [],
        {},
        [1, "two", 3.5, None, [True, {"k": []}]],
        {"a": {"b": {"c": [1, 2, {"d": None}]}}, "": "empty key"},
    ]
    q = store.queue("q")
    s = store.stream("s")
    for p in payloads:
        await q.enqueue(p)
        await s.publish(p)
    batched = store.queue("batched")
    await batched.enqueue_batch([*payloads, {"text": "a\u0000b", "sep": "\u2028"}])
    jobs = await q.claim_batch("w", len(payloads))
    events = await s.read_since(0)
    batch_jobs = await batched.claim_batch("w", len(payloads) + 1)
    assert batch_jobs[-1].payload == {"text": "a\u0000b", "sep": "\u2028"}
    for got in (
        [j.payload for j in jobs],
        [e.payload for e in events],
        [j.payload for j in batch_jobs[:-1]],
    ):
        assert got == payloads
        # Types survive too (1.0 stays a float, True stays a bool).
        assert [type(v) for v in got] == [type(v) for v in payloads]


@pytest.mark.producer
async def test_strings_containing_nul_round_trip(store: Store) -> None:
    # A valid JSON string; an engine must store it faithfully or refuse it
    # with CodecError before writing, never corrupt it.
    payload = {"text": "a\u0000b"}
    try:
        await store.stream("s").publish(payload)
    except CodecError:
        assert await store.stream("s").read_since(0) == []
        return
    (event,) = await store.stream("s").read_since(0)
    assert event.payload == payload


async def test_payload_as_decodes_into_a_dataclass(store: Store) -> None:
    q = store.queue("q")
    s = store.stream("s")
    job_id = await q.enqueue(ORDER)
    await s.publish(ORDER)
    expected = Order(7, "hi", ["a", "b"], Point(1, 2), 9.5)
    job = await q.claim_one("w")
    assert job is not None
    assert job.payload_as(Order) == expected
    (event,) = await s.read_since(0)
    assert event.payload_as(Order) == expected
    info = await q.get_job(job_id)
    assert info is not None and info.payload_as(Order) == expected
    partial = {k: v for k, v in ORDER.items() if k != "total"}
    await s.publish(partial)
    assert (await s.read_since(1))[0].payload_as(Order) == Order(7, "hi", ["a", "b"], Point(1, 2))


@pytest.mark.parametrize(
    "payload",
    [
        {"x": 1},  # missing field
        {"x": 1, "y": 2, "z": 3},  # unknown field
        {"x": "1", "y": 2},  # wrong type
        {"x": 1.5, "y": 2},  # float where int expected
        {"x": True, "y": 2},  # bool is not an int here
        [1, 2],  # not an object
        None,
        "point",
    ],
)
async def test_payload_as_raises_codec_error_on_mismatch(store: Store, payload: Any) -> None:
    s = store.stream("s")
    await s.publish(payload)
    (event,) = await s.read_since(0)
    with pytest.raises(CodecError):
        event.payload_as(Point)
    q = store.queue("q")
    await q.enqueue(payload)
    job = await q.claim_one("w")
    assert job is not None
    with pytest.raises(CodecError):
        job.payload_as(Point)


async def test_payload_as_nested_mismatch_raises_codec_error(store: Store) -> None:
    s = store.stream("s")
    await s.publish({**ORDER, "at": {"x": 1}})
    await s.publish({**ORDER, "tags": ["a", 2]})
    for event in await s.read_since(0):
        with pytest.raises(CodecError):
            event.payload_as(Order)


# --- typed payloads -----------------------------------------------------------
# One typed object as the whole payload (a dataclass, attrs class, msgspec
# Struct, NamedTuple or pydantic model) is stored as its JSON form, and
# payload_as(type(v)) reads back an object equal to v; what cannot come back
# equal is refused with CodecError before any round trip.


class Size(enum.Enum):
    S = "s"
    M = "m"


@dataclass(frozen=True)
class Line:
    sku: str
    qty: int


@dataclass
class TypedOrder:
    id: int
    size: Size
    at: datetime
    lines: tuple[Line, ...]
    kind: Literal["retail", "wholesale"]
    note: str | None = None
    counts: dict[int, int] = field(default_factory=dict)


TYPED = TypedOrder(
    7, Size.M, datetime(2024, 3, 1, 12, 30, 0, 250, tzinfo=UTC), (Line("a", 1), Line("b", 2)),
    "retail", counts={3: 4},
)  # fmt: skip
TYPED_JSON = {
    "id": 7,
    "size": "m",
    "at": "2024-03-01T12:30:00.000250Z",
    "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
    "kind": "retail",
    "note": None,
    "counts": {"3": 4},
}


@pytest.mark.producer
async def test_typed_payloads_round_trip_through_every_entry_point(store: Store) -> None:
    q = store.queue("q")
    s = store.stream("s")
    ids = [await q.enqueue(TYPED), *await q.enqueue_batch([TYPED, TYPED])]
    async with store.transaction() as tx:
        ids.append(await tx.enqueue("q", TYPED))
        await tx.publish("s", TYPED)
        await tx.publish_with_key("s", "k", TYPED)
        await tx.outbox_enqueue("o", TYPED)
        await tx.notify("ch", TYPED)
    await s.publish(TYPED)
    await s.publish_with_key("k", TYPED)
    await store.outbox("o").enqueue(TYPED)
    await store.notify("ch", TYPED)
    for job_id in ids:
        info = await q.get_job(job_id)
        assert info is not None
        assert info.payload == TYPED_JSON
        assert info.payload_as(TypedOrder) == TYPED
    jobs = await q.claim_batch("w", 10)
    assert len(jobs) == 4
    assert all(j.payload_as(TypedOrder) == TYPED for j in jobs)
    events = await s.read_since(0)
    assert len(events) == 4
    assert all(e.payload == TYPED_JSON and e.payload_as(TypedOrder) == TYPED for e in events)
    delivered: list[Any] = []

    async def deliver(payload: Any) -> None:
        delivered.append(payload)

    if hasattr(store, "_sync"):  # alkstore.sync has no outbox consumer: count instead
        assert (await store.outbox("o").stats()).ready == 2
    else:
        assert await store.outbox("o").run_once(deliver) == 2
        assert delivered == [TYPED_JSON, TYPED_JSON]


@pytest.mark.producer
async def test_typed_payload_kinds_round_trip(store: Store) -> None:
    pydantic = pytest.importorskip("pydantic")
    attrs = pytest.importorskip("attrs")

    class Model(pydantic.BaseModel):  # type: ignore[name-defined, misc]
        id: int
        at: datetime
        size: Size
        pair: tuple[int, str]

    @attrs.define
    class Attrs:
        when: datetime
        tags: frozenset[str]

    class Pair(NamedTuple):
        left: int
        right: Line

    class Struct(msgspec.Struct):
        items: list[Line]
        day: date

    naive = datetime(2024, 3, 1, 12, 30)
    paris = datetime(2024, 7, 1, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
    values: list[Any] = [
        Model(id=1, at=paris, size=Size.S, pair=(1, "x")),
        Attrs(naive, frozenset({"a", "b"})),
        Pair(1, Line("z", 3)),
        Struct([Line("a", 1)], date(2024, 2, 29)),
        TypedOrder(1, Size.S, naive, (), "wholesale"),  # a naive datetime stays naive
        TypedOrder(2, Size.S, paris, (), "wholesale"),  # a zone's offset is kept
    ]
    q = store.queue("q")
    ids = [await q.enqueue(v) for v in values]
    for job_id, value in zip(ids, values, strict=True):
        info = await q.get_job(job_id)
        assert info is not None
        back = info.payload_as(type(value))
        assert back == value and type(back) is type(value)
    naive_back = (await q.get_job(ids[4])).payload_as(TypedOrder)  # type: ignore[union-attr]
    assert naive_back.at.tzinfo is None
    zoned_back = (await q.get_job(ids[5])).payload_as(TypedOrder)  # type: ignore[union-attr]
    assert zoned_back.at.utcoffset() == paris.utcoffset()


@dataclass
class Loose:
    numbers: list[int]
    anything: Any = None
    amount: float = 0.0
    at: datetime | None = None


@dataclass(eq=False)
class NoEq:
    x: int


# Typed payloads that would not read back equal: refused, never stored lossy.
LOSSY: list[Any] = [
    Loose({1, 2}),  # a set in a list field reads back as a list
    Loose([1], anything=(1, 2)),  # a tuple in an Any field reads back as a list
    Loose([1], anything=datetime(2024, 1, 1, tzinfo=UTC)),  # ... and a datetime as a str
    Loose([1], anything=b"bytes"),
    Loose([1], amount=float("nan")),
    Loose([1], at=datetime(2024, 1, 1, tzinfo=timezone(timedelta(seconds=30)))),  # offset secs
    # In the repeated hour of a fall-back, Python never equates a zoned
    # datetime with a fixed-offset one, so it cannot read back equal.
    Loose([1], at=datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Paris"))),
    Loose([2**64]),
    NoEq(1),
    {"nested": Line("a", 1)},  # a typed object only as the whole payload
    [Line("a", 1)],
]


@pytest.mark.producer
@pytest.mark.parametrize("entry", list(ENTRY))
async def test_lossy_typed_payloads_raise_codec_error_and_write_nothing(
    store: Store, entry: str
) -> None:
    async with store.listen("ch") as wakes:
        for payload in LOSSY:
            with pytest.raises(CodecError):
                await ENTRY[entry](store, payload)
        assert wakes.try_recv() is None
    await assert_nothing_written(store)


@pytest.mark.producer
async def test_lossy_typed_payload_error_names_the_field(store: Store) -> None:
    with pytest.raises(CodecError, match=r"\$\.numbers"):
        await store.queue("q").enqueue(Loose({1, 2}))
    with pytest.raises(CodecError, match=r"\$\.amount"):
        await store.queue("q").enqueue(Loose([1], amount=float("inf")))
    await assert_nothing_written(store)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"size": "xl"}, r"\$\.size"),
        ({"at": "yesterday"}, r"\$\.at"),
        ({"kind": "other"}, r"\$\.kind"),
        ({"lines": [{"sku": "a", "qty": "1"}]}, r"\$\.lines\[0\]\.qty"),
        ({"lines": [{"sku": "a", "qty": 1, "colour": "red"}]}, r"\$\.lines\[0\]\.colour"),
        ({"extra": 1}, r"\$\.extra"),
        ({"counts": {"three": 4}}, r"\$\.counts"),
    ],
)
async def test_payload_as_names_the_field_that_does_not_convert(
    store: Store, change: dict[str, Any], where: str
) -> None:
    s = store.stream("s")
    await s.publish({**TYPED_JSON, **change})
    (event,) = await s.read_since(0)
    with pytest.raises(CodecError, match=where):
        event.payload_as(TypedOrder)
