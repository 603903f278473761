"""Time-zoned fire times (daylight-saving changes included) and the catch-up
policies, in the pure core: no database, no clock, only instants."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from alkstore.protocol.values.errors import CodecError, InvalidArgument
from alkstore.protocol.values.schedules import CatchUp, Expression, parse

S = 1_000_000
MIN = 60 * S
H = 3600 * S


def at(zone: str, *fields: int, fold: int = 0) -> int:
    """The instant of a local wall time in ``zone``."""
    local = datetime(*fields, tzinfo=ZoneInfo(zone), fold=fold)  # type: ignore[misc]
    return round(local.timestamp() * S)


def local(zone: str, us: int) -> datetime:
    return datetime.fromtimestamp(us / S, UTC).astimezone(ZoneInfo(zone))


def fires(expr: Expression, start: int, end: int) -> list[int]:
    """Every fire time in (start, end], by next_after."""
    out: list[int] = []
    t = start
    while (t := expr.next_after(t)) <= end:
        out.append(t)
    return out


# 2024: Paris springs forward on 31 March (02:00 -> 03:00) and falls back on
# 27 October (03:00 -> 02:00); New York on 10 March and 3 November, at 02:00.
PARIS_SPRING = (2024, 3, 31)
PARIS_FALL = (2024, 10, 27)


def test_a_daily_time_in_the_spring_gap_fires_once_at_the_end_of_the_gap() -> None:
    """Invariant: one fire per local day; on the day 02:30 does not exist, at 03:00."""
    expr = parse("30 2 * * *", "Europe/Paris")
    times = fires(expr, at("Europe/Paris", 2024, 3, 29), at("Europe/Paris", 2024, 4, 2))
    days = [local("Europe/Paris", t) for t in times]
    assert [d.date() for d in days] == [date(2024, 3, d) for d in (29, 30, 31)] + [date(2024, 4, 1)]
    assert [d.strftime("%H:%M%z") for d in days] == ["02:30+0100", "02:30+0100", "03:00+0200",
                                                     "02:30+0200"]  # fmt: skip
    # 03:00 that day is the instant the clocks jump, 01:00 UTC
    assert times[2] == round(datetime(2024, 3, 31, 1, tzinfo=UTC).timestamp() * S)


def test_a_daily_time_repeated_by_the_fall_back_fires_once_at_its_first_occurrence() -> None:
    """Invariant: one fire per local day, 02:30 at its first occurrence (summer time)."""
    expr = parse("30 2 * * *", "Europe/Paris")
    times = fires(expr, at("Europe/Paris", 2024, 10, 25), at("Europe/Paris", 2024, 10, 29))
    days = [local("Europe/Paris", t) for t in times]
    assert Counter(d.date() for d in days) == {date(2024, 10, d): 1 for d in (25, 26, 27, 28)}
    assert days[2].strftime("%H:%M%z") == "02:30+0200"
    ny = parse("30 1 * * *", "America/New_York")
    times = fires(ny, at("America/New_York", 2024, 11, 2), at("America/New_York", 2024, 11, 5))
    assert [local("America/New_York", t).strftime("%d %H:%M%z") for t in times] == [
        "02 01:30-0400", "03 01:30-0400", "04 01:30-0500"
    ]  # fmt: skip


def test_an_hour_wildcard_fires_by_the_clock_through_both_changes() -> None:
    """Invariant: ``*/20 * * * *`` fires every 20 minutes of real time, no gap, no repeat."""
    expr = parse("*/20 * * * *", "Europe/Paris")
    for day in (PARIS_SPRING, PARIS_FALL):
        times = fires(expr, at("Europe/Paris", *day), at("Europe/Paris", *day, 6))
        assert {b - a for a, b in pairwise(times)} == {20 * MIN}
    # the repeated hour runs twice, by the clock: 02:00, 02:20, 02:40 in summer then winter time
    fall = fires(expr, at("Europe/Paris", *PARIS_FALL, 1, 50), at("Europe/Paris", *PARIS_FALL, 3))
    assert [local("Europe/Paris", t).strftime("%H:%M%z") for t in fall] == [
        "02:00+0200", "02:20+0200", "02:40+0200",
        "02:00+0100", "02:20+0100", "02:40+0100", "03:00+0100",
    ]  # fmt: skip
    # a wall time the spring change skips is simply not there (croniter's rule)
    hourly = parse("10 * * * *", "Europe/Paris")
    spring = fires(hourly, at("Europe/Paris", *PARIS_SPRING), at("Europe/Paris", *PARIS_SPRING, 4))
    assert [local("Europe/Paris", t).strftime("%H:%M") for t in spring] == ["00:10", "01:10",
                                                                           "03:10"]  # fmt: skip


def test_a_half_hour_change_lord_howe() -> None:
    """Invariant: one fire per local day across a 30-minute change both ways."""
    expr = parse("15 2 * * *", "Australia/Lord_Howe")
    for first in ((2024, 4, 5), (2024, 10, 4)):  # falls back 7 April, springs 6 October
        start = at("Australia/Lord_Howe", *first)
        times = fires(expr, start, start + 4 * 24 * H)
        assert len({local("Australia/Lord_Howe", t).date() for t in times}) == len(times) == 4


ZONES_AND_EXPRESSIONS = [
    ("Europe/Paris", "30 2 * * *"), ("Europe/Paris", "*/20 * * * *"),
    ("Europe/Paris", "0 */2 * * *"), ("Europe/Paris", "*/15 2 * * *"),
    ("Europe/Paris", "10 * * * *"), ("America/New_York", "30 1 * * *"),
    ("America/New_York", "0 0 * * * *"), ("Australia/Lord_Howe", "*/10 1-2 * * *"),
    ("UTC", "*/7 * * * *"),
]  # fmt: skip


def changes_2024(zone: str) -> list[datetime]:
    """The days of 2024 whose noon offset differs from the day before's."""
    tz = ZoneInfo(zone)
    noons = [datetime(2024, 1, 1, 12, tzinfo=tz) + timedelta(days=d) for d in range(366)]
    return [b for a, b in pairwise(noons) if a.utcoffset() != b.utcoffset()]


@pytest.mark.parametrize(("zone", "text"), ZONES_AND_EXPRESSIONS)
def test_previous_and_next_fire_times_agree_around_the_changes(zone: str, text: str) -> None:
    """Invariant: fire times strictly increase, and ``prev_before(x)`` is the
    last one before ``x`` (the one ``next_after`` steps from to reach ``x``),
    probed just after, between and at fire times, over the two days around
    each daylight-saving change of 2024."""
    expr = parse(text, zone)
    days = changes_2024(zone) or [datetime(2024, 3, 31, 12, tzinfo=UTC)]
    assert zone == "UTC" or len(days) == 2
    for noon in days:
        start = round(noon.timestamp() * S) - 36 * H
        all_times = fires(expr, start, start + 48 * H)
        assert all_times == sorted(set(all_times))
        for earlier, later in pairwise(all_times):
            for x in (earlier + 1, (earlier + later) // 2, later):
                assert expr.prev_before(x) == earlier, (local(zone, x), local(zone, earlier))


def test_every_is_not_changed_by_a_zone() -> None:
    utc, paris = parse("@every 1h"), parse("@every 1h", "Europe/Paris")
    assert paris.tz == "Europe/Paris"
    for t in (at("Europe/Paris", *PARIS_SPRING, 1, 59), at("Europe/Paris", *PARIS_FALL, 2, 30)):
        assert paris.next_after(t) == utc.next_after(t)
        assert paris.prev_before(t) == utc.prev_before(t)


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus", "utc", "", "Europe", "../etc/passwd", "/etc/localtime", "localtime",
     "posixrules", "Europe/Paris\x00", None, 5],
)  # fmt: skip
def test_an_unknown_zone_is_invalid(zone: object) -> None:
    with pytest.raises(InvalidArgument, match="time zone"):
        parse("0 3 * * *", zone)


# -- catch-up policies --------------------------------------------------------------

T0 = 1_800_000_000 * S  # a multiple of 10 s


def test_latest_all_and_skip_choose_among_the_missed_fire_times() -> None:
    """Invariant: each policy's fire times are fire times from the due one to
    now, oldest first: latest the newest, all the newest ``cap``, skip the
    newest if it is within the grace, else none."""
    every = parse("@every 10s")
    due = T0 + 10 * S
    now = due + 65 * S  # seven fire times have passed: due .. due + 60 s
    missed = [due + i * 10 * S for i in range(7)]
    assert CatchUp.of().fire_times(every, due, now) == missed[-1:]
    assert CatchUp.of("all", 3).fire_times(every, due, now) == missed[-3:]
    assert CatchUp.of("all", 100).fire_times(every, due, now) == missed
    assert CatchUp.of("skip").fire_times(every, due, now) == missed[-1:]  # 5 s late: in grace
    assert CatchUp.of("skip", grace=2).fire_times(every, due, now) == []  # 5 s late: missed
    # on time, every policy enqueues the one fire time
    for policy in (CatchUp.of(), CatchUp.of("all", 3), CatchUp.of("skip", grace=0)):
        assert policy.fire_times(every, due, due) == [due]
    # cron, in a zone, across the fall-back: the repeated 02:30 is not a fire time
    daily = parse("30 2 * * *", "Europe/Paris")
    first = at("Europe/Paris", 2024, 10, 25, 2, 30)
    now = at("Europe/Paris", 2024, 10, 29, 12)
    days = CatchUp.of("all", 10).fire_times(daily, first, now)
    assert [local("Europe/Paris", t).day for t in days] == [25, 26, 27, 28, 29]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("sometimes",), "catch_up must be"),
        (("latest", 3), "catch_up_max applies"),
        (("skip", 3), "catch_up_max applies"),
        (("all", None, 5), "catch_up_grace applies"),
        (("latest", None, 5), "catch_up_grace applies"),
        (("all", 0), "catch_up_max must"),
        (("all", True), "catch_up_max must"),
        (("all", 10_001), "catch_up_max must"),
        (("all", 2.0), "catch_up_max must"),
        (("skip", None, -1), "catch_up_grace"),
    ],
)
def test_catch_up_settings_are_checked(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        CatchUp.of(*args)


def test_defaults_and_stored_policies() -> None:
    assert CatchUp.of() == CatchUp("latest", None, None)
    assert CatchUp.of("all") == CatchUp("all", 10, None)
    assert CatchUp.of("skip") == CatchUp("skip", None, 60 * S)
    assert CatchUp.of("skip", grace=timedelta(minutes=5)).grace_us == 300 * S
    for policy in (CatchUp.of(), CatchUp.of("all", 4), CatchUp.of("skip", grace=0)):
        assert CatchUp.decode(policy.policy, policy.cap, policy.grace_us) == policy
    for corrupt in (("nope", None, None), ("all", None, None), ("all", 0, None),
                    ("skip", None, None), ("latest", 3, None), ("all", True, None)):  # fmt: skip
        with pytest.raises(CodecError):
            CatchUp.decode(*corrupt)
